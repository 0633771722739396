import NatterModel
import Testing

// Goal: show that live push under load shares frames while no record waits longer than the interval, that what a
// REQUEST asks for is not held, and that credit rides on RECORDS when records flow both ways. Method: a `SyncPair`
// whose sessions hold pushes for 50 ms, driven by hand.
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
        // The initial exchange's messages spend 200 ms in flight: a round trip that justifies the interval (a DONE
        // answering within microseconds would lower it to zero).
        pair.tick(at: pair.now + .milliseconds(200))
        pair.run()
        #expect(pair.a.session.pushInterval == interval && pair.b.session.pushInterval == interval)
        return (pair, base)
    }

    @Test("a DONE that answers the first summary quickly lowers the interval at the link's start")
    func quickDoneLowersTheInterval() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 3)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(base))
        pair.a.session = SyncSession(source: pair.a.log, pushInterval: Self.interval)
        pair.b.session = SyncSession(source: pair.b.log, pushInterval: Self.interval)
        pair.start()
        pair.run()
        #expect(pair.stats[.a]!.count(.done) == 1 && pair.stats[.b]!.count(.done) == 1)
        #expect(pair.a.session.pushInterval == .zero && pair.b.session.pushInterval == .zero)
        // A live record then goes at once.
        let next = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 1, after: base)
        pair.author(next, on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 1)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }

    @Test("a live record waits at most the interval: the first is held until it is that old, later ones share its frame")
    func burstShares() {
        var (pair, base) = Self.pair()
        let more = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 3, after: base)
        let queuedAt = pair.now
        pair.author([more[0]], on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 0, "held while records gather")
        #expect(pair.a.session.nextDeadline() == queuedAt + Self.interval)
        pair.tick(at: queuedAt + Self.interval / 2)
        pair.author([more[1]], on: .a)
        pair.author([more[2]], on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 0)
        #expect(pair.a.session.nextDeadline() == queuedAt + Self.interval, "the oldest record sets the deadline")
        pair.tick(at: queuedAt + Self.interval)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 1, "all three in one frame, the first held exactly the interval")
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        // The next batch goes no sooner than the interval after this one, even for a record queued much later.
        let sentAt = pair.now
        let late = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 1, after: base + more)
        pair.tick(at: sentAt + Self.interval * 3)
        pair.author(late, on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 1)
        pair.tick(at: sentAt + Self.interval * 4)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 2)
        #expect(pair.violations.isEmpty)
    }

    @Test("a link's interval is a quarter of its handshake, at most the cap, and zero below 2 ms (a LAN)")
    func intervalFromHandshake() {
        let cap = Duration.milliseconds(40)
        #expect(Limits.syncPushInterval(upTo: cap, handshake: .milliseconds(1)) == .zero)
        #expect(Limits.syncPushInterval(upTo: cap, handshake: .microseconds(7_900)) == .zero)
        #expect(Limits.syncPushInterval(upTo: cap, handshake: .milliseconds(8)) == .milliseconds(2))
        #expect(Limits.syncPushInterval(upTo: cap, handshake: .milliseconds(100)) == .milliseconds(25))
        #expect(Limits.syncPushInterval(upTo: cap, handshake: .milliseconds(300)) == cap)
    }

    @Test("credits that come back quickly lower an interval a slow handshake set; slow ones leave it")
    func roundTripsLowerTheInterval() {
        var (pair, base) = Self.pair()
        var written = base
        /// One live record from A, sent when its hold ends; its batch then spends `flight` before B sees it.
        func sendOne(flight: Duration) {
            let record = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 1, after: written)
            written += record
            pair.author(record, on: .a)
            pair.run()
            pair.tick(at: pair.now + Self.interval)
            pair.tick(at: pair.now + flight)
            pair.run()
        }
        // B returns credit after four batches (`syncCreditReturnBatches`); 200 ms in flight is a round trip that
        // justifies the 50 ms interval, so it stays.
        for _ in 0..<Limits.syncCreditReturnBatches { sendOne(flight: .milliseconds(200)) }
        #expect(pair.stats[.b]!.count(.credit) == 1)
        #expect(pair.a.session.pushInterval == Self.interval)
        // The same link answering within microseconds: a LAN whose handshake was slow. The interval falls to zero...
        for _ in 0..<Limits.syncCreditReturnBatches { sendOne(flight: .zero) }
        #expect(pair.stats[.b]!.count(.credit) == 2)
        #expect(pair.a.session.pushInterval == .zero)
        // ...so the next live record goes at once instead of waiting 50 ms.
        let sent = pair.stats[.a]!.count(.records)
        let next = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 1, after: written)
        pair.author(next, on: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == sent + 1)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }

    @Test("records a REQUEST asks for go at once, without gathering")
    func requestsGoAtOnce() {
        var (pair, base) = Self.pair()
        let more = Fixture.feed(Self.alice, in: Fixture.conversation(7), count: 2, after: base)
        pair.a.log.append(more)  // held by A, never reported live: B finds them missing
        let feed = FeedKey(conversation: Fixture.conversation(7), author: Fixture.author(Self.alice))
        pair.process(
            pair.b.session.missing(conversation: feed.conversation, author: feed.author, from: 4, now: pair.now),
            from: .b)
        pair.run()
        #expect(pair.stats[.a]!.count(.records) == 1)
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
