import CSodium

/// An X25519 public key: where conversation keys are sealed to. Separate from the identity key by design
/// (docs/decisions/0002-separate-encryption-key.md): no Ed25519-to-X25519 conversion.
public struct EncryptionPublicKey: Sendable, Hashable, Comparable {
    public static let byteCount = 32
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, Self.byteCount, "encryption public key")
        self.bytes = bytes
    }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

/// An X25519 key pair that receives sealed boxes and agrees shared secrets.
public struct EncryptionKeyPair: Sendable, CustomStringConvertible {
    public static let secretByteCount = 32

    public let publicKey: EncryptionPublicKey
    /// The X25519 secret scalar.
    public let secret: SecretBytes

    /// A fresh random key pair.
    public static func generate() -> EncryptionKeyPair {
        var secret = SecureRandom.bytes(secretByteCount)
        defer { wipe(&secret) }
        return try! EncryptionKeyPair(secret: secret)
    }

    /// The key pair with this 32-byte secret (stored identities and test vectors).
    public init(secret: [UInt8]) throws(CryptoError) {
        try requireLength(secret, Self.secretByteCount, "encryption secret")
        Sodium.ready()
        var pk = [UInt8](repeating: 0, count: EncryptionPublicKey.byteCount)
        _ = crypto_scalarmult_base(&pk, secret)
        self.publicKey = try EncryptionPublicKey(bytes: pk)
        self.secret = SecretBytes(secret)
    }

    /// The X25519 shared secret with `peer`, hashed with both public keys (sorted) so that it is uniform and the
    /// same on both sides. Throws for low-order peer keys, which would give an all-zero secret.
    public func agreement(with peer: EncryptionPublicKey) throws(CryptoError) -> SecretBytes {
        var shared = [UInt8](repeating: 0, count: 32)
        defer { wipe(&shared) }
        let status = secret.withUnsafeBytes { sk in
            crypto_scalarmult(&shared, sk.u8, peer.bytes)
        }
        guard status == 0 else { throw .weakPublicKey }
        let (low, high) = publicKey < peer ? (publicKey, peer) : (peer, publicKey)
        var material = [UInt8]()
        material.reserveCapacity(96)
        material += shared
        material += low.bytes
        material += high.bytes
        defer { wipe(&material) }
        var digest = Blake2b.hash(material, outputBytes: 32)
        defer { wipe(&digest) }
        return SecretBytes(digest)
    }

    public var description: String { "EncryptionKeyPair(secret redacted)" }
}

/// An identity's statement that an X25519 key is its encryption key, signed in the `natter/v1/enc-key` domain.
public struct EncryptionKeyCertificate: Sendable, Hashable {
    public let identity: IdentityPublicKey
    public let encryptionKey: EncryptionPublicKey
    public let signature: Signature

    /// Certifies `encryptionKey` with `identity`.
    public init(certifying encryptionKey: EncryptionPublicKey, by identity: IdentityKeyPair) {
        self.identity = identity.publicKey
        self.encryptionKey = encryptionKey
        self.signature = identity.sign(Self.message(identity.publicKey, encryptionKey), in: .encryptionKey)
    }

    /// A certificate received from elsewhere; it is checked here, so an instance is always valid.
    public init(identity: IdentityPublicKey, encryptionKey: EncryptionPublicKey, signature: Signature)
        throws(CryptoError)
    {
        guard identity.isValidSignature(signature, for: Self.message(identity, encryptionKey), in: .encryptionKey)
        else {
            throw .invalidCertificate
        }
        self.identity = identity
        self.encryptionKey = encryptionKey
        self.signature = signature
    }

    private static func message(_ identity: IdentityPublicKey, _ key: EncryptionPublicKey) -> [UInt8] {
        identity.bytes + key.bytes
    }
}

/// Anonymous public-key encryption (`crypto_box_seal`): how an epoch key reaches one member.
public enum SealedBox {
    /// Bytes a sealed box adds to its plaintext (48: ephemeral public key and MAC).
    public static var overheadBytes: Int { Int(crypto_box_sealbytes()) }

    /// Encrypts `plaintext` so that only the holder of `recipient`'s secret can read it. Throws `.weakPublicKey`
    /// for a low-order recipient key, for which libsodium refuses to seal (nobody could open the box).
    public static func seal(_ plaintext: [UInt8], to recipient: EncryptionPublicKey) throws(CryptoError) -> [UInt8] {
        Sodium.ready()
        var out = [UInt8](repeating: 0, count: plaintext.count + overheadBytes)
        guard crypto_box_seal(&out, plaintext, UInt64(plaintext.count), recipient.bytes) == 0 else {
            throw .weakPublicKey
        }
        return out
    }

    /// Opens a sealed box addressed to `keyPair`.
    public static func open(_ ciphertext: [UInt8], with keyPair: EncryptionKeyPair) throws(CryptoError) -> [UInt8] {
        guard ciphertext.count >= overheadBytes else { throw .sealedBoxOpenFailed }
        var out = [UInt8](repeating: 0, count: ciphertext.count - overheadBytes)
        let status = keyPair.secret.withUnsafeBytes { sk in
            crypto_box_seal_open(
                &out, ciphertext, UInt64(ciphertext.count), keyPair.publicKey.bytes,
                sk.u8)
        }
        guard status == 0 else { throw .sealedBoxOpenFailed }
        return out
    }
}
