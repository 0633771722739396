import NatterModel

/// What a record in the ledger was written for.
public enum OperationKind: String, Sendable, CaseIterable, Comparable {
    case profile, create, message, reaction, receipt, add, remove

    /// Whether the workload issued it (it counts as an operation in the report).
    var isOperation: Bool { self != .profile && self != .create }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        allCases.firstIndex(of: lhs)! < allCases.firstIndex(of: rhs)!
    }
}

/// Every record the lab had a node write, with when it was published and when each node applied it.
///
/// A record enters the ledger when its authoring call returns on a running node: it is acknowledged (durable on
/// the author's store), so the checkers demand it everywhere once the network heals.
struct Ledger {
    struct Entry {
        let ref: RecordRef
        var id: RecordID { ref.id }
        let author: Int
        let kind: OperationKind
        let publishedAt: Duration
        /// Per node, when it applied the record (the author: at publication).
        var appliedAt: [Duration?]
        var appliedCount = 0
        /// Fixed at the heal: whether a live node holds it, so every live node must get it.
        var mustReach = false
    }

    private(set) var entries: [Entry] = []
    private var index: [RecordID: Int] = [:]
    let nodes: Int

    init(nodes: Int) { self.nodes = nodes }

    var count: Int { entries.count }

    subscript(position: Int) -> Entry { entries[position] }

    func position(of id: RecordID) -> Int? { index[id] }

    @discardableResult
    mutating func add(_ ref: RecordRef, author: Int, kind: OperationKind, at time: Duration) -> Int {
        let id = ref.id
        precondition(index[id] == nil, "a record is authored once")
        var appliedAt = [Duration?](repeating: nil, count: nodes)
        appliedAt[author] = time
        entries.append(
            Entry(ref: ref, author: author, kind: kind, publishedAt: time, appliedAt: appliedAt, appliedCount: 1))
        index[id] = entries.count - 1
        return entries.count - 1
    }

    /// Notes that `node` applied `id` at `time`; returns the entry's position when this is news.
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
