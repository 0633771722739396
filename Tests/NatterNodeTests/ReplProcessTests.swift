// Goal: three real natter processes, driven only through their REPLs in scripting mode with `--json`, chat
// directly and in a group — statuses delivered and read, add, remove, rename, role change, reactions changed and
// removed, an edit, a delete, a reply, a receipts view — report each of these as JSON events, and end with equal
// digests. Method: the built binary on pipes (`NatterProcess`), named peers on loopback without discovery, bounded
// waits on parsed JSON lines, every process stopped by PID.
import Foundation
import NatterModel
import NatterTestSupport
import Testing

extension NatterProcess {
    /// `natter run` scripted with `--json` on loopback without discovery, listening on a free port, dialling `peer`.
    static func scripted(_ natter: URL, data: String, name: String, peer: Int?) throws -> NatterProcess {
        var arguments = [
            "run", "--data", data, "--name", name, "--listen", "127.0.0.1:0", "--no-discovery", "--json",
        ]
        if let peer { arguments += ["--peer", "127.0.0.1:\(peer)"] }
        return try NatterProcess(natter, arguments)
    }

    /// Printed lines that are JSON objects.
    var events: [[String: Any]] {
        printed.compactMap { line in
            (try? JSONSerialization.jsonObject(with: Data(line.utf8))) as? [String: Any]
        }
    }

    /// Waits (bounded) for an event of `type` whose string fields equal `fields` and that passes `also`.
    @discardableResult
    func waitForEvent(
        _ type: String, _ fields: [String: String] = [:], seconds: Double = 20,
        also: ([String: Any]) -> Bool = { _ in true }
    ) async throws -> [String: Any] {
        func matches(_ event: [String: Any]) -> Bool {
            event["type"] as? String == type
                && fields.allSatisfy { key, value in event[key] as? String == value } && also(event)
        }
        var found: [String: Any]?
        do {
            try await NatterTestSupport.waitFor("\(type) event", deadline: seconds, interval: .milliseconds(20)) {
                found = events.first(where: matches)
                return found != nil
            }
        } catch {
            throw ProcessFailure("no \(type) event with \(fields) within \(seconds) s; saw: \(printed.suffix(30))")
        }
        return found!
    }
}

@Suite("Three natter processes through their REPLs", .serialized)
struct ReplProcessTests {
    @Test("direct chat and a group through --json scripting: statuses, membership, reactions, edits, digests agree")
    func threeNodesThroughTheREPL() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-repl-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        func start(_ name: String, peer: Int?) throws -> NatterProcess {
            try NatterProcess.scripted(natter, data: "\(root)/\(name)", name: name, peer: peer)
        }
        let alice = try start("Alice", peer: nil)
        defer { alice.kill() }
        let port = try #require(try await alice.waitForEvent("started")["port"] as? Int)
        let bob = try start("Bob", peer: port)
        defer { bob.kill() }
        let carol = try start("Carol", peer: port)
        defer { carol.kill() }
        func ref(_ event: [String: Any]) throws -> String { try #require(event["ref"] as? String) }

        // A direct chat: delivered when Bob's node holds it, read when he opens the conversation.
        alice.send("/wait peer Bob 20")
        alice.send("/wait peer Carol 20")
        alice.send("/msg Bob -1 hello Bob")
        let hello = try await alice.waitForEvent(
            "message", ["text": "-1 hello Bob"], also: { $0["own"] as? Bool == true })
        let helloRef = try ref(hello)
        #expect(hello["status"] as? String == "sent" || hello["status"] as? String == "queued")
        let received = try await bob.waitForEvent(
            "message", ["text": "-1 hello Bob", "author": "Alice", "change": "new"])
        #expect(received["own"] as? Bool == false && received["ref"] as? String == helloRef)
        #expect(received["fingerprint"] as? String == hello["fingerprint"] as? String)
        alice.send("/wait delivered \(helloRef) 20")
        try await alice.waitForEvent(
            "status", ["ref": helloRef], also: { ["delivered", "read"].contains($0["status"] as? String) })
        bob.send("/open Alice")
        try await alice.waitForEvent(
            "status", ["ref": helloRef, "status": "read"],
            also: { $0["read_by"] as? Int == 1 && $0["recipients"] as? Int == 1 })

        // A group: created with Bob, Carol added, renamed, Bob made an admin.
        alice.send("/group create Lab Bob")
        try await bob.waitForEvent("member", ["change": "created", "kind": "group", "title": "Lab", "by": "Alice"])
        alice.send("/invite Carol")
        let added = try await carol.waitForEvent("member", ["change": "added", "by": "Alice"])
        #expect((added["members"] as? [[String: Any]])?.first?["name"] as? String == "Carol")
        // A new member sees the group's whole history.
        try await carol.waitForEvent("member", ["change": "created", "title": "Lab"])
        alice.send("/rename The Lab")
        try await bob.waitForEvent("rename", ["title": "The Lab", "by": "Alice"])
        try await carol.waitForEvent("rename", ["title": "The Lab", "by": "Alice"])
        alice.send("/role Bob admin")
        let role = try await carol.waitForEvent("member", ["change": "role", "role": "admin", "by": "Alice"])
        #expect((role["members"] as? [[String: Any]])?.first?["name"] as? String == "Bob")

        // Bob writes; Carol reacts, changes her reaction and removes it.
        bob.send("/open \"The Lab\"")
        carol.send("/open \"The Lab\"")
        bob.send("hi -all")
        let hi = try await bob.waitForEvent("message", ["text": "hi -all"], also: { $0["own"] as? Bool == true })
        let hiRef = try ref(hi)
        try await carol.waitForEvent("message", ["ref": hiRef, "author": "Bob"])
        carol.send("/react \(hiRef) love")
        try await bob.waitForEvent("reaction", ["ref": hiRef, "name": "Carol", "reaction": "love"])
        carol.send("/react \(hiRef) laugh")
        let changed = try await bob.waitForEvent("reaction", ["ref": hiRef, "name": "Carol", "reaction": "laugh"])
        #expect((changed["counts"] as? [[String: Any]])?.map { $0["reaction"] as? String } == ["laugh"])
        carol.send("/unreact \(hiRef)")
        let removed = try await bob.waitForEvent(
            "reaction", ["ref": hiRef, "name": "Carol"], also: { $0["reaction"] is NSNull })
        #expect((removed["counts"] as? [Any])?.isEmpty == true)

        // Read by both other members; the receipts view says who and when.
        bob.send("/wait read \(hiRef) 20")
        try await bob.waitForEvent(
            "status", ["ref": hiRef, "status": "read"],
            also: { $0["read_by"] as? Int == 2 && $0["recipients"] as? Int == 2 })
        bob.send("/receipts \(hiRef)")
        try await bob.waitForEvent("output", ["text": "\(hiRef): read ✓✓"])
        try await bob.waitForEvent(
            "output", also: { ($0["text"] as? String)?.hasPrefix("  Carol read it at ") == true })
        try await bob.waitForEvent(
            "output", also: { ($0["text"] as? String)?.hasPrefix("  Alice read it at ") == true })

        // A reply, an edit, a delete.
        carol.send("/reply \(hiRef) -- a reply")
        try await bob.waitForEvent("message", ["text": "-- a reply", "reply_to": hiRef, "author": "Carol"])
        bob.send("/edit \(hiRef) hi all, edited")
        try await carol.waitForEvent(
            "message", ["ref": hiRef, "change": "edit", "text": "hi all, edited"],
            also: { $0["edited"] as? Bool == true })
        bob.send("/delete \(hiRef)")
        try await carol.waitForEvent(
            "message", ["ref": hiRef, "change": "delete"], also: { $0["deleted"] as? Bool == true })
        try await alice.waitForEvent("message", ["ref": hiRef, "change": "delete"], also: { $0["text"] is NSNull })

        // Carol is removed; Bob and Alice see it.
        alice.send("/kick Carol")
        let kicked = try await bob.waitForEvent("member", ["change": "removed", "by": "Alice"])
        #expect((kicked["members"] as? [[String: Any]])?.first?["name"] as? String == "Carol")

        // Alice and Bob end with the same digests.
        func digests(_ node: NatterProcess) -> [String] {
            node.events.filter { $0["type"] as? String == "digest" }.map { "\($0["log"]!) \($0["conversations"]!)" }
        }
        var agreed = false
        for attempt in 1...50 where !agreed {
            for node in [alice, bob] { node.send("/digest") }
            for node in [alice, bob] {
                try await node.waitForEvent("digest", also: { _ in digests(node).count >= attempt })
            }
            agreed = digests(alice).last == digests(bob).last
            if !agreed { try await Task.sleep(for: .milliseconds(200)) }
        }
        #expect(agreed)
        for node in [alice, bob, carol] {
            #expect(
                !node.events.contains { $0["type"] as? String == "error" },
                "\(node.events.filter { $0["type"] as? String == "error" })")
            try await node.finish()
            #expect(node.process.terminationStatus == 0)
        }
    }

    @Test("a first start from a script needs --name: one clear error line, non-zero exit, nothing created")
    func firstStartNeedsAName() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-first-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let process = Process()
        process.executableURL = natter
        process.arguments = ["run", "--data", "\(root)/new", "--listen", "127.0.0.1:0", "--no-discovery"]
        let (input, errors) = (Pipe(), Pipe())
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        process.standardError = errors
        try process.run()
        input.fileHandleForWriting.closeFile()
        #expect(try await waitForExit(process, seconds: 30))
        let message = String(decoding: errors.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        #expect(process.terminationStatus != 0)
        #expect(message.split(separator: "\n").count == 1)
        #expect(message.contains("give your display name with --name NAME"))
        #expect(!FileManager.default.fileExists(atPath: "\(root)/new/identity.key"))
    }
}

@Suite("Files through the REPL", .serialized)
struct ReplFileTests {
    @Test("/send-file on one node, /save into a directory on another: same bytes, a safe name, no overwrite")
    func sendAndSaveAFile() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-file-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        try FileManager.default.createDirectory(atPath: "\(root)/out", withIntermediateDirectories: true)
        // 300 KiB of seeded bytes (several chunks), under a name a hostile sender could choose.
        var generator = SeededGenerator(seed: 300)
        let bytes = (0..<300 * 1024).map { _ in UInt8.random(in: 0...255, using: &generator) }
        let source = "\(root)/..report 2026.bin"
        try Data(bytes).write(to: URL(fileURLWithPath: source))

        func start(_ name: String, peer: Int?) throws -> NatterProcess {
            try NatterProcess.scripted(natter, data: "\(root)/\(name)", name: name, peer: peer)
        }
        let alice = try start("Alice", peer: nil)
        defer { alice.kill() }
        let port = try #require(try await alice.waitForEvent("started")["port"] as? Int)
        let bob = try start("Bob", peer: port)
        defer { bob.kill() }

        alice.send("/wait peer Bob 20")
        alice.send("/msg Bob here it comes")
        alice.send("/open Bob")
        alice.send("/send-file \(source)")
        let sent = try await alice.waitForEvent("message", also: { ($0["file"] as? [String: Any]) != nil })
        let file = try #require(sent["file"] as? [String: Any])
        #expect(file["name"] as? String == "..report 2026.bin")
        #expect(file["size"] as? Int == bytes.count)
        let received = try await bob.waitForEvent("message", ["author": "Alice"], also: { $0["file"] is [String: Any] })
        let ref = try #require(received["ref"] as? String)

        bob.send("/save \(ref) \(root)/out")
        bob.send("/wait saved \(ref) 30")
        try await bob.waitForEvent("file", ["state": "saved", "ref": ref], seconds: 40)
        let saved = "\(root)/out/report 2026.bin"  // leading dots dropped: never a hidden or parent entry
        #expect(try Data(contentsOf: URL(fileURLWithPath: saved)) == Data(bytes))

        // Saving again to the same place is refused unless told; --force replaces it.
        bob.send("/save \(ref) \(saved)")
        try await bob.waitForEvent("error", also: { ($0["message"] as? String)?.isEmpty == false })
        bob.send("/save --force \(ref) \(saved)")
        bob.send("/wait saved \(ref) 10")
        for node in [alice, bob] { try await node.finish() }
        let errors = bob.events.filter { $0["type"] as? String == "error" }
        #expect(errors.count == 1, "\(errors)")
        #expect(alice.process.terminationStatus == 0)
    }
}
