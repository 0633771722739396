import NatterModel
import Testing

// Goal: show that live push under load shares frames without delaying a lone record, and that credit rides on
// RECORDS when records flow both ways. Method: a `SyncPair` whose sessions hold pushes for 50 ms, driven by hand.
@testable import NatterSync

@Suite("Sync push interval")
struct SyncPushIntervalTests {
    static let alice = Fixture.identity(0x21)
    static let bob = Fixture.identity(0x41)
    static let interval = Duration.milliseconds(50)

    static func pair() -> (SyncPair, base: [Record]) {
        let base = Fixture.feed(alice, in: Fixture.conversation(7), count: 3)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(base))
        pair.a.session = SyncSession(source: pair.a.log, pushInterval: interval)
        pair.b.session = SyncSession(source: pair.b.log, pushInterval: interval)
        pair.start()
        pair.run()
        return (pair, base)
    }

    @Test("the first record goes at once; records within the interval share the next frame")
    func burstShares() {
        var (pair, base) = Self.pair()
        let more = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 3, after: base)
        let sentAt = pair.now
        pair.author([more[0]], on: .a)
        #expect(pair.stats[.a]!.count(.records) == 1)
        pair.run()
        pair.author([more[1]], on: .a)
        pair.author([more[2]], on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 1, "held for the interval")
        #expect(pair.a.session.nextDeadline() == sentAt + Self.interval)
        pair.tick(at: sentAt + Self.interval)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 2, "both in one frame")
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }

    @Test("with records flowing both ways, credit rides on RECORDS and no CREDIT is sent")
    func creditRides() {
        var (pair, _) = Self.pair()
        let aliceMore = Fixture.feed(Self.alice, in: Fixture.conversation(8), count: 40)
        let bobMore = Fixture.feed(Self.bob, in: Fixture.conversation(8), count: 40)
        for round in 0..<40 {
            pair.author([aliceMore[round]], on: .a)
            pair.author([bobMore[round]], on: .b)
            pair.run()
            pair.advance(to: pair.now + Self.interval, step: Self.interval)
        }
        #expect(pair.stats[.a]!.count(.records) >= 40)
        #expect(pair.stats[.a]!.count(.credit) + pair.stats[.b]!.count(.credit) == 0)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }
}
