public import NatterCrypto

/// One record of a conversation as the rules see it: the header every node can read, and what this reader made
/// of the payload.
public struct ConversationEntry: Sendable {
    /// Decrypted meaning of the payload, or why there is none.
    public enum Body: Sendable {
        case content(ContentOperation)
        case control(ControlOperation, opening: EpochOpening?)
        /// A removal this identity reads only through its notice (it is one of those removed): it knows who removed
        /// whom, but holds not the new key, so it can check neither the commit's slots nor its parents
        /// (`RemovalNotice`).
        case notice(ControlOperation)
        /// No key for it here (a relay, a removed member, or keys not yet received).
        case unreadable
        /// A commit with a slot for this reader whose key does not open it: its author sealed us a wrong key. As
        /// unreadable, until a later commit's history chain brings the real key (`SlotRepair` says who writes it).
        case wronglySealed
        /// The key opened the envelope but the content is not a valid operation.
        case malformed(String)
    }

    public let id: RecordID
    public let header: RecordHeader
    public let body: Body

    public init(id: RecordID, header: RecordHeader, body: Body) {
        self.id = id
        self.header = header
        self.body = body
    }

    public var author: AuthorID { header.author }
    /// The deterministic total order: Lamport number, then record id. It extends the causal order.
    public var position: EntryPosition { EntryPosition(lamport: header.lamport, id: id) }

    /// Whether `self` happened before `other` (other's author had seen it). Dependencies are full vector clocks
    /// of the author's applied log, so one comparison decides.
    public func precedes(_ other: ConversationEntry) -> Bool {
        id != other.id && other.header.dependencies[author] >= header.sequence
    }

    public func isConcurrent(with other: ConversationEntry) -> Bool {
        id != other.id && !precedes(other) && !other.precedes(self)
    }
}

/// What an epoch-opening commit reveals to those who hold its key, beyond its operation: the parents it chains, and
/// whom its slots are sealed to, as roster tags (`KeySlots.rosterTag`) with the key that makes them.
public struct EpochOpening: Hashable, Sendable {
    public let parents: [EpochID]
    /// One tag per slot, in slot order (the order of the owners' identity keys).
    public let tags: [[UInt8]]
    /// The `natrrost` subkey of the epoch key: the rules compute the tags of the resulting roster with it.
    public let tagKey: [UInt8]
    /// Whether the commit carried a removal notice (form 4), checked against its key and parents: a removal must,
    /// nothing else may.
    public let announced: Bool

    public init(parents: [EpochID], tags: [[UInt8]], tagKey: [UInt8], announced: Bool) {
        self.parents = parents
        self.tags = tags
        self.tagKey = tagKey
        self.announced = announced
    }
}

/// A position in the total order: (Lamport number, record id).
public struct EntryPosition: Hashable, Comparable, Sendable {
    public let lamport: UInt64
    public let id: RecordID

    public static func < (lhs: Self, rhs: Self) -> Bool { (lhs.lamport, lhs.id) < (rhs.lamport, rhs.id) }
}

/// Who can be a conversation's genesis author: what the reading node knows about the conversation's id.
public struct ConversationContext: Sendable {
    public let conversation: ConversationID
    /// For a direct conversation this node is part of: the two identities (the id derives from their shared
    /// secret, which only they can compute). Nil for groups.
    public let directParties: Set<AuthorID>?

    public init(conversation: ConversationID, directParties: Set<AuthorID>? = nil) {
        self.conversation = conversation
        self.directParties = directParties
    }

    /// The id of a group founded by `creator` with `salt`: BLAKE2b-256("natter/v1/group" ‖ creator ‖ salt).
    /// Only the creator's genesis matches it, so a group has exactly one genesis.
    public static func groupID(creator: AuthorID, salt: [UInt8]) -> ConversationID {
        ConversationID(bytes: Blake2b.hash(Array("natter/v1/group".utf8) + creator.bytes + salt, outputBytes: 32))
    }

    /// The id of the direct conversation between two identities, from their X25519 agreement (hashed with both
    /// keys): the same on both sides, unlinkable to the pair by anyone else.
    public static func directID(agreement: SecretBytes) -> ConversationID {
        agreement.withUnsafeBytes { secret in
            ConversationID(bytes: Blake2b.hash(Array("natter/v1/direct".utf8) + Array(secret), outputBytes: 32))
        }
    }
}

extension ConversationEntry {
    /// Whether this identity has no key for it (`Body.unreadable`, `Body.wronglySealed`).
    public var isUnreadable: Bool {
        switch body {
        case .unreadable, .wronglySealed: true
        default: false
        }
    }

    /// Whether this identity read it through a removal notice only (`Body.notice`).
    public var isNotice: Bool {
        if case .notice = body { return true }
        return false
    }
}
