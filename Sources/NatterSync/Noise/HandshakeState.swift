internal import NatterCrypto

/// A token of a Noise message pattern (specification revision 34, sections 7 and 9).
enum NoiseToken: Sendable {
    case e, s, ee, es, se, ss, psk
}

/// The fixed parameters of natter's link handshake.
enum NoiseProtocol {
    /// The full protocol name. It is hashed into the first handshake hash, so peers that disagree on any part of it
    /// fail at message 1.
    static let name = "Noise_XXpsk0_25519_ChaChaPoly_SHA512"

    /// The prologue: both ends hash it before message 1, so a Noise peer of another application that happens to
    /// hold the same PSK still cannot complete a handshake with natter.
    static let prologue = Array("natter/v1/link".utf8)

    /// XXpsk0: `-> psk, e` / `<- e, ee, s, es` / `-> s, se`. Mutual authentication with hidden identities: the
    /// initiator learns the responder's static key only after proving the PSK, and reveals its own last.
    static let pattern: [[NoiseToken]] = [
        [.psk, .e],
        [.e, .ee, .s, .es],
        [.s, .se],
    ]

    /// Whether the pattern has a `psk` token: then every `e` token also calls MixKey(e.public_key), so the
    /// ephemeral key feeds the cipher key before any DH (section 9.2).
    static let isPSKHandshake = pattern.joined().contains(.psk)
}

/// Noise's HandshakeState (specification revision 34, section 5.3) for natter's pattern.
///
/// Sans-IO and deterministic: the ephemeral key comes in at creation, so a test with fixed keys reproduces every
/// byte (and matches another implementation). Each message's payload is built or checked against the handshake hash
/// *before* the payload itself is encrypted or decrypted, which is the hash the identity bindings sign.
struct HandshakeState: Sendable {
    /// The outcome of reading a message.
    struct Read {
        /// The decrypted payload.
        var payload: [UInt8]
        /// The handshake hash just before the payload's DecryptAndHash: what the writer's payload was made against.
        var hashBeforePayload: [UInt8]
    }

    let isInitiator: Bool
    private var symmetric: SymmetricState
    private let localStatic: NoiseKeyPair
    private let localEphemeral: NoiseKeyPair
    private let psk: SymmetricKey
    private var ephemeralSent = false
    /// The peer's static public key, once its `s` token was read.
    private(set) var remoteStatic: [UInt8]?
    /// The peer's ephemeral public key, once its `e` token was read.
    private(set) var remoteEphemeral: [UInt8]?
    /// How many messages have been written or read so far.
    private(set) var messageCount = 0

    /// Initialize(): InitializeSymmetric(protocol name), MixHash(prologue); XX has no pre-messages.
    init(isInitiator: Bool, localStatic: NoiseKeyPair, localEphemeral: NoiseKeyPair, psk: SymmetricKey) {
        self.isInitiator = isInitiator
        self.localStatic = localStatic
        self.localEphemeral = localEphemeral
        self.psk = psk
        symmetric = SymmetricState(protocolName: Array(NoiseProtocol.name.utf8))
        symmetric.mixHash(NoiseProtocol.prologue)
    }

    /// Whether every message of the pattern has been processed.
    var isFinished: Bool { messageCount == NoiseProtocol.pattern.count }

    /// Whether the next message is ours to write (messages alternate, the initiator first).
    var isOurTurn: Bool { !isFinished && (messageCount % 2 == 0) == isInitiator }

    /// The current handshake hash.
    var handshakeHash: [UInt8] { symmetric.handshakeHash }

    /// WriteMessage: processes the next pattern's tokens, then appends EncryptAndHash of the payload that
    /// `makePayload` builds from the handshake hash at that point.
    mutating func writeMessage(payload makePayload: ([UInt8]) -> [UInt8]) throws(NoiseError) -> [UInt8] {
        precondition(isOurTurn, "writeMessage out of turn")
        var message: [UInt8] = []
        for token in NoiseProtocol.pattern[messageCount] {
            switch token {
            case .e:
                precondition(!ephemeralSent, "an ephemeral key is sent once")
                ephemeralSent = true
                message += localEphemeral.publicKey
                symmetric.mixHash(localEphemeral.publicKey)
                if NoiseProtocol.isPSKHandshake { symmetric.mixKey(SecretBytes(localEphemeral.publicKey)) }
            case .s:
                message += try symmetric.encryptAndHash(localStatic.publicKey)
            case .psk:
                symmetric.mixKeyAndHash(psk.secret)
            case .ee, .es, .se, .ss:
                try mixDH(token)
            }
        }
        let payload = makePayload(symmetric.handshakeHash)
        message += try symmetric.encryptAndHash(payload)
        messageCount += 1
        return message
    }

    /// ReadMessage: processes the next pattern's tokens against `message`, then DecryptAndHash of the rest.
    mutating func readMessage(_ message: [UInt8]) throws(NoiseError) -> Read {
        precondition(!isFinished && !isOurTurn, "readMessage out of turn")
        var rest = message[...]
        for token in NoiseProtocol.pattern[messageCount] {
            switch token {
            case .e:
                guard rest.count >= X25519.byteCount else { throw .truncated }
                let ephemeral = Array(rest.prefix(X25519.byteCount))
                rest = rest.dropFirst(X25519.byteCount)
                remoteEphemeral = ephemeral
                symmetric.mixHash(ephemeral)
                if NoiseProtocol.isPSKHandshake { symmetric.mixKey(SecretBytes(ephemeral)) }
            case .s:
                let length = X25519.byteCount + (symmetric.hasKey ? ChaCha20Poly1305.tagBytes : 0)
                guard rest.count >= length else { throw .truncated }
                remoteStatic = try symmetric.decryptAndHash(rest.prefix(length))
                rest = rest.dropFirst(length)
            case .psk:
                symmetric.mixKeyAndHash(psk.secret)
            case .ee, .es, .se, .ss:
                try mixDH(token)
            }
        }
        if symmetric.hasKey, rest.count < ChaCha20Poly1305.tagBytes { throw .truncated }
        let hashBeforePayload = symmetric.handshakeHash
        let payload = try symmetric.decryptAndHash(rest)
        messageCount += 1
        return Read(payload: payload, hashBeforePayload: hashBeforePayload)
    }

    /// Split(): the two transport cipher states, once the handshake is finished.
    func split() -> (initiatorToResponder: CipherState, responderToInitiator: CipherState) {
        precondition(isFinished, "Split before the handshake finished")
        return symmetric.split()
    }

    /// MixKey(DH(…)) for a DH token, with the keys the token names from this side's point of view.
    private mutating func mixDH(_ token: NoiseToken) throws(NoiseError) {
        let local: NoiseKeyPair
        let remote: [UInt8]?
        switch (token, isInitiator) {
        case (.ee, _): (local, remote) = (localEphemeral, remoteEphemeral)
        case (.ss, _): (local, remote) = (localStatic, remoteStatic)
        case (.es, true): (local, remote) = (localEphemeral, remoteStatic)
        case (.es, false): (local, remote) = (localStatic, remoteEphemeral)
        case (.se, true): (local, remote) = (localStatic, remoteEphemeral)
        case (.se, false): (local, remote) = (localEphemeral, remoteStatic)
        default: preconditionFailure("\(token) is not a DH token")
        }
        guard let remote else { preconditionFailure("the pattern uses a remote key before it is known") }
        do {
            symmetric.mixKey(try X25519.sharedSecret(secret: local.secret, peerPublicKey: remote))
        } catch {
            throw .weakPublicKey
        }
    }
}
