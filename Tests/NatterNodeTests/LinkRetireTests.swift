// Goal: show that a node leaving a link on purpose (`NodeCore.retire`, docs/protocol.md §3.3 step 6, LEAVING) tells
// its peer, which grafts elsewhere what the link supplied while the link still carries records, and that the link
// closes with a goodbye only after the grace period; and that `treeLoad` ranks links by what the trees use them
// for. Method: three NodeCores in a triangle over `PipeNetwork`, with virtual time.
import NatterModel
import NatterNode
import NatterSync
import Testing

@Suite("Leaving a link")
struct LinkRetireTests {
    /// A, B and C, linked in a triangle over links with 10 ms of latency (so handshakes take time), caught up.
    static func triangle() throws -> (PipeNetwork, NodeCore, NodeCore, NodeCore) {
        let net = PipeNetwork()
        let a = try net.add("A", seed: 0x51)
        let b = try net.add("B", seed: 0x52)
        let c = try net.add("C", seed: 0x53)
        net.connect(a, b)
        net.connect(b, c)
        net.connect(a, c)
        net.runSlowly(delay: .milliseconds(10))
        return (net, a, b, c)
    }

    @Test("the leaver says LEAVING, the peer grafts elsewhere at once, and the link closes after the grace period")
    func retire() throws {
        let (net, a, b, c) = try Self.triangle()
        // Past the new links' race (their first copies prune nothing), A's profile feed settles on a tree: B and C
        // get it from A directly and prune each other for it.
        net.advance(Limits.syncTreeNewLinkRace, slowly: .milliseconds(10))
        for name in ["A1", "A2", "A3"] {
            let record = try a.conversations.publishProfile(name: name, now: 2)
            net.publish(a, record)
        }
        let link = try #require(a.connectedPeers[b.identity.author])
        #expect(a.treeLoad(of: link) != nil)
        #expect(a.treeLoad(of: LinkID(999)) == nil)
        let requestsBefore = b.messagesSentByKind["request", default: 0]
        let retired = try #require(a.retire(link, now: net.now))
        net.perform(net.index(a), retired)
        net.run()
        #expect(a.messagesSentByKind["leaving"] == 1)
        #expect(a.treeLoad(of: link) == nil, "a link being left is no candidate any more")
        #expect(b.messagesSentByKind["request", default: 0] > requestsBefore, "B grafted A's feed on C")
        #expect(a.connectedPeers[b.identity.author] == link, "the link stays during the grace period")
        // Retiring it again changes nothing.
        #expect(a.retire(link, now: net.now) == [])
        net.advance(.milliseconds(200))
        #expect(a.connectedPeers[b.identity.author] == nil && b.connectedPeers[a.identity.author] == nil)
        #expect(!net.events.contains { if case .linkFailed = $0.event { true } else { false } })
        // A's next record reaches B over C.
        let after = try a.conversations.publishProfile(name: "A4", now: 3)
        net.publish(a, after)
        #expect(try b.store.record(after.ref) != nil)
        #expect(try c.store.logDigest() == b.store.logDigest())
    }
}
