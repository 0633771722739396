import Dispatch
import Foundation
import NatterModel
import Synchronization

/// Decoding and signature checks of one ingest batch on every core, in chunks the caller consumes in order while
/// later chunks are still being checked: the store inserts chunk k while the workers verify chunk k + 1 and on.
///
/// Each record's result is a pure function of its bytes and the caller reads them in input order, so the outcome of
/// an ingest never depends on how the work was spread or timed (`ParallelIngestTests`).
final class ParallelVerification: Sendable {
    typealias Outcome = Result<NatterModel.Record, RecordFormatError>

    /// Records verified per unit of work: small enough that the first chunk is ready soon and the last one leaves
    /// little for the caller to wait on, large enough that hand-offs cost nothing next to 32 signature checks.
    static let chunkRecords = 32

    private let batch: [[UInt8]]
    nonisolated(unsafe) private let results: UnsafeMutableBufferPointer<Outcome?>
    private let ready: [DispatchSemaphore]
    private let nextChunk = Atomic<Int>(0)

    /// Starts checking `batch` on `workerCount` threads at once.
    init(_ batch: [[UInt8]], workerCount: Int) {
        self.batch = batch
        results = .allocate(capacity: batch.count)
        results.initialize(repeating: nil)
        let chunks = (batch.count + Self.chunkRecords - 1) / Self.chunkRecords
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
                results[index] = Result { () throws(RecordFormatError) in try .decodeVerified(batch[index]) }
            }
            ready[chunk].signal()
        }
    }

    private func range(of chunk: Int) -> Range<Int> {
        (chunk * Self.chunkRecords)..<min(batch.count, (chunk + 1) * Self.chunkRecords)
    }

    /// Calls `body` with every record's result in input order, waiting for each chunk as it comes. Once only:
    /// each chunk's semaphore is consumed.
    func forEachInOrder(_ body: (Outcome) throws -> Void) rethrows {
        for chunk in ready.indices {
            ready[chunk].wait()
            for index in range(of: chunk) { try body(results[index]!) }
        }
    }
}
