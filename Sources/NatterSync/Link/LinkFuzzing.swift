internal import NatterCrypto

/// The link's decoders as the fuzz targets see them (Sources/natter-fuzz, docs/protocol.md §2): the handshake's
/// framing, its three messages' payloads, and the secure channel's framing and record stream. Random bytes rarely
/// pass a Noise tag, so each entry point can also wrap the fuzzer's bytes in authentic Noise messages or frames,
/// written by a peer that holds the network key and fixed keys: the decoders behind the authentication are reached
/// too. Nothing here may trap on any input; a broken property of an accepted input traps with a message.
public enum LinkFuzzing {
    /// Fixed keys for both ends: two identities, two Noise static keys, two ephemeral keys, the default network.
    private struct Fixture {
        let initiator: LinkConfiguration
        let responder: LinkConfiguration
        let initiatorEphemeral: NoiseKeyPair
        let responderEphemeral: NoiseKeyPair
    }

    private static let fixture: Fixture = {
        func keyPair(_ byte: UInt8) -> NoiseKeyPair {
            try! NoiseKeyPair(secret: [UInt8](repeating: byte, count: X25519.byteCount))
        }
        let network = NetworkKey.defaultNetwork
        return Fixture(
            initiator: LinkConfiguration(
                identity: try! IdentityKeyPair(seed: [UInt8](repeating: 1, count: 32)), staticKey: keyPair(2),
                networkKey: network, rekeyIntervalFrames: 3),
            responder: LinkConfiguration(
                identity: try! IdentityKeyPair(seed: [UInt8](repeating: 3, count: 32)), staticKey: keyPair(4),
                networkKey: network, rekeyIntervalFrames: 3),
            initiatorEphemeral: keyPair(5), responderEphemeral: keyPair(6))
    }()

    // MARK: - Handshake

    /// Runs `bytes` through the handshake. The first byte picks what they are:
    /// 0 raw bytes to a responder (framing, message 1's tag), 1 raw bytes to an initiator after its message 1,
    /// 2 the payload of an authentic message 1, 3 of an authentic message 2, 4 of an authentic message 3, 5 the
    /// version list and identity binding decoders on their own. The rest of the bytes follow.
    public static func handshake(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        let fixture = fixture
        switch mode % 6 {
        case 0:
            var responder = LinkHandshake(
                role: .responder, configuration: fixture.responder, ephemeralKey: fixture.responderEphemeral)
            _ = responder.start()
            check(responder.receive(rest), endOfInput: responder.endOfInput())
        case 1:
            var initiator = LinkHandshake(
                role: .initiator, configuration: fixture.initiator, ephemeralKey: fixture.initiatorEphemeral)
            _ = initiator.start()
            check(initiator.receive(rest), endOfInput: initiator.endOfInput())
        case 2:
            // A peer with the network key writes message 1 around the fuzzer's payload.
            var peer = noise(initiator: true)
            guard let message = try? peer.writeMessage(payload: { _ in rest }),
                message.count <= Limits.handshakeMessageBytesMax
            else { return }
            var responder = LinkHandshake(
                role: .responder, configuration: fixture.responder, ephemeralKey: fixture.responderEphemeral)
            _ = responder.start()
            check(responder.receive(LinkHandshake.frame(message)), endOfInput: responder.endOfInput())
        case 3:
            // Our initiator's message 1, read by a raw responder that answers with the fuzzer's payload.
            var initiator = LinkHandshake(
                role: .initiator, configuration: fixture.initiator, ephemeralKey: fixture.initiatorEphemeral)
            guard case .send(let first) = initiator.start().first else { preconditionFailure("message 1 is sent") }
            var peer = noise(initiator: false)
            guard (try? peer.readMessage(Array(first.dropFirst(2)))) != nil,
                let message = try? peer.writeMessage(payload: { _ in rest }),
                message.count <= Limits.handshakeMessageBytesMax
            else { return }
            check(initiator.receive(LinkHandshake.frame(message)), endOfInput: initiator.endOfInput())
        case 4:
            // A raw initiator completes messages 1 and 2 with our responder, then writes message 3 around the payload.
            var responder = LinkHandshake(
                role: .responder, configuration: fixture.responder, ephemeralKey: fixture.responderEphemeral)
            _ = responder.start()
            var peer = noise(initiator: true)
            guard let first = try? peer.writeMessage(payload: { _ in VersionList.encode([1]) }),
                case .send(let second) = responder.receive(LinkHandshake.frame(first)).first,
                (try? peer.readMessage(Array(second.dropFirst(2)))) != nil,
                let third = try? peer.writeMessage(payload: { _ in rest }),
                third.count <= Limits.handshakeMessageBytesMax
            else { return }
            check(responder.receive(LinkHandshake.frame(third)), endOfInput: responder.endOfInput())
        default:
            payloads(rest)
        }
    }

    /// The handshake payload decoders alone: whatever they accept re-encodes to exactly the bytes they read.
    private static func payloads(_ bytes: [UInt8]) {
        if let (versions, length) = VersionList.decode(bytes[...]) {
            require(VersionList.encode(versions) == Array(bytes.prefix(length)), "a version list re-encodes differently")
        }
        if let binding = IdentityBinding(bytes: bytes[...]) {
            require(binding.bytes == bytes, "an identity binding re-encodes differently")
        }
    }

    /// A raw Noise handshake state of the fixture's initiator or responder (for writing hostile messages).
    private static func noise(initiator: Bool) -> HandshakeState {
        let fixture = fixture
        let configuration = initiator ? fixture.initiator : fixture.responder
        return HandshakeState(
            isInitiator: initiator, localStatic: configuration.staticKey,
            localEphemeral: initiator ? fixture.initiatorEphemeral : fixture.responderEphemeral,
            psk: configuration.networkKey.handshakeKey)
    }

    /// Properties of a handshake's actions on any input: at most one failure, last; an established link names a peer
    /// whose binding verified — here only the fixture's two identities can, since nobody else's key signs.
    private static func check(_ actions: [LinkHandshake.Action], endOfInput: [LinkHandshake.Action]) {
        for (index, action) in actions.enumerated() {
            switch action {
            case .fail: require(index == actions.count - 1, "a handshake acts after failing")
            case .established(let done):
                let known = [fixture.initiator.identity.publicKey, fixture.responder.identity.publicKey]
                require(known.contains(done.peer), "a handshake established a peer nobody bound")
            case .send: break
            }
        }
        require(endOfInput.count <= 1, "the end of input reports more than one failure")
    }

    // MARK: - Channel

    /// Runs `bytes` through a secure channel's receiver (rekeying every 3 frames, so rekeys are fuzzed too). The first
    /// byte picks what they are: even, raw wire bytes; odd, plaintexts the authentic peer seals as frames (the record
    /// stream behind the tags), the fuzzer's bytes cut into frames at every 0xFF-0xFE pair.
    public static func channel(_ bytes: [UInt8]) {
        guard let mode = bytes.first else { return }
        let rest = Array(bytes.dropFirst())
        var (sender, receiver) = channels
        let wire: [UInt8]
        if mode % 2 == 0 {
            wire = rest
        } else {
            var sealed = [UInt8]()
            for plaintext in frames(rest) {
                guard let frame = try? sender.sealFrame(plaintext[...]) else { return }
                sealed += frame
            }
            wire = sealed
        }
        var events = receiver.receive(wire)
        events += receiver.endOfInput()
        for (index, event) in events.enumerated() {
            switch event {
            case .failed: require(index == events.count - 1, "the channel reports events after a failure")
            case .message(let message):
                require(message.count <= Limits.applicationMessageBytesMax, "a message above the cap was delivered")
            case .goodbye: break
            }
        }
    }

    /// The fuzzer's plaintexts: cut at each 0xFF 0xFE pair, each at most one frame's worth.
    private static func frames(_ bytes: [UInt8]) -> [[UInt8]] {
        var out = [[UInt8]]()
        var current = [UInt8]()
        var index = 0
        while index < bytes.count {
            if bytes[index] == 0xFF, index + 1 < bytes.count, bytes[index + 1] == 0xFE {
                out.append(current)
                current = []
                index += 2
                continue
            }
            current.append(bytes[index])
            if current.count == Limits.transportPlaintextBytesMax {
                out.append(current)
                current = []
            }
            index += 1
        }
        out.append(current)
        return out
    }

    /// The channels of a completed fixture handshake (values: each input starts from a copy).
    private static let channels = channelPair()

    /// The channels of a completed fixture handshake: the initiator's (to seal) and the responder's (to receive).
    private static func channelPair() -> (sender: SecureChannel, receiver: SecureChannel) {
        let fixture = fixture
        var initiator = LinkHandshake(
            role: .initiator, configuration: fixture.initiator, ephemeralKey: fixture.initiatorEphemeral)
        var responder = LinkHandshake(
            role: .responder, configuration: fixture.responder, ephemeralKey: fixture.responderEphemeral)
        _ = responder.start()
        var toResponder = initiator.start()
        var sender: SecureChannel?
        var receiver: SecureChannel?
        // At most three messages cross; each side's actions are fed to the other.
        for _ in 0..<3 {
            var toInitiator = [LinkHandshake.Action]()
            for case .send(let bytes) in toResponder {
                for action in responder.receive(bytes) {
                    if case .established(let done) = action { receiver = done.channel } else { toInitiator.append(action) }
                }
            }
            toResponder = []
            for case .send(let bytes) in toInitiator {
                for action in initiator.receive(bytes) {
                    if case .established(let done) = action { sender = done.channel } else { toResponder.append(action) }
                }
            }
            if let sender, let receiver { return (sender, receiver) }
        }
        preconditionFailure("the fixture handshake completes")
    }

    // MARK: - Seeds

    /// Inputs that reach each handshake mode's decoder: an authentic message 1 (raw, to a responder), version lists
    /// and identity-binding-sized payloads for messages 1 to 3, and the payload decoders' own inputs.
    public static var handshakeSeeds: [(name: String, bytes: [UInt8])] {
        var initiator = LinkHandshake(
            role: .initiator, configuration: fixture.initiator, ephemeralKey: fixture.initiatorEphemeral)
        guard case .send(let first) = initiator.start().first else { preconditionFailure("message 1 is sent") }
        let binding = IdentityBinding(
            identity: fixture.initiator.identity, staticKey: fixture.initiator.staticKey.publicKey,
            handshakeHash: [UInt8](repeating: 0, count: 64)
        ).bytes
        return [
            ("handshake-raw-message-1", [0] + first),
            ("handshake-raw-message-2-short", [1, 0, 2, 0, 0]),
            ("handshake-message-1-versions", [2] + VersionList.encode([1, 2])),
            ("handshake-message-2-version-binding", [3, 0, 1] + binding),
            ("handshake-message-2-refusal", [3, 0, 0] + VersionList.encode([2])),
            ("handshake-message-3-binding", [4] + binding),
            ("handshake-payload-versions", [5] + VersionList.encode([1])),
        ]
    }

    /// Inputs of the channel target: authentic frames of a message and a goodbye, and the same stream as raw bytes.
    public static var channelSeeds: [(name: String, bytes: [UInt8])] {
        var (sender, _) = channels
        let message = try! sender.send(Array("a message".utf8))
        let goodbye = try! sender.sendGoodbye()
        let stream: [UInt8] = [0, 0, 0, 0, 4] + Array("ping".utf8) + [0xFF, 0xFE] + [1, 0, 0, 0, 0]
        let split: [UInt8] = [0, 0, 0, 0, 6] + Array("par".utf8) + [0xFF, 0xFE] + Array("ts!".utf8)
        return [
            ("channel-raw-message-goodbye", [0] + message + goodbye),
            ("channel-stream-message-goodbye", [1] + stream),
            ("channel-stream-split-message", [1] + split),
        ]
    }

    private static func require(_ condition: Bool, _ message: @autoclosure () -> String) {
        if !condition { fatalError("natter-fuzz: \(message())") }
    }
}
