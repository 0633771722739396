/// The key that isolates a swarm: nodes with different network keys neither discover nor talk to each other.
///
/// It is 32 random bytes, or Argon2id of a passphrase with the fixed salt and cost below (documented in
/// docs/protocol.md, so every implementation derives the same key), or the well-known default key that lets a
/// newcomer chat with zero configuration. Only subkeys are used on the wire.
public struct NetworkKey: Sendable, CustomStringConvertible {
    /// The Argon2id salt: the 16 ASCII bytes `natter/v1/netkey`. Fixed so that every node derives the same key.
    public static let passphraseSalt = Array("natter/v1/netkey".utf8)
    /// Argon2id passes. With the memory cost, about 0.15 s on a small machine: paid once, when the key is set.
    public static let passphraseOpsLimit: UInt64 = 3
    /// Argon2id memory cost: 64 MiB.
    public static let passphraseMemLimit: Int = 64 * 1024 * 1024

    public let key: SymmetricKey
    /// Whether this is the public default key (anyone can join).
    public let isDefault: Bool

    public init(key: SymmetricKey, isDefault: Bool = false) {
        self.key = key
        self.isDefault = isDefault
    }

    /// The public default network: BLAKE2b-256 of `natter/v1/default-network`.
    public static let defaultNetwork = NetworkKey(
        key: try! SymmetricKey(bytes: Blake2b.hash(Array("natter/v1/default-network".utf8), outputBytes: 32)),
        isDefault: true)

    /// A fresh random network key.
    public static func generate() -> NetworkKey { NetworkKey(key: .generate()) }

    /// The key for `passphrase` (Argon2id13 over its NFC-normalised UTF-8, salt `passphraseSalt`, 3 passes,
    /// 64 MiB). Normalising first means "café" gives one key however the accent was typed.
    public static func fromPassphrase(_ passphrase: String) throws(CryptoError) -> NetworkKey {
        NetworkKey(
            key: try PassphraseKey.derive(
                passphrase, salt: passphraseSalt, opsLimit: passphraseOpsLimit, memLimit: passphraseMemLimit))
    }

    /// The pre-shared key of the link handshake.
    public var handshakeKey: SymmetricKey { key.derive(purpose: "natrhand") }
    /// The key that encrypts and authenticates discovery beacons.
    public var beaconKey: SymmetricKey { key.derive(purpose: "natrbeac") }

    public var description: String { isDefault ? "<default network key>" : "<network key>" }
}
