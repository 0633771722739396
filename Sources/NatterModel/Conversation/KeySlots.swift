public import NatterCrypto

/// The key slots of an epoch-opening commit (docs/protocol.md §10.2; why: docs/decisions/0008-key-slots.md).
///
/// Everything derives from the new epoch key K. Its `crypto_kdf` subkey `natrslot` is the commit's ephemeral X25519
/// secret e, and E = X25519(e, base) travels in clear. Member m, with encryption key P, finds its slot by the hint
/// derived from s = X25519(e, P) = X25519(p, E), which only m (holding p) and holders of K (who know e) can compute:
/// a relay cannot test who holds a slot. The slot wraps K under a key derived from the same s. Since E is a function
/// of K, it commits the commit to one key: a key is accepted for a commit only when it gives the commit's E.
/// The roster tags under K (subkey `natrrost`) let every member check the slots' owners against the roster.
public enum KeySlots {
    /// Bytes of a slot hint: enough to tell 256 members apart (a collision only costs a second try), too short
    /// to be worth anything else.
    public static let hintBytes = 8
    /// A wrapped key: the 32-byte epoch key and the 16-byte Poly1305 tag.
    public static let wrappedKeyBytes = SymmetricKey.byteCount + 16
    public static let slotBytes = hintBytes + wrappedKeyBytes
    /// Bytes of a roster tag (one per slot, under the epoch key): as for hints.
    public static let tagBytes = 8

    /// The commit's public ephemeral key for epoch key `key`: E = X25519(e, base), e = the `natrslot` subkey of K.
    public static func ephemeral(of key: SymmetricKey) -> [UInt8] {
        X25519.publicKey(secret: key.derive(purpose: "natrslot").secret)
    }

    /// Whether `key` is the epoch key of the commit whose ephemeral key is `ephemeral`: the check every key must
    /// pass before it is used, whether it came from a slot or from a history chain (a parent key).
    public static func opens(_ key: SymmetricKey, ephemeral: [UInt8]) -> Bool {
        Self.ephemeral(of: key) == ephemeral
    }

    /// The slot for a member with encryption key `recipient`: `hint (8) ‖ wrapped key (48)`.
    static func slot(for recipient: EncryptionPublicKey, key: SymmetricKey, ephemeral: [UInt8]) throws(CryptoError)
        -> [UInt8]
    {
        let shared = try X25519.sharedSecret(
            secret: key.derive(purpose: "natrslot").secret, peerPublicKey: recipient.bytes)
        let (hint, wrapKey) = secrets(shared: shared, ephemeral: ephemeral, recipient: recipient)
        var plain = key.secret.exposedCopy()
        defer { wipe(&plain) }
        return hint + ChaCha20Poly1305.seal(plain, key: wrapKey, counter: 0, associatedData: [UInt8]())
    }

    /// The hint and the wrapping key of a slot, from the X25519 secret its owner shares with the commit:
    /// hint = the first 8 bytes of BLAKE2b-128(key = s, "natter/v1/slot-hint" ‖ E ‖ P), wrapping key =
    /// BLAKE2b-256(key = s, "natter/v1/slot-key" ‖ E ‖ P).
    static func secrets(shared: SecretBytes, ephemeral: [UInt8], recipient: EncryptionPublicKey)
        -> (hint: [UInt8], wrapKey: SymmetricKey)
    {
        var s = shared.exposedCopy()
        defer { wipe(&s) }
        let hint = Blake2b.hash(Array("natter/v1/slot-hint".utf8) + ephemeral + recipient.bytes, outputBytes: 16, key: s)
        var wrap = Blake2b.hash(Array("natter/v1/slot-key".utf8) + ephemeral + recipient.bytes, outputBytes: 32, key: s)
        defer { wipe(&wrap) }
        return (Array(hint.prefix(hintBytes)), try! SymmetricKey(bytes: wrap))
    }

    /// What a commit's slots hold for the owner of `keyPair`.
    public enum Opening: Sendable {
        /// No slot bears our hint: the commit was not sealed to us.
        case none
        /// Our slot's key, checked against the commit's ephemeral key.
        case key(SymmetricKey)
        /// A slot bears our hint but holds no key that opens the commit: its author sealed us a wrong key.
        case wrong
    }

    /// Opens our slot in a commit with ephemeral key `ephemeral` and `slots` (each `hint ‖ wrapped key`).
    public static func open(
        slots: [(hint: [UInt8], wrapped: [UInt8])], ephemeral: [UInt8], keyPair: EncryptionKeyPair
    ) -> Opening {
        guard let shared = try? X25519.sharedSecret(secret: keyPair.secret, peerPublicKey: ephemeral) else {
            return .none  // a low-order ephemeral key: no slot can be for anyone
        }
        let (hint, wrapKey) = secrets(shared: shared, ephemeral: ephemeral, recipient: keyPair.publicKey)
        var found = false
        for slot in slots where slot.hint == hint {
            found = true
            guard var bytes = try? ChaCha20Poly1305.open(slot.wrapped, key: wrapKey, counter: 0, associatedData: [UInt8]())
            else { continue }
            defer { wipe(&bytes) }
            let key = try! SymmetricKey(bytes: bytes)
            if opens(key, ephemeral: ephemeral) { return .key(key) }
        }
        return found ? .wrong : .none
    }

    /// The tag of `member` in the roster of the commit whose epoch key gives `tagKey` (`rosterTagKey`): the first 8
    /// bytes of BLAKE2b-128(key = the `natrrost` subkey of K, member public key).
    public static func rosterTag(_ member: AuthorID, tagKey: [UInt8]) -> [UInt8] {
        Array(Blake2b.hash(member.bytes, outputBytes: 16, key: tagKey).prefix(tagBytes))
    }

    /// The key of the roster tags of epoch key `key`.
    public static func rosterTagKey(_ key: SymmetricKey) -> [UInt8] {
        key.derive(purpose: "natrrost").secret.exposedCopy()
    }

    /// The members of `roster` whose slot in a commit with epoch key `key` is not the one they should have: wrong,
    /// missing, or someone else's. Slots are in the order of their owners' identity keys, so slot i belongs to the
    /// i-th member; each slot is deterministic, so it is rebuilt and compared. Needs the members' encryption keys
    /// (their profiles), which the rules do not have: this is how a member who holds the key detects that another
    /// was sealed a wrong one (`SlotRepair`).
    public static func wronglySealed(
        slots: [(hint: [UInt8], wrapped: [UInt8])], key: SymmetricKey, roster: [(AuthorID, EncryptionPublicKey)]
    ) -> [AuthorID] {
        let ephemeral = ephemeral(of: key)
        return roster.sorted { $0.0 < $1.0 }.enumerated().compactMap { index, member in
            guard index < slots.count,
                let expected = try? slot(for: member.1, key: key, ephemeral: ephemeral),
                expected == slots[index].hint + slots[index].wrapped
            else { return member.0 }
            return nil
        }
    }
}

extension EpochOpening {
    /// What an epoch-opening commit sealed to `roster` with `key` reveals to a member: its parents and the roster
    /// tags of its slots, and whether it carries a removal notice (what the author checks its own commit with before
    /// writing it).
    public init(parents: [EpochID], roster: some Collection<AuthorID>, key: SymmetricKey, announced: Bool) {
        let tagKey = KeySlots.rosterTagKey(key)
        self.init(
            parents: parents, tags: roster.sorted().map { KeySlots.rosterTag($0, tagKey: tagKey) }, tagKey: tagKey,
            announced: announced)
    }
}
