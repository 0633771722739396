import NatterCrypto
import NatterModel
import Testing

// Goal: show, over many random pairs of logs, that sync always converges: feeds that never forked end equal on both
// sides, forked feeds leave evidence of the other branch on each side, nothing crosses a link twice, and both sides
// report caught up once. Method: seeded random logs (feeds held to different lengths, some forked), seeded random
// interleavings of messages and store ingestion, new records authored on both sides while the exchange runs.
@testable import NatterSync

@Suite("Sync convergence on random logs")
struct SyncPropertyTests {
    static let identities = (0..<4).map { Fixture.identity(UInt8(0x10 + $0 * 0x20)) }

    @Test("random logs and interleavings converge", arguments: 1...16)
    func converge(seed: UInt64) {
        var generator = SeededGenerator(seed: seed)
        var recordsA = [Record]()
        var recordsB = [Record]()
        var forked = Set<FeedKey>()
        for conversationNumber in 0..<4 {
            let conversation = Fixture.conversation(conversationNumber)
            for identity in Self.identities where Bool.random(using: &generator) {
                let length = Int.random(in: 1...40, using: &generator)
                let chain = Fixture.feed(identity, in: conversation, count: length)
                let heldA = Int.random(in: 0...length, using: &generator)
                let heldB = Int.random(in: 0...length, using: &generator)
                recordsA += chain.prefix(heldA)
                if Int.random(in: 0..<5, using: &generator) == 0, heldB > 0 {
                    // B holds another branch from some point of A's.
                    let split = Int.random(in: 0..<heldB, using: &generator)
                    recordsB += chain.prefix(split)
                    recordsB += Fixture.feed(
                        identity, in: conversation, count: heldB - split, after: Array(chain.prefix(split)), salt: 9)
                    if heldA > split {
                        forked.insert(FeedKey(conversation: conversation, author: Fixture.author(identity)))
                    }
                } else {
                    recordsB += chain.prefix(heldB)
                }
            }
        }
        var pair = SyncPair(a: Fixture.log(recordsA), b: Fixture.log(recordsB))
        pair.start()
        // New records on both sides while the exchange runs.
        var liveA = [Record]()
        var liveB = [Record]()
        for round in 0..<6 {
            pair.run(.random(seed: seed &* 31 &+ UInt64(round)), maxSteps: Int.random(in: 1...30, using: &generator))
            let ownA = Fixture.feed(Self.identities[0], in: Fixture.conversation(100), count: 2, after: liveA)
            let ownB = Fixture.feed(Self.identities[1], in: Fixture.conversation(101), count: 1, after: liveB)
            liveA += ownA
            liveB += ownB
            pair.author(ownA, on: .a)
            pair.author(ownB, on: .b)
        }
        pair.run(.random(seed: seed))

        #expect(pair.violations.isEmpty)
        #expect(pair.a.closedWith == nil && pair.b.closedWith == nil)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(allDistinct(pair.stats[.a]!.recordIDs) && allDistinct(pair.stats[.b]!.recordIDs))
        let conversations = Set(pair.a.log.conversations()).union(pair.b.log.conversations())
        for conversation in conversations.sorted() {
            let authors = Set((pair.a.log.chains[conversation] ?? [:]).keys)
                .union((pair.b.log.chains[conversation] ?? [:]).keys)
            for author in authors.sorted() {
                let feed = FeedKey(conversation: conversation, author: author)
                let chainA = pair.a.log.chains[conversation]?[author] ?? []
                let chainB = pair.b.log.chains[conversation]?[author] ?? []
                if forked.contains(feed) {
                    #expect(pair.a.log.evidence[feed]?.isEmpty == false, "A lacks evidence for \(feed)")
                    #expect(pair.b.log.evidence[feed]?.isEmpty == false, "B lacks evidence for \(feed)")
                } else {
                    #expect(chainA == chainB, "feed \(feed) differs: \(chainA.count) vs \(chainB.count)")
                }
            }
        }
        #expect(pair.b.log.chains[Fixture.conversation(100)]?[Fixture.author(Self.identities[0])] == liveA)
        #expect(pair.a.log.chains[Fixture.conversation(101)]?[Fixture.author(Self.identities[1])] == liveB)
    }
}
