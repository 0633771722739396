internal import NatterCrypto

/// Noise's HKDF (specification revision 34, section 4.3) over HMAC-SHA512, with two or three outputs.
///
/// `temp_key = HMAC(ck, ikm)`, `output1 = HMAC(temp_key, 0x01)`, `output2 = HMAC(temp_key, output1 || 0x02)`,
/// `output3 = HMAC(temp_key, output2 || 0x03)`. The chaining key is 64 bytes, which is why HMAC must take keys of
/// any length (TOOLCHAIN pitfall 18). Every output is key material, so every output stays a `SecretBytes`.
enum NoiseHKDF {
    /// HKDF(chainingKey, inputKeyMaterial, outputs) for `outputs` 2 or 3.
    static func derive(chainingKey: SecretBytes, inputKeyMaterial: SecretBytes, outputs: Int) -> [SecretBytes] {
        precondition(outputs == 2 || outputs == 3, "Noise's HKDF has two or three outputs")
        var extract = HMACSHA512(key: chainingKey)
        extract.update(inputKeyMaterial)
        let tempKey = extract.finalize()

        var results: [SecretBytes] = []
        for index in 1...outputs {
            var expand = HMACSHA512(key: tempKey)
            if let previous = results.last { expand.update(previous) }
            expand.update([UInt8(index)])
            results.append(expand.finalize())
        }
        return results
    }
}

/// Noise's SymmetricState (specification revision 34, section 5.2): the chaining key `ck`, the handshake hash `h`
/// and the handshake's cipher state.
///
/// `h` is the transcript of everything sent and received, so each side's view of the handshake is authenticated by
/// every later ciphertext; `ck` accumulates every DH and the PSK.
struct SymmetricState: Sendable {
    private var cipher: CipherState
    private var chainingKey: SecretBytes
    /// The handshake hash `h` (64 bytes). Not secret, but unique to this handshake: identity bindings sign it.
    private(set) var handshakeHash: [UInt8]

    /// InitializeSymmetric(protocol_name): `h` is the name zero-padded to HASHLEN (64) bytes if it fits, else its
    /// hash; `ck = h`; no key.
    init(protocolName: [UInt8]) {
        if protocolName.count <= SHA512.byteCount {
            handshakeHash = protocolName + [UInt8](repeating: 0, count: SHA512.byteCount - protocolName.count)
        } else {
            handshakeHash = SHA512.hash(protocolName)
        }
        chainingKey = SecretBytes(handshakeHash)
        cipher = CipherState(key: nil)
    }

    /// Whether the handshake cipher has a key yet.
    var hasKey: Bool { cipher.hasKey }

    /// MixKey(ikm): `ck, temp_k = HKDF(ck, ikm, 2)`; the cipher gets the first 32 bytes of `temp_k` (HASHLEN is 64).
    mutating func mixKey(_ inputKeyMaterial: SecretBytes) {
        let outputs = NoiseHKDF.derive(chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 2)
        chainingKey = outputs[0]
        cipher = CipherState(key: SymmetricKey(prefixOf: outputs[1]))
    }

    /// MixHash(data): `h = HASH(h || data)`.
    mutating func mixHash(_ data: some ByteSource) {
        var input = handshakeHash
        data.withUnsafeBytes { input.append(contentsOf: $0) }
        handshakeHash = SHA512.hash(input)
    }

    /// MixKeyAndHash(ikm), for the PSK: `ck, temp_h, temp_k = HKDF(ck, ikm, 3)`; MixHash(temp_h); the cipher gets
    /// the first 32 bytes of `temp_k`.
    mutating func mixKeyAndHash(_ inputKeyMaterial: SecretBytes) {
        let outputs = NoiseHKDF.derive(chainingKey: chainingKey, inputKeyMaterial: inputKeyMaterial, outputs: 3)
        chainingKey = outputs[0]
        var tempHash = outputs[1].exposedCopy()
        defer { wipe(&tempHash) }
        mixHash(tempHash)
        cipher = CipherState(key: SymmetricKey(prefixOf: outputs[2]))
    }

    /// EncryptAndHash(plaintext): encrypt with `h` as associated data, then MixHash(ciphertext).
    mutating func encryptAndHash(_ plaintext: some ByteSource) throws(NoiseError) -> [UInt8] {
        let ciphertext = try cipher.encrypt(plaintext, associatedData: handshakeHash)
        mixHash(ciphertext)
        return ciphertext
    }

    /// DecryptAndHash(ciphertext): decrypt with `h` as associated data, then MixHash(ciphertext).
    mutating func decryptAndHash(_ ciphertext: some ByteSource) throws(NoiseError) -> [UInt8] {
        let plaintext = try cipher.decrypt(ciphertext, associatedData: handshakeHash)
        mixHash(ciphertext)
        return plaintext
    }

    /// Split(): `temp_k1, temp_k2 = HKDF(ck, empty, 2)`, each truncated to 32 bytes; the first cipher carries the
    /// initiator's messages, the second the responder's.
    func split() -> (initiatorToResponder: CipherState, responderToInitiator: CipherState) {
        let empty = SecretBytes([UInt8]())
        let outputs = NoiseHKDF.derive(chainingKey: chainingKey, inputKeyMaterial: empty, outputs: 2)
        return (
            CipherState(key: SymmetricKey(prefixOf: outputs[0])),
            CipherState(key: SymmetricKey(prefixOf: outputs[1]))
        )
    }
}
