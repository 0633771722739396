import NatterModel

/// What a record in the ledger was written for.
public enum OperationKind: String, Sendable, CaseIterable, Comparable {
    /// `raced`: a message its author wrote at the moment it was removed, before it could know (concurrent with
    /// its removal: the rules retract it everywhere); `twin`: a message of a node's twin (a fork).
    /// `rekey`: a re-key a node wrote on its own (chat setting).
    case profile, create, message, reaction, receipt, add, remove, raced, twin, rekey

    /// Whether the workload issued it (it counts as an operation in the report).
    var isOperation: Bool {
        switch self {
        case .message, .reaction, .receipt, .add, .remove: true
        case .profile, .create, .raced, .twin, .rekey: false
        }
    }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Every record the lab had a node write, with when it was published and when each node applied it.
///
/// A record enters the ledger when its authoring call returns on a running node: it is acknowledged (durable on
/// the author's store), so the checkers demand it everywhere once the network heals. Each entry also names the
/// ledger entries it depends on (its feed predecessor and its dependency clock), so that every `applied` event
/// can be checked against causal order.
struct Ledger {
    struct Entry {
        let ref: RecordRef
        var id: RecordID { ref.id }
        let author: Int
        let kind: OperationKind
        let publishedAt: Duration
        /// Positions of the entries this record depends on: its feed predecessor and every record its dependency
        /// clock names, as far as the ledger holds them.
        let dependencies: [Int]
        /// Per node, when it applied the record (the author: at publication).
        var appliedAt: [Duration?]
        var appliedCount = 0
        /// Fixed at the heal: whether a live node holds it, so every live node must get it.
        var mustReach = false
    }

    /// A feed, as the ledger finds records by position.
    struct Feed: Hashable {
        let conversation: ConversationID
        let author: AuthorID
    }

    private(set) var entries: [Entry] = []
    private var index: [RecordID: Int] = [:]
    /// Per feed, the position of each sequence's record (twins' records included: either branch of a fork).
    private var bySequence: [Feed: [UInt64: Int]] = [:]
    /// Feeds that forked (two records at one sequence: a twin's and its original's), and from which sequence.
    private(set) var forks: [Feed: UInt64] = [:]
    /// Each branch record at a fork's sequence and the other branch's record there.
    private var otherBranch: [Int: Int] = [:]
    /// Feeds whose fork was forgotten: one branch reached no live node (`dropFork`).
    private var forgotten: Set<Feed> = []
    /// Per feed, the highest sequence held.
    private var highest: [Feed: UInt64] = [:]
    let nodes: Int

    init(nodes: Int) { self.nodes = nodes }

    var count: Int { entries.count }

    subscript(position: Int) -> Entry { entries[position] }

    func position(of id: RecordID) -> Int? { index[id] }

    @discardableResult
    mutating func add(_ record: Record, author: Int, kind: OperationKind, at time: Duration) -> Int {
        let id = record.id
        precondition(index[id] == nil, "a record is authored once")
        let header = record.header
        let feed = Feed(conversation: header.conversation, author: header.author)
        var dependencies = [Int]()
        // The feed predecessor is the record the chain names: on a forked feed, the author's own branch.
        if header.sequence > 1, let previous = index[header.previous] ?? bySequence[feed]?[header.sequence - 1] {
            dependencies.append(previous)
        }
        for dependency in header.dependencies {
            let other = Feed(conversation: header.conversation, author: dependency.author)
            if let position = bySequence[other]?[dependency.sequence] { dependencies.append(position) }
        }
        var appliedAt = [Duration?](repeating: nil, count: nodes)
        appliedAt[author] = time
        entries.append(
            Entry(
                ref: record.ref, author: author, kind: kind, publishedAt: time, dependencies: dependencies,
                appliedAt: appliedAt, appliedCount: 1))
        index[id] = entries.count - 1
        highest[feed] = max(highest[feed] ?? 0, header.sequence)
        // Two records at one sequence are a fork's branches. The original's is indexed (it replaces a twin's that came
        // first): a twin's branch that reached no live node is forgotten at the heal (`dropFork`), and the records that
        // name the feed there in their dependency clocks then name the original's.
        if let held = bySequence[feed]?[header.sequence] {
            forks[feed] = min(forks[feed] ?? .max, header.sequence)
            otherBranch[held] = entries.count - 1
            otherBranch[entries.count - 1] = held
            if entries[held].kind == .twin && kind != .twin {
                bySequence[feed]![header.sequence] = entries.count - 1
            }
        } else {
            bySequence[feed, default: [:]][header.sequence] = entries.count - 1
        }
        return entries.count - 1
    }

    /// Whether the record at `position` is at or beyond the fork of its feed: the fork rule never applies it
    /// anywhere, and what depends on it is applied up to the fork.
    func isBeyondFork(_ position: Int) -> Bool {
        let record = entries[position].ref.position
        guard let fork = forks[Feed(conversation: record.conversation, author: record.author)] else { return false }
        return record.sequence >= fork
    }

    /// The highest sequence of the feed of `author` in `conversation` the ledger holds (0: none).
    func highestSequence(conversation: ConversationID, author: AuthorID) -> UInt64 {
        highest[Feed(conversation: conversation, author: author)] ?? 0
    }

    /// Forgets the fork of `feed`: one branch never left the node that wrote it (no fork reached the network).
    mutating func dropFork(_ feed: Feed) {
        forks[feed] = nil
        forgotten.insert(feed)
    }

    /// The other branch's record at the position of the record at `position`, when its feed's fork was forgotten: a
    /// record that names the feed there in its dependency clock names the branch that reached its author, which the
    /// ledger cannot tell apart by position.
    func forgottenBranch(of position: Int) -> Int? {
        let record = entries[position].ref.position
        guard forgotten.contains(Feed(conversation: record.conversation, author: record.author)) else { return nil }
        return otherBranch[position]
    }

    /// The records at `feed`'s fork sequence: one per branch.
    func branches(of feed: Feed) -> [Int] {
        guard let fork = forks[feed] else { return [] }
        return entries.indices.filter {
            entries[$0].ref.position.sequence == fork && entries[$0].ref.position.conversation == feed.conversation
                && entries[$0].ref.position.author == feed.author
        }
    }

    /// Notes that `node` applied `id` at `time`; returns the entry's position when this is news.
    @discardableResult
    mutating func applied(_ id: RecordID, by node: Int, at time: Duration) -> Int? {
        guard let position = index[id], entries[position].appliedAt[node] == nil else { return nil }
        entries[position].appliedAt[node] = time
        entries[position].appliedCount += 1
        return position
    }

    mutating func setMustReach(_ position: Int, _ value: Bool) {
        entries[position].mustReach = value
    }
}
