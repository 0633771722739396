/// A member as the rules see them at some point.
public struct MemberInfo: Hashable, Sendable {
    public var role: MemberRole
    public var flags: MemberFlags
    /// Where the add that made them a member sits in the total order (seniority for creator hand-over).
    public var joined: EntryPosition
}

/// A key epoch: opened by a commit, sealed to `roster`.
public struct EpochInfo: Hashable, Sendable {
    public let id: EpochID
    public let roster: [AuthorID]
    public let parents: [EpochID]
    public let position: EntryPosition
}

/// A message in the timeline with everything that happened to it.
public struct TimelineMessage: Hashable, Sendable {
    public let id: RecordID
    public let author: AuthorID
    public let sequence: UInt64
    public let position: EntryPosition
    /// The author's creation time, clamped so it never goes before its causal predecessors' (monotone).
    public let displayedAtMillis: Int64
    public let replyTo: RecordID?
    /// Every version kept, oldest first; the last is the current text. At most `editVersionsMax`.
    public var versions: [String]
    public var editCount: Int
    public var deleted: Bool
    /// The file a file message carries (nil for text messages, and once the message is deleted).
    public var file: FileDescriptor? = nil

    public var text: String { deleted ? "" : versions.last ?? "" }
    public var edited: Bool { editCount > 0 }
}

/// A change to the group shown apart from chat lines (SPEC F3). Reactions to these are refused.
public struct SystemEvent: Hashable, Sendable {
    public enum Change: Hashable, Sendable {
        case created(kind: ConversationKind, title: String?, members: [AuthorID])
        case added([AuthorID])
        case removed([AuthorID])
        case left
        case renamed(String?)
        case roleChanged(AuthorID, MemberRole)
        case flagsChanged(AuthorID, MemberFlags)
        case rekeyed
    }

    public let id: RecordID
    public let author: AuthorID
    public let position: EntryPosition
    public let displayedAtMillis: Int64
    public let change: Change
    /// `change` as the conversation digest writes it (its description), made once: it goes through reflection,
    /// and the digest is recomputed at every refresh.
    let digestText: String

    public init(id: RecordID, author: AuthorID, position: EntryPosition, displayedAtMillis: Int64, change: Change) {
        self.id = id
        self.author = author
        self.position = position
        self.displayedAtMillis = displayedAtMillis
        self.change = change
        digestText = "\(change)"
    }
}

/// One line of the timeline.
public enum TimelineItem: Hashable, Sendable {
    case message(TimelineMessage)
    case system(SystemEvent)

    public var id: RecordID {
        switch self {
        case .message(let message): message.id
        case .system(let event): event.id
        }
    }

    public var position: EntryPosition {
        switch self {
        case .message(let message): message.position
        case .system(let event): event.position
        }
    }
}

/// What a reader has received and read, as causal positions (vector clocks) in the conversation.
public struct ReaderMarks: Hashable, Sendable {
    /// Everything this member's node held when it last wrote anything here.
    public var delivered: VectorClock
    /// Everything this member has viewed ("read up to here").
    public var read: VectorClock
}

/// The whole derived state of one conversation: a deterministic function of the set of records held.
public struct ConversationState: Hashable, Sendable {
    public internal(set) var kind: ConversationKind?
    public internal(set) var title: String?
    public internal(set) var creator: AuthorID?
    public internal(set) var members: [AuthorID: MemberInfo] = [:]
    public internal(set) var epochs: [EpochID: EpochInfo] = [:]
    /// The epoch new records must use, or nil while a re-key is pending (`rekeyDuty` says who must do it).
    public internal(set) var currentEpoch: EpochID?
    /// Epochs that are not an ancestor of another epoch: more than one means concurrent commits.
    public internal(set) var epochHeads: [EpochID] = []
    /// The member expected to re-key when no epoch matches the roster (after a leave, or concurrent commits), or
    /// when an epoch head leaves out a member (`Derivation.rekeyDuty`): the member in the most heads, ties by the
    /// smallest identity (with no concurrency, the smallest identity among the members).
    public internal(set) var rekeyDuty: AuthorID?
    /// Messages and system events in display order: (Lamport number, record id).
    public internal(set) var timeline: [TimelineItem] = []
    /// message → person → reaction.
    public internal(set) var reactions: [RecordID: [AuthorID: Reaction]] = [:]
    public internal(set) var receipts: [AuthorID: ReaderMarks] = [:]
    /// Records this reader rejects, with the rule they broke. Every member who reads a record rejects it alike; a
    /// record under the key of no valid epoch (a rejected epoch-opening commit, or what was written under its key)
    /// is read only by those it was sealed to, so the digest leaves it out (`sharedRejections`).
    public internal(set) var rejected: [RecordID: String] = [:]
    /// For each rejected record, the epoch whose key reading it took: its own for an epoch-opening commit.
    var rejectedUnder: [RecordID: EpochID] = [:]
    /// Messages that were valid until a late record (a concurrent removal of their author) invalidated them:
    /// shown as "retracted", never silently dropped (SPEC F4). Not part of `timeline`.
    public internal(set) var retracted: [RecordID: TimelineMessage] = [:]
    /// Records this reader cannot decrypt.
    public internal(set) var unreadable: Set<RecordID> = []

    /// The rejections every member holds alike: of records under a valid epoch's key, which every member holds
    /// once the re-keys the rules owe are in (every epoch is an ancestor of a head, every head holds every member).
    /// A rejected epoch-opening commit opens no epoch, so no later epoch chains its key: a member who was not sealed
    /// it (added after it was written) never reads it, while those it was sealed to reject it (issue 17 point 9,
    /// seed 466 of ConversationConvergenceTests).
    public var sharedRejections: [RecordID: String] {
        rejected.filter { id, _ in rejectedUnder[id].map { epochs[$0] != nil } ?? true }
    }

    /// Whether `member`, holding the keys of the epochs `holds` says, should write the re-key the rules owe
    /// (`rekeyDuty`): always when no epoch matches the roster; when one does but a head leaves out a member, only if
    /// its re-key would merge something — it holds the keys of two heads, or of a head that leaves someone out. A
    /// head it was sealed a wrong key for stays a head until `SlotRepair`'s re-key chains it; re-keying meanwhile
    /// would change nothing, and would be owed again at every refresh.
    public func owesRekey(_ member: AuthorID, holding holds: (EpochID) -> Bool) -> Bool {
        guard rekeyDuty == member, members[member] != nil else { return false }
        guard currentEpoch != nil else { return true }
        let roster = Set(members.keys)
        let held = epochHeads.filter(holds)
        return held.count > 1 || held.contains { !roster.isSubset(of: epochs[$0]?.roster ?? []) }
    }

    public var exists: Bool { kind != nil }
    public var isDirect: Bool { kind == .direct }
    public var sortedMembers: [AuthorID] { members.keys.sorted() }

    /// The message with this id, if it is a valid message.
    public func message(_ id: RecordID) -> TimelineMessage? {
        guard case .message(let message) = items[id] else { return nil }
        return message
    }

    /// The timeline item with this id (a valid message or a system line), if any.
    public func item(_ id: RecordID) -> TimelineItem? { items[id] }

    /// Timeline items by id; `timeline` lists them in display order.
    var items: [RecordID: TimelineItem] = [:]
    /// Recipients of each message: members at its causal position other than its author.
    var recipientsAtSend: [RecordID: [AuthorID]] = [:]
    /// Each reader's receipts: what they covered, and when (displayed time).
    var readReceipts: [AuthorID: [(readUpTo: VectorClock, atMillis: Int64)]] = [:]
    /// The sequence numbers of each author's valid messages, ascending: unread counts and the need for a receipt
    /// come from these and the receipts in O(authors · log messages), without reading the timeline.
    var messageSequences: [AuthorID: [UInt64]] = [:]

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.kind == rhs.kind && lhs.title == rhs.title && lhs.creator == rhs.creator && lhs.members == rhs.members
            && lhs.epochs == rhs.epochs && lhs.currentEpoch == rhs.currentEpoch && lhs.timeline == rhs.timeline
            && lhs.reactions == rhs.reactions && lhs.receipts == rhs.receipts && lhs.rejected == rhs.rejected
            && lhs.rejectedUnder == rhs.rejectedUnder && lhs.unreadable == rhs.unreadable
            && lhs.rekeyDuty == rhs.rekeyDuty && lhs.epochHeads == rhs.epochHeads
            && lhs.retracted == rhs.retracted
            && lhs.readReceipts.mapValues { $0.map(\.readUpTo) } == rhs.readReceipts.mapValues { $0.map(\.readUpTo) }
            && lhs.readReceipts.mapValues { $0.map(\.atMillis) } == rhs.readReceipts.mapValues { $0.map(\.atMillis) }
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(timeline)
        hasher.combine(members)
    }
}
