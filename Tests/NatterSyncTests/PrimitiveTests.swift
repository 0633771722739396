import NatterCrypto
import Testing

// Goal: show that the primitives under the Noise handshake compute the standard functions: SHA-512, HMAC-SHA512
// with keys of any length (64 bytes above all: Noise's chaining key), X25519, ChaCha20-Poly1305 with Noise's nonce,
// and Noise's Rekey. Method: published known answers (FIPS 180-2, RFC 4231, RFC 7748, RFC 8439) and values from
// Python's hashlib/hmac and `cryptography`, embedded as constants; plus a few consistency checks.
@testable import NatterSync

/// One HMAC-SHA512 known answer.
struct HMACVector: Sendable, CustomTestStringConvertible {
    let name: String
    let key: [UInt8]
    let message: [UInt8]
    let mac: String
    var testDescription: String { name }
}

@Suite("SHA-512, HMAC-SHA512, X25519, ChaCha20-Poly1305")
struct PrimitiveTests {
    // MARK: - SHA-512

    /// FIPS 180-2 appendix C ("abc", the 896-bit message) and the empty string; the 1000-byte message from
    /// Python 3.11 `hashlib.sha512(bytes(i % 251 for i in range(1000)))`.
    static let sha512Vectors: [(message: [UInt8], digest: String)] = [
        (
            [],
            "cf83e1357eefb8bdf1542850d66d8007d620e4050b5715dc83f4a921d36ce9ce"
                + "47d0d13c5d85f2b0ff8318d2877eec2f63b931bd47417a81a538327af927da3e"
        ),
        (
            Array("abc".utf8),
            "ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a"
                + "2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f"
        ),
        (
            Array(
                ("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmnhijklmnoijklmnopjklmnopqklmnopqrlmnopqrs"
                    + "mnopqrstnopqrstu").utf8),
            "8e959b75dae313da8cf4f72814fc143f8f7779c6eb9f7fa17299aeadb6889018"
                + "501d289e4900f7e4331b99dec4b5433ac7d329eeb6dd26545e96e55b874be909"
        ),
        (
            (0..<1000).map { UInt8($0 % 251) },
            "5096498d96f50f9a137c4db5b8b0cd38383ad55350fb5a98805fedc31fa1262f"
                + "1f0cf4d6f12d7ecd8dedd933a4c9126344fe22e937a8ad35fdeae1e876ae698b"
        ),
    ]

    @Test("SHA-512 known answers")
    func sha512() {
        for vector in Self.sha512Vectors {
            #expect(Hex.encode(SHA512.hash(vector.message)) == vector.digest)
        }
    }

    // MARK: - HMAC-SHA512

    /// RFC 4231 test cases 1, 2, 3, 4, 6 and 7 (case 5 truncates its output), then keys of 32, 64 and 128 bytes
    /// from Python 3.11 `hmac.new(key, message, hashlib.sha512).hexdigest()`. RFC 4231 has no 64-byte key; the
    /// 64-byte vectors are the case Noise's HKDF needs (its chaining key), and 131 bytes forces the hash-the-key-first
    /// path.
    static let hmacVectors: [HMACVector] = [
        HMACVector(
            name: "RFC 4231 case 1 (20-byte key)", key: [UInt8](repeating: 0x0b, count: 20),
            message: Array("Hi There".utf8),
            mac: "87aa7cdea5ef619d4ff0b4241a1d6cb02379f4e2ce4ec2787ad0b30545e17cde"
                + "daa833b7d6b8a702038b274eaea3f4e4be9d914eeb61f1702e696c203a126854"),
        HMACVector(
            name: "RFC 4231 case 2 (4-byte key)", key: Array("Jefe".utf8),
            message: Array("what do ya want for nothing?".utf8),
            mac: "164b7a7bfcf819e2e395fbe73b56e0a387bd64222e831fd610270cd7ea250554"
                + "9758bf75c05a994a6d034f65f8f0e6fdcaeab1a34d4a6b4b636e070a38bce737"),
        HMACVector(
            name: "RFC 4231 case 3", key: [UInt8](repeating: 0xaa, count: 20),
            message: [UInt8](repeating: 0xdd, count: 50),
            mac: "fa73b0089d56a284efb0f0756c890be9b1b5dbdd8ee81a3655f83e33b2279d39"
                + "bf3e848279a722c806b485a47e67c807b946a337bee8942674278859e13292fb"),
        HMACVector(
            name: "RFC 4231 case 4 (25-byte key)", key: (1...25).map { UInt8($0) },
            message: [UInt8](repeating: 0xcd, count: 50),
            mac: "b0ba465637458c6990e5a8c5f61d4af7e576d97ff94b872de76f8050361ee3db"
                + "a91ca5c11aa25eb4d679275cc5788063a5f19741120c4f2de2adebeb10a298dd"),
        HMACVector(
            name: "RFC 4231 case 6 (131-byte key)", key: [UInt8](repeating: 0xaa, count: 131),
            message: Array("Test Using Larger Than Block-Size Key - Hash Key First".utf8),
            mac: "80b24263c7c1a3ebb71493c1dd7be8b49b46d1f41b4aeec1121b013783f8f352"
                + "6b56d037e05f2598bd0fd2215d6a1e5295e64f73f63f0aec8b915a985d786598"),
        HMACVector(
            name: "RFC 4231 case 7 (131-byte key, long message)", key: [UInt8](repeating: 0xaa, count: 131),
            message: Array(
                ("This is a test using a larger than block-size key and a larger than block-size data. The key needs "
                    + "to be hashed before being used by the HMAC algorithm.").utf8),
            mac: "e37b6a775dc87dbaa4dfa9f96e5e3ffddebd71f8867289865df5a32d20cdc944"
                + "b6022cac3c4982b10d5eeb55c3e4de15134676fb6de0446065c97440fa8c6a58"),
        HMACVector(
            name: "32-byte key", key: (0..<32).map { UInt8($0) }, message: Array("abc".utf8),
            mac: "69d4a21e226bf0d348cb9a847c01cf24e93e8ac30d7c951704b936f82f795a62"
                + "4b470e23abd33ac8700e797f0f2a499b932bac7d283bbbb37d8fecf70d5e08a7"),
        HMACVector(
            name: "64-byte key", key: (0..<64).map { UInt8($0) }, message: Array("natter noise hkdf".utf8),
            mac: "6c929aff0d1ee5d63664d309e9fc8329945fb1b9b20df477133d2efe223eea85"
                + "fb5399334e75b39f6c03cc411d43e8bd4472eee7ac6dfe7466786f361ddd16cb"),
        HMACVector(
            name: "64-byte key, empty message", key: (0..<64).map { UInt8($0) }, message: [],
            mac: "d29b9e3f87809686f34109fbc718d6abbb09c278cf05a206adf21463e1170362"
                + "122e58272a31679720b254cbd63a7c6d696bf9283f9c6897e7d792483bb0388c"),
        HMACVector(
            name: "128-byte key (one block, not hashed)", key: (0..<128).map { UInt8($0) }, message: Array("abc".utf8),
            mac: "b63d28cd593ad7e8f0e3168367471441d9668b5fb970a620994e8e1c7b02d0d2"
                + "b17f55eb1bf5916465ae8bfcafad706e29cbe258ac4a2d4014190ec0b3abe827"),
    ]

    @Test("HMAC-SHA512 known answers", arguments: hmacVectors)
    func hmac(vector: HMACVector) {
        #expect(Hex.encode(HMACSHA512.authenticate(vector.message, key: vector.key)) == vector.mac)
        // The same with a secret key, fed in two pieces.
        var mac = HMACSHA512(key: SecretBytes(vector.key))
        let half = vector.message.count / 2
        mac.update(vector.message[..<half])
        mac.update(SecretBytes(vector.message[half...]))
        #expect(Hex.encode(mac.finalize().exposedCopy()) == vector.mac)
    }

    // MARK: - X25519

    @Test("X25519 matches RFC 7748 section 6.1, both ways")
    func x25519() throws {
        let alice = SecretBytes(hexBytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a"))
        let bob = SecretBytes(hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb"))
        let alicePublic = X25519.publicKey(secret: alice)
        let bobPublic = X25519.publicKey(secret: bob)
        #expect(Hex.encode(alicePublic) == "8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
        #expect(Hex.encode(bobPublic) == "de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
        let shared = "4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742"
        #expect(Hex.encode(try X25519.sharedSecret(secret: alice, peerPublicKey: bobPublic).exposedCopy()) == shared)
        #expect(Hex.encode(try X25519.sharedSecret(secret: bob, peerPublicKey: alicePublic).exposedCopy()) == shared)
    }

    @Test("X25519 refuses low-order keys (all-zero output) and keys of the wrong length")
    func x25519Rejections() {
        let secret = SecretBytes(counting(from: 1))
        // The point of order 1 (zero) and the order-8 point from RFC 7748's list of small-order points.
        for lowOrder in [
            [UInt8](repeating: 0, count: 32),
            hexBytes("e0eb7a7c3b41b8ae1656e3faf19fc46ada098deb9c32b1fd866205165f49b800"),
        ] {
            #expect(throws: CryptoError.weakPublicKey) {
                try X25519.sharedSecret(secret: secret, peerPublicKey: lowOrder)
            }
        }
        #expect(throws: CryptoError.invalidLength(what: "X25519 public key", expected: 32, actual: 31)) {
            try X25519.sharedSecret(secret: secret, peerPublicKey: [UInt8](repeating: 9, count: 31))
        }
    }

    // MARK: - ChaCha20-Poly1305

    @Test("the Noise nonce is four zero bytes and the counter little-endian")
    func nonceLayout() {
        #expect(ChaCha20Poly1305.nonce(counter: 0x0807_0605_0403_0201) == hexBytes("000000000102030405060708"))
        #expect(ChaCha20Poly1305.nonce(counter: 0) == [UInt8](repeating: 0, count: 12))
        #expect(ChaCha20Poly1305.nonceBytes == 12 && ChaCha20Poly1305.tagBytes == 16)
    }

    /// RFC 8439 appendix A.5: its nonce 00000000 0102030405060708 is exactly Noise's nonce for counter
    /// 0x0807060504030201, so the published vector applies unchanged.
    @Test("ChaCha20-Poly1305 matches RFC 8439 appendix A.5")
    func rfc8439() throws {
        let key = try SymmetricKey(bytes: hexBytes("1c9240a5eb55d38af333888604f6b5f0473917c1402b80099dca5cbc207075c0"))
        let associatedData = hexBytes("f33388860000000000004e91")
        let plaintext = Array(
            ("Internet-Drafts are draft documents valid for a maximum of six months and may be updated, replaced, or "
                + "obsoleted by other documents at any time. It is inappropriate to use Internet-Drafts as reference "
                + "material or to cite them other than as /\u{201C}work in progress./\u{201D}").utf8)
        // Ciphertext, then the tag (last line).
        let expected = hexBytes(
            "64a0861575861af460f062c79be643bd5e805cfd345cf389f108670ac76c8cb24c6cfc18755d43eea09ee94e382d26b0"
                + "bdb7b73c321b0100d4f03b7f355894cf332f830e710b97ce98c8a84abd0b948114ad176e008d33bd60f982b1ff37c855"
                + "9797a06ef4f0ef61c186324e2b3506383606907b6a7c02b0f9f6157b53c867e4b9166c767b804d46a59b5216cde7a4e9"
                + "9040c5a40433225ee282a1b0a06c523eaf4534d7f83fa1155b0047718cbc546a0d072b04b3564eea1b422273f548271a"
                + "0bb2316053fa76991955ebd63159434ecebb4e466dae5a1073a6727627097a1049e617d91d361094fa68f0ff77987130"
                + "305beaba2eda04df997b714d6c6f2c29a6ad5cb4022b02709b"
                + "eead9d67890cbb22392336fea1851f38")
        let counter: UInt64 = 0x0807_0605_0403_0201
        #expect(
            ChaCha20Poly1305.seal(plaintext, key: key, counter: counter, associatedData: associatedData) == expected)
        #expect(
            try ChaCha20Poly1305.open(expected, key: key, counter: counter, associatedData: associatedData) == plaintext
        )
        #expect(throws: CryptoError.authenticationFailed) {
            try ChaCha20Poly1305.open(expected, key: key, counter: counter + 1, associatedData: associatedData)
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try ChaCha20Poly1305.open(
                flippingBit(0, of: expected), key: key, counter: counter, associatedData: associatedData)
        }
        #expect(throws: CryptoError.authenticationFailed) {
            try ChaCha20Poly1305.open([UInt8](repeating: 0, count: 15), key: key, counter: 0, associatedData: [UInt8]())
        }
    }

    /// Values from Python `cryptography`: `ChaCha20Poly1305(bytes(range(32))).encrypt(b"\0" * 4 + n.to_bytes(8,
    /// "little"), plaintext, ad)`.
    @Test("ChaCha20-Poly1305 with Noise nonces matches Python cryptography; Rekey too")
    func cryptographyAnswers() throws {
        let key = try SymmetricKey(bytes: counting(from: 0))
        let sealed = ChaCha20Poly1305.seal(Array("noise".utf8), key: key, counter: 5, associatedData: Array("ad".utf8))
        #expect(Hex.encode(sealed) == "4d67ff7920c05076a204b0850366394a1051b038b3")

        // REKEY(k) = the first 32 bytes of ENCRYPT(k, 2^64 - 1, empty, 32 zero bytes). Encrypting 32 zeros at
        // counter 0 under the new key and under a key built from the expected bytes must agree.
        var cipher = CipherState(key: key)
        cipher.rekey()
        #expect(cipher.nonce == 0)
        let rekeyed = try SymmetricKey(
            bytes: hexBytes("50835543a205b22c9323f2022bc4f67d838f90e61d5ccf33c4513e01f85b5042"))
        let zeros = [UInt8](repeating: 0, count: 32)
        #expect(
            try cipher.encrypt(zeros, associatedData: [])
                == ChaCha20Poly1305.seal(zeros, key: rekeyed, counter: 0, associatedData: [UInt8]()))
    }

    // MARK: - Cipher state

    @Test("a cipher state refuses the reserved nonce 2^64 - 1, and a failed decryption keeps the nonce")
    func nonceExhaustion() throws {
        var sender = CipherState(key: try SymmetricKey(bytes: counting(from: 7)))
        var receiver = sender
        sender.setNonce(UInt64.max - 1)
        receiver.setNonce(UInt64.max - 1)
        let last = try sender.encrypt([1, 2, 3], associatedData: [])
        #expect(throws: NoiseError.nonceExhausted) { try sender.encrypt([4], associatedData: []) }

        #expect(throws: NoiseError.decryptFailed) { try receiver.decrypt(flippingBit(3, of: last), associatedData: []) }
        #expect(receiver.nonce == UInt64.max - 1)
        #expect(try receiver.decrypt(last, associatedData: []) == [1, 2, 3])
        #expect(throws: NoiseError.nonceExhausted) { try receiver.decrypt(last, associatedData: []) }
    }

    @Test("without a key a cipher state passes bytes through, as Noise specifies")
    func emptyKey() throws {
        var cipher = CipherState(key: nil)
        #expect(try cipher.encrypt([1, 2, 3], associatedData: [9]) == [1, 2, 3])
        #expect(try cipher.decrypt([4, 5], associatedData: [9]) == [4, 5])
        #expect(cipher.nonce == 0)
    }
}
