import NatterModel
import Synchronization

/// The records this store stored last, with when they arrived, by position: the reads that follow a store — the
/// conversation snapshot taking in what was just applied, a sync session forwarding it, the tables' arrival times
/// of the new lines — find them here instead of reading them back from SQLite (about 30 % of a lab run's statement
/// steps, 2026-11-29).
///
/// Coherent like `FeedCache`: filled only after a commit, with records stored with their bodies (never a junk
/// feed's, never fork evidence), and emptied by whatever else changes or deletes records (`invalidate`). A
/// position's record never changes otherwise. Bounded by `recordsMax`; the oldest go first.
final class RecentRecords: Sendable {
    /// Records held: 256 (about 300 KiB) — a busy group's quarter second between refreshes several times over, and the
    /// copies gossip delivers soon after the first; a sync batch catching up is read from SQLite.
    static let recordsMax = 256

    private struct Entry {
        let record: NatterModel.Record
        let receivedAtMillis: Int64
        /// Its place in `State.ring`, so an eviction removes only the entry it put there.
        let slot: Int
    }

    private struct State {
        var entries: [RecordPosition: Entry] = [:]
        var ring = [RecordPosition?](repeating: nil, count: RecentRecords.recordsMax)
        var next = 0
    }

    private let state = Mutex(State())

    /// Records a transaction stored with their bodies, once it committed.
    func remember(_ records: [NatterModel.Record], receivedAtMillis: Int64) {
        guard !records.isEmpty else { return }
        state.withLock { state in
            for record in records {
                let slot = state.next
                if let old = state.ring[slot], state.entries[old]?.slot == slot { state.entries[old] = nil }
                let position = record.header.position
                state.ring[slot] = position
                state.entries[position] = Entry(record: record, receivedAtMillis: receivedAtMillis, slot: slot)
                state.next = (slot + 1) % Self.recordsMax
            }
        }
    }

    /// The held run of one feed's records from `from` on, at most `limit` long (empty when `from` is not held).
    func run(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int) -> [NatterModel.Record] {
        state.withLock { state in
            var run = [NatterModel.Record]()
            var sequence = from
            while run.count < limit,
                let entry = state.entries[
                    RecordPosition(conversation: conversation, author: author, sequence: sequence)]
            {
                run.append(entry.record)
                sequence += 1
            }
            return run
        }
    }

    /// The id of the record held at `position`, if held.
    func id(at position: RecordPosition) -> RecordID? {
        state.withLock { $0.entries[position]?.record.id }
    }

    /// When the record `ref` names arrived here, if held.
    func receivedAtMillis(of ref: RecordRef) -> Int64? {
        state.withLock { state in
            guard let entry = state.entries[ref.position], entry.record.id == ref.id else { return nil }
            return entry.receivedAtMillis
        }
    }

    /// Something other than an ingest changed or deleted records: forget everything.
    func invalidate() {
        state.withLock { $0 = State() }
    }
}
