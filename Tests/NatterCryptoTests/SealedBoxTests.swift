// Goal: show that sealed boxes interoperate with another libsodium binding and open only for their recipient and
// only untouched. Method: a box sealed by PyNaCl to RFC 7748 Bob's key is opened here, then opened with the wrong
// key pair, with every bit flipped, truncated and extended; round trips cover fresh keys and the empty plaintext.
import NatterCrypto
import Testing

/// Produced with Python 3.11 and PyNaCl 1.6.2 (which bundles its own build of libsodium, so this checks interop and
/// the wire layout rather than being fully independent; the ephemeral key was random, so only opening is checked):
///
///     from nacl.public import PrivateKey, SealedBox
///     bob = PrivateKey(RFC7748_BOB_SECRET)
///     SealedBox(bob.public_key).encrypt(b"epoch key for bob").hex()
private enum SealedBoxVectors {
    static let plaintext = Array("epoch key for bob".utf8)
    static let toBob = hexBytes(
        "5b0f63ccd6469e5d9434a2d4a31dd4c5634421ef7e63c7d4bf12123dfc35e90c"
            + "901d4cb865dfa5967e81a2774471b11e11ecfcec9f8471c6debeef0d72d54e97a5")
}

@Suite("Sealed boxes (crypto_box_seal)")
struct SealedBoxTests {
    let alice: EncryptionKeyPair
    let bob: EncryptionKeyPair

    init() throws {
        alice = try EncryptionKeyPair(secret: Fixtures.rfc7748AliceSecret)
        bob = try EncryptionKeyPair(secret: Fixtures.rfc7748BobSecret)
    }

    /// The error `open` throws, or nil if the box opened.
    private func openError(_ box: [UInt8], with keyPair: EncryptionKeyPair) -> CryptoError? {
        do {
            _ = try SealedBox.open(box, with: keyPair)
            return nil
        } catch {
            return error
        }
    }

    @Test("a box sealed by PyNaCl opens to its plaintext")
    func opensForeignBox() throws {
        #expect(try SealedBox.open(SealedBoxVectors.toBob, with: bob) == SealedBoxVectors.plaintext)
        #expect(SealedBoxVectors.toBob.count == SealedBoxVectors.plaintext.count + SealedBox.overheadBytes)
    }

    @Test("the overhead is 48 bytes: ephemeral public key and tag")
    func overhead() throws {
        #expect(SealedBox.overheadBytes == 48)
        #expect(try SealedBox.seal([1, 2, 3], to: bob.publicKey).count == 3 + 48)
    }

    @Test("seal then open round-trips, for the empty plaintext too", arguments: [0, 1, 32, 1000])
    func roundTrip(length: Int) throws {
        let recipient = EncryptionKeyPair.generate()
        let plaintext = (0..<length).map { UInt8(truncatingIfNeeded: $0 &* 13 &+ 5) }
        let box = try SealedBox.seal(plaintext, to: recipient.publicKey)
        #expect(try SealedBox.open(box, with: recipient) == plaintext)
    }

    @Test("sealing twice gives different boxes (fresh ephemeral key)")
    func sealingIsRandomised() throws {
        let first = try SealedBox.seal(SealedBoxVectors.plaintext, to: bob.publicKey)
        let second = try SealedBox.seal(SealedBoxVectors.plaintext, to: bob.publicKey)
        #expect(first != second)
        #expect(first.prefix(32) != second.prefix(32))
        #expect(try SealedBox.open(first, with: bob) == SealedBoxVectors.plaintext)
        #expect(try SealedBox.open(second, with: bob) == SealedBoxVectors.plaintext)
    }

    @Test("the wrong recipient cannot open the box")
    func wrongRecipient() {
        #expect(throws: CryptoError.sealedBoxOpenFailed) { try SealedBox.open(SealedBoxVectors.toBob, with: alice) }
        #expect(throws: CryptoError.sealedBoxOpenFailed) {
            try SealedBox.open(SealedBoxVectors.toBob, with: EncryptionKeyPair.generate())
        }
    }

    @Test("flipping any bit of the box makes it unopenable")
    func everyBitMatters() {
        let box = SealedBoxVectors.toBob
        let opened = (0..<(box.count * 8)).filter { bit in
            openError(flippingBit(bit, of: box), with: bob) != .sealedBoxOpenFailed
        }
        #expect(opened.isEmpty, "tampered boxes not refused at bits \(opened)")
    }

    @Test("truncated or extended boxes do not open")
    func truncatedAndExtended() {
        let box = SealedBoxVectors.toBob
        let opened = (0..<box.count).filter { length in
            openError(Array(box.prefix(length)), with: bob) != .sealedBoxOpenFailed
        }
        #expect(opened.isEmpty, "truncated boxes not refused at lengths \(opened)")
        #expect(openError(box + [0], with: bob) == .sealedBoxOpenFailed)
        #expect(openError(Array(box.dropFirst()), with: bob) == .sealedBoxOpenFailed)
    }

    @Test("sealing to a low-order key is refused")
    func lowOrderRecipient() throws {
        // libsodium refuses to seal to a low-order key (nobody could open the box); seal reports it.
        let zero = try EncryptionPublicKey(bytes: [UInt8](repeating: 0, count: 32))
        #expect(throws: CryptoError.weakPublicKey) { try SealedBox.seal(Array("attack at dawn!!".utf8), to: zero) }
    }
}
