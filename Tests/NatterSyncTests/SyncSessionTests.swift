import NatterCrypto
import NatterModel
import Testing

// Goal: show that two sync sessions bring two logs to the same records, moving each record at most once per link
// direction, skipping unchanged conversations, respecting every batch and window bound, pushing live records once,
// exchanging fork evidence, and ending in the same state whatever the interleaving. Method: pairs of in-memory logs
// built from signed fixture records, wired through `SyncPair`, which checks every message as it crosses and counts
// messages, bytes and records per direction.
@testable import NatterSync

@Suite("Sync session")
struct SyncSessionTests {
    static let alice = Fixture.identity(0x20)
    static let bob = Fixture.identity(0x40)
    static let carol = Fixture.identity(0x60)
    static let dave = Fixture.identity(0x80)

    /// A holds conversations 1–3, B conversations 3–5; conversation 3 has a shared prefix and feeds on both sides.
    static func overlappingLogs() -> (a: [Record], b: [Record]) { overlapping }

    private static let overlapping = makeOverlappingLogs()

    private static func makeOverlappingLogs() -> (a: [Record], b: [Record]) {
        let shared = Fixture.feed(alice, in: Fixture.conversation(3), count: 100)
        let aliceMore = Fixture.feed(alice, in: Fixture.conversation(3), count: 150, after: shared)
        var a = shared + aliceMore
        var b = shared
        for number in 1...2 {
            a += Fixture.feed(bob, in: Fixture.conversation(number), count: 300)
            a += Fixture.feed(carol, in: Fixture.conversation(number), count: 150)
        }
        a += Fixture.feed(carol, in: Fixture.conversation(3), count: 120)
        b += Fixture.feed(dave, in: Fixture.conversation(3), count: 130)
        for number in 4...5 {
            b += Fixture.feed(dave, in: Fixture.conversation(number), count: 260)
            b += Fixture.feed(bob, in: Fixture.conversation(number), count: 90)
        }
        return (a, b)
    }

    @Test("a fresh exchange in both directions leaves both logs equal, each record sent once")
    func bothDirections() {
        let (recordsA, recordsB) = Self.overlappingLogs()
        var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB))
        pair.start()
        pair.run()
        let union = Set(recordsA.map(\.id)).union(recordsB.map(\.id))
        #expect(pair.violations.isEmpty)
        #expect(pair.a.closedWith == nil && pair.b.closedWith == nil)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(LogContents(pair.a.log).chain == union)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        let sentByA = pair.stats[.a]!.recordIDs
        let sentByB = pair.stats[.b]!.recordIDs
        #expect(allDistinct(sentByA) && allDistinct(sentByB))
        // Exactly what the other side lacked, nothing it had.
        #expect(Set(sentByA) == Set(recordsA.map(\.id)).subtracting(recordsB.map(\.id)))
        #expect(Set(sentByB) == Set(recordsB.map(\.id)).subtracting(recordsA.map(\.id)))
        #expect(pair.a.progress.last.map { $0.received == $0.expected && $0.received == sentByB.count } == true)
        #expect(pair.b.progress.last.map { $0.received == $0.expected && $0.received == sentByA.count } == true)
        print(
            "(a) records A→B \(sentByA.count), B→A \(sentByB.count); messages A→B \(pair.stats[.a]!.messages) "
                + "(\(pair.stats[.a]!.bytes) bytes), B→A \(pair.stats[.b]!.messages) (\(pair.stats[.b]!.bytes) bytes)"
                + "; by type A \(pair.stats[.a]!.messagesByType.sorted { $0.key < $1.key }), "
                + "B \(pair.stats[.b]!.messagesByType.sorted { $0.key < $1.key })")
    }

    @Test("the same exchange over real secure channels")
    func overSecureChannels() {
        let (recordsA, recordsB) = Self.overlappingLogs()
        var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB), overSecureChannels: true)
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
    }

    @Test("a fresh node pulls everything")
    func freshNodePulls() {
        let (recordsA, _) = Self.overlappingLogs()
        var pair = SyncPair(a: Fixture.log(recordsA), b: InMemoryRecordSource())
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(pair.b.log.recordCount == recordsA.count)
        #expect(pair.stats[.a]!.recordIDs.count == recordsA.count)
        #expect(pair.stats[.b]!.recordIDs.isEmpty)
        #expect(pair.b.progress.last.map { $0 == (recordsA.count, recordsA.count) } == true)
    }

    @Test("of 1,000 conversations only the 3 that differ are exchanged")
    func onlyDifferingConversations() {
        var shared = [Record]()
        for number in 0..<1000 {
            shared += Fixture.feed(Self.alice, in: Fixture.conversation(number), count: 1, payloadBytes: 8)
        }
        let inTen = shared.filter { $0.header.conversation == Fixture.conversation(10) }
        let extraA = Fixture.feed(Self.alice, in: Fixture.conversation(10), count: 2, after: inTen)
        let extraB = Fixture.feed(Self.bob, in: Fixture.conversation(500), count: 3)
        // Conversation 900 differs both ways: a new author on each side.
        let extraA900 = Fixture.feed(Self.carol, in: Fixture.conversation(900), count: 1)
        let extraB900 = Fixture.feed(Self.dave, in: Fixture.conversation(900), count: 1)
        var pair = SyncPair(a: Fixture.log(shared + extraA + extraA900), b: Fixture.log(shared + extraB + extraB900))
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        for side in [Side.a, .b] {
            let stats = pair.stats[side]!
            #expect(stats.count(.summary) == 1)
            #expect(stats.count(.heads) == 1)
            #expect(stats.headsEntries == 3)
            #expect(stats.count(.records) == 1)
            #expect(stats.messages <= 5)
            // The summary (1000 × 48 bytes) dominates; everything else is a few hundred bytes per record.
            #expect(stats.bytes < 4 + 1000 * 48 + 3_000)
        }
        #expect(Set(pair.stats[.a]!.recordIDs) == Set((extraA + extraA900).map(\.id)))
        #expect(Set(pair.stats[.b]!.recordIDs) == Set((extraB + extraB900).map(\.id)))
        print(
            "(b) messages A→B \(pair.stats[.a]!.messages) (\(pair.stats[.a]!.bytes) bytes), "
                + "B→A \(pair.stats[.b]!.messages) (\(pair.stats[.b]!.bytes) bytes)")
    }
}
