// Goal: show that identities, domain-framed Ed25519 signatures and fingerprints match an independent implementation
// and that verification refuses every kind of mismatch. Method: known answers computed with Python's `cryptography`
// (OpenSSL) over `len(label) || label || message`, then wrong keys, wrong domains, every flipped signature bit, a
// sample of flipped message bits, a malleated scalar and a small-order forgery.
import NatterCrypto
import Testing

/// Vectors produced with Python 3.11 and `cryptography` 48.0.0:
///
///     from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
///     def frame(label, msg): l = label.encode(); return bytes([len(l)]) + l + msg
///     sk = Ed25519PrivateKey.from_private_bytes(bytes.fromhex(SEED))
///     sk.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw).hex()
///     sk.sign(frame("natter/v1/record", b"hello, natter")).hex()
private enum SignatureVectors {
    static let message = Array("hello, natter".utf8)
    /// TEST 1 seed, domain `natter/v1/record`, message `hello, natter`.
    static let test1RecordHello = hexBytes(
        "823ae5ec34b5355bfd5b5dbdb5ff97282b6904bd6e9d52f2ec3c918b97b1574b"
            + "29e060577a15912b9b9b92db5941da35c5af71a37c56adddc5747faecce39c04")
    /// TEST 1 seed, domain `natter/v1/record`, empty message (signed bytes: 0x10 || "natter/v1/record").
    static let test1RecordEmpty = hexBytes(
        "906fe0e6c12964a2939080ba4848ecc6521fedca9ffdeb2d9136db686f266e43"
            + "6f02aa83e97c9438ba2ce2bbc1b37183b03a5399150b94eab86b346aed1ec70c")
    /// TEST 1 seed, domain `natter/v1/enc-key`, message `hello, natter`.
    static let test1EncKeyHello = hexBytes(
        "fd1e0e7b8192a38a3385d4e11f0836372c6c1f9b5c3ca471d95978d2d4585c64"
            + "6957bd14809dc505f0840b95b585f27ad2d41a0297bd4a0ff92894ea23277809")
    /// TEST 1 seed, the empty domain label (signed bytes: 0x00 || message), message `hello, natter`.
    static let test1EmptyLabelHello = hexBytes(
        "c47bc8030b14efe41d4913b8731c75e4318f895a5f0f9604c01a6e1590c6ce27"
            + "ba808d9fd82f9e3676984f1fdf742cb94ff041936adeffdd08c40046d8f29208")
    /// TEST 2 seed, domain `natter/v1/record`, message `hello, natter`.
    static let test2RecordHello = hexBytes(
        "c13b4ba3b2d9ea76dc1a1079dddae33e0b0206841735ff876c179a033d4c1c01"
            + "e6b95e3a051dd981f756831b43d6e0b355e262a5becdf9005f2a89fef9ed5d02")
    /// RFC 8032 TEST 1's own signature over the empty message, with no framing at all.
    static let rfc8032Test1Unframed = hexBytes(
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
            + "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    /// `test1RecordHello` with S replaced by S + L (L = 2^252 + 27742317777372353535851937790883648493): the same
    /// group element, so lax verifiers accept it; OpenSSL and libsodium must not.
    static let test1RecordHelloMalleated = hexBytes(
        "823ae5ec34b5355bfd5b5dbdb5ff97282b6904bd6e9d52f2ec3c918b97b1574b"
            + "16b456b49478a38371388a7e383bb94ac5af71a37c56adddc5747faecce39c14")
}

@Suite("Ed25519 identities and domain-framed signatures")
struct SigningTests {
    let test1: IdentityKeyPair
    let test2: IdentityKeyPair

    init() throws {
        test1 = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        test2 = try IdentityKeyPair(seed: Fixtures.rfc8032Test2Seed)
    }

    // MARK: - Known answers

    @Test("the seed determines the RFC 8032 public key")
    func publicKeyFromSeed() {
        #expect(test1.publicKey.bytes == Fixtures.rfc8032Test1PublicKey)
        #expect(test2.publicKey.bytes == Fixtures.rfc8032Test2PublicKey)
        #expect(test1.seed.exposedCopy() == Fixtures.rfc8032Test1Seed)
    }

    @Test("signatures equal the independent ones over len(label) || label || message")
    func knownSignatures() {
        let message = SignatureVectors.message
        #expect(test1.sign(message, in: .record).bytes == SignatureVectors.test1RecordHello)
        #expect(test1.sign([UInt8](), in: .record).bytes == SignatureVectors.test1RecordEmpty)
        #expect(test1.sign(message, in: .encryptionKey).bytes == SignatureVectors.test1EncKeyHello)
        #expect(test1.sign(message, in: SignatureDomain("")).bytes == SignatureVectors.test1EmptyLabelHello)
        #expect(test2.sign(message, in: .record).bytes == SignatureVectors.test2RecordHello)
    }

    @Test("independently made signatures verify")
    func knownSignaturesVerify() throws {
        let message = SignatureVectors.message
        let key1 = test1.publicKey
        #expect(
            key1.isValidSignature(try Signature(bytes: SignatureVectors.test1RecordHello), for: message, in: .record))
        #expect(
            key1.isValidSignature(try Signature(bytes: SignatureVectors.test1RecordEmpty), for: [UInt8](), in: .record))
        #expect(
            key1.isValidSignature(
                try Signature(bytes: SignatureVectors.test1EncKeyHello), for: message, in: .encryptionKey))
        #expect(
            key1.isValidSignature(
                try Signature(bytes: SignatureVectors.test1EmptyLabelHello), for: message, in: SignatureDomain("")))
        let key2 = try IdentityPublicKey(bytes: Fixtures.rfc8032Test2PublicKey)
        #expect(
            key2.isValidSignature(try Signature(bytes: SignatureVectors.test2RecordHello), for: message, in: .record))
    }

    @Test("the domain labels are the documented strings")
    func domainLabels() {
        #expect(SignatureDomain.record.label == "natter/v1/record")
        #expect(SignatureDomain.encryptionKey.label == "natter/v1/enc-key")
        #expect(SignatureDomain.record.description == "natter/v1/record")
        #expect(SignatureDomain.record == SignatureDomain("natter/v1/record"))
    }

    @Test("signing is deterministic and every byte source signs the same bytes")
    func deterministicAcrossByteSources() {
        let message = Array(("x" + String(repeating: "natter ", count: 40) + "y").utf8)
        let fromArray = test1.sign(message, in: .record)
        #expect(test1.sign(message, in: .record) == fromArray)
        let padded = [0xAA] + message + [0xBB]
        #expect(test1.sign(padded[1..<(padded.count - 1)], in: .record) == fromArray)
        let fromPointer = message.withUnsafeBytes { test1.sign($0, in: .record) }
        #expect(fromPointer == fromArray)
        #expect(test1.publicKey.isValidSignature(fromArray, for: padded[1..<(padded.count - 1)], in: .record))
    }

    @Test("a fresh identity signs and verifies a long message")
    func generatedRoundTrip() {
        let identity = IdentityKeyPair.generate()
        let message = (0..<70_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
        let signature = identity.sign(message, in: .record)
        #expect(identity.publicKey.isValidSignature(signature, for: message, in: .record))
        #expect(!identity.publicKey.isValidSignature(signature, for: message.dropLast(), in: .record))
    }

    // MARK: - Fingerprints

    /// Python, with `pk` the RFC 8032 TEST 1 public key:
    ///
    ///     d = hashlib.blake2b(pk, digest_size=32).digest()[:10].hex()
    ///     "-".join(d[i:i+4] for i in range(0, 20, 4))
    @Test("fingerprint is the first 10 bytes of BLAKE2b-256 in groups of four hex digits")
    func fingerprint() throws {
        #expect(test1.publicKey.fingerprint == "7849-ac30-4968-0be1-ef76")
        #expect(test1.publicKey.description == "identity 7849-ac30-4968-0be1-ef76")
        #expect(test1.description == "IdentityKeyPair(7849-ac30-4968-0be1-ef76, secret redacted)")
        let fresh = IdentityKeyPair.generate().publicKey.fingerprint
        #expect(fresh.count == 24)
        #expect(fresh.split(separator: "-").map(\.count) == [4, 4, 4, 4, 4])
        #expect(fresh.allSatisfy { $0 == "-" || $0.isHexDigit && !$0.isUppercase })
    }

    @Test("public keys order by their bytes")
    func publicKeyOrder() throws {
        let low = try IdentityPublicKey(bytes: [0x00] + [UInt8](repeating: 0xff, count: 31))
        let high = try IdentityPublicKey(bytes: [0x01] + [UInt8](repeating: 0x00, count: 31))
        #expect(low < high)
        #expect(!(high < low))
        #expect(test2.publicKey < test1.publicKey)  // 0x3d... < 0xd7...
    }

    // MARK: - Rejections

    @Test("another identity's key does not verify")
    func wrongKey() throws {
        let signature = try Signature(bytes: SignatureVectors.test1RecordHello)
        #expect(!test2.publicKey.isValidSignature(signature, for: SignatureVectors.message, in: .record))
        #expect(
            !IdentityKeyPair.generate().publicKey.isValidSignature(
                signature, for: SignatureVectors.message, in: .record))
    }

    @Test("a signature made in one domain is invalid in every other")
    func wrongDomain() throws {
        let key = test1.publicKey
        let message = SignatureVectors.message
        let record = try Signature(bytes: SignatureVectors.test1RecordHello)
        #expect(!key.isValidSignature(record, for: message, in: .encryptionKey))
        #expect(!key.isValidSignature(record, for: message, in: SignatureDomain("")))
        #expect(!key.isValidSignature(record, for: message, in: SignatureDomain("natter/v1/recorD")))
        #expect(!key.isValidSignature(record, for: message, in: SignatureDomain("natter/v2/record")))
        let encKey = try Signature(bytes: SignatureVectors.test1EncKeyHello)
        #expect(!key.isValidSignature(encKey, for: message, in: .record))
    }

    @Test("the length prefix keeps the label/message boundary unambiguous")
    func labelMessageBoundary() {
        // Without the length byte, "ab" + "c" and "a" + "bc" would sign the same bytes.
        let signature = test1.sign(Array("c".utf8), in: SignatureDomain("ab"))
        #expect(test1.publicKey.isValidSignature(signature, for: Array("c".utf8), in: SignatureDomain("ab")))
        #expect(!test1.publicKey.isValidSignature(signature, for: Array("bc".utf8), in: SignatureDomain("a")))
        #expect(!test1.publicKey.isValidSignature(signature, for: Array("abc".utf8), in: SignatureDomain("")))
    }

    @Test("a plain, unframed Ed25519 signature is never accepted")
    func unframedSignatureRejected() throws {
        // The RFC's signature over "" is valid Ed25519, but natter signs 0x00 || "" even for the empty label.
        let raw = try Signature(bytes: SignatureVectors.rfc8032Test1Unframed)
        #expect(!test1.publicKey.isValidSignature(raw, for: [UInt8](), in: SignatureDomain("")))
        #expect(!test1.publicKey.isValidSignature(raw, for: [UInt8](), in: .record))
    }

    @Test("flipping any one of the 512 signature bits invalidates it")
    func everySignatureBitMatters() throws {
        let good = SignatureVectors.test1RecordHello
        let accepted = try (0..<(Signature.byteCount * 8)).filter { bit in
            let tampered = try Signature(bytes: flippingBit(bit, of: good))
            return test1.publicKey.isValidSignature(tampered, for: SignatureVectors.message, in: .record)
        }
        #expect(accepted.isEmpty, "tampered signatures accepted at bits \(accepted)")
    }

    @Test("flipping message bits invalidates the signature")
    func messageBitsMatter() throws {
        let message = (0..<200).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let signature = test1.sign(message, in: .record)
        // Every bit of the first and last bytes, then every 13th bit in between.
        let bits = Array(0..<8) + Array(stride(from: 8, to: 199 * 8, by: 13)) + Array((199 * 8)..<(200 * 8))
        let accepted = bits.filter { bit in
            test1.publicKey.isValidSignature(signature, for: flippingBit(bit, of: message), in: .record)
        }
        #expect(accepted.isEmpty, "tampered messages accepted at bits \(accepted)")
        #expect(!test1.publicKey.isValidSignature(signature, for: message + [0], in: .record))
    }

    @Test("a malleated signature (S + L) is refused")
    func malleatedScalarRefused() throws {
        let malleated = try Signature(bytes: SignatureVectors.test1RecordHelloMalleated)
        #expect(!test1.publicKey.isValidSignature(malleated, for: SignatureVectors.message, in: .record))
    }

    @Test("the small-order key forgery (A = R = identity point, S = 0) is refused")
    func smallOrderForgeryRefused() throws {
        // With A and R the identity point and S = 0, the verification equation [S]B = R + [k]A holds for any
        // message; a strict verifier rejects small-order A and R.
        let identityPoint = [UInt8(1)] + [UInt8](repeating: 0, count: 31)
        let key = try IdentityPublicKey(bytes: identityPoint)
        let forged = try Signature(bytes: identityPoint + [UInt8](repeating: 0, count: 32))
        #expect(!key.isValidSignature(forged, for: SignatureVectors.message, in: .record))
        #expect(!key.isValidSignature(forged, for: [UInt8](), in: SignatureDomain("")))
    }

    @Test("an all-zero signature and key verify nothing")
    func zeroes() throws {
        let zeroSignature = try Signature(bytes: [UInt8](repeating: 0, count: 64))
        #expect(!test1.publicKey.isValidSignature(zeroSignature, for: SignatureVectors.message, in: .record))
        let zeroKey = try IdentityPublicKey(bytes: [UInt8](repeating: 0, count: 32))
        let real = try Signature(bytes: SignatureVectors.test1RecordHello)
        #expect(!zeroKey.isValidSignature(real, for: SignatureVectors.message, in: .record))
    }

    // MARK: - Lengths

    @Test("wrong-length seeds, keys and signatures throw invalidLength", arguments: [0, 1, 31, 33, 64])
    func wrongLengths(length: Int) {
        let bytes = [UInt8](repeating: 7, count: length)
        #expect(throws: CryptoError.invalidLength(what: "identity seed", expected: 32, actual: length)) {
            try IdentityKeyPair(seed: bytes)
        }
        #expect(throws: CryptoError.invalidLength(what: "identity public key", expected: 32, actual: length)) {
            try IdentityPublicKey(bytes: bytes)
        }
        let signatureLength = length == 64 ? 63 : length
        #expect(throws: CryptoError.invalidLength(what: "signature", expected: 64, actual: signatureLength)) {
            try Signature(bytes: [UInt8](repeating: 7, count: signatureLength))
        }
    }

    @Test("invalidLength describes itself in one line")
    func errorDescription() {
        let error = CryptoError.invalidLength(what: "signature", expected: 64, actual: 63)
        #expect(error.description == "signature must be 64 bytes, got 63")
    }
}
