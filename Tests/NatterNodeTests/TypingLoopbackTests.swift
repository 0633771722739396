// Goal: on real nodes over loopback TCP, typing reaches the other member — through a relay that is not a member —
// stays on while keystrokes continue, clears after the idle timeout (not before 3 s after the last keystroke), is
// never written to any node's database, and never reaches a non-member as an event (SPEC F12, issue 7). How fast
// is printed, not asserted: the timing rules are `TypingTests`' (the pure `TypingTracker`, time as input).
// Method: four `Node` actors in this process (named peers, no discovery): Alice ← Relay ← Bob, and Eve dialling
// Alice; Alice and Bob share a direct chat. Each node's event stream is recorded with arrival times; each database
// is dumped with the `sqlite3` tool before and after.
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import natter

/// A node and what it reported, with the time each event arrived.
final class RecordedNode: Sendable {
    let node: Node
    let path: String
    let events = Mutex<[(at: ContinuousClock.Instant, event: NodeEvent)]>([])
    let tasks = Mutex<[Task<Void, Never>]>([])

    init(
        root: String, name: String, peers: [Int], quotas: QuotaConfiguration = .init(),
        prepare: (RecordStore) throws -> Void = { _ in }
    ) async throws {
        path = "\(root)/\(name)"
        let (identity, store) = try DataDirectoryHandle(explicit: path).initialise(name: name, network: nil)
        try prepare(store)
        node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0),
            peers: peers.map { PeerAddress(host: "127.0.0.1", port: $0) }, discovery: nil, quotas: quotas)
        let node = node
        tasks.withLock {
            $0 = [
                Task { await node.run() },
                Task { [self] in for await event in node.events { self.events.withLock { $0.append((.now, event)) } } },
            ]
        }
    }

    var author: AuthorID { get async { await node.identity.author } }

    func typingEvents(in conversation: ConversationID) -> [(at: ContinuousClock.Instant, people: [AuthorID])] {
        events.withLock { list in
            list.compactMap { entry in
                guard case .typing(let id, let people) = entry.event, id == conversation else { return nil }
                return (entry.at, people)
            }
        }
    }

    var anyTyping: Bool {
        events.withLock { $0.contains { if case .typing = $0.event { true } else { false } } }
    }

    /// The whole database as SQL text (`sqlite3 .dump`): equal dumps mean nothing was written.
    func dump() throws -> String { try sqlite3(".dump") }

    /// What the `sqlite3` tool (another process, as an operator would use it) prints for `command` on this node's
    /// database.
    func sqlite3(_ command: String) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/sqlite3")
        process.arguments = ["\(path)/natter.sqlite", command]
        let pipe = Pipe()
        process.standardOutput = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw ProcessFailure("sqlite3 \(command) failed for \(path)") }
        return String(decoding: data, as: UTF8.self)
    }

    func stop() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        await node.shutdown()
    }
}

@Suite("Typing on real nodes over loopback", .serialized)
struct TypingLoopbackTests {
    @Test("typing reaches the member through a relay, clears after the idle timeout, is not stored or shown to others")
    func typingOverLoopback() async throws {
        try await MachineTurns.shared.exclusive { try await typingOverLoopbackAlone() }
    }

    func typingOverLoopbackAlone() async throws {
        #expect(FileManager.default.isExecutableFile(atPath: "/usr/bin/sqlite3"), "the test reads databases with sqlite3")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-typing-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await RecordedNode(root: root, name: "Alice", peers: [])
        let relay = try await RecordedNode(root: root, name: "Relay", peers: [alice.node.port])
        let bob = try await RecordedNode(root: root, name: "Bob", peers: [relay.node.port])
        let eve = try await RecordedNode(root: root, name: "Eve", peers: [alice.node.port])
        let nodes = [alice, relay, bob, eve]
        defer { Task { for node in nodes { await node.stop() } } }
        let (aliceID, bobID) = (await alice.author, await bob.author)

        // A direct chat, founded by Alice once Bob's profile reached her through the relay.
        let (aliceNode, bobNode) = (alice.node, bob.node)
        // Setup, not a timing target: generous for a loaded machine running the whole suite.
        #expect(try await eventually(seconds: 30) { try await aliceNode.read { try $0.hasProfile(bobID) } })
        let chat = try await aliceNode.read { try $0.directConversationID(with: bobID) }
        try await aliceNode.author(.sendDirect("hello", to: bobID))
        func lastText() async throws -> String? {
            try await bobNode.read { try $0.conversationList().first { $0.id == chat }?.preview }
        }
        #expect(try await eventually { try await lastText() == "hello" })
        // Let every write settle before the databases are read. Bob's node writes a delivered receipt (it is node
        // policy, with a delay): wait until Alice holds it and all four logs agree — Eve's too: she relays what Alice
        // holds, and a record reaching her after the path settled changed her database while people typed (seen in
        // CI, about one run in ten). A quiet spell alone can end before a receipt delayed by a loaded machine is
        // written. Then two dumps 300 ms apart agree (the tables refreshed after the last delivery).
        #expect(
            try await eventually(seconds: 30) {
                guard let hello = try await aliceNode.read({ try $0.lineIDs(of: chat).last }) else { return false }
                let receipts = try await aliceNode.read { try $0.receipts(of: hello, in: chat) }
                guard receipts.contains(where: { $0.member == bobID && $0.state != .pending }) else { return false }
                var logs = Set<[UInt8]>()
                for node in nodes { logs.insert(try await node.node.read { try $0.digests().log }) }
                return logs.count == 1
            })
        var before = try nodes.map { try $0.dump() }
        for _ in 0..<30 {
            try await Task.sleep(for: .milliseconds(300))
            let again = try nodes.map { try $0.dump() }
            if again == before { break }
            before = again
        }

        // Typing reaches Bob through the relay. How soon is a figure for the log, not a gate: the pure timing is
        // `TypingTests`' (time as input), and wall-clock bounds swing with the machine's load.
        let seen = bob.typingEvents(in: chat).count  // Bob's typing events before Alice types
        let start = ContinuousClock.now
        await alice.node.userTyping(in: chat)
        #expect(try await eventually(seconds: 30) { bob.typingEvents(in: chat).count > seen })
        let shown = try #require(bob.typingEvents(in: chat).dropFirst(seen).first)
        #expect(shown.people == [aliceID])
        print("typing over loopback: reached Bob through the relay after \(shown.at - start)")

        // Keystrokes for 3 s (a refresh on the way), then none: Bob's indicator stays on while they last, and clears
        // after the idle timeout — no sooner than 3 s after the last keystroke (taken before the keystroke is handed
        // to the node, so the node's own time of it is later).
        var lastKeystroke = ContinuousClock.now
        for _ in 0..<6 {
            try await Task.sleep(for: .milliseconds(500))
            lastKeystroke = .now
            await alice.node.userTyping(in: chat)
        }
        // No flicker holds while each refresh reaches Bob within the display timeout's slack (2 s beyond the refresh
        // interval). On a machine loaded enough that the first frame took over a second to arrive (the whole suite
        // in parallel on two cores: seen in CI), a delayed refresh may let it lapse once; that is the timeout doing
        // its job, and the pure timing is `TypingTests`'. The indicator must still end cleared.
        let loaded = shown.at - start > .seconds(1)
        if !loaded { #expect(bob.typingEvents(in: chat).count == seen + 1, "no flicker while Alice types") }
        #expect(try await eventually(seconds: 30) { bob.typingEvents(in: chat).last?.people == [] })
        let events = bob.typingEvents(in: chat).dropFirst(seen)
        if loaded {
            print("typing over loopback: loaded machine, flicker not checked: \(events.map(\.people))")
            #expect(events.allSatisfy { $0.people == [aliceID] || $0.people.isEmpty })
        } else {
            #expect(events.map(\.people) == [[aliceID], []], "shown, then cleared: \(events.map(\.people))")
        }
        let cleared = try #require(events.last).at - lastKeystroke
        // SPEC F12's 3 s, written out: a bound taken from the constant under test could not catch a change to it.
        #expect(cleared >= .seconds(3), "cleared \(cleared) after the last keystroke")
        print("typing over loopback: cleared \(cleared) after the last keystroke (idle \(TypingTracker.idleTimeout))")

        // Nobody else saw anything; no database changed.
        #expect(!relay.anyTyping && !eve.anyTyping && !alice.anyTyping)
        let after = try nodes.map { try $0.dump() }
        for (index, node) in nodes.enumerated() {
            let changed = Set(after[index].split(separator: "\n")).symmetricDifference(before[index].split(separator: "\n"))
            #expect(changed.isEmpty, "\(node.path) changed while people typed: \(changed.sorted().prefix(5))")
        }
        #expect(before[0].contains("CREATE TABLE") && before[0].contains("INSERT INTO"))
    }
}
