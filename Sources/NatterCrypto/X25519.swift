import CSodium

/// Raw X25519 (`crypto_scalarmult`, RFC 7748): the Diffie-Hellman function of the link handshake.
///
/// Noise needs the shared secret unhashed (it hashes it into its own chaining key), whereas
/// `EncryptionKeyPair.agreement` hashes the secret with both public keys for natter's own uses; hence this separate,
/// minimal face. Secrets are 32 raw bytes; libsodium clamps them as RFC 7748 says.
public enum X25519 {
    /// Length of secrets, public keys and shared secrets: 32 bytes (Noise's DHLEN).
    public static let byteCount = 32

    /// The public key of the 32-byte `secret`.
    public static func publicKey(secret: SecretBytes) -> [UInt8] {
        precondition(secret.count == byteCount, "X25519 secrets are 32 bytes")
        Sodium.ready()
        var publicKey = [UInt8](repeating: 0, count: byteCount)
        secret.withUnsafeBytes { sk in
            _ = crypto_scalarmult_base(&publicKey, sk.u8)
        }
        return publicKey
    }

    /// The raw shared secret of `secret` and a peer's public key.
    ///
    /// Throws `.invalidLength` for a public key that is not 32 bytes and `.weakPublicKey` when the result is all
    /// zeros (a low-order peer key, which would let an attacker force a known secret).
    public static func sharedSecret(secret: SecretBytes, peerPublicKey: [UInt8]) throws(CryptoError) -> SecretBytes {
        precondition(secret.count == byteCount, "X25519 secrets are 32 bytes")
        try requireLength(peerPublicKey, byteCount, "X25519 public key")
        Sodium.ready()
        var status: Int32 = 0
        let shared = SecretBytes(count: byteCount) { out in
            status = secret.withUnsafeBytes { sk in
                peerPublicKey.withUnsafeBytes { pk in
                    crypto_scalarmult(out.u8, sk.u8, pk.u8)
                }
            }
        }
        // libsodium returns -1 exactly when the output is all zeros.
        guard status == 0 else { throw .weakPublicKey }
        return shared
    }
}
