import Foundation
import NatterCrypto

#if canImport(Glibc)
import Glibc
#endif

/// Moving an identity between data directories: `natter identity export` and `import` (docs/cli.md).
extension DataDirectory {
    /// The largest file `readExport` reads: an export is 187 bytes, so anything much larger is not one.
    public static let exportFileBytesMax = 4096

    /// Writes this directory's identity and network key, sealed under `passphrase`, to a new file at `file` (mode
    /// 0600, fsynced). Never overwrites an existing file.
    @discardableResult
    public func exportIdentity(to file: String, passphrase: String) throws -> IdentityExport {
        let export = IdentityExport(identity: try readIdentity(), network: try readNetworkKey())
        var sealed = try export.sealed(passphrase: passphrase)
        defer { wipe(&sealed) }
        try Self.createSecretFile(
            file, contents: sealed, in: DataDirectory(path: file).parent,
            ifExists: .fileSystem(path: file, reason: "already exists (an export never overwrites a file)"))
        return export
    }

    /// The bytes of the export at `file`, checked as far as they can be without the passphrase.
    public static func readExport(_ file: String) throws -> IdentityExport.Sealed {
        var info = stat()
        guard stat(file, &info) == 0 else {
            throw StoreError.fileSystem(path: file, reason: String(cString: strerror(errno)))
        }
        guard Int(info.st_size) <= exportFileBytesMax else { throw IdentityFileError.notAnExport }
        guard let data = FileManager.default.contents(atPath: file) else {
            throw StoreError.fileSystem(path: file, reason: "cannot read")
        }
        return try IdentityExport.Sealed(Array(data))
    }

    /// Refuses a directory that already holds anything: an identity is imported into a new data directory only.
    /// Checked before the passphrase is asked for, and again by `importIdentity`.
    public func requireNewForImport() throws(StoreError) {
        if isInitialised { throw .alreadyInitialised(path: path) }
        guard FileManager.default.fileExists(atPath: path) else { return }
        // An unreadable directory counts as not empty: refusing is the safe answer.
        let entries = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? [""]
        guard entries.isEmpty else {
            throw .fileSystem(path: path, reason: "is not empty; import into a new data directory (--data DIR)")
        }
    }

    /// Creates this data directory around `export`'s identity and network key. The new store doubts its own heads
    /// (`OwnHeadsDoubt.imported`): the identity's records are on other nodes, so it writes nothing until a peer that
    /// holds them has synced with it, or the user forces it. Writes no record (not even a profile: the identity has
    /// one already). On failure, removes what it created.
    public func importIdentity(_ export: IdentityExport) throws -> RecordStore {
        try requireNewForImport()
        let existed = FileManager.default.fileExists(atPath: path)
        do {
            try create()
            let store = try RecordStore.open(directory: path)
            // The doubt goes first: whatever happens next, this store never writes from an empty feed by itself.
            try store.doubtOwnHeads(.imported)
            if !export.network.isDefault { try writeNetworkKey(export.network) }
            try writeIdentity(export.identity)
            try store.bind(to: export.identity.author, directory: path)
            return store
        } catch {
            removeAfterFailedImport(existed: existed)
            throw error
        }
    }

    /// Removes what a failed import created: the directory when it made it, else the entries it put in it (it was
    /// empty before).
    private func removeAfterFailedImport(existed: Bool) {
        let manager = FileManager.default
        if !existed {
            // Best effort: the import already failed with its own error, which is the one to report.
            try? manager.removeItem(atPath: path)
            return
        }
        for entry in (try? manager.contentsOfDirectory(atPath: path)) ?? [] {
            try? manager.removeItem(atPath: path + "/" + entry)
        }
    }
}
