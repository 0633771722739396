// Goal: show that subkeys (crypto_kdf) and network keys (the default key and Argon2id of a passphrase) are derived
// exactly as documented, so every implementation derives the same bytes. Method: known answers from Python's
// `hashlib.blake2b` with salt and personalisation (crypto_kdf's construction) and from `argon2-cffi`, with Argon2id
// run once because it takes a good fraction of a second.
import NatterCrypto
import Testing

/// Subkeys of the master key 0x00 0x01 ... 0x1f, produced with Python 3.11 (crypto_kdf_derive_from_key with a
/// 32-byte subkey is keyed BLAKE2b-256 of the empty message, salt = little-endian id padded to 16 bytes, and
/// personalisation = the 8-byte context padded to 16 bytes):
///
///     def kdf(master, id, ctx):
///         return hashlib.blake2b(b"", digest_size=32, key=master,
///                                salt=id.to_bytes(8, "little") + bytes(8), person=ctx.encode() + bytes(8)).hexdigest()
struct SubkeyVector: Sendable, CustomTestStringConvertible {
    let purpose: String
    let id: UInt64
    let subkey: String

    var testDescription: String { "\(purpose) #\(id)" }
}

/// Network-key vectors, produced with Python 3.11, `hashlib` and argon2-cffi 25.1.0:
///
///     default = hashlib.blake2b(b"natter/v1/default-network", digest_size=32).digest()
///     kdf(default, 0, "natrhand"); kdf(default, 0, "natrbeac")
///     from argon2.low_level import hash_secret_raw, Type
///     hash_secret_raw(b"correct horse battery staple", b"natter/v1/netkey", time_cost=3, memory_cost=65536,
///                     parallelism=1, hash_len=32, type=Type.ID).hex()
private enum NetworkKeyVectors {
    static let defaultKey = "b87c88ef0f6af64cbac1f4f35fef6a6c05c643dd1adc75dd9f7fd455bfe5e9e4"
    static let defaultHandshakeKey = "29bce7c21bb559c6d6e3d6c0b4705e88204dc710253175e780f17932bb54b9cf"
    static let defaultBeaconKey = "3a767fefdaa30161c548a01355127598b2ca2122dff437a0915ec9c4e3860730"
    static let passphrase = "correct horse battery staple"
    static let passphraseKey = "b8c3cdcdb2f134c471f73e895170f772b780f921d26a04abe710538e6ca533f7"
}

@Suite("Subkeys and network keys")
struct KeyDerivationTests {
    static let subkeyVectors: [SubkeyVector] = [
        SubkeyVector(
            purpose: "natrhand", id: 0, subkey: "6daec8d481c553d437379e9f39ac10130478b7098e9bbfc7e63127929767ff85"),
        SubkeyVector(
            purpose: "natrhand", id: 1, subkey: "5a035cc17bac095e5123dbf050c70ebd6547686fb5a3c7a0085bd93784853b6a"),
        SubkeyVector(
            purpose: "natrhand", id: 0x0123_4567_89ab_cdef,
            subkey: "a651ef337f653f0d3ee56732f5582385eccaf944fd154bb7d9c090f6a52afb25"),
        SubkeyVector(
            purpose: "natrbeac", id: 0, subkey: "dc696b09f63e0e7f4c926a978ee1d1c5a733a1f1cc6a3cf8c691c66d309038ee"),
        SubkeyVector(
            purpose: "natrbeac", id: 1, subkey: "ace8897caeef1982b2f73659fbcabd35814d93392e600ec07812a4aabd1ce053"),
        SubkeyVector(
            purpose: "natrbeac", id: 0x0123_4567_89ab_cdef,
            subkey: "a6b4f99345a58016e7c0fd4928310eb6a6d27e3965fa37d0091688823950f739"),
    ]

    @Test("derive(purpose:id:) is crypto_kdf_derive_from_key", arguments: subkeyVectors)
    func subkeys(vector: SubkeyVector) throws {
        let master = try SymmetricKey(bytes: Fixtures.counting32)
        let subkey = master.derive(purpose: vector.purpose, id: vector.id)
        #expect(Hex.encode(subkey.secret.exposedCopy()) == vector.subkey)
        #expect(subkey.secret.count == SymmetricKey.byteCount)
    }

    @Test("the network key's handshake and beacon keys are its natrhand and natrbeac subkeys with id 0")
    func purposeKeys() throws {
        let network = NetworkKey(key: try SymmetricKey(bytes: Fixtures.counting32))
        #expect(Hex.encode(network.handshakeKey.secret.exposedCopy()) == Self.subkeyVectors[0].subkey)
        #expect(Hex.encode(network.beaconKey.secret.exposedCopy()) == Self.subkeyVectors[3].subkey)
        let master = try SymmetricKey(bytes: Fixtures.counting32)
        #expect(master.derive(purpose: "natrhand").secret.constantTimeEquals(network.handshakeKey.secret))
    }

    @Test("the default network key is BLAKE2b-256 of natter/v1/default-network")
    func defaultNetwork() {
        let network = NetworkKey.defaultNetwork
        #expect(network.isDefault)
        #expect(Hex.encode(network.key.secret.exposedCopy()) == NetworkKeyVectors.defaultKey)
        #expect(Hex.encode(network.handshakeKey.secret.exposedCopy()) == NetworkKeyVectors.defaultHandshakeKey)
        #expect(Hex.encode(network.beaconKey.secret.exposedCopy()) == NetworkKeyVectors.defaultBeaconKey)
        #expect(network.description == "<default network key>")
    }

    @Test("the passphrase parameters are the documented ones")
    func passphraseParameters() {
        #expect(NetworkKey.passphraseSalt == Array("natter/v1/netkey".utf8))
        #expect(NetworkKey.passphraseSalt.count == 16)  // crypto_pwhash_SALTBYTES
        #expect(NetworkKey.passphraseOpsLimit == 3)
        #expect(NetworkKey.passphraseMemLimit == 64 * 1024 * 1024)  // argon2-cffi memory_cost=65536 (KiB)
    }

    /// One of the three Argon2id runs in the suite.
    @Test("fromPassphrase is Argon2id13 with the fixed salt, 3 passes and 64 MiB")
    func passphrase() throws {
        let network = try NetworkKey.fromPassphrase(NetworkKeyVectors.passphrase)
        #expect(Hex.encode(network.key.secret.exposedCopy()) == NetworkKeyVectors.passphraseKey)
        #expect(!network.isDefault)
        #expect(network.description == "<network key>")
    }

    @Test("a passphrase gives one key whatever Unicode normal form it was typed in")
    func passphraseNormalisation() throws {
        let composed = "caf\u{E9} au lait"
        let decomposed = "cafe\u{301} au lait"
        #expect(Array(composed.utf8) != Array(decomposed.utf8))
        let a = try NetworkKey.fromPassphrase(composed).key.secret
        let b = try NetworkKey.fromPassphrase(decomposed).key.secret
        #expect(a.constantTimeEquals(b))
    }

    @Test("subkeys are independent: each purpose, id and master gives another key")
    func independence() throws {
        let master = try SymmetricKey(bytes: Fixtures.counting32)
        let other = SymmetricKey.generate()
        let keys = [
            master.derive(purpose: "natrhand"), master.derive(purpose: "natrbeac"),
            master.derive(purpose: "natrhand", id: 1), master.derive(purpose: "natrhand", id: 1 << 63),
            other.derive(purpose: "natrhand"), master,
        ].map { $0.secret.exposedCopy() }
        #expect(Set(keys.map(Hex.encode)).count == keys.count)
    }

    @Test("derivation is deterministic")
    func deterministic() {
        let master = SymmetricKey.generate()
        #expect(
            master.derive(purpose: "natrbeac", id: 7).secret.constantTimeEquals(
                master.derive(purpose: "natrbeac", id: 7).secret))
        #expect(NetworkKey.generate().isDefault == false)
    }
}
