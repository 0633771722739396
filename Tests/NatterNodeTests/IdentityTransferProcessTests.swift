// Goal: SPEC F20 with real processes. An identity exported on one data directory and imported into a fresh one is the
// same identity, waits until a peer that knows it has synced with it, then writes on without forking any feed and
// with all its conversations back; a wrong passphrase, a truncated file and an existing identity each fail with one
// line and create or change nothing. A data directory copied elsewhere while the original keeps writing waits the
// same way (no fork evidence anywhere), and without a peer writes only after /force-write. Method: the built `natter`
// binary (`natter identity export/import`, `natter run --json` on loopback without discovery, `natter digest`), bounded
// waits on its JSON events, every process stopped by PID.
import Foundation
import NatterTestSupport
import Testing

@Suite("Identity export and import, copied data directories: real processes", .serialized)
struct IdentityTransferProcessTests {
    private let natter: URL
    private let root: String

    init() throws {
        natter = try builtExecutable("natter")
        root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-idx-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: root, withIntermediateDirectories: true)
    }

    private func run(_ arguments: [String]) async throws -> (status: Int32, stdout: String, stderr: String) {
        try await runProcess(natter, arguments)
    }

    /// `natter digest --data DIR`'s lines: `log …`, the counts line, `conversation …` lines.
    private func digest(_ name: String) async throws -> [String] {
        let result = try await run(["digest", "--data", "\(root)/\(name)"])
        try #require(result.status == 0, "natter digest: \(result.stderr)")
        return result.stdout.split(separator: "\n").map(String.init)
    }

    private func port(of process: NatterProcess) async throws -> Int {
        try #require(try await process.waitForEvent("started")["port"] as? Int)
    }

    /// Waits for an `error` event whose message contains `text`.
    private func waitForError(_ process: NatterProcess, _ text: String) async throws {
        try await process.waitForEvent("error", also: { ($0["message"] as? String)?.contains(text) == true })
    }

    private func waitForNotice(_ process: NatterProcess, _ text: String) async throws {
        try await process.waitForEvent("notice", also: { ($0["message"] as? String)?.contains(text) == true })
    }

    /// Alice and Bob with a group ("trip") and a direct chat, messages both ways; Alice is stopped at the end.
    private func aliceAndBob() async throws -> (bob: NatterProcess, bobPort: Int) {
        let alice = try NatterProcess.scripted(natter, data: "\(root)/alice", name: "Alice", peer: nil)
        defer { alice.kill() }
        let alicePort = try await port(of: alice)
        let bob = try NatterProcess.scripted(natter, data: "\(root)/bob", name: "Bob", peer: alicePort)
        let bobPort = try await port(of: bob)
        alice.send("/wait peer Bob 20")
        alice.send("/group create trip Bob")
        try await bob.waitForEvent("member", ["change": "created", "title": "trip"])
        alice.send("/msg trip packed the tent")
        alice.send("/msg Bob a direct word")
        try await bob.waitForEvent("message", ["text": "a direct word", "author": "Alice"])
        bob.send("/msg trip bringing the stove")
        try await alice.waitForEvent("message", ["text": "bringing the stove", "author": "Bob"])
        alice.send("/wait synced 20")
        try await alice.finish()
        return (bob, bobPort)
    }

    @Test("export, import elsewhere: same fingerprint, waits, learns its heads from Bob, writes on; no fork, no loss")
    func importedIdentityRejoins() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (bob, bobPort) = try await aliceAndBob()
        defer { bob.kill() }
        let passphrase = "\(root)/passphrase"
        try "a passphrase long enough\n".write(toFile: passphrase, atomically: true, encoding: .utf8)
        try "not the passphrase\n".write(toFile: "\(root)/wrong", atomically: true, encoding: .utf8)
        let file = "\(root)/alice.natterid"
        let exported = try await run([
            "identity", "export", "--data", "\(root)/alice", "--passphrase-file", passphrase, file,
        ])
        #expect(exported.status == 0, "\(exported.stderr)")
        #expect((try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int) == 0o600)
        let fingerprint = try #require(
            try await run(["id", "--data", "\(root)/alice"]).stdout.split(separator: "\n").first?.split(separator: " ")
                .last)

        // Failures: one line on standard error each, exit status 1, nothing created or changed.
        let bytes = try Data(contentsOf: URL(fileURLWithPath: file))
        try bytes.prefix(100).write(to: URL(fileURLWithPath: "\(root)/truncated.natterid"))
        let bobIdentity = try Data(contentsOf: URL(fileURLWithPath: "\(root)/bob/identity.key"))
        for (arguments, expected) in [
            (["--data", "\(root)/laptop", "--passphrase-file", "\(root)/wrong", file], "wrong passphrase"),
            (["--data", "\(root)/laptop", "--passphrase-file", passphrase, "\(root)/truncated.natterid"], "truncated"),
            (["--data", "\(root)/bob", "--passphrase-file", passphrase, file], "already holds an identity"),
        ] {
            let result = try await run(["identity", "import"] + arguments)
            #expect(result.status == 1)
            #expect(result.stdout.isEmpty)
            let lines = result.stderr.split(separator: "\n")
            #expect(
                lines.count == 1 && lines.first?.hasPrefix("error: ") == true && result.stderr.contains(expected),
                "\(arguments): \(result.stderr)")
        }
        #expect(!FileManager.default.fileExists(atPath: "\(root)/laptop"), "a failed import created the directory")
        #expect(try Data(contentsOf: URL(fileURLWithPath: "\(root)/bob/identity.key")) == bobIdentity)

        let imported = try await run([
            "identity", "import", "--data", "\(root)/laptop", "--passphrase-file", passphrase, file,
        ])
        #expect(imported.status == 0, "\(imported.stderr)")
        #expect(imported.stdout.contains("imported \(fingerprint)"))
        let laptopID = try await run(["id", "--data", "\(root)/laptop"]).stdout
        #expect(laptopID.contains("fingerprint \(fingerprint)"))

        // The new laptop starts without a peer: it refuses to write and says why; then it meets Bob.
        let laptop = try NatterProcess.scripted(natter, data: "\(root)/laptop", name: "ignored", peer: nil)
        defer { laptop.kill() }
        _ = try await port(of: laptop)
        try await waitForNotice(laptop, "sending waits")
        laptop.send("/nick Alice again")
        try await waitForError(laptop, "sending waits: this identity was imported")
        laptop.send("/connect 127.0.0.1:\(bobPort)")
        try await waitForNotice(laptop, "own feeds learned from")
        // The conversations come back with the records (shown once the tables are refreshed, just after the sync).
        try await laptop.waitForEvent("member", ["change": "created", "title": "trip"])
        laptop.send("/msg trip writing from the new laptop")
        try await bob.waitForEvent("message", ["text": "writing from the new laptop", "author": "Alice"])
        laptop.send("/msg Bob and directly")
        try await bob.waitForEvent("message", ["text": "and directly", "author": "Alice"])
        laptop.send("/wait synced 20")
        bob.send("/wait synced 20")
        try await laptop.finish()
        try await bob.finish()

        let (laptopDigest, bobDigest, aliceDigest) = (
            try await digest("laptop"), try await digest("bob"), try await digest("alice")
        )
        #expect(laptopDigest.first == bobDigest.first, "log digests differ")
        #expect(laptopDigest.dropFirst(2).sorted() == bobDigest.dropFirst(2).sorted(), "conversation digests differ")
        // Both conversations are back: the same ones the original held.
        #expect(laptopDigest.filter { $0.hasPrefix("conversation ") }.count == 2)
        #expect(
            Set(laptopDigest.filter { $0.hasPrefix("conversation ") }.map { $0.split(separator: " ")[1] })
                == Set(aliceDigest.filter { $0.hasPrefix("conversation ") }.map { $0.split(separator: " ")[1] }))
        for lines in [laptopDigest, bobDigest] { #expect(lines[1].hasSuffix("forked feeds 0"), "\(lines[1])") }
    }

    @Test("a copy started elsewhere while the original writes: waits, catches up, writes; no fork; alone: /force-write")
    func copiedDirectoryWaits() async throws {
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (bob, bobPort) = try await aliceAndBob()
        defer { bob.kill() }
        // Carol relays between the original and the copy: a peer keeps one link per identity, so two nodes of one
        // identity linked to the same peer would push each other off.
        let carol = try NatterProcess.scripted(natter, data: "\(root)/carol", name: "Carol", peer: bobPort)
        defer { carol.kill() }
        let carolPort = try await port(of: carol)
        carol.send("/wait peer Bob 20")
        carol.send("/wait synced 20")
        try await carol.waitForEvent("sync", also: { $0["caught_up"] as? Bool == true })

        // Alice stopped: her directory is copied twice (cp -a, new inodes). The original then keeps writing.
        for copy in ["copy", "lonely"] {
            let cp = try await runProcess(
                URL(fileURLWithPath: "/bin/cp"), ["-a", "\(root)/alice", "\(root)/\(copy)"])
            try #require(cp.status == 0, "\(cp.stderr)")
        }
        let alice = try NatterProcess(
            natter,
            [
                "run", "--data", "\(root)/alice", "--listen", "127.0.0.1:0", "--no-discovery", "--json", "--peer",
                "127.0.0.1:\(bobPort)",
            ])
        defer { alice.kill() }
        alice.send("/wait peer Bob 20")
        alice.send("/msg trip the original writes on")
        try await bob.waitForEvent("message", ["text": "the original writes on"])

        let copy = try NatterProcess(
            natter, ["run", "--data", "\(root)/copy", "--listen", "127.0.0.1:0", "--no-discovery", "--json"])
        defer { copy.kill() }
        try await waitForNotice(copy, "sending waits: this data directory was copied")
        copy.send("/msg trip from the copy, too early")
        try await waitForError(copy, "sending waits")
        alice.send("/msg trip while the copy waits")
        try await bob.waitForEvent("message", ["text": "while the copy waits"])
        copy.send("/connect 127.0.0.1:\(carolPort)")
        try await waitForNotice(copy, "own feeds learned from")
        try await copy.waitForEvent("message", ["text": "while the copy waits"])
        // The original has said its piece; the copy writes from the learned heads.
        copy.send("/msg trip the copy writes")
        try await bob.waitForEvent("message", ["text": "the copy writes"])
        try await alice.waitForEvent("message", ["text": "the copy writes"])
        try await waitForNotice(alice, "another node is writing as this identity")

        // The second copy finds no peer: only the user's word lets it write.
        let lonely = try NatterProcess(
            natter, ["run", "--data", "\(root)/lonely", "--listen", "127.0.0.1:0", "--no-discovery", "--json"])
        defer { lonely.kill() }
        lonely.send("/msg Bob alone")
        try await waitForError(lonely, "sending waits")
        lonely.send("/force-write")
        try await lonely.waitForEvent("output", also: { ($0["text"] as? String)?.hasPrefix("sending resumes") == true })
        lonely.send("/msg Bob alone, forced")
        try await lonely.waitForEvent("message", ["text": "alone, forced"], also: { $0["own"] as? Bool == true })
        try await lonely.finish()

        // Two processes on one data directory stay impossible.
        let second = try await run(["run", "--data", "\(root)/copy", "--listen", "127.0.0.1:0", "--no-discovery"])
        #expect(second.status == 1 && second.stderr.contains("is in use by natter process"), "\(second.stderr)")

        for process in [alice, copy, carol, bob] { process.send("/wait synced 20") }
        for process in [alice, copy, carol, bob] { try await process.finish() }
        let digests = [
            try await digest("bob"), try await digest("carol"), try await digest("alice"), try await digest("copy"),
        ]
        for lines in digests {
            #expect(lines[0] == digests[0][0], "log digests differ")
            #expect(lines[1].hasSuffix("forked feeds 0"), "fork evidence: \(lines[1])")
        }
    }
}
