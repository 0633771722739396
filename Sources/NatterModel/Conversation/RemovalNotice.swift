public import NatterCrypto

/// The notice of a removal commit (docs/protocol.md §10.2, form 4; why: docs/decisions/0010-removal-notice.md).
///
/// A removal opens an epoch sealed only to the members who stay, so without more the members it removes could not
/// read it and would not learn they were removed. The notice makes its operation — who removed whom — readable by
/// the members it removes too, and by nobody else, without exposing the new epoch key K:
///
/// - the **notice key** N = `kdf(K, "natrnote")` (one-way: N reveals nothing of K) seals the operation, so whoever
///   holds K reads it as well: there is one copy of the operation, nothing for a second copy to disagree with;
/// - each removed member gets a **notice slot** `hint (8) ‖ N ⊕ mask (32)`, made like a key slot from the X25519 secret
///   s it shares with the commit's E (`KeySlots`), under labels of its own: the removed member computes s anyway to
///   look for its key slot, so reading the notice costs it one hash more, and a relay still learns nothing;
/// - the **check** C = BLAKE2b-256(key = N, "natter/v1/notice-check") commits the notice to one N: an unmasked N′ is
///   taken only if it gives C (a masked key has no tag of its own, and the operation's ChaCha20-Poly1305 tag alone does
///   not commit to one key). Members derive N from K and check C, so a removed member who reads the notice at all
///   reads the operation the members read, or the members reject the commit.
public enum RemovalNotice {
    public static let hintBytes = 8
    /// A notice slot: the hint and the masked notice key.
    public static let slotBytes = hintBytes + SymmetricKey.byteCount
    public static let checkBytes = 32

    /// N, the notice key of the commit whose epoch key is `key`.
    public static func key(of key: SymmetricKey) -> SymmetricKey {
        key.derive(purpose: "natrnote")
    }

    /// C, what any N′ must give to be taken for the commit's notice key.
    public static func check(of noticeKey: SymmetricKey) -> [UInt8] {
        var n = noticeKey.secret.exposedCopy()
        defer { wipe(&n) }
        return Blake2b.hash(Array("natter/v1/notice-check".utf8), outputBytes: checkBytes, key: n)
    }

    /// The hint and the mask of a notice slot, from the X25519 secret s its owner (encryption key P) shares with the
    /// commit (ephemeral key E): hint = the first 8 bytes of BLAKE2b-128(key = s, "natter/v1/notice-hint" ‖ E ‖ P),
    /// mask = BLAKE2b-256(key = s, "natter/v1/notice-mask" ‖ E ‖ P).
    static func hintAndMask(shared: SecretBytes, ephemeral: [UInt8], recipient: EncryptionPublicKey)
        -> (hint: [UInt8], mask: [UInt8])
    {
        var s = shared.exposedCopy()
        defer { wipe(&s) }
        let hint = Blake2b.hash(Array("natter/v1/notice-hint".utf8) + ephemeral + recipient.bytes, outputBytes: 16, key: s)
        let mask = Blake2b.hash(Array("natter/v1/notice-mask".utf8) + ephemeral + recipient.bytes, outputBytes: 32, key: s)
        return (Array(hint.prefix(hintBytes)), mask)
    }

    /// The notice slot of a removed member with encryption key `recipient`, in the commit of epoch key `key`.
    /// Throws for a low-order key (no secret can be agreed with it).
    public static func slot(for recipient: EncryptionPublicKey, key: SymmetricKey) throws(CryptoError) -> [UInt8] {
        let shared = try X25519.sharedSecret(
            secret: key.derive(purpose: "natrslot").secret, peerPublicKey: recipient.bytes)
        let (hint, mask) = hintAndMask(shared: shared, ephemeral: KeySlots.ephemeral(of: key), recipient: recipient)
        var n = Self.key(of: key).secret.exposedCopy()
        defer { wipe(&n) }
        return hint + zip(n, mask).map { $0 ^ $1 }
    }

    /// The notice key from our notice slot among `slots`, or nil: no slot bears our hint, or none unmasks to a key that
    /// gives `check`.
    public static func find(slots: [[UInt8]], check: [UInt8], ephemeral: [UInt8], keyPair: EncryptionKeyPair)
        -> SymmetricKey?
    {
        guard let shared = try? X25519.sharedSecret(secret: keyPair.secret, peerPublicKey: ephemeral) else {
            return nil  // a low-order ephemeral key: no slot can be for anyone
        }
        let (hint, mask) = hintAndMask(shared: shared, ephemeral: ephemeral, recipient: keyPair.publicKey)
        for slot in slots where Array(slot.prefix(hintBytes)) == hint {
            var n = zip(slot.dropFirst(hintBytes), mask).map { $0 ^ $1 }
            defer { wipe(&n) }
            let candidate = try! SymmetricKey(bytes: n)
            if Self.check(of: candidate) == check { return candidate }
        }
        return nil
    }
}
