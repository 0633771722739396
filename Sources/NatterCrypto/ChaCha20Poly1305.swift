import CSodium

/// ChaCha20-Poly1305 (IETF, RFC 8439) with Noise's counter nonces: the cipher of the link handshake and transport.
///
/// Unlike `AEAD` (XChaCha20 with random 24-byte nonces, for records stored forever), a Noise link numbers its
/// messages, so the 12-byte nonce is 4 zero bytes followed by the 64-bit message counter, little-endian, exactly as
/// the Noise specification's `ChaChaPoly` cipher functions say. A counter must never repeat under one key; the
/// Noise cipher state guarantees that.
public enum ChaCha20Poly1305 {
    /// Bytes the tag adds to every ciphertext: 16.
    public static var tagBytes: Int { Int(crypto_aead_chacha20poly1305_ietf_abytes()) }
    /// Nonce length: 12 bytes.
    public static var nonceBytes: Int { Int(crypto_aead_chacha20poly1305_ietf_npubbytes()) }

    /// The 12-byte nonce for `counter`: `00 00 00 00 || counter as u64 little-endian`.
    public static func nonce(counter: UInt64) -> [UInt8] {
        var nonce = [UInt8](repeating: 0, count: 4)
        withUnsafeBytes(of: counter.littleEndian) { nonce.append(contentsOf: $0) }
        return nonce
    }

    /// Encrypts `plaintext` under `key` with the nonce of `counter`, authenticating `associatedData` too.
    public static func seal(
        _ plaintext: some ByteSource, key: SymmetricKey, counter: UInt64, associatedData: some ByteSource
    ) -> [UInt8] {
        Sodium.ready()
        let nonce = nonce(counter: counter)
        return plaintext.withUnsafeBytes { m in
            associatedData.withUnsafeBytes { ad in
                var out = [UInt8](repeating: 0, count: m.count + tagBytes)
                var outLength: UInt64 = 0
                key.secret.withUnsafeBytes { k in
                    _ = crypto_aead_chacha20poly1305_ietf_encrypt(
                        &out, &outLength, m.u8, UInt64(m.count), ad.u8, UInt64(ad.count), nil, nonce, k.u8)
                }
                return out
            }
        }
    }

    /// Decrypts and verifies; throws `.authenticationFailed` for a wrong key, counter or associated data, or any
    /// altered bit.
    public static func open(
        _ ciphertext: some ByteSource, key: SymmetricKey, counter: UInt64, associatedData: some ByteSource
    ) throws(CryptoError) -> [UInt8] {
        Sodium.ready()
        let nonce = nonce(counter: counter)
        let plaintext: [UInt8]? = ciphertext.withUnsafeBytes { c in
            associatedData.withUnsafeBytes { ad in
                guard c.count >= tagBytes else { return nil }
                var out = [UInt8](repeating: 0, count: c.count - tagBytes)
                var outLength: UInt64 = 0
                let status = key.secret.withUnsafeBytes { k in
                    crypto_aead_chacha20poly1305_ietf_decrypt(
                        &out, &outLength, nil, c.u8, UInt64(c.count), ad.u8, UInt64(ad.count), nonce, k.u8)
                }
                return status == 0 ? out : nil
            }
        }
        guard let plaintext else { throw .authenticationFailed }
        return plaintext
    }
}

extension SymmetricKey {
    /// The key made of the first 32 bytes of a longer secret: Noise truncates its 64-byte HKDF outputs this way
    /// when HASHLEN is 64.
    public init(prefixOf secret: SecretBytes) {
        precondition(secret.count >= Self.byteCount, "a symmetric key needs 32 bytes")
        let prefix = SecretBytes(count: Self.byteCount) { out in
            secret.withUnsafeBytes { source in
                out.copyMemory(from: UnsafeRawBufferPointer(rebasing: source[0..<Self.byteCount]))
            }
        }
        self.init(secret: prefix)
    }
}
