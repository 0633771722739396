import Dispatch
import Foundation
import NatterModel
import Synchronization

/// A record still to be checked before it may be stored: bytes from elsewhere (decoded, then the signature checked),
/// or a record decoded already — by the sync session, which checked its structure and canonical form — whose
/// signature alone is left. Either way the outcome is what `Record.decodeVerified` gives for its bytes.
enum UncheckedRecord: Sendable {
    case bytes([UInt8])
    case decoded(NatterModel.Record)

    /// What `Record.decodeVerified` gives for its bytes; a signature `memo` remembers as valid is not checked again.
    func checked(_ memo: SignatureMemo? = nil) -> ParallelVerification.Outcome {
        let record: NatterModel.Record
        switch self {
        case .bytes(let bytes):
            do {
                record = try .decode(bytes)
            } catch {
                return .failure(error)
            }
        case .decoded(let decoded): record = decoded
        }
        if let memo, memo.contains(record.id) { return .success(record) }
        guard record.hasValidSignature else { return .failure(.badSignature) }
        memo?.insert(record.id)
        return .success(record)
    }
}

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
    /// The workers' priority: below the node's own thread (`utility`: nice 2 on Linux), which stores what they
    /// check, so on cores they share the node's thread runs when it can — it checks any chunk no worker has taken
    /// (`outcome(at:)`), so it never waits for workers kept off the cores. Not `background` (nice 10): other
    /// programs' load would then hold the workers back several times more (measured: docs/performance.md).
    static let workerPriority: DispatchQoS.QoSClass = .utility

    let records: [UncheckedRecord]
    /// Signatures checked already in this process (the lab's shared checks), or nil.
    private let memo: SignatureMemo?
    nonisolated(unsafe) private let results: UnsafeMutableBufferPointer<Outcome?>
    /// Signalled once when a chunk's results are written; a reader that waits signals it again, so every later
    /// reader passes at once.
    private let ready: [DispatchSemaphore]
    /// Which chunks a thread has taken on (each is checked by exactly one), and the first one no worker took yet.
    private let claims: Mutex<(claimed: [Bool], next: Int)>

    /// Starts checking `records` on `workerCount` threads at once (none: each reader checks what it reads).
    init(_ records: [UncheckedRecord], workerCount: Int, memo: SignatureMemo? = nil) {
        self.records = records
        self.memo = memo
        results = .allocate(capacity: records.count)
        results.initialize(repeating: nil)
        let chunks = (records.count + Self.chunkRecords - 1) / Self.chunkRecords
        ready = (0..<chunks).map { _ in DispatchSemaphore(value: 0) }
        claims = Mutex(([Bool](repeating: false, count: chunks), 0))
        for _ in 0..<min(max(0, workerCount), chunks) {
            DispatchQueue.global(qos: Self.workerPriority).async { [self] in work() }
        }
    }

    deinit {
        // Workers hold `self` until they finish, so by now none is writing.
        results.deinitialize()
        results.deallocate()
    }

    private func work() {
        while let chunk = claimNext() { check(chunk) }
    }

    /// The first chunk nobody took yet, now taken by the caller; nil when none is left.
    private func claimNext() -> Int? {
        claims.withLock { claims in
            while claims.next < claims.claimed.count, claims.claimed[claims.next] { claims.next += 1 }
            guard claims.next < claims.claimed.count else { return nil }
            claims.claimed[claims.next] = true
            return claims.next
        }
    }

    /// Checks the records of a chunk the caller took, then lets its readers in. Each chunk is written by the one
    /// thread that took it, and read only after its semaphore.
    private func check(_ chunk: Int) {
        for index in range(of: chunk) {
            results[index] = records[index].checked(memo)
        }
        ready[chunk].signal()
    }

    private func range(of chunk: Int) -> Range<Int> {
        (chunk * Self.chunkRecords)..<min(records.count, (chunk + 1) * Self.chunkRecords)
    }

    /// The result for `records[index]`. A chunk no worker has taken yet is checked right here, by the caller, so a
    /// reader never waits for workers that the scheduler keeps off the cores (they run at a lower priority than
    /// the node's thread); one a worker is checking is waited for. Callers that read in order take each chunk's
    /// semaphore once (`OrderedReader`).
    func outcome(at index: Int) -> Outcome {
        let chunk = index / Self.chunkRecords
        let mine = claims.withLock { claims in
            guard !claims.claimed[chunk] else { return false }
            claims.claimed[chunk] = true
            return true
        }
        if mine { check(chunk) }
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
    func start(_ records: [UncheckedRecord], ids: [RecordID], workerCount: Int, memo: SignatureMemo? = nil) {
        let new = state.withLock { state in records.indices.filter { state.entries[ids[$0]] == nil } }
        guard !new.isEmpty else { return }
        let verification = ParallelVerification(new.map { records[$0] }, workerCount: workerCount, memo: memo)
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
