// Goal: a session does not let a greedy peer make it queue or resend without bound (issue 19, item 1): while the
// link cannot take writes, no batch goes whatever the credit, and credit beyond the window then closes the link;
// records the peer was already sent are sent again at its REQUEST up to `Limits.syncResentBytesMax` per anti-entropy
// interval, past which the link closes — while an honest peer's frequent small asks never reach it. Method: one
// session over an in-memory log, fed the greedy peer's messages by hand (SUMMARY, REQUEST, CREDIT), its sends counted.
import NatterCrypto
import NatterModel
import Testing

@testable import NatterSync

@Suite("A greedy peer against one session")
struct SyncGreedyPeerTests {
    let conversation = Fixture.conversation(19)
    let author = Fixture.identity(19)

    /// A session holding a feed of `count` records of 1,000 bytes, after the peer's empty summary (it pushes the
    /// feed at once, a window of batches).
    func session(records count: Int) -> (SyncSession<InMemoryRecordSource>, FeedKey, [SyncAction]) {
        let records = Fixture.feed(author, in: conversation, count: count, payloadBytes: 1_000)
        var session = SyncSession(source: Fixture.log(records))
        _ = session.start(now: .zero)
        let pushed = session.receive(message: SyncMessage.summary(isFinal: true, entries: []).encoded(), now: .zero)
        return (session, FeedKey(conversation: conversation, author: Fixture.author(author)), pushed)
    }

    func batches(_ actions: [SyncAction]) -> Int {
        actions.filter { if case .send(let bytes) = $0 { bytes.first == SyncMessage.Tag.records.rawValue } else { false } }
            .count
    }

    func closed(_ actions: [SyncAction]) -> SyncError? {
        actions.lazy.compactMap { if case .close(let error) = $0 { error } else { nil } }.first
    }

    @Test("while the link cannot take writes no batch goes, and credit beyond the window closes the link")
    func notWritable() {
        var (session, _, pushed) = session(records: 2_500)
        #expect(batches(pushed) == Limits.syncWindowBatches, "the initial push spends the window")
        #expect(session.writable(false, now: .seconds(1)).isEmpty)
        let credited = session.receive(message: SyncMessage.credit(Limits.syncWindowBatches).encoded(), now: .seconds(1))
        #expect(batches(credited) == 0, "credit alone does not make a blocked link send")
        let more = session.receive(message: SyncMessage.credit(1).encoded(), now: .seconds(1))
        guard case .malformed(.unexpected(let what))? = closed(more) else {
            Issue.record("credit beyond the window must close the link: \(more)")
            return
        }
        #expect(what.contains("beyond the window"))
    }

    @Test("writable again, the credit held meanwhile is spent")
    func writableAgain() {
        var (session, _, _) = session(records: 2_500)
        _ = session.writable(false, now: .seconds(1))
        _ = session.receive(message: SyncMessage.credit(Limits.syncWindowBatches).encoded(), now: .seconds(1))
        #expect(batches(session.writable(true, now: .seconds(2))) > 0)
    }

    /// Bytes of the record batches among `actions`.
    func batchBytes(_ actions: [SyncAction]) -> Int {
        actions.reduce(0) {
            if case .send(let bytes) = $1, bytes.first == SyncMessage.Tag.records.rawValue { $0 + bytes.count } else { $0 }
        }
    }

    @Test("REQUEST-from-1 repeated: resent bytes are counted, and past the interval's budget the link closes")
    func repeatedRequests() {
        var (session, feed, pushed) = session(records: 600)
        let request = SyncMessage.request(feed, from: 1).encoded()
        var now = Duration.seconds(1)
        // The greedy peer returns exactly the credit it was spent, as if it had ingested every batch.
        var spent = batches(pushed)
        var resent = 0
        var rounds = 0
        while !session.isClosed, rounds < 100 {
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
            let answer = session.receive(message: request, now: now)
            spent = batches(answer)
            resent += batchBytes(answer)
            rounds += 1
            if let error = closed(answer) {
                guard case .excessiveRequests(let closedFeed, let bytes) = error else {
                    Issue.record("closed for \(error)")
                    break
                }
                #expect(closedFeed == feed && bytes > Limits.syncResentBytesMax)
            }
            now += .milliseconds(10)
        }
        #expect(session.isClosed, "closed after \(rounds) rounds")
        // A whole feed (some 600 KiB) per round: the budget allows about a dozen, never much more than its bytes.
        let feedBytes = batchBytes(pushed)
        #expect(rounds >= Limits.syncResentBytesMax / feedBytes, "\(rounds) rounds of \(feedBytes) bytes")
        #expect(resent <= Limits.syncResentBytesMax + Limits.syncBatchBytesMax, "\(resent) bytes resent")
    }

    @Test("an honest peer asking again, often, for a record in flight is never closed")
    func smallResendsAreHonest() {
        var (session, feed, pushed) = session(records: 600)
        var spent = batches(pushed)
        // Its copy of the feed's last record came by another path first, fifty times in one interval: each
        // REQUEST asks for the one record this link had in flight. (The first rule closed the link at the fifth.)
        for round in 1...50 {
            let now = Duration.milliseconds(100 * Int64(round))
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
            let answer = session.receive(message: SyncMessage.request(feed, from: 600).encoded(), now: now)
            #expect(closed(answer) == nil, "request \(round)")
            spent = batches(answer)
            #expect(spent == 1, "request \(round) resends the one record")
        }
        #expect(!session.isClosed)
    }

    @Test("a REQUEST for records never sent is not a resend, and a new interval starts a new budget")
    func requestsThatAreNotResends() {
        var (session, feed, pushed) = session(records: 600)
        // Beyond what the peer holds: nothing to resend, however often asked.
        for _ in 0..<10 {
            let answer = session.receive(message: SyncMessage.request(feed, from: 601).encoded(), now: .seconds(1))
            #expect(closed(answer) == nil)
        }
        // Most of the budget: whole-feed resends while a next one would still fit.
        let feedBytes = batchBytes(pushed)
        var spent = batches(pushed)
        for _ in 0..<(Limits.syncResentBytesMax / feedBytes - 1) {
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: .seconds(1))
            spent = batches(session.receive(message: SyncMessage.request(feed, from: 1).encoded(), now: .seconds(1)))
        }
        #expect(!session.isClosed)
        // The anti-entropy round starts a new interval (the session's tick, after a ping keeps the link alive).
        let now = Limits.syncAntiEntropyInterval
        _ = session.receive(message: SyncMessage.ping.encoded(), now: now)
        _ = session.tick(now: now)
        for _ in 0..<2 {
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
            let again = session.receive(message: SyncMessage.request(feed, from: 1).encoded(), now: now)
            #expect(closed(again) == nil, "the budget starts again each interval")
            spent = batches(again)
            #expect(spent > 0)
        }
    }
}
