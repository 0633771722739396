import NatterModel
import Synchronization

/// Ids of records whose signatures were checked and found valid, shared by the stores of one process that receive
/// the same records: the lab's simulated nodes, where each record would otherwise be checked once per node
/// (`LabConfiguration.sharedSignatureChecks`). A record's validity is a function of its bytes, and its id is the
/// BLAKE2b-256 of all of them, signature included: a remembered id names bytes that were checked, so the outcome of
/// every ingest is the same with or without the memo; only the CPU spent differs. A shipped node has none (its store
/// skips re-checks of records it holds already by id, `IngestSession.heldAlready`).
public final class SignatureMemo: Sendable {
    /// Ids remembered at most: when full, the memo starts again empty (a lab run holds far fewer records).
    public let capacity: Int
    private let valid = Mutex(Set<RecordID>())

    public init(capacity: Int = 1 << 20) {
        precondition(capacity > 0)
        self.capacity = capacity
    }

    /// Whether `id` was checked and found valid.
    func contains(_ id: RecordID) -> Bool { valid.withLock { $0.contains(id) } }

    /// Remembers that the record `id` names has a valid signature.
    func insert(_ id: RecordID) {
        valid.withLock { valid in
            if valid.count >= capacity { valid.removeAll(keepingCapacity: true) }
            valid.insert(id)
        }
    }

    /// Ids remembered now.
    public var count: Int { valid.withLock { $0.count } }
}
