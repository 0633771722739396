// Goal: show that AEAD is XChaCha20-Poly1305 (IETF) exactly as specified and that opening refuses anything but the
// untouched ciphertext under the same key, nonce and associated data. Method: the draft-irtf-cfrg-xchacha A.3.1
// vector (reproduced in Python with a hand-written HChaCha20 plus `cryptography`'s ChaCha20-Poly1305), then wrong
// keys, nonces and associated data, every flipped bit of a short ciphertext, every truncation, and wrong lengths.
import NatterCrypto
import Testing

/// draft-irtf-cfrg-xchacha-03, appendix A.3.1. Reproduced independently of libsodium with Python 3.11:
///
///     def hchacha20(key, n16): ...   # 20 ChaCha rounds, output words 0..3 and 12..15 (checked against the
///                                    # draft's section 2.2.1 HChaCha20 vector)
///     def xseal(key, nonce, m, ad):
///         return ChaCha20Poly1305(hchacha20(key, nonce[:16])).encrypt(bytes(4) + nonce[16:], m, ad)
///
/// and cross-checked with PyNaCl's `crypto_aead_xchacha20poly1305_ietf_encrypt`. The empty-message tag comes from the
/// same `xseal(key, nonce, b"", b"")`.
private enum XChaChaVectors {
    static let key = hexBytes("808182838485868788898a8b8c8d8e8f909192939495969798999a9b9c9d9e9f")
    static let nonce = hexBytes("404142434445464748494a4b4c4d4e4f5051525354555657")
    static let associatedData = hexBytes("50515253c0c1c2c3c4c5c6c7")
    static let plaintext = Array(
        ("Ladies and Gentlemen of the class of '99: If I could offer you only one tip for the future, "
            + "sunscreen would be it.").utf8)
    /// Ciphertext followed by the 16-byte tag `c0875924c1c7987947deafd8780acf49`.
    static let sealed = hexBytes(
        "bd6d179d3e83d43b9576579493c0e939572a1700252bfaccbed2902c21396cbb"
            + "731c7f1b0b4aa6440bf3a82f4eda7e39ae64c6708c54c216cb96b72e1213b452"
            + "2f8c9ba40db5d945b11b69b982c1bb9e3f3fac2bc369488f76b2383565d3fff9"
            + "21f9664c97637da9768812f615c68b13b52e"
            + "c0875924c1c7987947deafd8780acf49")
    /// The tag alone: empty plaintext, empty associated data, same key and nonce.
    static let emptySealed = hexBytes("1dac8f73146d1e9da796cb7f7221a5df")
}

@Suite("XChaCha20-Poly1305 AEAD")
struct AEADTests {
    let key: SymmetricKey
    let nonce: AEADNonce

    init() throws {
        key = try SymmetricKey(bytes: XChaChaVectors.key)
        nonce = try AEADNonce(bytes: XChaChaVectors.nonce)
    }

    /// The error `open` throws, or nil if it opened.
    private func openError(
        _ sealed: [UInt8], key: SymmetricKey? = nil, nonce: AEADNonce? = nil, associatedData: [UInt8]
    ) -> CryptoError? {
        do {
            _ = try AEAD.open(sealed, key: key ?? self.key, nonce: nonce ?? self.nonce, associatedData: associatedData)
            return nil
        } catch {
            return error
        }
    }

    // MARK: - Known answers

    @Test("sealing reproduces draft-irtf-cfrg-xchacha A.3.1")
    func sealKnownAnswer() {
        let sealed = AEAD.seal(
            XChaChaVectors.plaintext, key: key, nonce: nonce, associatedData: XChaChaVectors.associatedData)
        #expect(sealed == XChaChaVectors.sealed)
        #expect(AEAD.tagBytes == 16)
    }

    @Test("opening the A.3.1 ciphertext gives the plaintext")
    func openKnownAnswer() throws {
        let opened = try AEAD.open(
            XChaChaVectors.sealed, key: key, nonce: nonce, associatedData: XChaChaVectors.associatedData)
        #expect(opened == XChaChaVectors.plaintext)
    }

    @Test("empty plaintext and empty associated data give just the tag, which opens to nothing")
    func emptyKnownAnswer() throws {
        #expect(AEAD.seal([], key: key, nonce: nonce) == XChaChaVectors.emptySealed)
        #expect(try AEAD.open(XChaChaVectors.emptySealed, key: key, nonce: nonce) == [])
    }

    @Test("fresh keys and nonces round-trip", arguments: [0, 1, 15, 16, 17, 64, 4096])
    func roundTrip(length: Int) throws {
        let key = SymmetricKey.generate()
        let nonce = AEADNonce.random()
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 29) }
        let header: [UInt8] = [1, 2, 3]
        let sealed = AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: header)
        #expect(sealed.count == length + AEAD.tagBytes)
        #expect(try AEAD.open(sealed, key: key, nonce: nonce, associatedData: header) == plaintext)
    }

    // MARK: - Rejections

    @Test("a wrong key does not open")
    func wrongKey() throws {
        let ad = XChaChaVectors.associatedData
        #expect(openError(XChaChaVectors.sealed, key: .generate(), associatedData: ad) == .authenticationFailed)
        for bit in [0, 7, 100, 255] {
            let nearKey = try SymmetricKey(bytes: flippingBit(bit, of: XChaChaVectors.key))
            #expect(openError(XChaChaVectors.sealed, key: nearKey, associatedData: ad) == .authenticationFailed)
        }
    }

    @Test("a wrong nonce does not open, including one differing only in the last 8 bytes")
    func wrongNonce() throws {
        let ad = XChaChaVectors.associatedData
        #expect(openError(XChaChaVectors.sealed, nonce: .random(), associatedData: ad) == .authenticationFailed)
        // Bit 0 lands in HChaCha20's input, bit 191 in the ChaCha20 nonce.
        for bit in [0, 127, 128, 191] {
            let nearNonce = try AEADNonce(bytes: flippingBit(bit, of: XChaChaVectors.nonce))
            #expect(openError(XChaChaVectors.sealed, nonce: nearNonce, associatedData: ad) == .authenticationFailed)
        }
    }

    @Test("wrong associated data does not open")
    func wrongAssociatedData() {
        let ad = XChaChaVectors.associatedData
        let sealed = XChaChaVectors.sealed
        #expect(openError(sealed, associatedData: []) == .authenticationFailed)
        #expect(openError(sealed, associatedData: ad + [0]) == .authenticationFailed)
        #expect(openError(sealed, associatedData: Array(ad.dropLast())) == .authenticationFailed)
        let flipped = (0..<(ad.count * 8)).filter { openError(sealed, associatedData: flippingBit($0, of: ad)) == nil }
        #expect(flipped.isEmpty, "tampered associated data accepted at bits \(flipped)")
        // And the other way round: data sealed without associated data does not open with some.
        #expect(openError(XChaChaVectors.emptySealed, associatedData: [0]) == .authenticationFailed)
    }

    @Test("flipping any bit of a short message's ciphertext or tag is detected")
    func everyBitOfShortMessage() {
        let ad: [UInt8] = [0xA5]
        let sealed = AEAD.seal(Array("hi!".utf8), key: key, nonce: nonce, associatedData: ad)
        #expect(sealed.count == 19)
        let accepted = (0..<(sealed.count * 8)).filter { bit in
            openError(flippingBit(bit, of: sealed), associatedData: ad) != .authenticationFailed
        }
        #expect(accepted.isEmpty, "tampered ciphertexts accepted at bits \(accepted)")
    }

    @Test("flipping one bit in each byte of the A.3.1 ciphertext is detected")
    func everyByteOfLongMessage() {
        let sealed = XChaChaVectors.sealed
        let ad = XChaChaVectors.associatedData
        let accepted = (0..<sealed.count).map { $0 * 8 + $0 % 8 }.filter { bit in
            openError(flippingBit(bit, of: sealed), associatedData: ad) != .authenticationFailed
        }
        #expect(accepted.isEmpty, "tampered ciphertexts accepted at bits \(accepted)")
    }

    @Test("every truncation, and an extension, is refused")
    func truncatedAndExtended() {
        let sealed = XChaChaVectors.sealed
        let ad = XChaChaVectors.associatedData
        let accepted = (0..<sealed.count).filter { length in
            openError(Array(sealed.prefix(length)), associatedData: ad) != .authenticationFailed
        }
        #expect(accepted.isEmpty, "truncated ciphertexts accepted at lengths \(accepted)")
        #expect(openError(sealed + [0], associatedData: ad) == .authenticationFailed)
        #expect(openError(Array(sealed.dropFirst()), associatedData: ad) == .authenticationFailed)
        #expect(CryptoError.authenticationFailed.description == "decryption failed: wrong key or the data was altered")
    }

    // MARK: - Lengths

    @Test("wrong-length keys and nonces throw invalidLength", arguments: [0, 12, 16, 31, 33])
    func wrongLengths(length: Int) {
        let bytes = [UInt8](repeating: 3, count: length)
        #expect(throws: CryptoError.invalidLength(what: "symmetric key", expected: 32, actual: length)) {
            try SymmetricKey(bytes: bytes)
        }
        #expect(throws: CryptoError.invalidLength(what: "nonce", expected: 24, actual: length)) {
            try AEADNonce(bytes: bytes)
        }
    }
}
