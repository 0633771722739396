// Goal: the store refuses every own write while its own feeds may be behind other nodes' (SPEC F20, docs/protocol.md
// §9.2), and detects the cases it can see by itself: a data directory copied or restored elsewhere (its home
// marker changed), while a plain reopen of the same directory never waits. Method: real stores on disk in temporary
// directories; copies made file by file as `cp -a` would; the doubt read back after reopening.
import Foundation
import NatterCrypto
import NatterModel
import Testing

@testable import NatterStore

@Suite("Own feed heads: the store's gate and its home marker")
struct OwnHeadsTests {
    /// A data directory with an identity and one own record, in a fresh temporary folder.
    private struct Directory {
        let root: String
        let directory: DataDirectory
        let identity: LocalIdentity

        init() throws {
            root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-oh-\(UUID())").path
            directory = DataDirectory(path: root + "/data")
            identity = LocalIdentity.generate()
            try directory.create()
            try directory.writeIdentity(identity)
            let store = try open()
            #expect(store.ownHeadsDoubt == nil, "a new directory has nothing to doubt")
            try write(store, "first")
        }

        func open(_ path: String? = nil) throws -> RecordStore {
            let store = try RecordStore.open(directory: path ?? directory.path)
            try store.bind(to: identity.author, directory: path ?? directory.path)
            return store
        }

        @discardableResult
        func write(_ store: RecordStore, _ text: String) throws -> Record {
            try store.appendOwn(
                conversation: conversationID("own-heads"), kind: .content, epoch: testEpoch,
                createdAtMillis: 1_700_000_000_000, identity: identity.signing
            ) { _ in Array(text.utf8) }
        }

        /// Copies the directory's files to `name` beside it (new inodes, as `cp -a` makes).
        func copy(to name: String) throws -> String {
            let target = root + "/" + name
            try FileManager.default.createDirectory(atPath: target, withIntermediateDirectories: false)
            for entry in try FileManager.default.contentsOfDirectory(atPath: directory.path) {
                try FileManager.default.copyItem(atPath: directory.path + "/" + entry, toPath: target + "/" + entry)
            }
            return target
        }

        func remove() { try? FileManager.default.removeItem(atPath: root) }
    }

    @Test(
        "a reopened directory writes at once; a doubted store refuses every own write until confirmed, across reopens")
    func gateRefusesUntilConfirmed() throws {
        let data = try Directory()
        defer { data.remove() }
        do {
            let store = try data.open()
            #expect(store.ownHeadsDoubt == nil, "a plain reopen must not make the node wait")
            try data.write(store, "second")
            try store.doubtOwnHeads(.imported)
            #expect(throws: StoreError.self) { try data.write(store, "refused") }
            #expect(
                try store.feeds(of: conversationID("own-heads")).first?.stored == 2, "the refused write left nothing")
        }
        let reopened = try data.open()
        #expect(reopened.ownHeadsDoubt == .imported, "the doubt outlives a restart")
        do {
            try data.write(reopened, "still refused")
            Issue.record("appendOwn wrote while its heads were doubted")
        } catch StoreError.ownHeadsUnconfirmed(let doubt) {
            #expect(doubt == .imported)
            #expect("\(StoreError.ownHeadsUnconfirmed(doubt))".contains("/force-write"))
        }
        #expect(try reopened.confirmOwnHeads() == .imported)
        #expect(try reopened.confirmOwnHeads() == nil, "nothing left to confirm")
        try data.write(reopened, "third")
        #expect(try reopened.feeds(of: conversationID("own-heads")).first?.stored == 3)
    }

    @Test("a copied directory doubts its heads; the original, reopened where it was, does not")
    func copiedDirectoryWaits() throws {
        let data = try Directory()
        defer { data.remove() }
        let copy = try data.copy(to: "copy")
        let copied = try data.open(copy)
        #expect(copied.ownHeadsDoubt == .copied)
        #expect(throws: StoreError.self) { try data.write(copied, "would fork") }
        // The copy keeps waiting after a restart in its new place (the marker moved, the doubt stays).
        let original = try data.open()
        #expect(original.ownHeadsDoubt == nil)
        try data.write(original, "the original writes on")
        _ = consume copied
        let copiedAgain = try data.open(copy)
        #expect(copiedAgain.ownHeadsDoubt == .copied, "a restart of the copy before it learned its heads still waits")
        try copiedAgain.confirmOwnHeads()
        _ = consume copiedAgain
        #expect(try data.open(copy).ownHeadsDoubt == nil, "once confirmed, the copy is at home where it is")
    }

    @Test("renaming the directory in place is not a copy")
    func renamedDirectoryDoesNotWait() throws {
        let data = try Directory()
        defer { data.remove() }
        let renamed = data.root + "/renamed"
        try FileManager.default.moveItem(atPath: data.directory.path, toPath: renamed)
        #expect(try data.open(renamed).ownHeadsDoubt == nil)
    }

    @Test("a database restored over the old one, as rsync writes it (new file, renamed into place), doubts its heads")
    func restoredDatabaseWaits() throws {
        let data = try Directory()
        defer { data.remove() }
        let backup = try data.copy(to: "backup")
        try data.write(try data.open(), "written after the backup")
        for suffix in ["", "-wal", "-shm"] {
            let target = data.directory.path + "/natter.sqlite" + suffix
            try? FileManager.default.removeItem(atPath: target + ".tmp")  // nothing there unless a run was cut short
            guard FileManager.default.fileExists(atPath: backup + "/natter.sqlite" + suffix) else {
                try? FileManager.default.removeItem(atPath: target)  // the backup had none: neither may the restore
                continue
            }
            try FileManager.default.copyItem(atPath: backup + "/natter.sqlite" + suffix, toPath: target + ".tmp")
            #expect(rename(target + ".tmp", target) == 0)
        }
        let restored = try data.open()
        #expect(restored.ownHeadsDoubt == .copied)
        #expect(try restored.feeds(of: conversationID("own-heads")).first?.stored == 1, "the backup's state is back")
    }

    @Test("an in-memory store (the lab) never doubts by itself")
    func inMemoryStoreWrites() throws {
        let writer = try Writer(seed: 1)
        #expect(writer.store.ownHeadsDoubt == nil)
        try writer.write(conversationID("lab"))
    }
}
