public import NatterCrypto

/// An identity sealed under a passphrase, for moving it to another data directory or machine
/// (`natter identity export` / `import`): the identity's Ed25519 seed, its X25519 encryption secret and the network
/// key, encrypted with XChaCha20-Poly1305 under an Argon2id key of the passphrase. The file is 187 bytes; its layout
/// is in docs/protocol.md §9.3, exact enough for a second implementation.
public struct IdentityExport: Sendable {
    public let identity: LocalIdentity
    public let network: NetworkKey

    public init(identity: LocalIdentity, network: NetworkKey) {
        self.identity = identity
        self.network = network
    }

    /// The first 8 bytes of every export: ASCII `NATTERID`.
    public static let magic = Array("NATTERID".utf8)
    /// The format version this code writes and reads.
    public static let version: UInt8 = 1
    /// Key derivation 1: Argon2id v1.3.
    static let kdfArgon2id13: UInt8 = 1
    /// Argon2id passes of a new export: libsodium's "moderate" cost (`crypto_pwhash_OPSLIMIT_MODERATE`).
    public static let opsLimit: UInt64 = 3
    /// Argon2id memory of a new export: 256 MiB (`crypto_pwhash_MEMLIMIT_MODERATE`), about a second on a small
    /// machine. An export may sit on a USB stick or in a mailbox for years, so each guess must cost an attacker more
    /// than a network passphrase's does (64 MiB: `NetworkKey`).
    public static let memLimit = 256 * 1024 * 1024
    /// The plaintext: seed (32), encryption secret (32), network kind (1), network key (32).
    static let plaintextBytes = 97
    /// Magic (8), version (1), KDF (1), passes (4), memory in KiB (4), salt (16), nonce (24): the associated data.
    static let headerBytes = 58
    /// BLAKE2b-128 of everything before it: tells a damaged file from a wrong passphrase.
    static let checksumBytes = 16
    /// The whole file.
    public static let fileBytes = headerBytes + plaintextBytes + 16 + checksumBytes

    // MARK: - Sealing

    /// The file's bytes, sealed under `passphrase` with a fresh random salt and nonce.
    public func sealed(passphrase: String) throws(IdentityFileError) -> [UInt8] {
        try sealed(
            passphrase: passphrase, salt: SecureRandom.bytes(PassphraseKey.saltBytes), nonce: .random(),
            opsLimit: Self.opsLimit, memLimit: Self.memLimit)
    }

    /// The file's bytes with this salt, nonce and cost (the documented test vector fixes them).
    func sealed(
        passphrase: String, salt: [UInt8], nonce: AEADNonce, opsLimit: UInt64, memLimit: Int
    ) throws(IdentityFileError) -> [UInt8] {
        guard !passphrase.isEmpty else { throw .emptyPassphrase }
        var header = Self.magic
        header.append(Self.version)
        header.append(Self.kdfArgon2id13)
        header.appendBigEndian(UInt32(opsLimit))
        header.appendBigEndian(UInt32(memLimit / 1024))
        header += salt
        header += nonce.bytes
        let key: SymmetricKey
        do {
            key = try PassphraseKey.derive(passphrase, salt: salt, opsLimit: opsLimit, memLimit: memLimit)
        } catch {
            throw .keyDerivationFailed
        }
        var plaintext = identity.signing.seed.exposedCopy() + identity.encryption.secret.exposedCopy()
        defer { wipe(&plaintext) }
        plaintext.append(network.isDefault ? 0 : 1)
        plaintext += network.isDefault ? [UInt8](repeating: 0, count: 32) : network.key.secret.exposedCopy()
        var file = header + AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: header)
        file += Blake2b.hash(file, outputBytes: Self.checksumBytes)
        return file
    }

    // MARK: - Opening

    /// The cost and salt of a well-formed export, checked without the passphrase: a truncated, damaged or foreign
    /// file is refused before anyone is asked for a passphrase.
    public struct Sealed: Sendable {
        let bytes: [UInt8]
        let opsLimit: UInt64
        let memLimit: Int

        /// Checks everything that can be checked without the passphrase.
        public init(_ bytes: [UInt8]) throws(IdentityFileError) {
            let magic = IdentityExport.magic
            guard bytes.count > magic.count else {
                if magic.starts(with: bytes) { throw .truncated(bytes: bytes.count) }
                throw .notAnExport
            }
            guard bytes.starts(with: magic) else { throw .notAnExport }
            guard bytes[8] == IdentityExport.version else { throw .unsupportedVersion(bytes[8]) }
            guard bytes.count >= IdentityExport.fileBytes else { throw .truncated(bytes: bytes.count) }
            guard bytes.count == IdentityExport.fileBytes else {
                throw .damaged("\(bytes.count) bytes, expected \(IdentityExport.fileBytes)")
            }
            let body = Array(bytes[..<(bytes.count - IdentityExport.checksumBytes)])
            guard Blake2b.hash(body, outputBytes: IdentityExport.checksumBytes) == Array(bytes[body.count...]) else {
                throw .damaged("its checksum does not match")
            }
            guard bytes[9] == IdentityExport.kdfArgon2id13 else { throw .damaged("unknown key derivation \(bytes[9])") }
            opsLimit = UInt64(bytes.bigEndianUInt32(at: 10))
            memLimit = Int(bytes.bigEndianUInt32(at: 14)) * 1024
            guard (PassphraseKey.opsLimitMin...PassphraseKey.opsLimitMax).contains(opsLimit),
                (PassphraseKey.memLimitMin...PassphraseKey.memLimitMax).contains(memLimit)
            else { throw .damaged("Argon2id cost out of range (\(opsLimit) passes, \(memLimit / 1024) KiB)") }
            self.bytes = bytes
        }

        /// The identity and network key inside, if `passphrase` is the one it was sealed with.
        public func open(passphrase: String) throws(IdentityFileError) -> IdentityExport {
            let header = Array(bytes[..<IdentityExport.headerBytes])
            let salt = Array(bytes[18..<34])
            let nonce = try! AEADNonce(bytes: Array(bytes[34..<58]))
            let key: SymmetricKey
            do {
                key = try PassphraseKey.derive(passphrase, salt: salt, opsLimit: opsLimit, memLimit: memLimit)
            } catch {
                throw .keyDerivationFailed
            }
            let ciphertext = Array(bytes[IdentityExport.headerBytes..<(bytes.count - IdentityExport.checksumBytes)])
            var plaintext: [UInt8]
            do {
                plaintext = try AEAD.open(ciphertext, key: key, nonce: nonce, associatedData: header)
            } catch {
                throw .wrongPassphrase
            }
            defer { wipe(&plaintext) }
            let networkKind = plaintext[64]
            let networkBytes = Array(plaintext[65..<97])
            guard networkKind <= 1, networkKind == 1 || networkBytes.allSatisfy({ $0 == 0 }) else {
                throw .damaged("unknown network kind \(networkKind)")
            }
            do {
                let identity = LocalIdentity(
                    signing: try IdentityKeyPair(seed: Array(plaintext[0..<32])),
                    encryption: try EncryptionKeyPair(secret: Array(plaintext[32..<64])))
                let network =
                    networkKind == 0
                    ? NetworkKey.defaultNetwork : NetworkKey(key: try SymmetricKey(bytes: networkBytes))
                return IdentityExport(identity: identity, network: network)
            } catch {
                throw .damaged("\(error)")
            }
        }
    }
}

/// Why an identity export could not be written or read: each is one line a person can act on.
public enum IdentityFileError: Error, Sendable, Equatable, CustomStringConvertible {
    case notAnExport
    case truncated(bytes: Int)
    case unsupportedVersion(UInt8)
    case damaged(String)
    case wrongPassphrase
    case emptyPassphrase
    case keyDerivationFailed

    public var description: String {
        switch self {
        case .notAnExport: "this is not a natter identity export (it does not start with NATTERID)"
        case .truncated(let bytes):
            "the identity export is truncated (\(bytes) of \(IdentityExport.fileBytes) bytes): copy it again"
        case .unsupportedVersion(let version):
            "the identity export has format version \(version); this natter reads version \(IdentityExport.version)"
        case .damaged(let reason): "the identity export is damaged (\(reason)): copy it again"
        case .wrongPassphrase: "wrong passphrase for this identity export"
        case .emptyPassphrase: "the passphrase is empty"
        case .keyDerivationFailed: "Argon2id could not derive the key (not enough memory?)"
        }
    }
}

extension [UInt8] {
    fileprivate mutating func appendBigEndian(_ value: UInt32) {
        append(contentsOf: [
            UInt8(value >> 24), UInt8(value >> 16 & 0xff), UInt8(value >> 8 & 0xff), UInt8(value & 0xff),
        ])
    }

    fileprivate func bigEndianUInt32(at offset: Int) -> UInt32 {
        self[offset..<(offset + 4)].reduce(0) { $0 << 8 | UInt32($1) }
    }
}
