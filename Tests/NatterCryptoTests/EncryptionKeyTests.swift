// Goal: show that X25519 key pairs, the hashed key agreement and encryption-key certificates match independent
// computations and refuse weak keys and foreign or mis-domained certificates. Method: RFC 7748 keys with the
// agreement and a certificate signature recomputed in Python (`cryptography` + `hashlib`), then low-order peer keys,
// certificates signed by another identity, for another key or in another domain, and wrong-length inputs.
import NatterCrypto
import Testing

/// Vectors produced with Python 3.11, `cryptography` 48.0.0 and `hashlib`:
///
///     a = X25519PrivateKey.from_private_bytes(ALICE); b = X25519PrivateKey.from_private_bytes(BOB)
///     apk, bpk = (k.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw) for k in (a, b))
///     shared = a.exchange(b.public_key())                      # == b.exchange(a.public_key())
///     lo, hi = sorted([apk, bpk])
///     hashlib.blake2b(shared + lo + hi, digest_size=32).hexdigest()
///
///     sk1 = Ed25519PrivateKey.from_private_bytes(RFC8032_TEST1_SEED)
///     sk1.sign(bytes([17]) + b"natter/v1/enc-key" + pk1 + apk).hex()
private enum AgreementVectors {
    /// BLAKE2b-256(shared || Alice's public key || Bob's public key); Alice's key (0x85...) sorts first.
    static let aliceBob = hexBytes("519fb3af2f3f9e310718cf1f8bdec6e26ab64affe730f0f8b43c43b0e8ee52be")
    /// The RFC 8032 TEST 1 identity certifying Alice's RFC 7748 key.
    static let test1CertifiesAlice = hexBytes(
        "e3ba895e6e4a90c97d76ec49283490cd477be8da9f51e01c6adfd56271648bb2"
            + "306efaa45bccd60b10ccc2e98d9ffc477f2621131285a349adf1f607f24c9506")
}

@Suite("X25519 encryption keys, key agreement and certificates")
struct EncryptionKeyTests {
    let alice: EncryptionKeyPair
    let bob: EncryptionKeyPair

    init() throws {
        alice = try EncryptionKeyPair(secret: Fixtures.rfc7748AliceSecret)
        bob = try EncryptionKeyPair(secret: Fixtures.rfc7748BobSecret)
    }

    // MARK: - Known answers

    @Test("public keys are the RFC 7748 section 6.1 ones")
    func publicKeys() {
        #expect(alice.publicKey.bytes == Fixtures.rfc7748AlicePublic)
        #expect(bob.publicKey.bytes == Fixtures.rfc7748BobPublic)
        #expect(alice.secret.exposedCopy() == Fixtures.rfc7748AliceSecret)
    }

    @Test("the agreement is BLAKE2b-256(shared || lower key || higher key), the same from both sides")
    func agreementKnownAnswer() throws {
        let fromAlice = try alice.agreement(with: bob.publicKey)
        let fromBob = try bob.agreement(with: alice.publicKey)
        #expect(fromAlice.exposedCopy() == AgreementVectors.aliceBob)
        #expect(fromBob.exposedCopy() == AgreementVectors.aliceBob)
        #expect(fromAlice.constantTimeEquals(fromBob))
        // The raw X25519 output is never handed out.
        #expect(fromAlice.exposedCopy() != Fixtures.rfc7748SharedSecret)
    }

    @Test("fresh key pairs agree, and a third party gets a different secret")
    func generatedAgreement() throws {
        let a = EncryptionKeyPair.generate()
        let b = EncryptionKeyPair.generate()
        let c = EncryptionKeyPair.generate()
        let ab = try a.agreement(with: b.publicKey)
        #expect(ab.constantTimeEquals(try b.agreement(with: a.publicKey)))
        #expect(!ab.constantTimeEquals(try c.agreement(with: b.publicKey)))
        #expect(!ab.constantTimeEquals(try a.agreement(with: c.publicKey)))
        #expect(ab.count == 32)
    }

    @Test("encryption public keys order by their bytes")
    func publicKeyOrder() {
        #expect(alice.publicKey < bob.publicKey)
        #expect(!(bob.publicKey < alice.publicKey))
    }

    // MARK: - Weak keys

    /// The canonical small-order points of Curve25519 (0, 1, two of order 8) and the non-canonical encodings
    /// p - 1, p, p + 1; with a clamped scalar every one gives the all-zero shared secret.
    static let lowOrderPoints = [
        "0000000000000000000000000000000000000000000000000000000000000000",
        "0100000000000000000000000000000000000000000000000000000000000000",
        "e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800",
        "5f9c95bca3508c24b1d0b1559c83ef5b04445cc4581c8e86d8224eddd09f1157",
        "ecffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "edffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
        "eeffffffffffffffffffffffffffffffffffffffffffffffffffffffffffff7f",
    ]

    @Test("low-order peer keys are refused with weakPublicKey", arguments: lowOrderPoints)
    func lowOrderPeer(hex: String) throws {
        // Python's `cryptography` (OpenSSL) also refuses each of these with "Error computing shared key".
        let peer = try EncryptionPublicKey(bytes: hexBytes(hex))
        #expect(throws: CryptoError.weakPublicKey) { try alice.agreement(with: peer) }
        #expect(throws: CryptoError.weakPublicKey) { try EncryptionKeyPair.generate().agreement(with: peer) }
    }

    // MARK: - Certificates

    @Test("a certificate carries the independently computed signature")
    func certificateKnownAnswer() throws {
        let identity = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        let certificate = EncryptionKeyCertificate(certifying: alice.publicKey, by: identity)
        #expect(certificate.signature.bytes == AgreementVectors.test1CertifiesAlice)
        #expect(certificate.identity == identity.publicKey)
        #expect(certificate.encryptionKey == alice.publicKey)
    }

    @Test("a received certificate with the right signature is accepted")
    func certificateAccepted() throws {
        let received = try EncryptionKeyCertificate(
            identity: IdentityPublicKey(bytes: Fixtures.rfc8032Test1PublicKey),
            encryptionKey: EncryptionPublicKey(bytes: Fixtures.rfc7748AlicePublic),
            signature: Signature(bytes: AgreementVectors.test1CertifiesAlice))
        let identity = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        #expect(received == EncryptionKeyCertificate(certifying: alice.publicKey, by: identity))
    }

    @Test("a certificate signed by another identity is rejected")
    func certificateFromAnotherIdentity() throws {
        let claimed = try IdentityPublicKey(bytes: Fixtures.rfc8032Test1PublicKey)
        let impostor = try IdentityKeyPair(seed: Fixtures.rfc8032Test2Seed)
        let forged = EncryptionKeyCertificate(certifying: alice.publicKey, by: impostor)
        #expect(throws: CryptoError.invalidCertificate) {
            try EncryptionKeyCertificate(identity: claimed, encryptionKey: alice.publicKey, signature: forged.signature)
        }
        // Signing the claimed identity's own certificate bytes does not help the impostor either.
        let bytes = claimed.bytes + alice.publicKey.bytes
        #expect(throws: CryptoError.invalidCertificate) {
            try EncryptionKeyCertificate(
                identity: claimed, encryptionKey: alice.publicKey,
                signature: impostor.sign(bytes, in: .encryptionKey))
        }
    }

    @Test("a certificate for one key does not certify another")
    func certificateForAnotherKey() throws {
        let identity = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        let signature = try Signature(bytes: AgreementVectors.test1CertifiesAlice)
        #expect(throws: CryptoError.invalidCertificate) {
            try EncryptionKeyCertificate(
                identity: identity.publicKey, encryptionKey: bob.publicKey, signature: signature)
        }
    }

    @Test("the right bytes signed in another domain are not a certificate")
    func certificateInAnotherDomain() throws {
        let identity = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        let bytes = identity.publicKey.bytes + alice.publicKey.bytes
        for domain in [SignatureDomain.record, SignatureDomain(""), SignatureDomain("natter/v1/enc-keys")] {
            let signature = identity.sign(bytes, in: domain)
            #expect(throws: CryptoError.invalidCertificate) {
                try EncryptionKeyCertificate(
                    identity: identity.publicKey, encryptionKey: alice.publicKey, signature: signature)
            }
        }
        #expect(CryptoError.invalidCertificate.description == "the encryption key is not certified by this identity")
    }

    @Test("a certificate with any flipped signature bit is rejected")
    func certificateTampered() throws {
        let identity = try IdentityPublicKey(bytes: Fixtures.rfc8032Test1PublicKey)
        let good = AgreementVectors.test1CertifiesAlice
        var accepted: [Int] = []
        for bit in 0..<(Signature.byteCount * 8) {
            let signature = try Signature(bytes: flippingBit(bit, of: good))
            #expect(throws: CryptoError.invalidCertificate) {
                _ = try EncryptionKeyCertificate(
                    identity: identity, encryptionKey: self.alice.publicKey, signature: signature)
                accepted.append(bit)
            }
        }
        #expect(accepted.isEmpty, "tampered certificates accepted at bits \(accepted)")
    }

    // MARK: - Lengths

    @Test("wrong-length secrets and public keys throw invalidLength", arguments: [0, 16, 31, 33, 64])
    func wrongLengths(length: Int) {
        let bytes = [UInt8](repeating: 9, count: length)
        #expect(throws: CryptoError.invalidLength(what: "encryption secret", expected: 32, actual: length)) {
            try EncryptionKeyPair(secret: bytes)
        }
        #expect(throws: CryptoError.invalidLength(what: "encryption public key", expected: 32, actual: length)) {
            try EncryptionPublicKey(bytes: bytes)
        }
    }
}
