internal import NatterCrypto

/// The version list of handshake message 1 (and of a message 2 that refuses): `count: u8` then `count` versions as
/// u16 big-endian, strictly ascending, none zero (docs/protocol.md §2).
enum VersionList {
    /// Whether `versions` is a list this node may offer: 1 to `Limits.versionsOfferedMax` entries, strictly
    /// ascending, none zero.
    static func isValid(_ versions: [UInt16]) -> Bool {
        (1...Limits.versionsOfferedMax).contains(versions.count)
            && versions.allSatisfy { $0 > 0 }
            && zip(versions, versions.dropFirst()).allSatisfy { $0 < $1 }
    }

    static func encode(_ versions: [UInt16]) -> [UInt8] {
        precondition(isValid(versions), "version lists are 1...16 ascending non-zero versions")
        var bytes: [UInt8] = [UInt8(versions.count)]
        for version in versions { bytes += [UInt8(version >> 8), UInt8(version & 0xff)] }
        return bytes
    }

    /// Decodes a list at the front of `bytes`, returning it and the number of bytes it used; nil if malformed.
    static func decode(_ bytes: ArraySlice<UInt8>) -> (versions: [UInt16], length: Int)? {
        guard let count = bytes.first.map(Int.init), count >= 1, count <= Limits.versionsOfferedMax else { return nil }
        let length = 1 + 2 * count
        guard bytes.count >= length else { return nil }
        let base = bytes.startIndex + 1
        let versions = (0..<count).map { UInt16(bytes[base + 2 * $0]) << 8 | UInt16(bytes[base + 2 * $0 + 1]) }
        guard isValid(versions) else { return nil }
        return (versions, length)
    }
}

/// A node's proof that a Noise static key speaks for its identity in one handshake: the Ed25519 identity public
/// key (32 bytes) then its signature (64 bytes) in the `natter/v1/noise-static` domain over the static public key
/// (32) followed by the handshake hash (64) just before the payload that carries the binding.
///
/// The handshake hash covers the whole transcript so far, both ephemeral keys included, so a binding cannot be
/// replayed into another handshake, and a peer that only relays another node's messages cannot claim its identity.
struct IdentityBinding: Sendable {
    static let byteCount = IdentityPublicKey.byteCount + Signature.byteCount

    let identity: IdentityPublicKey
    let signature: Signature

    /// The binding of `staticKey` to `identity` for the handshake whose hash is `handshakeHash`.
    init(identity: IdentityKeyPair, staticKey: [UInt8], handshakeHash: [UInt8]) {
        self.identity = identity.publicKey
        self.signature = identity.sign(Self.message(staticKey, handshakeHash), in: .noiseStatic)
    }

    /// Parses exactly `byteCount` bytes; nil otherwise. The signature is not checked here (see `verifies`).
    init?(bytes: ArraySlice<UInt8>) {
        guard bytes.count == Self.byteCount,
            let identity = try? IdentityPublicKey(bytes: Array(bytes.prefix(IdentityPublicKey.byteCount))),
            let signature = try? Signature(bytes: Array(bytes.suffix(Signature.byteCount)))
        else { return nil }
        self.identity = identity
        self.signature = signature
    }

    var bytes: [UInt8] { identity.bytes + signature.bytes }

    /// Whether the signature binds `staticKey` to `identity` in the handshake whose hash is `handshakeHash`.
    func verifies(staticKey: [UInt8], handshakeHash: [UInt8]) -> Bool {
        identity.isValidSignature(signature, for: Self.message(staticKey, handshakeHash), in: .noiseStatic)
    }

    private static func message(_ staticKey: [UInt8], _ handshakeHash: [UInt8]) -> [UInt8] {
        staticKey + handshakeHash
    }
}
