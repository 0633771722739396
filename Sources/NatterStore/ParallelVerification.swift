import Dispatch
import Foundation
import NatterModel
import Synchronization

/// Decoding and signature checks of a list of records on every core, in chunks that are read as soon as they are
/// done while later chunks are still being checked: the store inserts chunk k while the workers verify chunk k + 1
/// and on, and checks started ahead of ingest (`VerificationAhead`) run while the node does other work.
///
/// Each record's result is a pure function of its bytes, so the outcome of an ingest never depends on how the work
/// was spread or timed (`ParallelIngestTests`).
final class ParallelVerification: Sendable {
    typealias Outcome = Result<NatterModel.Record, RecordFormatError>

    /// Records verified per unit of work: small enough that the first chunk is ready soon and the last one leaves
    /// little for the caller to wait on, large enough that hand-offs cost nothing next to 32 signature checks.
    static let chunkRecords = 32

    let records: [[UInt8]]
    nonisolated(unsafe) private let results: UnsafeMutableBufferPointer<Outcome?>
    /// Signalled once when a chunk's results are written; a reader that waits signals it again, so every later
    /// reader passes at once.
    private let ready: [DispatchSemaphore]
    private let nextChunk = Atomic<Int>(0)

    /// Starts checking `records` on `workerCount` threads at once.
    init(_ records: [[UInt8]], workerCount: Int) {
        self.records = records
        results = .allocate(capacity: records.count)
        results.initialize(repeating: nil)
        let chunks = (records.count + Self.chunkRecords - 1) / Self.chunkRecords
        ready = (0..<chunks).map { _ in DispatchSemaphore(value: 0) }
        for _ in 0..<min(max(1, workerCount), chunks) {
            DispatchQueue.global().async { [self] in work() }
        }
    }

    deinit {
        // Workers hold `self` until they finish, so by now none is writing.
        results.deinitialize()
        results.deallocate()
    }

    private func work() {
        while true {
            let chunk = nextChunk.add(1, ordering: .relaxed).oldValue
            guard chunk < ready.count else { return }
            // Each chunk is written by the one worker that claimed it, and read only after its semaphore.
            for index in range(of: chunk) {
                results[index] = Result { () throws(RecordFormatError) in try .decodeVerified(records[index]) }
            }
            ready[chunk].signal()
        }
    }

    private func range(of chunk: Int) -> Range<Int> {
        (chunk * Self.chunkRecords)..<min(records.count, (chunk + 1) * Self.chunkRecords)
    }

    /// The result for `records[index]`, waiting for its chunk if it is still being checked. Callers that read in
    /// order wait at most once per chunk (`OrderedReader`).
    func outcome(at index: Int) -> Outcome {
        let chunk = index / Self.chunkRecords
        ready[chunk].wait()
        ready[chunk].signal()
        return results[index]!
    }

    /// Reads results in input order, touching each chunk's semaphore once.
    struct OrderedReader {
        let verification: ParallelVerification
        private var doneThrough = -1

        init(_ verification: ParallelVerification) { self.verification = verification }

        mutating func outcome(at index: Int) -> Outcome {
            let chunk = index / ParallelVerification.chunkRecords
            if chunk > doneThrough {
                _ = verification.outcome(at: index)
                doneThrough = chunk
            }
            return verification.results[index]!
        }
    }
}

/// Checks of records that the node will ingest soon, started before their turn (`RecordStore.verifyAhead`), so the
/// cores verify while the node's own thread inserts, commits and refreshes. An ingest takes the result of any record
/// it finds here (by id: the hash of the exact bytes) instead of checking it again.
///
/// Bounded: at most `recordsMax` records are remembered; the oldest are forgotten first (their checks finish and
/// are dropped; an ingest of them checks them again).
final class VerificationAhead: Sendable {
    /// Records remembered: four sync windows (`Limits.syncWindowBatches` × `syncBatchRecordsMax`, 2,048 each), so a
    /// few links catching up at once keep their checks, and at most about 6 MiB of records and results are held.
    static let recordsMaxDefault = 8_192
    let recordsMax: Int

    init(recordsMax: Int = VerificationAhead.recordsMaxDefault) {
        self.recordsMax = recordsMax
    }

    private struct Entry {
        let verification: ParallelVerification
        let index: Int
        /// When it was started (its place in `State.order`).
        let serial: Int
    }

    private struct State {
        var entries: [RecordID: Entry] = [:]
        /// Ids with the serial they were started under, oldest first; entries taken since are skipped.
        var order: [(id: RecordID, serial: Int)] = []
        var orderStart = 0
        var nextSerial = 0

        mutating func forgetOldest() {
            let (id, serial) = order[orderStart]
            orderStart += 1
            if entries[id]?.serial == serial { entries[id] = nil }
        }
    }

    private let state = Mutex(State())

    /// Starts checking `records` (ids given) on every core; records already remembered are not checked again.
    func start(_ records: [[UInt8]], ids: [RecordID], workerCount: Int) {
        let new = state.withLock { state in records.indices.filter { state.entries[ids[$0]] == nil } }
        guard !new.isEmpty else { return }
        let verification = ParallelVerification(new.map { records[$0] }, workerCount: workerCount)
        state.withLock { state in
            for (index, original) in new.enumerated() where state.entries[ids[original]] == nil {
                state.entries[ids[original]] = Entry(verification: verification, index: index, serial: state.nextSerial)
                state.order.append((ids[original], state.nextSerial))
                state.nextSerial += 1
            }
            while state.entries.count > recordsMax { state.forgetOldest() }
            // Drop what was spent (forgotten or taken) once it outweighs what is remembered.
            if state.order.count - state.orderStart > 2 * recordsMax || state.orderStart > recordsMax {
                state.order = state.order[state.orderStart...].filter { state.entries[$0.id]?.serial == $0.serial }
                state.orderStart = 0
            }
        }
    }

    /// Takes the check of the record with this id, if one was started: its result once done.
    func take(_ id: RecordID) -> (ParallelVerification, Int)? {
        state.withLock { state in state.entries.removeValue(forKey: id).map { ($0.verification, $0.index) } }
    }

    /// Records remembered now.
    var count: Int { state.withLock { $0.entries.count } }
    /// Records whose checks were started since this was made (each record once while remembered).
    var started: Int { state.withLock { $0.nextSerial } }
}
