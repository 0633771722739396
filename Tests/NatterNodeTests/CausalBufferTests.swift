// Goal: the causal buffer holds records that arrived ahead of their predecessor within bounds — records, bytes, a
// share per peer, an age — and one peer filling it cannot make another peer's out-of-order records drop (issue 19,
// item 6). Method: the pure `CausalBuffer` with small bounds and explicit times; then the attack itself on real
// nodes: `natter debug attack causal-fill` sends feeds starting at sequence 2 to an in-process `Node`, and an
// honest peer's record 2, then (over another link) its record 1, must both be applied.
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterProbe
import NatterStore
import NatterSync
import NatterTestSupport
import Testing

@testable import NatterNode

@Suite("Causal buffer")
struct CausalBufferTests {
    static let records = try! floodRecords(
        conversation: floodConversation("causal-buffer"), authors: 4, perAuthor: 12, payloadBytes: 100, seed: 6)
    /// Author `author`'s record at `sequence` (1…12).
    func record(author: Int, _ sequence: Int) -> Record { Self.records[author * 12 + sequence - 1] }
    func peer(_ number: UInt8) -> AuthorID { AuthorID(raw: Bytes32([UInt8](repeating: number, count: 32))) }
    func feed(_ author: Int) -> FeedKey {
        FeedKey(conversation: floodConversation("causal-buffer"), author: record(author: author, 1).header.author)
    }

    func limits(records: Int = 8, bytes: Int = 1 << 20, divisor: Int = 2) -> CausalBufferLimits {
        var limits = CausalBufferLimits()
        limits.recordsMax = records
        limits.bytesMax = bytes
        limits.peerShareDivisor = divisor
        return limits
    }

    @Test("held records come out in feed order once their predecessor is stored, with those the store passed")
    func takeInOrder() {
        var buffer = CausalBuffer(limits: limits())
        #expect(buffer.hold(record(author: 0, 3), from: peer(1), now: .zero) == .held)
        #expect(buffer.hold(record(author: 0, 2), from: peer(1), now: .zero) == .held)
        #expect(buffer.hold(record(author: 0, 2), from: peer(2), now: .zero) == .duplicate)
        #expect(buffer.take(feed(0), next: 1).isEmpty)
        #expect(
            buffer.take(feed(0), next: 3) == [record(author: 0, 2), record(author: 0, 3)],
            "2 was stored meanwhile, or is a fork's other branch: it goes to the store too")
        #expect(buffer.count == 0 && buffer.bytes == 0 && buffer.feeds.isEmpty)
    }

    @Test("a peer holds at most its share; when full, a lighter peer's record takes the heaviest's oldest place")
    func sharesAndEviction() {
        var buffer = CausalBuffer(limits: limits(records: 8, divisor: 2))
        for sequence in 2...5 { #expect(buffer.hold(record(author: 0, sequence), from: peer(1), now: .zero) == .held) }
        #expect(buffer.hold(record(author: 0, 6), from: peer(1), now: .zero) == .refused, "its share is 4")
        for sequence in 2...5 { #expect(buffer.hold(record(author: 1, sequence), from: peer(2), now: .zero) == .held) }
        #expect(buffer.count == 8)
        // Full: peer 3 holds nothing, so the heaviest (a tie: the smaller identity, peer 1) gives up its oldest.
        #expect(buffer.hold(record(author: 2, 2), from: peer(3), now: .seconds(1)) == .held)
        #expect(buffer.held(by: peer(1)) == 3 && buffer.held(by: peer(3)) == 1)
        #expect(buffer.take(feed(0), next: 3) == [record(author: 0, 3)], "peer 1's oldest record went")
    }

    @Test("the byte bound weighs holders by bytes")
    func byteBound() {
        let size = record(author: 0, 2).bytes.count
        var buffer = CausalBuffer(limits: limits(records: 100, bytes: 4 * size, divisor: 1))
        for sequence in 2...5 { #expect(buffer.hold(record(author: 0, sequence), from: peer(1), now: .zero) == .held) }
        #expect(buffer.hold(record(author: 1, 2), from: peer(2), now: .zero) == .held)
        #expect(buffer.bytes <= 4 * size && buffer.held(by: peer(1)) == 3)
        #expect(buffer.hold(record(author: 0, 6), from: peer(1), now: .zero) == .refused, "peer 1 is the heaviest")
    }

    @Test("records expire after the age bound; an evicted conversation's records go at once")
    func expiryAndDrop() {
        var buffer = CausalBuffer(limits: limits())
        _ = buffer.hold(record(author: 0, 2), from: peer(1), now: .zero)
        _ = buffer.hold(record(author: 1, 2), from: peer(1), now: .seconds(30))
        #expect(buffer.nextExpiry == .seconds(60))
        #expect(buffer.expire(now: .milliseconds(59_999)) == 0)
        #expect(buffer.expire(now: .seconds(60)) == 1 && buffer.count == 1)
        buffer.drop(conversation: floodConversation("causal-buffer"))
        #expect(buffer.count == 0 && buffer.nextExpiry == nil)
    }

    @Test("a held record that turns out to fork its feed is kept as evidence, and what its fork applies is reported")
    func drainedForkEvidenceReportsApplied() throws {
        var writer = ChatWriter("drained-fork")
        let chat = writer.chat
        func write(_ store: RecordStore, _ identity: IdentityKeyPair, _ text: String) throws -> Record {
            try writer.write(store, identity, text)
        }
        let alice = try IdentityKeyPair(seed: [UInt8](repeating: 1, count: 32))
        let bob = try IdentityKeyPair(seed: [UInt8](repeating: 2, count: 32))
        let aliceStore = try RecordStore.inMemory()
        let (twinStore, bobStore) = (try RecordStore.inMemory(), try RecordStore.inMemory())
        let a1 = try write(aliceStore, alice, "common")
        _ = try twinStore.ingest([a1.bytes], receivedAtMillis: writer.clock)
        let (a2, a3) = (try write(aliceStore, alice, "left"), try write(aliceStore, alice, "left"))
        let (_, t3) = (try write(twinStore, alice, "right"), try write(twinStore, alice, "right"))
        _ = try bobStore.ingest([a1, a2, a3].map(\.bytes), receivedAtMillis: writer.clock)
        let b1 = try write(bobStore, bob, "after alice's third")

        // The observer holds a1 and b1 (waiting for alice's third), buffers the twin's third (a gap at 2), then
        // stores a2: draining the buffer finds the twin's third naming another second, a fork at 2. The fork cuts
        // b1's dependency at 1, so b1 applies in the drain's own transaction.
        let observer = try RecordStore.inMemory()
        _ = try observer.ingest([a1.bytes, b1.bytes], receivedAtMillis: writer.clock)
        var buffer = CausalBuffer(limits: limits())
        #expect(buffer.hold(t3, from: peer(1), now: .zero) == .held)
        _ = try observer.ingest([a2.bytes], receivedAtMillis: writer.clock)
        let drained = buffer.drain(into: observer, receivedAtMillis: writer.clock, durability: .synced)
        #expect(drained.stored.isEmpty)
        #expect(drained.evidence.map(\.id) == [t3.id])
        #expect(drained.applied.map(\.id) == [b1.id], "the record the fork let apply is reported")
        let feeds = try observer.feeds(of: chat)
        #expect(feeds.first { $0.author == AuthorID(alice.publicKey) }?.forkSequence == 2)
        #expect(feeds.first { $0.author == AuthorID(bob.publicKey) }?.applied == 1)
    }

    @Test("both branches of a fork held at one position reach the store: one appended, the other kept as evidence")
    func bothBranchesAtOnePosition() throws {
        var writer = ChatWriter("two-branches")
        let chat = writer.chat
        let alice = try IdentityKeyPair(seed: [UInt8](repeating: 1, count: 32))
        func write(_ store: RecordStore, _ text: String) throws -> Record { try writer.write(store, alice, text) }
        let (aliceStore, twinStore) = (try RecordStore.inMemory(), try RecordStore.inMemory())
        let a1 = try write(aliceStore, "common")
        _ = try twinStore.ingest([a1.bytes], receivedAtMillis: writer.clock)
        let (left, right) = (try write(aliceStore, "left"), try write(twinStore, "right"))
        let rightAgain = try write(twinStore, "right, then more")

        // Both second records arrive before the first (a node back from a partition hears both twins at once).
        var buffer = CausalBuffer(limits: limits())
        #expect(buffer.hold(left, from: peer(1), now: .zero) == .held)
        #expect(buffer.hold(right, from: peer(2), now: .zero) == .held, "the other branch at the same position")
        #expect(buffer.hold(right, from: peer(1), now: .zero) == .duplicate, "the same record again")
        #expect(buffer.hold(rightAgain, from: peer(2), now: .zero) == .held)
        #expect(buffer.count == 3 && buffer.held(by: peer(2)) == 2)

        let observer = try RecordStore.inMemory()
        _ = try observer.ingest([a1.bytes], receivedAtMillis: writer.clock)
        let drained = buffer.drain(into: observer, receivedAtMillis: writer.clock, durability: .synced)
        #expect(drained.stored.map(\.id) == [left.id], "the first to arrive is appended")
        #expect(
            drained.evidence.map(\.id) == [right.id, rightAgain.id],
            "the other proves the fork, and the twin's next names it: evidence too")
        #expect(buffer.count == 0)
        let feed = try observer.feeds(of: chat).first { $0.author == AuthorID(alice.publicKey) }
        #expect(feed?.forkSequence == 2 && feed?.stored == 2)
    }

    @Test("a peer filling the buffer with feeds starting at sequence 2 cannot make an honest gap's record drop")
    func fillAttackOnRealNodes() async throws {
        let victim = try await RunningNode(seed: 71)
        defer { Task { await victim.stop() } }
        let port = victim.node.port
        // One link, 5,000 records from sequence 2 on: more than the whole buffer (4,096), even if the victim has yet to
        // ingest the last three batches (768) when the attacker says it is done.
        let attacker = try NatterProcess(
            try builtExecutable("natter"),
            ["debug", "attack", "causal-fill", "--peer", "127.0.0.1:\(port)", "--records", "5000", "--seconds", "60"])
        defer { attacker.kill() }
        try await attacker.waitFor("causal-fill: sent", seconds: 60)

        // An honest feed's record 2 over one link, then its record 1 over another (as when the two took different
        // paths). Before issue 19 the full buffer dropped record 2, and only record 1 was ever applied.
        let honest = try floodRecords(
            conversation: floodConversation("honest-gap"), authors: 1, perAuthor: 2, seed: 72)
        let links = try await onThread {
            let first = try RawLink(host: "127.0.0.1", port: port)
            try first.send(RawLink.emptySummary)
            try first.send(RawLink.records([honest[1]]))
            // The victim asks for the gap (REQUEST from 1): record 2 was read and judged out of order.
            let deadline = ContinuousClock.now + .seconds(30)
            while !(try first.receive(wait: .milliseconds(100)).contains { $0.first == 5 }) {
                guard ContinuousClock.now < deadline else { throw ProcessFailure("no REQUEST for the gap") }
            }
            let second = try RawLink(host: "127.0.0.1", port: port)
            try second.send(RawLink.emptySummary)
            try second.send(RawLink.records([honest[0]]))
            return KeptAlive([first, second])
        }
        defer { _ = links }
        let second = honest[1].id
        let applied = try await eventually(seconds: 30) {
            victim.log.all.contains { if case .applied(let refs) = $0 { refs.contains { $0.id == second } } else { false } }
        }
        #expect(applied, "the honest record 2 waited in the buffer and was applied after record 1")
    }
}

/// Writes content records into one chat, each a millisecond after the last: an author's branches on the stores of
/// its twins (the fork tests).
struct ChatWriter {
    let chat: ConversationID
    let epoch = EpochID(bytes: [UInt8](repeating: 7, count: 32))
    /// The last record's time.
    private(set) var clock: Int64 = 1_000

    init(_ name: String) { chat = floodConversation(name) }

    mutating func write(_ store: RecordStore, _ identity: IdentityKeyPair, _ text: String) throws -> Record {
        clock += 1
        return try store.appendOwn(
            conversation: chat, kind: .content, epoch: epoch, createdAtMillis: clock, identity: identity
        ) { _ in Array(text.utf8) }
    }
}

/// Objects kept alive until the end of a test (raw links, whose sockets close when they go).
final class KeptAlive: @unchecked Sendable {
    let objects: [AnyObject]
    init(_ objects: [AnyObject]) { self.objects = objects }
}

/// Runs blocking work (raw sockets) on a thread of its own, so it holds no thread of the shared pool.
func onThread<T: Sendable>(_ work: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread.detachNewThread { continuation.resume(with: Result { try work() }) }
    }
}
