public import NatterModel

/// What changed in a conversation at one refresh, as deltas: a front end renders them as they come and never
/// re-derives a conversation to learn what changed. Built from the engine's change log (`ConversationEngine.changes`),
/// or, after a re-derivation, from the difference between the tables and the new state — so a new line costs the
/// same in a conversation of 10 lines or 100,000. Each change is reported once.
public struct ConversationDelta: Sendable, Equatable {
    public let conversation: ConversationID
    /// The conversation's details, when they changed (and at its first refresh in this process).
    public var details: ConversationDetails?
    /// Lines created, edited, deleted or retracted, in timeline order.
    public var lines: [LineChange] = []
    /// Reactions set, replaced or removed, in the order they happened (a new line carries its own).
    public var reactions: [ReactionChange] = []
    /// This node's messages whose status changed (a new message's status comes with its line).
    public var statuses: [StatusChange] = []

    public init(conversation: ConversationID) {
        self.conversation = conversation
    }

    /// Whether nothing changed that a front end shows.
    public var isEmpty: Bool { details == nil && lines.isEmpty && reactions.isEmpty && statuses.isEmpty }
}

/// A conversation as a whole: what the list, the prompt and `/members` show of it.
public struct ConversationDetails: Sendable, Equatable {
    public let kind: ConversationKind
    /// The group's own title (nil: untitled, or a direct conversation).
    public let ownTitle: String?
    /// The title as the list shows it: the group's own, else the other person's or the members' names.
    public let title: String
    public let members: [AuthorID: MemberInfo]
    public let creator: AuthorID?
    /// Whether this node is a member now.
    public let isMember: Bool
    /// Whether a commit was sealed without this node (it was removed, or left out of a new epoch).
    public let lockedOut: Bool
    /// Messages by others after this node's read receipt.
    public let unread: Int

    public var sortedMembers: [AuthorID] { members.keys.sorted() }
}

/// A line that appeared or changed.
public struct LineChange: Sendable, Equatable {
    public enum Kind: Sendable, Equatable {
        /// A line not shown before (new, or a late arrival placed in its position).
        case new
        case edited
        case deleted
        /// A line shown before that a late record invalidated (SPEC F4): marked, never dropped.
        case retracted
    }

    public let kind: Kind
    public let line: ConversationLine
}

/// Someone's reaction to a message changed.
public struct ReactionChange: Sendable, Equatable {
    public let message: RecordID
    /// Who wrote the message (a reaction to your own message is a notice elsewhere, SPEC F15).
    public let messageAuthor: AuthorID
    public let person: AuthorID
    /// The reaction now (nil: removed).
    public let reaction: Reaction?
    /// The message's reactions now, most popular first.
    public let summary: [ReactionCount]
}

/// One of this node's messages moved on (SPEC F7: statuses never go backwards).
public struct StatusChange: Sendable, Equatable {
    public let message: RecordID
    public let status: MessageStatus
}

/// What the deltas of a conversation need to remember between refreshes: the statuses of this node's messages that
/// can still change, and the last details and marks reported.
struct DeltaMemory: Sendable {
    /// This node's messages not yet read by every recipient, with the status last reported. At most
    /// `statusesTrackedMax`, the newest: older ones still show their status in `/receipts` and history, but no
    /// longer report changes live (a conversation whose members never read would otherwise grow it for ever).
    var statuses: [RecordID: MessageStatus] = [:]
    /// When each tracked message was added (for dropping the oldest).
    var tracked: [RecordID] = []
    var details: ConversationDetails?
    /// The receipts and roster statuses were last computed against: statuses change only when these do.
    var receipts: [AuthorID: ReaderMarks] = [:]
    var members: Set<AuthorID> = []

    static let statusesTrackedMax = 256

    /// Starts tracking an own message's status (it just appeared).
    mutating func track(_ message: RecordID, _ status: MessageStatus) {
        guard status.phase != .read, statuses[message] == nil else { return }
        statuses[message] = status
        tracked.append(message)
        if tracked.count > Self.statusesTrackedMax {
            let excess = tracked.count - Self.statusesTrackedMax
            for id in tracked.prefix(excess) { statuses[id] = nil }
            tracked.removeFirst(excess)
        }
    }

    /// The statuses that changed since last reported, when receipts or the roster changed; forgets final ones.
    /// A roster change can move any status; otherwise only those of messages between a member's old and new marks
    /// for the messages' author are looked at, since a status depends on nothing else (`ConversationState.status`):
    /// every message a member writes moves its marks, mostly for other people's feeds, and looking at all tracked
    /// messages each time cost a refresh up to `statusesTrackedMax` status computations.
    mutating func statusChanges(in state: ConversationState) -> [StatusChange] {
        let roster = Set(state.members.keys)
        guard state.receipts != receipts || roster != members else { return [] }
        var moved: [ClosedRange<UInt64>]? = []
        if roster == members, let author = tracked.lazy.compactMap({ state.message($0)?.author }).first {
            for member in Set(receipts.keys).union(state.receipts.keys) {
                let (before, after) = (receipts[member], state.receipts[member])
                guard before != after else { continue }
                for clock in [\ReaderMarks.delivered, \ReaderMarks.read] {
                    let (old, new) = (before?[keyPath: clock][author] ?? 0, after?[keyPath: clock][author] ?? 0)
                    if old != new { moved?.append((min(old, new) + 1)...max(old, new)) }
                }
            }
        } else {
            moved = nil  // the roster changed (or nothing is tracked): look at every one
        }
        receipts = state.receipts
        members = roster
        var changes = [StatusChange]()
        for id in tracked where statuses[id] != nil {
            if let moved {
                guard let sequence = state.message(id)?.sequence, moved.contains(where: { $0.contains(sequence) })
                else { continue }
            }
            guard let now = state.status(of: id) else {
                statuses[id] = nil
                continue
            }
            if now != statuses[id] { changes.append(StatusChange(message: id, status: now)) }
            statuses[id] = now.phase == .read ? nil : now
        }
        tracked.removeAll { statuses[$0] == nil }
        return changes
    }
}
