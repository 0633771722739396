// Goal: a node that shuts down ends each link with the authenticated goodbye, so its peer tells a clean stop from a
// crash or a cut. Method: two cores over the in-process pipes; only the bytes of `closeAllLinks()` are delivered
// (no transport close), so the peer can end the link only because of the goodbye.
import Testing

@testable import NatterNode

@Suite("Closing every link")
struct CloseAllLinksTests {
    @Test("the peer ends the link on the goodbye alone, without a failure")
    func goodbyeEndsThePeersLink() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 31)
        let bob = try net.add("Bob", seed: 32)
        net.connect(alice, bob)
        net.run()
        #expect(bob.connectedPeers.keys.contains(alice.identity.author))

        let actions = alice.closeAllLinks()
        #expect(alice.connectedPeers.isEmpty)
        #expect(actions.contains { if case .close = $0 { true } else { false } })
        net.perform(0, actions.filter { if case .send = $0 { true } else { false } })
        net.run()
        #expect(bob.connectedPeers.isEmpty, "Bob ended the link on Alice's goodbye")
        #expect(net.events.contains { $0.node == 1 && $0.event == .peerDown(alice.identity.author, LinkID(2)) })
        #expect(!net.events.contains { if $0.node == 1, case .linkFailed = $0.event { true } else { false } })
    }
}
