import NatterCrypto
import NatterModel
import Testing

// Goal: show that when two logs hold different forks of one author's feed, each side ends up holding the other's
// conflicting records as evidence, back to the first divergence, and that evidence learned elsewhere is relayed.
// Method: fixture feeds that share a prefix and then diverge (same length, uneven, a single record), synced
// through `SyncPair`; the in-memory logs keep evidence as the store does.
@testable import NatterSync

@Suite("Sync fork evidence")
struct SyncForkTests {
    static let mallory = Fixture.identity(0xe0)
    static let alice = Fixture.identity(0x20)
    static let conversation = Fixture.conversation(42)
    static let feed = FeedKey(conversation: conversation, author: Fixture.author(mallory))

    /// A shared prefix of `common` records, then `lengthA` records on A's branch and `lengthB` on B's.
    static func forked(common: Int, lengthA: Int, lengthB: Int) -> (prefix: [Record], a: [Record], b: [Record]) {
        let prefix = Fixture.feed(mallory, in: conversation, count: common)
        let a = Fixture.feed(mallory, in: conversation, count: lengthA, after: prefix, salt: 1)
        let b = Fixture.feed(mallory, in: conversation, count: lengthB, after: prefix, salt: 2)
        return (prefix, a, b)
    }

    static func evidenceSequences(_ log: InMemoryRecordSource) -> [UInt64] {
        (log.evidence[feed] ?? []).map(\.header.sequence).sorted()
    }

    @Test(
        "each side receives the other's conflicting records back to the first divergence",
        arguments: [(4, 1, 1), (2, 3, 3), (2, 4, 2), (0, 2, 5), (6, 3, 0)])
    func forks(common: Int, lengthA: Int, lengthB: Int) {
        let (prefix, branchA, branchB) = Self.forked(common: common, lengthA: lengthA, lengthB: lengthB)
        let bystander = Fixture.feed(Self.alice, in: Self.conversation, count: 3)
        var pair = SyncPair(a: Fixture.log(prefix + branchA), b: Fixture.log(prefix + branchB + bystander))
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.closedWith == nil && pair.b.closedWith == nil)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        // Chains keep their own branch; the honest bystander's feed syncs as usual.
        #expect(pair.a.log.chains[Self.conversation]?[Fixture.author(Self.mallory)] == prefix + branchA)
        #expect(pair.a.log.chains[Self.conversation]?[Fixture.author(Self.alice)] == bystander)
        if !branchA.isEmpty, !branchB.isEmpty {
            // The first divergence is held as evidence on both sides.
            let first = UInt64(common + 1)
            #expect(Self.evidenceSequences(pair.a.log).first == first)
            #expect(Self.evidenceSequences(pair.b.log).first == first)
            #expect(Set(pair.a.log.evidence[Self.feed] ?? []).isSubset(of: branchB))
            #expect(Set(pair.b.log.evidence[Self.feed] ?? []).isSubset(of: branchA))
        } else {
            // One log is a prefix of the other: no fork, the shorter catches up.
            #expect(pair.a.log.evidence.isEmpty && pair.b.log.evidence.isEmpty)
            #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        }
        #expect(allDistinct(pair.stats[.a]!.recordIDs) && allDistinct(pair.stats[.b]!.recordIDs))
    }

    @Test("the same record at the same position on both sides crosses once each way")
    func singleConflict() {
        let (prefix, branchA, branchB) = Self.forked(common: 4, lengthA: 1, lengthB: 1)
        var pair = SyncPair(a: Fixture.log(prefix + branchA), b: Fixture.log(prefix + branchB))
        pair.start()
        pair.run()
        #expect(pair.stats[.a]!.recordIDs == [branchA[0].id])
        #expect(pair.stats[.b]!.recordIDs == [branchB[0].id])
        #expect(pair.a.log.evidence[Self.feed] == branchB)
        #expect(pair.b.log.evidence[Self.feed] == branchA)
    }

    @Test("evidence learned on another link is relayed once")
    func relaysEvidence() {
        let (prefix, branchA, branchB) = Self.forked(common: 3, lengthA: 2, lengthB: 1)
        var pair = SyncPair(a: Fixture.log(prefix + branchA), b: Fixture.log(prefix + branchA))
        pair.start()
        pair.run()
        #expect(pair.stats[.a]!.recordIDs.isEmpty)
        // A's node ingests B-branch's record from a third node: it is evidence, and A's session relays it.
        let (outcomes, stored) = pair.a.log.ingest([branchB[0].bytes])
        #expect(outcomes == [.forkEvidence])
        pair.process(pair.a.session.localRecordsStored(stored, now: pair.now), from: .a)
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.b.log.evidence[Self.feed] == [branchB[0]])
        let relayed = pair.stats[.a]!.recordIDs
        #expect(relayed.contains(branchB[0].id) && allDistinct(relayed))
        // Reporting it again relays nothing.
        #expect(pair.a.session.localRecordsStored(stored, now: pair.now).isEmpty)
    }

    @Test("a peer that was away when evidence went by gets it when the link starts: same chains, same digest")
    func offersHeldEvidence() {
        let (prefix, branchA, branchB) = Self.forked(common: 3, lengthA: 2, lengthB: 1)
        // A learned of the fork while B was away: it holds B-branch's record as evidence. Their chains are equal, so
        // their summary digests match and no heads or ranges cross.
        let pair = Self.syncHoldingEvidence(chainA: prefix + branchA, evidence: branchB[0], chainB: prefix + branchA)
        #expect(pair.b.log.evidence[Self.feed] == [branchB[0]], "B holds the fork now")
        #expect(pair.stats[.a]!.recordIDs.contains(branchB[0].id))
    }

    @Test("evidence that only extends the other branch goes with our record at the fork, which the peer lacks")
    func offersOurRecordAtTheFork() {
        let (prefix, branchA, branchB) = Self.forked(common: 3, lengthA: 1, lengthB: 2)
        // A's chain ends at the fork (its 4th record is A-branch's); all it holds of B-branch is the 5th record, kept
        // as evidence because it names another 4th. B holds B-branch whole: the evidence is a copy to it, and only
        // A's 4th tells it of the fork.
        let pair = Self.syncHoldingEvidence(chainA: prefix + branchA, evidence: branchB[1], chainB: prefix + branchB)
        #expect(pair.b.log.evidence[Self.feed] == [branchA[0]], "B holds the fork now")
    }

    /// A holds `chainA` and, as fork evidence, `evidence`; B holds `chainB`. Syncs them to the end: no protocol
    /// violation, and no record crossed twice either way.
    static func syncHoldingEvidence(chainA: [Record], evidence: Record, chainB: [Record]) -> SyncPair {
        let a = Fixture.log(chainA)
        #expect(a.ingest([evidence.bytes]).outcomes == [.forkEvidence])
        var pair = SyncPair(a: a, b: Fixture.log(chainB))
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(allDistinct(pair.stats[.a]!.recordIDs) && allDistinct(pair.stats[.b]!.recordIDs))
        return pair
    }
}
