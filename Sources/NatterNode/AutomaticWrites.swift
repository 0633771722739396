import NatterModel
import NatterStore

/// When this node writes on its own, as policy (SPEC F7, F8; DESIGN §4): delivered and read receipts, and the
/// re-keys the rules make its duty. The same for a headless node, the lab and the REPL, since the core decides.
public struct ReceiptConfiguration: Sendable, Equatable {
    /// Whether the node writes receipts and due re-keys at all (the lab's "messages only" setting turns it off).
    public var enabled = true
    /// The wait after the first message that calls for a receipt, so that one receipt covers a burst.
    public var delay: Duration = .milliseconds(150)
    /// The least time between two receipts of one conversation while messages keep arriving: a receipt is a marker
    /// ("up to here"), so one per interval covers every message of it. It grows with the conversation's members
    /// (`interval(members:)`): each receipt goes to every member, so a group of n would otherwise cost n² records
    /// a second network-wide; with the interval proportional to n it costs O(n), and a two-person chat stays snappy.
    public var interval: Duration = .milliseconds(150)
    /// What each member beyond the first adds to the interval (25 members: about 2 s; 64: about 5 s).
    public var intervalPerMember: Duration = .milliseconds(80)
    /// The longest interval, however large the group: statuses never lag more than this behind.
    public var intervalMax: Duration = .seconds(10)
    /// The wait before a re-key this node is due to make (after a leave, or concurrent commits).
    public var rekeyDelay: Duration = .milliseconds(150)

    public init() {}

    /// The least time between two receipts of a conversation of `members` people.
    public func interval(members: Int) -> Duration {
        min(intervalMax, max(interval, intervalPerMember * max(0, members - 1)))
    }
}

/// The timing of the node's own automatic writes, as a pure machine: needs in (a conversation has messages past
/// this node's marks; the rules name this node to re-key), with the time; due writes out (`take`). A receipt that
/// is needed again within `interval` of the last one waits for the interval's end, so receipts per conversation
/// stay bounded however fast messages arrive, and every receipt falls on a grid of the interval on the wall clock
/// (`aligned`), so members' receipts arrive together; "read" covers "delivered" (its dependencies carry what the node
/// holds), so a conversation being viewed gets one receipt, not two.
struct AutomaticWrites {
    private struct Due {
        var at: Duration
        var read = false
        var delivered = false
        var rekey = false
    }

    /// When the last receipt of a conversation was written, and the interval that applies to it.
    private struct Last {
        var at: Duration
        var interval: Duration
    }

    /// The most conversations with a write due: a bound on the memory (beyond it, needs wait for the next refresh
    /// that names them; a node is rarely a member of this many conversations at once).
    static let conversationsMax = 4_096

    let configuration: ReceiptConfiguration
    private var due: [ConversationID: Due] = [:]
    /// When the last receipt of each conversation was written (entries older than their interval are dropped).
    private var lastReceipt: [ConversationID: Last] = [:]
    /// Each conversation's interval, as last told (`receiptNeeded`).
    private var intervals: [ConversationID: Duration] = [:]
    /// Conversations whose receipt the last `take` handed out, noted at the time it was due: the write that follows
    /// (`wrote`) does not note it again at its own, later time, which would move the next receipt off the grid.
    private var takenReceipts: Set<ConversationID> = []
    /// The conversation this node's user is viewing (receipts there say "read"; `view`).
    private(set) var viewing: ConversationID?

    /// The wall-clock time of the core's zero, in milliseconds since 1970 (`NodeConfiguration.clockOriginMillis`):
    /// receipts fall on a grid of the wall clock (`aligned`).
    private let clockOriginMillis: Int64

    init(configuration: ReceiptConfiguration, clockOriginMillis: Int64 = 0) {
        self.configuration = configuration
        self.clockOriginMillis = clockOriginMillis
    }

    /// When the next write is due.
    var nextDeadline: Duration? { due.values.map(\.at).min() }

    /// The user now views `conversation` (nil: none).
    mutating func view(_ conversation: ConversationID?) { viewing = conversation }

    /// Schedules what this node owes in a conversation it reads, from `snapshot`: a re-key when the rules name it
    /// and it would change something (`owesRekey`: no epoch matches the roster, or it can merge a head that leaves
    /// out a member), or when a commit sealed a member a key that does not open it and `SlotRepair` names this node
    /// (`owesSlotRepair`, asked only then: it reads the store); and a receipt when messages by others are past its
    /// marks — "read" when its user views the conversation, else "delivered".
    mutating func review(_ snapshot: ConversationSnapshot, me: AuthorID, now: Duration, owesSlotRepair: () -> Bool) {
        let state = snapshot.state
        guard configuration.enabled, state.exists, state.members[me] != nil, !snapshot.lockedOut else { return }
        if snapshot.owesRekey || owesSlotRepair() { rekeyNeeded(in: snapshot.id, now: now) }
        let marks = state.receipts[me]
        let members = state.members.count
        if viewing == snapshot.id, state.hasMessages(beyond: marks?.read ?? VectorClock(), viewer: me) {
            receiptNeeded(in: snapshot.id, read: true, members: members, now: now)
        } else if state.hasMessages(beyond: marks?.delivered ?? VectorClock(), viewer: me) {
            receiptNeeded(in: snapshot.id, read: false, members: members, now: now)
        }
    }

    /// Reviews `conversation` as `conversations` holds it now (`review`). A conversation the store cannot read now is
    /// reviewed again at its next refresh.
    mutating func review(
        _ conversation: ConversationID, in conversations: Conversations, me: AuthorID, now: Duration
    ) {
        // `try?`: a conversation the store cannot read now is reviewed again at its next refresh.
        guard configuration.enabled, let snapshot = try? conversations.snapshot(of: conversation) else { return }
        // `try?`: a store that cannot answer is asked again at the next refresh.
        review(snapshot, me: me, now: now) { (try? conversations.owesSlotRepair(in: conversation)) == true }
    }

    /// Reviews every conversation the store holds (at start, after a restart, when writing may resume); a notice when
    /// the store cannot list them.
    mutating func reviewAll(in conversations: Conversations, me: AuthorID, now: Duration) -> [NodeAction] {
        do {
            for conversation in try conversations.store.conversationIDs() {
                review(conversation, in: conversations, me: me, now: now)
            }
        } catch {
            return [.event(.notice("store: cannot list the conversations to review receipts (\(error))"))]
        }
        return []
    }

    /// The node wrote `intents` (`results`, in the same order): notes each conversation written in (a read receipt
    /// for `markRead`), and returns the records written.
    mutating func wrote(
        _ intents: [ConversationIntent], _ results: [Result<Authored, any Error>], now: Duration
    ) -> [Record] {
        var records = [Record]()
        for (intent, result) in zip(intents, results) {
            guard case .success(let authored) = result else { continue }
            records += authored.records
            if case .markRead = intent {
                wrote(in: authored.conversation, readReceipt: true, now: now)
            } else {
                wrote(in: authored.conversation, readReceipt: false, now: now)
            }
        }
        return records
    }

    /// A notice for each of `intents` that could not be written (`results`, in the same order).
    static func failures(
        _ intents: [ConversationIntent], _ results: [Result<Authored, any Error>]
    ) -> [NodeAction] {
        zip(intents, results).compactMap { intent, result in
            guard case .failure(let error) = result else { return nil }
            return .event(.notice("could not write \(intent): \(error)"))
        }
    }

    /// A receipt is needed in `conversation` of `members` people (`read` when its user views it, else
    /// "delivered").
    mutating func receiptNeeded(in conversation: ConversationID, read: Bool, members: Int, now: Duration) {
        guard configuration.enabled else { return }
        let interval = configuration.interval(members: members)
        var at = now + configuration.delay
        if let last = lastReceipt[conversation] { at = max(at, last.at + last.interval) }
        at = aligned(at, to: interval)
        guard var entry = due[conversation] ?? (due.count < Self.conversationsMax ? Due(at: at) : nil) else { return }
        if read { entry.read = true } else { entry.delivered = true }
        entry.at = min(entry.at, at)
        due[conversation] = entry
        intervals[conversation] = interval
    }

    /// `at`, or the first instant after it that is a whole multiple of `interval` on the wall clock. Every member of
    /// a conversation then writes its receipts at the same instants (the clocks of a LAN agree to a few
    /// milliseconds), so each node receives the members' receipts together and stores them in a few turns, not one
    /// turn each: a turn's commit, fsync and refresh cost about as much for one record as for twenty (issue 18).
    /// The bound stays one receipt per interval, and a receipt waits at most one interval more than it did.
    private func aligned(_ at: Duration, to interval: Duration) -> Duration {
        let step = max(1, interval.wholeMilliseconds)
        let wall = clockOriginMillis + at.wholeMilliseconds
        let remainder = ((wall % step) + step) % step
        return remainder == 0 ? at : at + .milliseconds(step - remainder)
    }

    /// The rules make it this node's duty to re-key `conversation`.
    mutating func rekeyNeeded(in conversation: ConversationID, now: Duration) {
        guard configuration.enabled else { return }
        let at = now + configuration.rekeyDelay
        guard var entry = due[conversation] ?? (due.count < Self.conversationsMax ? Due(at: at) : nil) else { return }
        entry.rekey = true
        entry.at = min(entry.at, at)
        due[conversation] = entry
    }

    /// This node wrote a record in `conversation` at `now`: its dependencies say what it holds, so a due
    /// "delivered" is covered; a read receipt covers "read" too.
    mutating func wrote(in conversation: ConversationID, readReceipt: Bool, now: Duration) {
        if readReceipt, takenReceipts.remove(conversation) == nil { noteReceipt(in: conversation, now: now) }
        guard var entry = due[conversation] else { return }
        entry.delivered = false
        if readReceipt { entry.read = false }
        due[conversation] = entry.read || entry.rekey ? entry : nil
    }

    /// The writes due at `now` (`all`: every one scheduled, as a node stops), in a fixed order (re-keys first: a receipt written after them uses the new epoch),
    /// each conversation at most one receipt.
    mutating func take(now: Duration, all: Bool = false) -> [ConversationIntent] {
        takenReceipts = []
        let ready = due.filter { all || $0.value.at <= now }.keys.sorted()
        guard !ready.isEmpty else { return [] }
        var rekeys = [ConversationIntent]()
        var receipts = [ConversationIntent]()
        for conversation in ready {
            let entry = due.removeValue(forKey: conversation)!
            if entry.rekey { rekeys.append(.rekey(conversation)) }
            if entry.read {
                receipts.append(.markRead(conversation))
            } else if entry.delivered {
                receipts.append(.markDelivered(conversation))
            }
            // The time it was due, not the tick's (a busy node's tick comes late): the next one keeps to the grid.
            // (`all` takes some not yet due: those count from now.)
            if entry.read || entry.delivered {
                noteReceipt(in: conversation, now: min(now, entry.at))
                takenReceipts.insert(conversation)
            }
        }
        lastReceipt = lastReceipt.filter { now - $0.value.at < $0.value.interval }
        intervals = intervals.filter { due[$0.key] != nil || lastReceipt[$0.key] != nil }
        return rekeys + receipts
    }

    private mutating func noteReceipt(in conversation: ConversationID, now: Duration) {
        lastReceipt[conversation] = Last(at: now, interval: intervals[conversation] ?? configuration.interval)
    }
}
