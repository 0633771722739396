// Goal: the link defences the adversarial checklist names for the node core (issue 19, item 8): a handshake that
// has not finished 5 s after its connection opened is abandoned (and marked as a stalled handshake, which the node
// scores while its handshake slots are under load), and a node that dials itself drops the link instead of
// linking to itself. Method: NodeCores over in-process pipes (`PipeNetwork`) with virtual time.
import NatterModel
import Testing

@testable import NatterNode

@Suite("Link defences of the node core")
struct LinkDefenceCoreTests {
    @Test("a connection that sends nothing is closed 5 s after it opened, not before, as a stalled handshake")
    func handshakeTimeout() throws {
        let net = PipeNetwork()
        let node = try net.add("Victim", seed: 91)
        #expect(node.configuration.handshakeTimeout == .seconds(5))
        let silent = LinkID(1_000)
        #expect(node.handle(.linkOpened(silent, initiator: false), now: .zero).isEmpty, "a responder waits in silence")
        #expect(node.nextDeadline() == .seconds(5), "the timeout is the core's next deadline")
        #expect(node.handle(.tick, now: .milliseconds(4_999)).isEmpty, "still waiting just before the timeout")
        let actions = node.handle(.tick, now: .seconds(5))
        #expect(actions.contains(.event(.linkFailed(silent, "handshake timed out"))))
        #expect(
            actions.contains {
                if case .event(.misbehaved(silent, let misbehaviour)) = $0 { misbehaviour.kind == .stalledHandshake } else { false }
            })
        #expect(actions.last == .close(silent))
        #expect(node.handle(.tick, now: .seconds(6)).isEmpty, "closed once")
    }

    @Test("a handshake that completes in time is not abandoned")
    func handshakeInTime() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 92)
        let bob = try net.add("Bob", seed: 93)
        net.connect(alice, bob)
        net.run()
        net.advance(.seconds(5))
        #expect(!net.events.contains { if case .linkFailed = $0.event { true } else { false } })
        #expect(alice.connectedPeers.keys.contains(bob.identity.author))
    }

    @Test("a node that dials itself does not link to itself")
    func connectedToItself() throws {
        let net = PipeNetwork()
        let node = try net.add("Narcissus", seed: 94)
        net.connect(node, node)
        net.run()
        #expect(node.connectedPeers.isEmpty)
        #expect(!net.events.contains { if case .peerUp = $0.event { true } else { false } })
        #expect(net.events.contains { if case .linkFailed(_, "connected to itself") = $0.event { true } else { false } })
    }
}
