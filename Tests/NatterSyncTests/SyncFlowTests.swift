import NatterCrypto
import NatterModel
import Testing

// Goal: show that the sync session keeps its batches and window within their limits under any scheduling, pushes
// live records exactly once, answers requests for missing ranges, and reaches the same final state, through the
// same actions, whatever the interleaving or the run. Method: `SyncPair` checks every message as it crosses (batch
// count and bytes, outstanding batches against the window); schedules that starve the receiver's store, feed it
// promptly, or pick events with a seeded generator; transcripts compared action by action.
@testable import NatterSync

@Suite("Sync flow control and live push")
struct SyncFlowTests {
    static let alice = Fixture.identity(0x20)
    static let bob = Fixture.identity(0x40)
    static let carol = Fixture.identity(0x60)

    /// Large records (batches fill by bytes) and many small ones (batches fill by count).
    static let bulky: [Record] =
        Fixture.feed(alice, in: Fixture.conversation(1), count: 200, payloadBytes: 6_000)
        + Fixture.feed(bob, in: Fixture.conversation(1), count: 900, payloadBytes: 8)
        + Fixture.feed(carol, in: Fixture.conversation(2), count: 60, payloadBytes: 50_000)

    @Test(
        "batches respect their limits and the window never exceeds its bound",
        arguments: [Schedule.messagesFirst, .ingestFirst, .random(seed: 7)])
    func boundedBatches(schedule: Schedule) {
        var pair = SyncPair(a: Fixture.log(Self.bulky), b: InMemoryRecordSource())
        pair.start()
        pair.run(schedule)
        #expect(pair.violations.isEmpty)
        #expect(pair.b.log.recordCount == Self.bulky.count)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        let stats = pair.stats[.a]!
        #expect(allDistinct(stats.recordIDs) && stats.recordIDs.count == Self.bulky.count)
        // Fewest possible batches: neither 256 records nor 256 KiB are exceeded, and most batches are full.
        let totalBytes = Self.bulky.reduce(0) { $0 + $1.bytes.count }
        #expect(stats.count(.records) >= totalBytes / Limits.syncBatchBytesMax)
        if case .messagesFirst = schedule {
            // The receiver's store lags: the sender fills the window and waits for credit.
            #expect(stats.maxOutstanding == Limits.syncWindowBatches)
        }
    }

    @Test("a stream of full batches has its credit back every two batches; batches of a few records every four")
    func streamCredit() {
        // Small records: batches fill by count (256 each), a catch-up's stream.
        let stream = Fixture.feed(Self.bob, in: Fixture.conversation(3), count: 8 * Limits.syncBatchRecordsMax)
        var streaming = SyncPair(a: Fixture.log(stream), b: InMemoryRecordSource())
        streaming.start()
        streaming.run(.ingestFirst)
        #expect(streaming.violations.isEmpty && streaming.b.log.recordCount == stream.count)
        let streamCredits = streaming.stats[.b]!.credits
        #expect(streamCredits == Array(repeating: Limits.syncStreamCreditReturnBatches, count: 4))
        // Live pushes afterwards, a record each: no stream, so their credit waits for half the window.
        let live = Fixture.feed(
            Self.bob, in: Fixture.conversation(3), count: 2 * Limits.syncCreditReturnBatches, after: stream)
        for record in live {
            streaming.author([record], on: .a)
            streaming.advance(to: streaming.now + .milliseconds(100))
        }
        #expect(streaming.violations.isEmpty && streaming.b.log.recordCount == stream.count + live.count)
        #expect(streaming.stats[.a]!.count(.records) == 8 + live.count, "each live record went as a batch of its own")
        #expect(
            Array(streaming.stats[.b]!.credits.dropFirst(streamCredits.count))
                == Array(repeating: Limits.syncCreditReturnBatches, count: 2))
    }

    @Test("a catch-up interleaves feeds chunk by chunk, each feed still in sequence order")
    func feedsInterleaved() {
        let feeds = [Self.alice, Self.bob, Self.carol].map {
            Fixture.feed($0, in: Fixture.conversation(1), count: 100, payloadBytes: 8)
        }
        var pair = SyncPair(a: Fixture.log(feeds.flatMap { $0 }), b: InMemoryRecordSource())
        pair.start()
        pair.run()
        let sent = pair.stats[.a]!.recordIDs
        #expect(sent.count == 300 && pair.violations.isEmpty)
        // The first batch (256 records) carries every feed, not the first two and a half.
        let author = Dictionary(uniqueKeysWithValues: feeds.flatMap { $0 }.map { ($0.id, $0.header.author) })
        let firstChunks = sent.prefix(3 * SyncSession<InMemoryRecordSource>.readChunkRecords).map { author[$0]! }
        #expect(Set(firstChunks).count == 3)
        // Within each feed, records still go in sequence order.
        for feed in feeds {
            let ids = Set(feed.map(\.id))
            #expect(sent.filter { ids.contains($0) } == feed.map(\.id))
        }
    }

    @Test("after catching up, each new record crosses the link once, never back")
    func livePushOnce() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 20)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(Array(base.prefix(5))))
        pair.start()
        pair.run()
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        let beforeA = pair.stats[.a]!.recordIDs.count
        let beforeB = pair.stats[.b]!.recordIDs.count

        // A writes more to an old feed and a new conversation; B writes to the shared conversation.
        let moreA = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 7, after: base)
        let newConversation = Fixture.feed(Self.carol, in: Fixture.conversation(9), count: 3)
        let moreB = Fixture.feed(Self.bob, in: Fixture.conversation(1), count: 4)
        for record in moreA { pair.author([record], on: .a) }
        pair.author(newConversation, on: .a)
        pair.run()
        pair.author(moreB, on: .b)
        pair.run()

        #expect(pair.violations.isEmpty)
        let liveA = Array(pair.stats[.a]!.recordIDs.dropFirst(beforeA))
        let liveB = Array(pair.stats[.b]!.recordIDs.dropFirst(beforeB))
        #expect(liveA == (moreA + newConversation).map(\.id))
        #expect(liveB == moreB.map(\.id))
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        // Telling a session twice about the same records sends nothing more.
        pair.author([], on: .a)
        let again = pair.a.session.localRecordsStored(moreA.map { StoredRecord($0) }, now: pair.now)
        #expect(again.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
    }

    @Test("records stored during the initial exchange are pushed once")
    func liveDuringInitialExchange() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 600)
        let later = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 10, after: base)
        let other = Fixture.feed(Self.bob, in: Fixture.conversation(2), count: 5)
        var pair = SyncPair(a: Fixture.log(base), b: InMemoryRecordSource())
        pair.start()
        pair.run(maxSteps: 3)
        pair.author(later, on: .a)
        pair.author(other, on: .a)
        pair.run()
        #expect(pair.violations.isEmpty)
        let sent = pair.stats[.a]!.recordIDs
        #expect(allDistinct(sent) && sent.count == 615)
        #expect(pair.b.log.recordCount == 615)
        #expect(pair.b.caughtUpCount == 1)
    }

    @Test("a request for a missing range is answered with that range")
    func requestMissingRange() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 30)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(base))
        pair.start()
        pair.run()
        #expect(pair.stats[.a]!.recordIDs.isEmpty)
        let actions = pair.b.session.missing(
            conversation: Fixture.conversation(1), author: Fixture.author(Self.alice), from: 25, now: pair.now)
        pair.process(actions, from: .b)
        // A second request for a later point of the same feed is covered by the first.
        let covered = pair.b.session.missing(
            conversation: Fixture.conversation(1), author: Fixture.author(Self.alice), from: 27, now: pair.now)
        #expect(covered.isEmpty)
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.stats[.b]!.count(.request) == 1)
        #expect(pair.stats[.a]!.recordIDs == base[24...].map(\.id))
    }

    @Test("a gap reported by the store becomes a request")
    func gapBecomesRequest() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 10)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(base))
        pair.start()
        pair.run()
        // B's store says a delivered record came after a gap: B asks from the gap on.
        let more = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 5, after: base)
        pair.a.log.append(more)
        var message = SyncMessage.records([more[3]]).encoded()
        var actions = pair.b.session.receive(message: message, now: pair.now)
        #expect(actions.contains(.deliver([more[3]])))
        actions = pair.b.session.ingested([.outOfOrder(missingFrom: 11)], now: pair.now)
        message = SyncMessage.request(
            FeedKey(conversation: Fixture.conversation(1), author: Fixture.author(Self.alice)), from: 11
        ).encoded()
        #expect(actions == [.send(message)])
    }

    /// Both logs after a run in the fixed order.
    static let reference: (a: LogContents, b: LogContents) = {
        let (recordsA, recordsB) = SyncSessionTests.overlappingLogs()
        var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB))
        pair.start()
        pair.run()
        return (LogContents(pair.a.log), LogContents(pair.b.log))
    }()

    @Test("any interleaving of the two directions ends in the same state", arguments: 1...8)
    func interleavings(seed: UInt64) {
        let (recordsA, recordsB) = SyncSessionTests.overlappingLogs()
        var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB))
        pair.start()
        pair.run(.random(seed: seed))
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(LogContents(pair.a.log) == Self.reference.a)
        #expect(LogContents(pair.b.log) == Self.reference.b)
        #expect(Self.reference.a == Self.reference.b)
        #expect(allDistinct(pair.stats[.a]!.recordIDs) && allDistinct(pair.stats[.b]!.recordIDs))
    }

    @Test("the same inputs give the same actions")
    func determinism() {
        func transcript(seed: UInt64) -> [String] {
            let (recordsA, recordsB) = SyncSessionTests.overlappingLogs()
            var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB))
            pair.start()
            pair.run(.random(seed: seed))
            pair.author(Fixture.feed(Self.bob, in: Fixture.conversation(7), count: 3), on: .b)
            pair.run(.random(seed: seed + 1))
            pair.advance(to: pair.now + Limits.syncAntiEntropyInterval, .random(seed: seed + 2))
            return pair.transcript.map { "\($0.0) \($0.1)" }
        }
        let first = transcript(seed: 99)
        #expect(first.count > 20)
        #expect(first == transcript(seed: 99))
    }

    @Test("anti-entropy rounds on unchanged logs cost one summary each way")
    func quietAntiEntropy() {
        var logs = [Record]()
        for number in 0..<50 { logs += Fixture.feed(Self.alice, in: Fixture.conversation(number), count: 2) }
        var pair = SyncPair(a: Fixture.log(logs), b: Fixture.log(logs))
        pair.start()
        pair.run()
        #expect(pair.a.caughtUpCount == 1)
        let before = pair.stats
        pair.advance(to: Limits.syncAntiEntropyInterval)
        #expect(pair.violations.isEmpty)
        #expect(pair.a.closedWith == nil && pair.b.closedWith == nil)
        for side in [Side.a, .b] {
            let (old, new) = (before[side]!, pair.stats[side]!)
            #expect(new.count(.summary) == old.count(.summary) + 1)
            // Besides heartbeats, only the summary crossed.
            #expect(new.messages - new.count(.ping) == old.messages - old.count(.ping) + 1)
            #expect(new.count(.heads) == 0 && new.count(.records) == 0)
        }
    }

    @Test("later rounds leave out the feeds each side already reported")
    func headsSkipReportedFeeds() {
        let conversation = Fixture.conversation(1)
        var records = [Record]()
        var identities = [IdentityKeyPair]()
        for seed in 0..<50 {
            let identity = Fixture.identity(UInt8(seed * 5))
            identities.append(identity)
            records += Fixture.feed(identity, in: conversation, count: 2)
        }
        var pair = SyncPair(a: Fixture.log(records), b: Fixture.log(records))
        pair.start()
        pair.run()
        #expect(pair.stats[.a]!.headFeeds == 0)
        // Twice, A stores a record its session never hears of; each anti-entropy round finds it.
        for round in 1...2 {
            let before = (pair.stats[.a]!.headFeeds, pair.stats[.b]!.headFeeds)
            let feed = pair.a.log.chains[conversation]![Fixture.author(identities[round])]!
            pair.a.log.append(Fixture.feed(identities[round], in: conversation, count: 1, after: feed))
            pair.advance(to: Limits.syncAntiEntropyInterval * round)
            #expect(pair.violations.isEmpty)
            #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
            let sent = (pair.stats[.a]!.headFeeds - before.0, pair.stats[.b]!.headFeeds - before.1)
            if round == 1 {
                // First report of this conversation: every feed each way.
                #expect(sent == (50, 50))
            } else {
                // Only A's moved feed; B's heads have not moved since its last report.
                #expect(sent == (1, 0))
            }
        }
        #expect(pair.stats[.a]!.recordIDs.count == 2)
    }

    @Test("anti-entropy repairs a record live push never announced")
    func antiEntropyRepairs() {
        let base = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 3)
        var pair = SyncPair(a: Fixture.log(base), b: Fixture.log(base))
        pair.start()
        pair.run()
        // A stores a record without telling its session (say, the node missed it): the next round finds it.
        let missed = Fixture.feed(Self.alice, in: Fixture.conversation(1), count: 2, after: base)
        pair.a.log.append(missed)
        pair.advance(to: Limits.syncAntiEntropyInterval)
        #expect(pair.violations.isEmpty)
        #expect(pair.stats[.a]!.recordIDs == missed.map(\.id))
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
    }
}
