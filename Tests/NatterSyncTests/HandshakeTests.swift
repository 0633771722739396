import NatterCrypto
import NatterModel
import Testing

// Goal: show that the link handshake authenticates both identities, agrees on a version, refuses a foreign network
// at message 1 before any identity is revealed, and turns every tampered, truncated, replayed or misplaced message
// into a named failure. Method: two machines with fixed keys wired through byte buffers (whole and drip-fed), with a
// tamper hook on the wire, value copies of a machine to try many inputs from one state, and a forging responder or
// initiator built from the raw Noise handshake state.
@testable import NatterSync

@Suite("Link handshake")
struct HandshakeTests {
    // MARK: - Success

    @Test(
        "both sides learn each other's identity, the version and the same handshake hash", arguments: Feeding.allCases)
    func success(feeding: Feeding) throws {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator), responder: TestNode.responder.machine(.responder),
            feeding: feeding)
        let initiator = try #require(run.initiator.established)
        let responder = try #require(run.responder.established)
        #expect(run.initiator.error == nil && run.responder.error == nil)
        #expect(initiator.peer == TestNode.responder.identity.publicKey)
        #expect(responder.peer == TestNode.initiator.identity.publicKey)
        #expect(initiator.peerStaticKey == TestNode.responder.staticKey.publicKey)
        #expect(responder.peerStaticKey == TestNode.initiator.staticKey.publicKey)
        #expect(initiator.version == 1 && responder.version == 1)
        #expect(initiator.handshakeHash == responder.handshakeHash && initiator.handshakeHash.count == 64)
        #expect(initiator.unreadBytes.isEmpty && responder.unreadBytes.isEmpty)
        // Message sizes of version 1 (docs/protocol.md §2): 2 + 51, 2 + 194, 2 + 160.
        #expect(run.transcript.map(\.count) == [53, 196, 162])
    }

    @Test("whole buffers and byte-by-byte delivery give identical bytes")
    func feedingIsInvisible() {
        let whole = runHandshake(
            initiator: TestNode.initiator.machine(.initiator), responder: TestNode.responder.machine(.responder))
        let drip = runHandshake(
            initiator: TestNode.initiator.machine(.initiator), responder: TestNode.responder.machine(.responder),
            feeding: .dripFeed)
        #expect(whole.transcript == drip.transcript)
        #expect(whole.initiator.established?.handshakeHash == drip.initiator.established?.handshakeHash)
    }

    @Test("fresh ephemeral keys give a different handshake with the same identities")
    func freshEphemerals() {
        let first = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, ephemeralSeed: 1),
            responder: TestNode.responder.machine(.responder, ephemeralSeed: 2))
        let second = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, ephemeralSeed: 3),
            responder: TestNode.responder.machine(.responder, ephemeralSeed: 4))
        #expect(first.initiator.established?.peer == second.initiator.established?.peer)
        #expect(first.initiator.established?.handshakeHash != second.initiator.established?.handshakeHash)
        #expect(zip(first.transcript, second.transcript).allSatisfy { $0 != $1 })
    }

    @Test("transport bytes that arrive with message 3 are handed over, not lost")
    func unreadBytesReachTheChannel() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        #expect(responder.start().isEmpty)
        let message2 = try #require(sent(responder.receive(message1)).first)
        let afterMessage2 = initiator.receive(message2)
        let message3 = try #require(sent(afterMessage2).first)
        var initiatorLink = try #require(established(afterMessage2))
        let hello = try initiatorLink.channel.send(Array("right away".utf8))

        var responderLink = try #require(established(responder.receive(message3 + hello)))
        #expect(responderLink.unreadBytes == hello)
        #expect(responderLink.channel.receive(responderLink.unreadBytes) == [.message(Array("right away".utf8))])
    }

    // MARK: - Network key and privacy

    @Test("a peer with another network key fails at message 1 and nothing is revealed", arguments: Feeding.allCases)
    func wrongNetworkKey(feeding: Feeding) throws {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator),
            responder: TestNode.responder.machine(.responder, network: .otherNetwork), feeding: feeding)
        #expect(run.responder.error == .wrongNetworkKey)
        #expect(run.responder.sent.isEmpty)
        #expect(run.transcript.count == 1)
        #expect(run.initiator.established == nil && run.responder.established == nil)

        // Message 1 carries the ephemeral key and the encrypted version list, nothing else: no identity key, no
        // static key, not even encrypted (its size leaves no room for them).
        let message1 = run.transcript[0]
        #expect(message1.count == 2 + 32 + (1 + 2) + 16)
        for secretive in [
            TestNode.initiator.identity.publicKey.bytes, TestNode.initiator.staticKey.publicKey,
            TestNode.responder.identity.publicKey.bytes, TestNode.responder.staticKey.publicKey,
        ] {
            #expect(!containsAnyRun(of: secretive, in: message1))
        }
    }

    @Test("the initiator hears a refusal as the peer closing before message 2")
    func refusedInitiator() {
        var initiator = TestNode.initiator.machine(.initiator)
        _ = initiator.start()
        guard case .fail(.peerClosedHandshake(.handshakeMessage(2))) = initiator.endOfInput().first else {
            Issue.record("expected peerClosedHandshake(message 2)")
            return
        }
        #expect(initiator.receive([0]).count == 1)  // .fail(.closed): the machine stays failed
    }

    // MARK: - Tampering

    /// Each message's body bits, flipped one at a time into a copy of the machine that reads it.
    @Test("one flipped bit anywhere in a handshake message fails with a named error")
    func bitFlips() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        _ = responder.start()
        let responderBefore1 = responder
        let message2 = try #require(sent(responder.receive(message1)).first)
        let initiatorBefore2 = initiator
        let message3 = try #require(sent(initiator.receive(message2)).first)
        let responderBefore3 = responder

        let cases: [(message: [UInt8], machine: LinkHandshake, expected: LinkError)] = [
            (message1, responderBefore1, .wrongNetworkKey),
            (message2, initiatorBefore2, .decryptFailed(.handshakeMessage(2))),
            (message3, responderBefore3, .decryptFailed(.handshakeMessage(3))),
        ]
        for (message, machine, expected) in cases {
            for bit in 16..<(message.count * 8) {  // past the length prefix (its flips are below)
                var copy = machine
                let actions = copy.receive(flippingBit(bit, of: message))
                guard actions.count == 1, case .fail(let error) = actions[0], error == expected else {
                    Issue.record("bit \(bit) of \(expected): got \(actions)")
                    return
                }
            }
        }
    }

    @Test("a flipped bit in a length prefix never establishes a link")
    func lengthPrefixFlips() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        _ = responder.start()
        for bit in 0..<16 {
            var copy = responder
            var actions = copy.receive(flippingBit(bit, of: message1))
            actions += copy.endOfInput()
            #expect(sent(actions).isEmpty && established(actions) == nil)
            #expect(failure(actions) != nil, "bit \(bit): \(actions)")
        }
    }

    @Test("a frame cut short fails as truncated when the stream ends; oversize and undersize frames fail at once")
    func truncatedAndOversize() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        _ = responder.start()
        let message2 = try #require(sent(responder.receive(message1)).first)

        var cut = initiator
        #expect(cut.receive(message2.dropLast()).isEmpty)
        #expect(failure(cut.endOfInput()) == .truncated(.handshakeMessage(2)))

        var oversize = TestNode.responder.machine(.responder)
        _ = oversize.start()
        #expect(
            failure(oversize.receive([0x04, 0x01])) == .frameTooLarge(.handshakeMessage(1), bytes: 1025, limit: 1024))

        var undersize = TestNode.responder.machine(.responder)
        _ = undersize.start()
        guard case .unexpectedMessage = failure(undersize.receive([0x00, 0x10] + [UInt8](repeating: 0, count: 16)))
        else {
            Issue.record("a 16-byte message 1 must be refused as unexpected")
            return
        }
    }

    // MARK: - Replays and misplaced messages

    @Test("message 1 delivered twice: the second is refused by name")
    func replayedMessage1() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        _ = responder.start()
        #expect(sent(responder.receive(message1)).count == 1)
        let error = try #require(failure(responder.receive(message1)))
        guard case .unexpectedMessage = error else {
            Issue.record("expected unexpectedMessage, got \(error)")
            return
        }
        #expect(error.description.contains("handshake message 3"))
    }

    @Test("message 2 delivered twice: refused by the finished handshake, and by the channel as a bad frame")
    func replayedMessage2() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        var responder = TestNode.responder.machine(.responder)
        let message1 = try #require(sent(initiator.start()).first)
        _ = responder.start()
        let message2 = try #require(sent(responder.receive(message1)).first)
        var link = try #require(established(initiator.receive(message2)))
        guard case .unexpectedMessage = failure(initiator.receive(message2)) else {
            Issue.record("the finished handshake must refuse more bytes")
            return
        }
        #expect(link.channel.receive(message2) == [.failed(.decryptFailed(.transportFrame(0)))])
    }

    @Test("an old message 1 replayed to a new responder cannot be completed without its ephemeral secret")
    func replayedIntoNewHandshake() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        let message1 = try #require(sent(initiator.start()).first)
        // A second handshake by the same initiator (fresh ephemeral) reaches its message 3 ...
        let other = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, ephemeralSeed: 9),
            responder: TestNode.responder.machine(.responder))
        // ... but its message 3 does not complete a responder that answered the replayed message 1.
        var responder = TestNode.responder.machine(.responder)
        _ = responder.start()
        #expect(sent(responder.receive(message1)).count == 1)
        #expect(failure(responder.receive(other.transcript[2])) == .decryptFailed(.handshakeMessage(3)))
    }

    // MARK: - Identity bindings

    @Test("a responder's binding from another handshake is refused, with its own or the stolen static key")
    func foreignBindingInMessage2() throws {
        let responderNode = TestNode.responder
        let oldBinding = try bindingFromAnotherHandshake(signer: responderNode, role: .responder)

        for forgerStatic in [TestNode.mallory.staticKey, responderNode.staticKey] {
            var initiator = TestNode.initiator.machine(.initiator)
            let message1 = try #require(sent(initiator.start()).first)
            var forger = rawState(isInitiator: false, staticKey: forgerStatic, ephemeralSeed: 77)
            _ = try forger.readMessage(Array(message1.dropFirst(2)))
            let forged = try forger.writeMessage { _ in [0, 1] + oldBinding.bytes }
            #expect(
                failure(initiator.receive(LinkHandshake.frame(forged))) == .badIdentityBinding(.handshakeMessage(2)))
        }
    }

    @Test("an initiator's binding from another handshake is refused in message 3")
    func foreignBindingInMessage3() throws {
        let initiatorNode = TestNode.initiator
        let oldBinding = try bindingFromAnotherHandshake(signer: initiatorNode, role: .initiator)

        var forger = rawState(isInitiator: true, staticKey: initiatorNode.staticKey, ephemeralSeed: 78)
        var responder = TestNode.responder.machine(.responder)
        _ = responder.start()
        let message1 = try forger.writeMessage { _ in [1, 0, 1] }
        let message2 = try #require(sent(responder.receive(LinkHandshake.frame(message1))).first)
        _ = try forger.readMessage(Array(message2.dropFirst(2)))
        let forged = try forger.writeMessage { _ in oldBinding.bytes }
        #expect(failure(responder.receive(LinkHandshake.frame(forged))) == .badIdentityBinding(.handshakeMessage(3)))
    }

    @Test("the forging harness itself works: a fresh binding from the raw state is accepted")
    func rawStateControl() throws {
        var initiator = TestNode.initiator.machine(.initiator)
        let message1 = try #require(sent(initiator.start()).first)
        var honest = rawState(isInitiator: false, staticKey: TestNode.responder.staticKey, ephemeralSeed: 79)
        _ = try honest.readMessage(Array(message1.dropFirst(2)))
        let message2 = try honest.writeMessage { hash in
            [0, 1]
                + IdentityBinding(
                    identity: TestNode.responder.identity, staticKey: TestNode.responder.staticKey.publicKey,
                    handshakeHash: hash
                ).bytes
        }
        let link = try #require(established(initiator.receive(LinkHandshake.frame(message2))))
        #expect(link.peer == TestNode.responder.identity.publicKey)
    }

    @Test("a binding signed in another domain or over another key does not verify")
    func bindingIsSpecific() {
        let hash = [UInt8](repeating: 7, count: 64)
        let node = TestNode.initiator
        let binding = IdentityBinding(identity: node.identity, staticKey: node.staticKey.publicKey, handshakeHash: hash)
        #expect(binding.verifies(staticKey: node.staticKey.publicKey, handshakeHash: hash))
        #expect(!binding.verifies(staticKey: TestNode.mallory.staticKey.publicKey, handshakeHash: hash))
        #expect(!binding.verifies(staticKey: node.staticKey.publicKey, handshakeHash: flippingBit(0, of: hash)))
        let otherDomain = node.identity.sign(node.staticKey.publicKey + hash, in: .record)
        let misused = IdentityBinding(bytes: (node.identity.publicKey.bytes + otherDomain.bytes)[...])
        #expect(misused?.verifies(staticKey: node.staticKey.publicKey, handshakeHash: hash) == false)
    }

    // MARK: - Versions

    @Test("the highest common version wins")
    func versionChoice() throws {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, versions: [1, 2, 5]),
            responder: TestNode.responder.machine(.responder, versions: [1, 2, 3]))
        #expect(run.initiator.established?.version == 2)
        #expect(run.responder.established?.version == 2)
    }

    @Test("no common version: both sides say so, and the responder's refusal carries no identity")
    func noCommonVersion() throws {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, versions: [2, 3]),
            responder: TestNode.responder.machine(.responder, versions: [1]))
        #expect(run.responder.error == .noCommonVersion(ours: [1], theirs: [2, 3]))
        #expect(run.initiator.error == .noCommonVersion(ours: [2, 3], theirs: [1]))
        let refusal = try #require(run.responder.sent.first)
        #expect(refusal.count == 2 + 32 + 48 + (2 + 3) + 16)
        #expect(!containsAnyRun(of: TestNode.responder.identity.publicKey.bytes, in: refusal))
    }

    @Test("malformed version lists in message 1 are refused by name")
    func malformedVersionList() throws {
        for payload: [UInt8] in [
            [0, 0, 1], [2, 0, 1], [2, 0, 2, 0, 1], [1, 0, 0], [17] + [UInt8](repeating: 1, count: 34),
        ] {
            var forger = rawState(isInitiator: true, staticKey: TestNode.initiator.staticKey, ephemeralSeed: 80)
            var responder = TestNode.responder.machine(.responder)
            _ = responder.start()
            let message1 = try forger.writeMessage { _ in payload }
            guard
                case .malformedPayload(.handshakeMessage(1), _) = failure(
                    responder.receive(LinkHandshake.frame(message1)))
            else {
                Issue.record("payload \(payload) must be malformed")
                continue
            }
        }
    }

    @Test("extension bytes after message 1's version list are ignored, for later versions")
    func versionListExtensions() throws {
        var forger = rawState(isInitiator: true, staticKey: TestNode.initiator.staticKey, ephemeralSeed: 81)
        var responder = TestNode.responder.machine(.responder)
        _ = responder.start()
        let message1 = try forger.writeMessage { _ in [1, 0, 1, 0xee, 0xff] }
        #expect(sent(responder.receive(LinkHandshake.frame(message1))).count == 1)
    }

    // MARK: - Helpers

    /// A binding `signer` made, honestly, in a handshake other than the one under test.
    private func bindingFromAnotherHandshake(signer: TestNode, role: LinkHandshake.Role) throws -> IdentityBinding {
        var initiator = rawState(isInitiator: true, staticKey: TestNode.initiator.staticKey, ephemeralSeed: 90)
        var responder = rawState(isInitiator: false, staticKey: TestNode.responder.staticKey, ephemeralSeed: 91)
        var binding: IdentityBinding?
        func bind(_ hash: [UInt8]) -> [UInt8] {
            let made = IdentityBinding(
                identity: signer.identity, staticKey: signer.staticKey.publicKey, handshakeHash: hash)
            binding = made
            return made.bytes
        }
        _ = try responder.readMessage(try initiator.writeMessage { _ in [1, 0, 1] })
        let message2 = try responder.writeMessage {
            role == .responder ? [0, 1] + bind($0) : [0, 1] + [UInt8](repeating: 0, count: 96)
        }
        _ = try initiator.readMessage(message2)
        if role == .initiator { _ = try initiator.writeMessage { bind($0) } }
        return try #require(binding)
    }

    private func rawState(isInitiator: Bool, staticKey: NoiseKeyPair, ephemeralSeed: UInt64) -> HandshakeState {
        var generator = SeededGenerator(seed: ephemeralSeed)
        return HandshakeState(
            isInitiator: isInitiator, localStatic: staticKey,
            localEphemeral: NoiseKeyPair.generate(using: &generator), psk: NetworkKey.testNetwork.handshakeKey)
    }
}

// MARK: - Reading actions

func sent(_ actions: [LinkHandshake.Action]) -> [[UInt8]] {
    actions.compactMap { if case .send(let bytes) = $0 { bytes } else { nil } }
}

func established(_ actions: [LinkHandshake.Action]) -> LinkEstablished? {
    actions.lazy.compactMap { if case .established(let link) = $0 { link } else { nil } }.first
}

func failure(_ actions: [LinkHandshake.Action]) -> LinkError? {
    actions.lazy.compactMap { if case .fail(let error) = $0 { error } else { nil } }.first
}
