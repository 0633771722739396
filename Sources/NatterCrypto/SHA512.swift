import CSodium

/// SHA-512 (`crypto_hash_sha512`): the hash of the link handshake, `Noise_XXpsk0_25519_ChaChaPoly_SHA512`.
///
/// natter hashes its own data with BLAKE2b; SHA-512 exists here only because the Noise protocol name fixes it, so
/// any Noise implementation can check ours.
public enum SHA512 {
    /// Digest length: 64 bytes (Noise's HASHLEN).
    public static let byteCount = 64
    /// Block length: 128 bytes (Noise's BLOCKLEN). HMAC hashes keys longer than this first.
    public static let blockByteCount = 128

    /// The SHA-512 digest of `message`.
    public static func hash(_ message: some ByteSource) -> [UInt8] {
        Sodium.ready()
        var out = [UInt8](repeating: 0, count: byteCount)
        message.withUnsafeBytes { m in
            out.withUnsafeMutableBytes { o in
                _ = crypto_hash_sha512(o.u8, m.u8, UInt64(m.count))
            }
        }
        return out
    }
}

/// HMAC-SHA512 (RFC 2104) with a key of any length, fed incrementally; key and output are secrets.
///
/// Built on `crypto_auth_hmacsha512_init/update/final` because libsodium 1.0.18's one-shot
/// `crypto_auth_hmacsha512` takes exactly 32 key bytes, while Noise's HKDF keys HMAC with its 64-byte chaining key.
/// A self-test cannot tell the two apart; RFC 4231's vectors and the cross-check against another Noise
/// implementation can.
public struct HMACSHA512: ~Copyable {
    /// Output length: 64 bytes.
    public static let byteCount = 64

    private let state: UnsafeMutablePointer<crypto_auth_hmacsha512_state>

    /// An HMAC keyed with `key` (any length; keys longer than 128 bytes are hashed first, as RFC 2104 says).
    public init(key: SecretBytes) {
        Sodium.ready()
        state = .allocate(capacity: 1)
        key.withUnsafeBytes { k in
            _ = crypto_auth_hmacsha512_init(state, k.u8, k.count)
        }
    }

    /// An HMAC keyed with public or test bytes (any length).
    public init(key: some ByteSource) {
        Sodium.ready()
        state = .allocate(capacity: 1)
        key.withUnsafeBytes { k in
            _ = crypto_auth_hmacsha512_init(state, k.u8, k.count)
        }
    }

    deinit {
        // The state holds key-derived pads; wipe them.
        sodium_memzero(state, MemoryLayout<crypto_auth_hmacsha512_state>.size)
        state.deallocate()
    }

    /// Feeds `bytes` into the MAC.
    public mutating func update(_ bytes: some ByteSource) {
        bytes.withUnsafeBytes { b in
            _ = crypto_auth_hmacsha512_update(state, b.u8, UInt64(b.count))
        }
    }

    /// Feeds secret bytes into the MAC without copying them out.
    public mutating func update(_ secret: SecretBytes) {
        secret.withUnsafeBytes { b in
            _ = crypto_auth_hmacsha512_update(state, b.u8, UInt64(b.count))
        }
    }

    /// Finishes and returns the 64-byte MAC as a secret (in Noise's HKDF every MAC is key material).
    public consuming func finalize() -> SecretBytes {
        SecretBytes(count: Self.byteCount) { out in
            _ = crypto_auth_hmacsha512_final(state, out.u8)
        }
    }

    /// The MAC of `message` under `key` in one call, as plain bytes (for tests and non-secret uses).
    public static func authenticate(_ message: some ByteSource, key: some ByteSource) -> [UInt8] {
        var mac = HMACSHA512(key: key)
        mac.update(message)
        return mac.finalize().exposedCopy()
    }
}
