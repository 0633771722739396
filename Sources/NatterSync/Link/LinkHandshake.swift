public import NatterCrypto

/// What a node brings to every link handshake.
public struct LinkConfiguration: Sendable {
    /// The node's identity, which signs the binding to its Noise static key.
    public var identity: IdentityKeyPair
    /// The node's Noise static key.
    public var staticKey: NoiseKeyPair
    /// The network key; its `handshakeKey` is the Noise PSK, so only nodes of the same network get past message 1.
    public var networkKey: NetworkKey
    /// The natter protocol versions this node speaks: 1 to 16 entries, ascending, none zero.
    public var versions: [UInt16]
    /// Frames per direction between transport rekeys. Both ends must agree; only tests change it (so rekeys happen
    /// after a handful of frames rather than 2^16).
    public var rekeyIntervalFrames: UInt64

    /// A configuration; the defaults are this build's versions and the standard rekey interval. Invalid version
    /// lists and a zero interval are programming mistakes and trap.
    public init(
        identity: IdentityKeyPair, staticKey: NoiseKeyPair, networkKey: NetworkKey,
        versions: [UInt16] = LinkHandshake.supportedVersions,
        rekeyIntervalFrames: UInt64 = Limits.rekeyIntervalFrames
    ) {
        precondition(VersionList.isValid(versions), "versions must be 1...16 ascending non-zero entries")
        precondition(rekeyIntervalFrames > 0, "the rekey interval counts at least one frame")
        self.identity = identity
        self.staticKey = staticKey
        self.networkKey = networkKey
        self.versions = versions
        self.rekeyIntervalFrames = rekeyIntervalFrames
    }
}

/// A finished handshake: who the peer is, and the channel to talk to it.
public struct LinkEstablished: Sendable {
    /// The peer's identity, proven by its binding signature over this handshake.
    public let peer: IdentityPublicKey
    /// The peer's Noise static public key.
    public let peerStaticKey: [UInt8]
    /// The protocol version both ends now speak.
    public let version: UInt16
    /// The final handshake hash: unique to this link, the same on both ends (a channel binding for later use).
    public let handshakeHash: [UInt8]
    /// The encrypted channel.
    public var channel: SecureChannel
    /// Bytes received after the last handshake message: transport frames the peer sent right away. Feed them to
    /// `channel.receive` before anything else.
    public let unreadBytes: [UInt8]
}

/// The link handshake, `Noise_XXpsk0_25519_ChaChaPoly_SHA512` with natter's payloads, as a sans-IO state machine for
/// either role (byte layouts in docs/protocol.md §2).
///
/// Inputs are `start()`, `receive(_:)` (bytes from the connection, in any chunking) and `endOfInput()`; each
/// returns the actions the caller must carry out in order: send bytes, take the established link, or close the
/// connection on a failure. The machine never reads a clock, draws randomness or touches a socket; its ephemeral
/// key is given at creation, so a test with fixed keys reproduces every byte.
///
/// What each message proves: message 1 (initiator) proves the network key and offers versions, and reveals no
/// identity; a responder without the network key fails there (`wrongNetworkKey`) and sends nothing. Message 2
/// (responder) chooses the version and reveals and binds the responder's identity, to the initiator only. Message 3
/// (initiator) reveals and binds the initiator's identity.
public struct LinkHandshake: Sendable {
    /// The natter protocol versions this build speaks.
    public static let supportedVersions: [UInt16] = [1]

    /// Which end of the connection this machine is.
    public enum Role: Sendable {
        /// The dialling side: writes messages 1 and 3.
        case initiator
        /// The listening side: writes message 2.
        case responder
    }

    /// What the caller must do.
    public enum Action: Sendable {
        /// Write these bytes to the connection.
        case send([UInt8])
        /// The handshake is complete: use the channel from now on.
        case established(LinkEstablished)
        /// The handshake failed: close the connection (after sending anything listed before).
        case fail(LinkError)
    }

    private enum Phase: Sendable {
        case notStarted
        /// Waiting for handshake message 1, 2 or 3.
        case awaiting(Int)
        case established
        case failed
    }

    /// This machine's role.
    public let role: Role
    private let configuration: LinkConfiguration
    private var noise: HandshakeState
    private var phase = Phase.notStarted
    private var input = ByteQueue()
    /// The version the responder chose in message 2 (kept for `readMessage3`).
    private var chosenVersion: UInt16?

    /// A machine for `role`; `ephemeralKey` must be fresh for every handshake (see `NoiseKeyPair.generate`).
    public init(role: Role, configuration: LinkConfiguration, ephemeralKey: NoiseKeyPair) {
        self.role = role
        self.configuration = configuration
        noise = HandshakeState(
            isInitiator: role == .initiator, localStatic: configuration.staticKey, localEphemeral: ephemeralKey,
            psk: configuration.networkKey.handshakeKey)
    }

    // MARK: - Inputs

    /// The connection is open. The initiator sends message 1; the responder waits for it.
    public mutating func start() -> [Action] {
        guard case .notStarted = phase else { preconditionFailure("LinkHandshake.start called twice") }
        switch role {
        case .responder:
            phase = .awaiting(1)
            return []
        case .initiator:
            let message: [UInt8]
            do {
                message = try noise.writeMessage { _ in VersionList.encode(configuration.versions) }
            } catch {
                preconditionFailure("message 1 involves no DH and no exhausted nonce: \(error)")
            }
            phase = .awaiting(2)
            return [.send(Self.frame(message))]
        }
    }

    /// Bytes from the connection, in any chunking.
    public mutating func receive(_ bytes: some Collection<UInt8>) -> [Action] {
        switch phase {
        case .notStarted:
            preconditionFailure("LinkHandshake.receive before start")
        case .established:
            return [.fail(.unexpectedMessage("bytes reached the finished handshake; they belong to the channel"))]
        case .failed:
            return [.fail(.closed)]
        case .awaiting:
            break
        }
        input.append(bytes)
        var actions: [Action] = []
        while case .awaiting(let number) = phase, input.count >= 2 {
            let stage = LinkError.Stage.handshakeMessage(number)
            let length = Int(input.bigEndian(at: 0, width: 2))
            guard length <= Limits.handshakeMessageBytesMax else {
                return actions
                    + fail(.frameTooLarge(stage, bytes: length, limit: Limits.handshakeMessageBytesMax))
            }
            let minimum = Self.minimumLength(ofMessage: number)
            guard length >= minimum else {
                // A whole frame too short for this message is another message: replayed, or out of order.
                return actions
                    + fail(
                        .unexpectedMessage("a \(length)-byte frame where \(stage) (at least \(minimum) bytes) belongs"))
            }
            guard input.count >= 2 + length else { break }
            input.skip(2)
            let message = input.take(length)
            switch number {
            case 1: actions += readMessage1(message)
            case 2: actions += readMessage2(message)
            default: actions += readMessage3(message)
            }
        }
        return actions
    }

    /// The connection's input ended before the handshake finished (afterwards it is the channel's business).
    public mutating func endOfInput() -> [Action] {
        guard case .awaiting(let number) = phase else { return [] }
        let stage = LinkError.Stage.handshakeMessage(number)
        return fail(input.isEmpty ? .peerClosedHandshake(stage) : .truncated(stage))
    }

    // MARK: - Messages

    /// Responder: message 1 proves the network key and offers versions; answer with message 2.
    private mutating func readMessage1(_ message: [UInt8]) -> [Action] {
        let stage = LinkError.Stage.handshakeMessage(1)
        let read: HandshakeState.Read
        do {
            read = try noise.readMessage(message)
        } catch {
            return fail(Self.linkError(error, stage: stage))
        }
        guard let (theirs, _) = VersionList.decode(read.payload[...]) else {
            return fail(.malformedPayload(stage, "the version list"))
        }
        // Bytes after the list are extensions of later versions; version 1 ignores them.
        let ours = configuration.versions
        guard let version = ours.last(where: theirs.contains) else {
            // Refuse in message 2 so the initiator learns why; no identity binding is sent.
            let refusal = Self.bigEndian16(0) + VersionList.encode(ours)
            switch write(payload: { _ in refusal }) {
            case .success(let reply): return [.send(reply)] + fail(.noCommonVersion(ours: ours, theirs: theirs))
            case .failure(let error): return fail(error)
            }
        }
        chosenVersion = version
        let identity = configuration.identity
        let staticKey = configuration.staticKey.publicKey
        let written = write { hash in
            Self.bigEndian16(version)
                + IdentityBinding(identity: identity, staticKey: staticKey, handshakeHash: hash).bytes
        }
        switch written {
        case .success(let reply):
            phase = .awaiting(3)
            return [.send(reply)]
        case .failure(let error):
            return fail(error)
        }
    }

    /// Initiator: message 2 names the version and binds the responder's identity; answer with message 3.
    private mutating func readMessage2(_ message: [UInt8]) -> [Action] {
        let stage = LinkError.Stage.handshakeMessage(2)
        let read: HandshakeState.Read
        do {
            read = try noise.readMessage(message)
        } catch {
            return fail(Self.linkError(error, stage: stage))
        }
        let payload = read.payload[...]
        guard payload.count >= 2 else { return fail(.malformedPayload(stage, "no version")) }
        let version = UInt16(payload[payload.startIndex]) << 8 | UInt16(payload[payload.startIndex + 1])
        let ours = configuration.versions
        guard version != 0 else {
            guard let (theirs, length) = VersionList.decode(payload.dropFirst(2)), length == payload.count - 2 else {
                return fail(.malformedPayload(stage, "the refusal's version list"))
            }
            return fail(.noCommonVersion(ours: ours, theirs: theirs))
        }
        guard ours.contains(version) else {
            return fail(.malformedPayload(stage, "the peer chose version \(version), which was not offered"))
        }
        guard let binding = IdentityBinding(bytes: payload.dropFirst(2)) else {
            return fail(
                .malformedPayload(stage, "\(payload.count) bytes where 2 + \(IdentityBinding.byteCount) belong"))
        }
        guard let peerStatic = noise.remoteStatic,
            binding.verifies(staticKey: peerStatic, handshakeHash: read.hashBeforePayload)
        else { return fail(.badIdentityBinding(stage)) }

        let identity = configuration.identity
        let staticKey = configuration.staticKey.publicKey
        let written = write { hash in
            IdentityBinding(identity: identity, staticKey: staticKey, handshakeHash: hash).bytes
        }
        switch written {
        case .success(let reply):
            return [.send(reply), .established(establish(peer: binding.identity, peerStatic: peerStatic, version))]
        case .failure(let error):
            return fail(error)
        }
    }

    /// Responder: message 3 binds the initiator's identity; the link is up.
    private mutating func readMessage3(_ message: [UInt8]) -> [Action] {
        let stage = LinkError.Stage.handshakeMessage(3)
        let read: HandshakeState.Read
        do {
            read = try noise.readMessage(message)
        } catch {
            return fail(Self.linkError(error, stage: stage))
        }
        guard let binding = IdentityBinding(bytes: read.payload[...]) else {
            return fail(
                .malformedPayload(stage, "\(read.payload.count) bytes where \(IdentityBinding.byteCount) belong"))
        }
        guard let peerStatic = noise.remoteStatic,
            binding.verifies(staticKey: peerStatic, handshakeHash: read.hashBeforePayload)
        else { return fail(.badIdentityBinding(stage)) }
        // The responder chose the highest common version of message 1's list when it wrote message 2.
        guard let version = chosenVersion else { preconditionFailure("message 3 before a version was chosen") }
        return [.established(establish(peer: binding.identity, peerStatic: peerStatic, version))]
    }

    // MARK: - Helpers

    /// Writes our next message around `payload`, framed for the wire. A DH failure while writing blames the key the
    /// peer sent in the message before.
    private mutating func write(payload: ([UInt8]) -> [UInt8]) -> Result<[UInt8], LinkError> {
        let stage = LinkError.Stage.handshakeMessage(noise.messageCount)
        do {
            return .success(Self.frame(try noise.writeMessage(payload: payload)))
        } catch {
            return .failure(Self.linkError(error, stage: stage))
        }
    }

    private mutating func establish(peer: IdentityPublicKey, peerStatic: [UInt8], _ version: UInt16)
        -> LinkEstablished
    {
        let (initiatorToResponder, responderToInitiator) = noise.split()
        let (sender, receiver) =
            role == .initiator
            ? (initiatorToResponder, responderToInitiator) : (responderToInitiator, initiatorToResponder)
        phase = .established
        return LinkEstablished(
            peer: peer, peerStaticKey: peerStatic, version: version, handshakeHash: noise.handshakeHash,
            channel: SecureChannel(
                sender: sender, receiver: receiver, rekeyIntervalFrames: configuration.rekeyIntervalFrames),
            unreadBytes: input.takeAll())
    }

    private mutating func fail(_ error: LinkError) -> [Action] {
        phase = .failed
        input = ByteQueue()
        return [.fail(error)]
    }

    private static func linkError(_ error: NoiseError, stage: LinkError.Stage) -> LinkError {
        switch error {
        // Before message 1 authenticates, a failed tag means the PSK differs (or the bytes are garbage).
        case .decryptFailed: return stage == .handshakeMessage(1) ? .wrongNetworkKey : .decryptFailed(stage)
        case .truncated: return .truncated(stage)
        case .weakPublicKey: return .weakPeerKey(stage)
        case .nonceExhausted: return .nonceExhausted
        }
    }

    /// The smallest well-formed length of each message: its keys, tags and smallest version-1 payload.
    private static func minimumLength(ofMessage number: Int) -> Int {
        let key = X25519.byteCount
        let tag = ChaCha20Poly1305.tagBytes
        switch number {
        case 1: return key + tag + 3  // e, payload: one version
        case 2: return key + (key + tag) + tag + 2  // e, encrypted s, payload: a version at least
        default: return (key + tag) + tag + IdentityBinding.byteCount  // encrypted s, payload: the binding
        }
    }

    /// `u16 BE length || message`: handshake messages travel in the same framing as transport frames.
    static func frame(_ message: [UInt8]) -> [UInt8] {
        precondition(message.count <= Limits.noiseMessageBytesMax, "Noise messages are at most 65535 bytes")
        return bigEndian16(UInt16(message.count)) + message
    }

    private static func bigEndian16(_ value: UInt16) -> [UInt8] { [UInt8(value >> 8), UInt8(value & 0xff)] }
}
