internal import NatterCrypto

/// Why a Noise operation failed. Internal: the link machines turn it into a `LinkError` that names the stage.
enum NoiseError: Error, Equatable {
    /// Authenticated decryption failed.
    case decryptFailed
    /// The cipher state reached nonce 2^64 - 1, which Noise reserves.
    case nonceExhausted
    /// A DH with the peer's key gave all zeros.
    case weakPublicKey
    /// The message ends before a token's bytes.
    case truncated
}

/// Noise's CipherState (specification revision 34, section 5.1): a key `k` (possibly empty) and a counter nonce `n`.
///
/// The nonce is implicit on the wire: both ends count messages, so a replayed, dropped or reordered message fails
/// authentication. A value type, so a handshake that fails leaves no half-updated state behind in its caller.
struct CipherState: Sendable {
    /// Nonce 2^64 - 1 is reserved for `rekey`; reaching it ends the cipher state.
    static let reservedNonce = UInt64.max

    private var key: SymmetricKey?
    /// The next nonce to use.
    private(set) var nonce: UInt64 = 0

    /// InitializeKey(key): a cipher state with `key` (or none) and nonce 0.
    init(key: SymmetricKey?) {
        self.key = key
    }

    /// HasKey().
    var hasKey: Bool { key != nil }

    /// SetNonce(nonce). Only tests move the nonce (to reach exhaustion without 2^64 messages).
    mutating func setNonce(_ nonce: UInt64) { self.nonce = nonce }

    /// EncryptWithAd(ad, plaintext): the ciphertext under nonce `n`, then `n += 1`; the plaintext itself when there
    /// is no key.
    mutating func encrypt(_ plaintext: some ByteSource, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return plaintext.withUnsafeBytes { Array($0) } }
        guard nonce != Self.reservedNonce else { throw .nonceExhausted }
        let ciphertext = ChaCha20Poly1305.seal(plaintext, key: key, counter: nonce, associatedData: associatedData)
        nonce += 1
        return ciphertext
    }

    /// DecryptWithAd(ad, ciphertext): the plaintext under nonce `n`, then `n += 1`; on failure `n` stays. The
    /// ciphertext itself when there is no key.
    mutating func decrypt(_ ciphertext: some ByteSource, associatedData: [UInt8]) throws(NoiseError) -> [UInt8] {
        guard let key else { return ciphertext.withUnsafeBytes { Array($0) } }
        guard nonce != Self.reservedNonce else { throw .nonceExhausted }
        let plaintext: [UInt8]
        do {
            plaintext = try ChaCha20Poly1305.open(
                ciphertext, key: key, counter: nonce, associatedData: associatedData)
        } catch {
            throw .decryptFailed
        }
        nonce += 1
        return plaintext
    }

    /// Rekey(): `k = REKEY(k)`, the first 32 bytes of ENCRYPT(k, 2^64 - 1, empty, 32 zero bytes). The nonce is
    /// unchanged, as the specification says.
    mutating func rekey() {
        guard let key else { preconditionFailure("Rekey on a cipher state without a key") }
        var stream = ChaCha20Poly1305.seal(
            [UInt8](repeating: 0, count: SymmetricKey.byteCount), key: key, counter: Self.reservedNonce,
            associatedData: [UInt8]())
        defer { wipe(&stream) }
        self.key = SymmetricKey(prefixOf: SecretBytes(stream))
    }
}
