// Goal: a session does not let a greedy peer make it queue or resend without bound (issue 19, item 1): while the
// link cannot take writes, no batch goes whatever the credit, and credit beyond the window then closes the link; a
// REQUEST for records the peer was already sent is honoured `Limits.syncResendsPerFeedMax` times per anti-entropy
// interval, and the next closes the link. Method: one session over an in-memory log, fed the greedy peer's messages
// by hand (SUMMARY, REQUEST, CREDIT), its sends counted.
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

    @Test("REQUESTs for records the peer was sent: four per interval are honoured, the fifth closes the link")
    func repeatedRequests() {
        var (session, feed, pushed) = session(records: 600)
        let request = SyncMessage.request(feed, from: 1).encoded()
        var now = Duration.seconds(1)
        // The greedy peer returns exactly the credit it was spent, as if it had ingested every batch.
        var spent = batches(pushed)
        for round in 1...Limits.syncResendsPerFeedMax {
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
            let answer = session.receive(message: request, now: now)
            #expect(closed(answer) == nil, "request \(round) is honoured")
            spent = batches(answer)
            #expect(spent > 0, "request \(round) resends the feed")
            now += .milliseconds(10)
        }
        _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
        let fifth = session.receive(message: request, now: now)
        #expect(closed(fifth) == .excessiveRequests(feed, times: Limits.syncResendsPerFeedMax + 1))
        #expect(session.isClosed)
    }

    @Test("a REQUEST for records never sent is not a resend, and a new interval forgives the count")
    func requestsThatAreNotResends() {
        var (session, feed, pushed) = session(records: 600)
        // Beyond what the peer holds: nothing to resend, however often asked.
        for _ in 0..<10 {
            let answer = session.receive(message: SyncMessage.request(feed, from: 601).encoded(), now: .seconds(1))
            #expect(closed(answer) == nil)
        }
        var spent = batches(pushed)
        for _ in 1...Limits.syncResendsPerFeedMax {
            _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: .seconds(1))
            spent = batches(session.receive(message: SyncMessage.request(feed, from: 1).encoded(), now: .seconds(1)))
        }
        // The anti-entropy round starts a new interval (the session's tick, after a ping keeps the link alive).
        let now = Limits.syncAntiEntropyInterval
        _ = session.receive(message: SyncMessage.ping.encoded(), now: now)
        _ = session.tick(now: now)
        _ = session.receive(message: SyncMessage.credit(spent).encoded(), now: now)
        let again = session.receive(message: SyncMessage.request(feed, from: 1).encoded(), now: now)
        #expect(closed(again) == nil, "the count starts again each interval")
        #expect(batches(again) > 0)
    }
}
