public import NatterCrypto

/// An X25519 key pair as the link handshake uses it: a node's Noise static key, or one handshake's ephemeral key.
///
/// The static key is bound to the node's identity by a signature in every handshake (docs/protocol.md §2), so it may be
/// long-lived or fresh per run. Ephemeral keys must be fresh for every handshake; this module never draws randomness
/// itself, so the caller makes them with `generate(using:)` and a secure generator (`SecureRandomGenerator`), and
/// tests pass fixed ones.
public struct NoiseKeyPair: Sendable, CustomStringConvertible {
    /// The 32-byte X25519 public key.
    public let publicKey: [UInt8]
    /// The 32-byte X25519 secret.
    public let secret: SecretBytes

    /// The key pair with this 32-byte secret.
    public init(secret: [UInt8]) throws(CryptoError) {
        guard secret.count == X25519.byteCount else {
            throw .invalidLength(what: "X25519 secret", expected: X25519.byteCount, actual: secret.count)
        }
        self.init(secret: SecretBytes(secret))
    }

    /// The key pair with this 32-byte secret.
    public init(secret: SecretBytes) {
        precondition(secret.count == X25519.byteCount, "X25519 secrets are 32 bytes")
        self.secret = secret
        self.publicKey = X25519.publicKey(secret: secret)
    }

    /// A fresh key pair from `generator`, which must be cryptographically secure outside tests and simulations.
    public static func generate(using generator: inout some RandomNumberGenerator) -> NoiseKeyPair {
        var bytes = (0..<X25519.byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) }
        defer { wipe(&bytes) }
        return NoiseKeyPair(secret: SecretBytes(bytes))
    }

    public var description: String { "NoiseKeyPair(\(Hex.encode(publicKey.prefix(8)))…, secret redacted)" }
}
