public import NatterCrypto
public import NatterModel

// MARK: - Limits of typing indicators

extension Limits {
    /// How many links a typing frame may cross: 6. Each forwarder decrements the count and drops the frame at zero,
    /// so a frame reaches members up to six links away (the lab's overlays, with their degree cap, stay well within
    /// it) and can never circulate.
    public static let typingHopsMax: UInt8 = 6

    /// Typing frames a node accepts per link: a burst of 64, refilled at 32 a second. One person typing sends one
    /// frame every 2 s (plus one when they stop), so this carries dozens of typists across a relay; what is above
    /// it is dropped unverified, before any signature check.
    public static let typingFramesPerLinkBurst = 64
    public static let typingFramesPerLinkPerSecond = 32.0
}

/// A typing indicator on a link (docs/protocol.md §3.2, type 16; SPEC F12): ephemeral, never stored. It names the
/// conversation and the author in clear (relays forward it), carries the state encrypted under a subkey of the
/// conversation's epoch key (so only members read it), and is signed by the author (so no one else, member or
/// relay, can forge it). The hop count is outside the signature: each forwarder decrements it.
public struct TypingFrame: Equatable, Sendable {
    /// The message type byte, after the sync session's 1–7 and the file frames' 8–10 (11–15 left for them).
    public static let type: UInt8 = 16
    /// Exact size of a frame: type, hops, conversation, author, epoch, sequence, nonce, sealed state, signature.
    public static let byteCount = 1 + 1 + 32 + 32 + 32 + 8 + AEADNonce.byteCount + 1 + 16 + Signature.byteCount
    /// What a typing frame's signature is for.
    public static let signatureDomain = SignatureDomain("natter/v1/typing")
    /// The `crypto_kdf` context of the subkey of an epoch key that seals typing states (never a record's key).
    public static let keyPurpose = "natrtype"

    /// The state a frame carries once opened.
    public enum State: UInt8, Sendable {
        case stopped = 0
        case typing = 1
    }

    public var hops: UInt8
    public let conversation: ConversationID
    public let author: AuthorID
    public let epoch: EpochID
    /// Strictly increasing per author (the author's clock in milliseconds, bumped when it does not advance):
    /// receivers keep the highest they saw per (conversation, author) and drop the rest, which also ends loops.
    public let sequence: UInt64
    public let nonce: AEADNonce
    /// The state byte sealed with XChaCha20-Poly1305 (17 bytes).
    public let sealedState: [UInt8]
    public let signature: Signature

    /// Whether an application message is a typing frame (by its first byte), to route it away from the session.
    public static func isTypingFrame(_ message: [UInt8]) -> Bool { message.first == type }

    /// Builds and signs a frame: the state sealed under `epochKey`'s typing subkey, the header as associated data.
    public static func seal(
        _ state: State, conversation: ConversationID, epoch: EpochID, epochKey: SymmetricKey, sequence: UInt64,
        nonce: AEADNonce, identity: IdentityKeyPair, hops: UInt8 = Limits.typingHopsMax
    ) -> TypingFrame {
        let author = AuthorID(identity.publicKey)
        let header = associatedData(conversation, author, epoch, sequence)
        let sealed = AEAD.seal(
            [state.rawValue], key: epochKey.derive(purpose: keyPurpose), nonce: nonce, associatedData: header)
        let signed = signedBytes(header: header, nonce: nonce, sealed: sealed)
        return TypingFrame(
            hops: hops, conversation: conversation, author: author, epoch: epoch, sequence: sequence, nonce: nonce,
            sealedState: sealed, signature: identity.sign(signed, in: signatureDomain))
    }

    /// Whether the author signed this frame (any hop count).
    public var isValidlySigned: Bool {
        let header = Self.associatedData(conversation, author, epoch, sequence)
        return author.publicKey.isValidSignature(
            signature, for: Self.signedBytes(header: header, nonce: nonce, sealed: sealedState),
            in: Self.signatureDomain)
    }

    /// The state, for a holder of the epoch's key; nil when the key does not open it or the state is one this
    /// version does not know (ignored, not an error: it was sealed by a member).
    public func open(epochKey: SymmetricKey) -> State? {
        let header = Self.associatedData(conversation, author, epoch, sequence)
        guard
            let plain = try? AEAD.open(
                sealedState, key: epochKey.derive(purpose: Self.keyPurpose), nonce: nonce, associatedData: header),
            plain.count == 1
        else { return nil }
        return State(rawValue: plain[0])
    }

    public func encoded() -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(Self.byteCount)
        out.append(Self.type)
        out.append(hops)
        out += Self.associatedData(conversation, author, epoch, sequence)
        out += nonce.bytes
        out += sealedState
        out += signature.bytes
        return out
    }

    /// Decodes one frame: exactly `byteCount` bytes, hops 1…`typingHopsMax`, sequence 1…2^62. Errors are
    /// `SyncMessageError`s: the peer broke the protocol, and the link closes. The signature is checked separately
    /// (`isValidlySigned`), after the receiver's cheaper checks.
    public static func decode(_ bytes: [UInt8]) throws(SyncMessageError) -> TypingFrame {
        guard !bytes.isEmpty else { throw .empty }
        var reader = SyncReader(bytes)
        let type = try reader.u8("type")
        guard type == Self.type else { throw .unknownType(type) }
        let hops = try reader.u8("hops")
        guard (1...Limits.typingHopsMax).contains(hops) else {
            throw .unexpected("a typing frame with \(hops) hops left (1…\(Limits.typingHopsMax))")
        }
        let conversation = ConversationID(raw: try reader.bytes32("conversation"))
        let author = AuthorID(raw: try reader.bytes32("author"))
        let epoch = EpochID(raw: try reader.bytes32("epoch"))
        let sequence = try reader.u64("sequence")
        guard (1...(UInt64(1) << 62)).contains(sequence) else { throw .sequenceOutOfRange(field: "sequence", sequence) }
        let nonceBytes = try reader.take(AEADNonce.byteCount, "nonce")
        let sealed = try reader.take(1 + AEAD.tagBytes, "sealed state")
        let signatureBytes = try reader.take(Signature.byteCount, "signature")
        try reader.finish()
        // The lengths were just read exactly: these cannot fail.
        let nonce = try! AEADNonce(bytes: nonceBytes)
        let signature = try! Signature(bytes: signatureBytes)
        return TypingFrame(
            hops: hops, conversation: conversation, author: author, epoch: epoch, sequence: sequence, nonce: nonce,
            sealedState: sealed, signature: signature)
    }

    private static func associatedData(
        _ conversation: ConversationID, _ author: AuthorID, _ epoch: EpochID, _ sequence: UInt64
    ) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(104)
        conversation.raw.appendBytes(to: &out)
        author.raw.appendBytes(to: &out)
        epoch.raw.appendBytes(to: &out)
        appendBigEndian(sequence, to: &out)
        return out
    }

    /// What the author signs: the type byte, then everything after the hop count up to the signature.
    private static func signedBytes(header: [UInt8], nonce: AEADNonce, sealed: [UInt8]) -> [UInt8] {
        [type] + header + nonce.bytes + sealed
    }
}
