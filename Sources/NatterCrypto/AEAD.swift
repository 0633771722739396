import CSodium

/// A 256-bit symmetric key (epoch keys, network keys, subkeys).
public struct SymmetricKey: Sendable, CustomStringConvertible {
    public static let byteCount = 32
    /// The key material.
    public let secret: SecretBytes

    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, Self.byteCount, "symmetric key")
        self.secret = SecretBytes(bytes)
    }

    init(secret: SecretBytes) {
        precondition(secret.count == Self.byteCount)
        self.secret = secret
    }

    /// A fresh random key.
    public static func generate() -> SymmetricKey {
        SymmetricKey(secret: SecretBytes(count: byteCount) { randombytes_buf($0.u8, $0.count) })
    }

    /// A 32-byte subkey for `purpose` (exactly 8 ASCII characters, libsodium's `crypto_kdf` context) and `id`.
    /// Subkeys with different contexts or ids are independent.
    public func derive(purpose: String, id: UInt64 = 0) -> SymmetricKey {
        let context = Array(purpose.utf8)
        precondition(context.count == Int(crypto_kdf_contextbytes()), "crypto_kdf contexts are exactly 8 bytes")
        Sodium.ready()
        let sub = SecretBytes(count: Self.byteCount) { out in
            secret.withUnsafeBytes { master in
                context.withUnsafeBufferPointer { ctx in
                    _ = ctx.withMemoryRebound(to: CChar.self) { c in
                        crypto_kdf_derive_from_key(
                            out.u8, Self.byteCount, id, c.baseAddress!,
                            master.u8)
                    }
                }
            }
        }
        return SymmetricKey(secret: sub)
    }

    public var description: String { "<symmetric key>" }
}

/// A 24-byte XChaCha20-Poly1305 nonce. Random nonces of this size never collide in practice.
public struct AEADNonce: Sendable, Hashable {
    public static let byteCount = 24
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, Self.byteCount, "nonce")
        self.bytes = bytes
    }

    /// A fresh random nonce.
    public static func random() -> AEADNonce { try! AEADNonce(bytes: SecureRandom.bytes(byteCount)) }
}

/// XChaCha20-Poly1305 (IETF) authenticated encryption with associated data.
public enum AEAD {
    /// Bytes the tag adds to every ciphertext (16).
    public static var tagBytes: Int { Int(crypto_aead_xchacha20poly1305_ietf_abytes()) }

    /// Encrypts `plaintext`, authenticating `associatedData` as well (for records: the header).
    public static func seal(
        _ plaintext: [UInt8], key: SymmetricKey, nonce: AEADNonce, associatedData: [UInt8] = []
    ) -> [UInt8] {
        Sodium.ready()
        var out = [UInt8](repeating: 0, count: plaintext.count + tagBytes)
        var outLength: UInt64 = 0
        key.secret.withUnsafeBytes { k in
            _ = crypto_aead_xchacha20poly1305_ietf_encrypt(
                &out, &outLength, plaintext, UInt64(plaintext.count), associatedData, UInt64(associatedData.count),
                nil, nonce.bytes, k.u8)
        }
        return out
    }

    /// Decrypts and verifies; throws `.authenticationFailed` for a wrong key, nonce, associated data or any flipped bit.
    public static func open(
        _ ciphertext: [UInt8], key: SymmetricKey, nonce: AEADNonce, associatedData: [UInt8] = []
    ) throws(CryptoError) -> [UInt8] {
        guard ciphertext.count >= tagBytes else { throw .authenticationFailed }
        var out = [UInt8](repeating: 0, count: ciphertext.count - tagBytes)
        var outLength: UInt64 = 0
        let status = key.secret.withUnsafeBytes { k in
            crypto_aead_xchacha20poly1305_ietf_decrypt(
                &out, &outLength, nil, ciphertext, UInt64(ciphertext.count), associatedData,
                UInt64(associatedData.count), nonce.bytes, k.u8)
        }
        guard status == 0 else { throw .authenticationFailed }
        return out
    }
}
