// Goal: show that a link that just came up is not pruned by the copies it brings first (docs/protocol.md §3.3 step
// 6, `Limits.syncTreeNewLinkRace`): trees formed before it existed may take a longer path than it offers, and a new
// link pruned at once would never carry one. Once the race is over, its copies prune it as any link's do. Method:
// four NodeCores over `PipeNetwork` (A the author; A–B, B–C, A–D, then D–C new), virtual time.
import NatterModel
import NatterNode
import NatterSync
import Testing

@Suite("A new link races the trees")
struct NewLinkRaceTests {
    @Test("copies over a link up for less than the race prune nothing; afterwards they prune it")
    func newLinkRaces() throws {
        let net = PipeNetwork()
        let a = try net.add("A", seed: 0x61)
        let b = try net.add("B", seed: 0x62)
        let c = try net.add("C", seed: 0x63)
        let d = try net.add("D", seed: 0x64)
        net.connect(a, b)
        net.connect(b, c)
        net.connect(a, d)
        net.run()
        // A's profile feed reaches C over B only: B is its parent there.
        for name in ["A1", "A2"] { net.publish(a, try a.conversations.publishProfile(name: name, now: 2)) }
        net.advance(.seconds(2))
        net.connect(d, c)
        net.run()
        #expect(c.connectedPeers[d.identity.author] != nil)
        let prunesBefore = c.messagesSentByKind["prune", default: 0]
        // B relays A3 to C ahead of D (the queue is first in, first out): D's is a copy, on a link up for no time.
        let third = try a.conversations.publishProfile(name: "A3", now: 3)
        net.publish(a, third)
        #expect(try c.store.record(third.ref) != nil)
        #expect(
            c.messagesSentByKind["prune", default: 0] == prunesBefore, "a copy over a new link prunes nothing")
        // Past the race, the same copy prunes the link.
        net.advance(Limits.syncTreeNewLinkRace)
        net.publish(a, try a.conversations.publishProfile(name: "A4", now: 4))
        #expect(c.messagesSentByKind["prune", default: 0] == prunesBefore + 1)
        #expect(try c.store.logDigest() == a.store.logDigest())
    }
}
