import NatterModel
import Testing

// Goal: show that PRUNE has exactly the documented layout and refuses hostile counts and orders, that a pruned feed
// is left out of live push while the others keep flowing, that a REQUEST (a graft) brings it back from the asked
// sequence, and that REROUTE and LEAVING have their documented layouts and reach the node once. Method: hand-made
// bytes against the decoder; a `SyncPair` driven by hand, counting records.
@testable import NatterSync

@Suite("Sync PRUNE")
struct SyncPruneTests {
    static let alice = Fixture.identity(0x23)
    static let carol = Fixture.identity(0x63)
    static let conversation = Fixture.conversation(11)
    static let aliceFeed = FeedKey(conversation: conversation, author: Fixture.author(alice))
    static let carolFeed = FeedKey(conversation: conversation, author: Fixture.author(carol))

    static func decode(_ bytes: [UInt8]) -> Result<SyncMessage, SyncMessageError> {
        Result { () throws(SyncMessageError) in try SyncMessage.decode(bytes) }
    }

    @Test("PRUNE is type 11, a u16 count, then conversation and author per feed")
    func layout() {
        let feeds = [Self.aliceFeed, Self.carolFeed].sorted()
        var expected: [UInt8] = [11, 0, 2]
        for feed in feeds { expected += feed.conversation.raw.bytes + feed.author.raw.bytes }
        #expect(SyncMessage.prune(feeds).encoded() == expected)
        #expect(expected.count == 3 + 64 * 2)
        #expect(Self.decode(expected) == .success(.prune(feeds)))
        #expect(SyncFrameKind.name(of: expected) == "prune")
    }

    @Test("an empty, oversized or unsorted PRUNE is refused before anything is read")
    func hostile() {
        #expect(Self.decode([11, 0, 0]) == .failure(.zeroCount(field: "pruned feeds")))
        let over = UInt16(Limits.syncPruneFeedsPerMessageMax + 1)
        #expect(
            Self.decode([11, UInt8(over >> 8), UInt8(over & 0xFF)])
                == .failure(.tooMany(field: "pruned feeds", count: Int(over), limit: Limits.syncPruneFeedsPerMessageMax)))
        #expect(Self.decode([11, 0, 1]) == .failure(.truncated(field: "pruned feeds")))
        let feed = Self.aliceFeed.conversation.raw.bytes + Self.aliceFeed.author.raw.bytes
        #expect(Self.decode([11, 0, 2] + feed + feed) == .failure(.unsorted(field: "pruned feeds")))
    }

    /// A pair holding the first records of both feeds, caught up.
    static func pair() -> (SyncPair, alice: [Record], carol: [Record]) {
        let alice = Fixture.feed(Self.alice, in: conversation, count: 1)
        let carol = Fixture.feed(Self.carol, in: conversation, count: 1)
        var pair = SyncPair(a: Fixture.log(alice + carol), b: Fixture.log(alice + carol))
        pair.start()
        pair.run()
        return (pair, alice, carol)
    }

    @Test("a pruned feed is not pushed live; other feeds are; a graft resumes it from the asked sequence")
    func pruneAndGraft() {
        var (pair, alice, carol) = Self.pair()
        let aliceMore = Fixture.feed(Self.alice, in: Self.conversation, count: 3, after: alice)
        let carolMore = Fixture.feed(Self.carol, in: Self.conversation, count: 1, after: carol)
        pair.process(pair.b.session.prune([Self.aliceFeed, Self.aliceFeed], now: pair.now), from: .b)
        #expect(pair.stats[.b]!.count(.prune) == 1)
        #expect(pair.b.session.hasPruned(Self.aliceFeed) && !pair.b.session.hasPruned(Self.carolFeed))
        // Pruning again sends nothing.
        pair.process(pair.b.session.prune([Self.aliceFeed], now: pair.now), from: .b)
        #expect(pair.stats[.b]!.count(.prune) == 1)
        pair.run()
        pair.author(Array(aliceMore.prefix(2)), on: .a)
        pair.author(carolMore, on: .a)
        pair.run()
        #expect(pair.stats[.a]!.recordIDs == carolMore.map(\.id), "only the unpruned feed is pushed")
        // B got alice's records 2 and 3 elsewhere; the graft asks from 4 and alice's 4 is pushed live again.
        pair.b.log.append(Array(aliceMore.prefix(2)))
        pair.process(pair.b.session.graft(Self.aliceFeed, from: 4, now: pair.now), from: .b)
        #expect(!pair.b.session.hasPruned(Self.aliceFeed))
        pair.run()
        pair.author([aliceMore[2]], on: .a)
        pair.run()
        #expect(pair.stats[.a]!.recordIDs == carolMore.map(\.id) + [aliceMore[2].id])
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }

    @Test("anti-entropy still repairs a pruned feed the peer lacks")
    func antiEntropyRepairs() {
        var (pair, alice, _) = Self.pair()
        let aliceMore = Fixture.feed(Self.alice, in: Self.conversation, count: 2, after: alice)
        pair.process(pair.b.session.prune([Self.aliceFeed], now: pair.now), from: .b)
        pair.run()
        pair.author(aliceMore, on: .a)
        pair.run()
        #expect(pair.stats[.a]!.recordIDs.isEmpty)
        pair.advance(to: pair.now + Limits.syncAntiEntropyInterval + .milliseconds(1))
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
    }

    @Test("REROUTE has PRUNE's layout under type 13, and goes only with the feeds the peer did not prune")
    func reroute() {
        let feeds = [Self.aliceFeed, Self.carolFeed].sorted()
        var expected: [UInt8] = [13, 0, 2]
        for feed in feeds { expected += feed.conversation.raw.bytes + feed.author.raw.bytes }
        #expect(SyncMessage.reroute(feeds).encoded() == expected)
        #expect(Self.decode(expected) == .success(.reroute(feeds)))
        #expect(Self.decode([13, 0, 0]) == .failure(.zeroCount(field: "rerouted feeds")))
        #expect(SyncFrameKind.name(of: expected) == "reroute")
        var (pair, _, _) = Self.pair()
        pair.process(pair.b.session.prune([Self.aliceFeed], now: pair.now), from: .b)
        pair.run()
        pair.process(pair.a.session.reroute([Self.carolFeed, Self.aliceFeed, Self.carolFeed], now: pair.now), from: .a)
        pair.run()
        #expect(pair.b.rerouted == [Self.carolFeed], "B pruned alice's feed: A does not supply it to B")
        pair.process(pair.a.session.reroute([Self.aliceFeed], now: pair.now), from: .a)
        #expect(pair.stats[.a]!.count(.reroute) == 1, "nothing is sent when every feed was pruned")
        #expect(pair.violations.isEmpty)
    }

    @Test("LEAVING is the single byte 12; bytes after it are malformed")
    func leavingLayout() {
        #expect(SyncMessage.leaving.encoded() == [12])
        #expect(Self.decode([12]) == .success(.leaving))
        #expect(Self.decode([12, 0]) == .failure(.trailingBytes(1)))
        #expect(SyncFrameKind.name(of: [12]) == "leaving")
    }

    @Test("a side leaving a link says so once; the peer hears it once, and live push goes on until the close")
    func leaving() {
        var (pair, alice, _) = Self.pair()
        pair.process(pair.a.session.leave(now: pair.now), from: .a)
        pair.process(pair.a.session.leave(now: pair.now), from: .a)
        pair.run()
        #expect(pair.stats[.a]!.count(.leaving) == 1)
        #expect(pair.b.peerLeavingCount == 1 && pair.a.peerLeavingCount == 0)
        let aliceMore = Fixture.feed(Self.alice, in: Self.conversation, count: 1, after: alice)
        pair.author(aliceMore, on: .a)
        pair.run()
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(pair.violations.isEmpty)
        // A second LEAVING from the same side is malformed.
        let again = pair.b.session.receive(message: [12], now: pair.now)
        #expect(again == [.close(.malformed(.unexpected("a second LEAVING")))])
    }
}
