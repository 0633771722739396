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

    @Test("bytes heard during a handshake move its deadline to 5 s after them, and never past 10 s after the open")
    func handshakeHeardMovesDeadline() throws {
        let net = PipeNetwork()
        let node = try net.add("Victim", seed: 95)
        let trickling = LinkID(1_000)
        #expect(node.handle(.linkOpened(trickling, initiator: false), now: .zero).isEmpty)
        node.heard(trickling, at: .seconds(4))
        #expect(node.nextDeadline() == .seconds(9), "5 s after the bytes")
        #expect(node.handle(.tick, now: .seconds(5)).isEmpty, "not abandoned at 5 s: its peer was heard at 4 s")
        node.heard(trickling, at: .seconds(8))
        #expect(node.nextDeadline() == .seconds(10), "capped at twice the timeout from the open")
        #expect(node.handle(.tick, now: .milliseconds(9_999)).isEmpty)
        let actions = node.handle(.tick, now: .seconds(10))
        #expect(actions.contains(.event(.linkFailed(trickling, "handshake timed out"))))
        #expect(actions.last == .close(trickling))
    }

    @Test("a handshake whose message arrived while the node was busy completes although handled after the timeout")
    func busyResponderCompletesHandshake() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 96)
        let bob = try net.add("Bob", seed: 97)
        net.connect(alice, bob)  // Alice's end is link 1, Bob's link 2
        net.step(2)  // both ends open; Alice's first handshake message waits for Bob
        let bobsEnd = LinkID(2)
        // Bob is busy: the message arrived at 1 s (the transport saw it); his timer fires at 5.5 s, before he
        // handles it.
        bob.heard(bobsEnd, at: .seconds(1))
        net.now = .milliseconds(5_500)
        net.perform(net.index(bob), bob.handle(.tick, now: net.now))
        net.run()
        #expect(!net.events.contains { if case .linkFailed = $0.event { true } else { false } })
        #expect(bob.connectedPeers.keys.contains(alice.identity.author))
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
