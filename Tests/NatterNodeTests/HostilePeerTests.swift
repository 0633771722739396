// Goal: one hostile peer on the LAN cannot make a node buffer without end nor keep honest nodes from linking
// (issue 19, items 1 and 2). Method: real `Node`s in this process on loopback TCP (no discovery) and the attacks of
// `natter debug attack` run for real — a greedy peer repeating REQUEST-from-1 with CREDIT (never reading, or reading
// and discarding), and silent connections holding the handshake slots — as processes of their own or raw sockets from
// other loopback addresses. Every wait is bounded; nothing here asserts a duration (the figures are measured by
// scripts/attack-figures.sh on a release build).
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Testing

@testable import natter

@Suite("Hostile peers on real nodes", .serialized, .timeLimit(.minutes(3)))
struct HostilePeerTests {
    /// The victim's feed: 2,000 records of 4,000 bytes (8 MB, well above a sync window and the transport's write
    /// buffer), from a throwaway author in a conversation the victim relays.
    static let feed = (conversation: floodConversation("greedy"), count: 2_000, payload: 4_000, seed: UInt64(1_919))

    /// A victim holding `feed`, and the feed's author.
    func victimWithFeed(root: String) async throws -> (RecordedNode, AuthorID) {
        let records = try floodRecords(
            conversation: Self.feed.conversation, authors: 1, perAuthor: Self.feed.count,
            payloadBytes: Self.feed.payload, seed: Self.feed.seed)
        let victim = try await RecordedNode(root: root, name: "Victim", peers: []) { store in
            _ = try store.ingest(records.map(\.bytes), receivedAtMillis: 1)
        }
        return (victim, records[0].header.author)
    }

    /// Runs `natter debug attack greedy` against `victim` for 20 s at most; returns what it printed.
    func greedy(_ victim: RecordedNode, author: AuthorID, reading: Bool) async throws -> String {
        let arguments =
            [
                "debug", "attack", "greedy", "--peer", "127.0.0.1:\(victim.node.port)",
                "--conversation", Self.feed.conversation.hex, "--author", author.hex, "--seconds", "20",
            ] + (reading ? ["--read"] : [])
        let (status, output, errors) = try await runProcess(try builtExecutable("natter"), arguments)
        #expect(status == 0, "\(errors)")
        return output
    }

    /// The misbehaviour the victim scored, if any.
    func misbehaviours(_ node: RecordedNode) -> [Misbehaviour] {
        node.events.withLock { $0.compactMap { if case .misbehaved(_, let m) = $0.event { m } else { nil } } }
    }

    @Test("a greedy peer repeating REQUEST-from-1 with CREDIT, never reading, is closed and scored")
    func greedyStalledReader() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-greedy-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (victim, author) = try await victimWithFeed(root: root)
        defer { Task { await victim.stop() } }
        let output = try await greedy(victim, author: author, reading: false)
        // Before issue 19 the attacker stayed linked for the whole 20 s while the victim queued hundreds of MB.
        #expect(output.contains("greedy: closed by the victim"), "\(output)")
        #expect(try await eventually(seconds: 10) { !misbehaviours(victim).isEmpty }, "the victim scores it")
        #expect(misbehaviours(victim).allSatisfy { $0.kind == .protocolViolation || $0.kind == .notReading })
    }

    @Test("a greedy peer repeating REQUEST-from-1 and discarding what it reads is closed by the resend bound")
    func greedyReader() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-greedy-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let (victim, author) = try await victimWithFeed(root: root)
        defer { Task { await victim.stop() } }
        let output = try await greedy(victim, author: author, reading: true)
        #expect(output.contains("greedy: closed by the victim"), "\(output)")
        let failed = try await eventually(seconds: 10) {
            victim.events.withLock {
                $0.contains { if case .linkFailed(_, let reason) = $0.event { reason.contains("asked again for records it was already sent") } else { false } }
            }
        }
        #expect(failed, "the victim says why it closed the link")
        #expect(misbehaviours(victim).contains { $0.kind == .protocolViolation })
    }

    @Test("an honest node links while 32 silent connections from 127.0.0.2–5 hold the handshake slots")
    func slowloris() async throws {
        let victim = try await RunningNode(seed: 61)
        defer { Task { await victim.stop() } }
        // The slowloris, 8 silent connections from each of 4 addresses, not renewed during the test: a slot
        // frees only when the victim gives one up.
        let attacker = try NatterProcess(
            try builtExecutable("natter"),
            [
                "debug", "attack", "slowloris", "--peer", "127.0.0.1:\(victim.node.port)", "--from",
                "127.0.0.2,127.0.0.3,127.0.0.4,127.0.0.5", "--per-address", "8", "--renew", "3600", "--seconds", "60",
            ])
        defer { attacker.kill() }
        try await attacker.waitFor("silent connections open", seconds: 30)
        let honest = try await RunningNode(seed: 62, peers: [PeerAddress(host: "127.0.0.1", port: victim.node.port)])
        defer { Task { await honest.stop() } }
        let honestID = await honest.node.identity.author
        try await victim.log.wait("the honest node's link", seconds: 30) { events in
            events.contains { if case .peerUp(honestID, _) = $0 { true } else { false } }
        }
        // Before issue 19 the table stayed full until the victim's 5 s handshake timeout closed silent connections:
        // the honest link came only after those timeouts (and, with the attack's renewals, after the attack).
        let events = victim.log.all
        let linkedAt = events.firstIndex { if case .peerUp(honestID, _) = $0 { true } else { false } }!
        let firstTimeout = events.firstIndex { if case .linkFailed(_, "handshake timed out") = $0 { true } else { false } }
        #expect(firstTimeout.map { linkedAt < $0 } ?? true, "the honest node linked before any silent connection timed out")
    }

    @Test("with every handshake slot held by silent connections, an honest connection evicts the stalest, which is scored")
    func silentConnectionsAreEvicted() async throws {
        let victim = try await RunningNode(seed: 63)
        defer { Task { await victim.stop() } }
        // The whole table: 8 addresses × their 4 slots, all silent.
        var silent = [RawClient]()
        for address in 2...9 {
            for _ in 0..<4 { silent.append(try RawClient(from: "127.0.0.\(address)", to: victim.node.port)) }
        }
        defer { for client in silent { client.finish() } }
        // Older than the eviction age (1 s), younger than the handshake timeout (5 s).
        try await Task.sleep(for: .seconds(2))
        let honest = try await RunningNode(seed: 64, peers: [PeerAddress(host: "127.0.0.1", port: victim.node.port)])
        defer { Task { await honest.stop() } }
        let honestID = await honest.node.identity.author
        try await victim.log.wait("the honest node's link", seconds: 30) { events in
            events.contains { if case .peerUp(honestID, _) = $0 { true } else { false } }
        }
        let scored = victim.log.all.compactMap { event -> Misbehaviour? in
            if case .misbehaved(_, let misbehaviour) = event, misbehaviour.kind == .stalledHandshake { misbehaviour } else { nil }
        }
        #expect(
            scored.contains { $0.detail.contains("evicted from a full handshake table") && $0.detail.contains("without a byte") },
            "a silent connection made room and was scored: \(scored)")
        #expect(silent.contains { $0.isClosed() }, "the evicted connection is closed")
    }
}
