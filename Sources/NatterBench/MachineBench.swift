import Foundation
import NatterCrypto
public import NatterModel
import NatterStore

/// The machine's physical limits — Ed25519 verification, SQLite inserts — and natter's own ingest, measured in one
/// process, so every benchmark can state its figures beside the limits measured in the same run (the machine is
/// shared and noisy: ratios hold where absolute figures do not).
public enum MachineBench {
    /// Runs of the all-cores verification ceiling; the best counts.
    public static let ceilingTrials = 3

    /// Rate (per second) of `count` operations done by `body`.
    public static func rate(count: Int, _ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let elapsed = try clock.measure(body)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return Double(count) / max(seconds, 1e-9)
    }

    /// Signature checks per second on one core.
    public static func verifyRate(_ record: Record, count: Int) -> Double {
        var valid = 0
        let rate = rate(count: count) {
            for _ in 0..<count where record.hasValidSignature { valid += 1 }
        }
        precondition(valid == count, "benchmark record failed to verify")
        return rate
    }

    /// The machine's signature ceiling: the best of `ceilingTrials` runs on every core at once (a ceiling, so the
    /// best: a run the scheduler or a neighbour slowed says less about the machine than about that moment, and the
    /// ratios judged against it would swing with it).
    public static func verifyRateOnAllCores(_ record: Record, count: Int, cores: Int) -> Double {
        let perCore = max(1, count / cores)
        return (0..<ceilingTrials).map { _ in
            rate(count: perCore * cores) {
                DispatchQueue.concurrentPerform(iterations: cores) { _ in
                    for _ in 0..<perCore { precondition(record.hasValidSignature) }
                }
            }
        }.max()!
    }

    /// Record rows inserted per second, `batch` per transaction with `synchronous=FULL`.
    public static func insertRate(_ records: [Record], batch: Int) throws -> Double {
        try withScratchStore { store in
            try rate(count: records.count) { try store.insertRowsForBenchmark(records, batchSize: batch) }
        }
    }

    /// Records ingested per second (`RecordStore.ingest`: decode, verify, store, apply), `batch` per transaction.
    public static func ingestRate(_ records: [Record], batch: Int) throws -> Double {
        try withScratchStore { store in
            var applied = 0
            let rate = try rate(count: records.count) {
                var index = 0
                while index < records.count {
                    let slice = records[index..<min(index + batch, records.count)]
                    applied += try store.ingest(slice.map(\.bytes), receivedAtMillis: 0).applied.count
                    index += slice.count
                }
            }
            guard applied == records.count else {
                throw BenchError("ingest applied \(applied) of \(records.count) records: benchmark workload broken")
            }
            return rate
        }
    }

    static func withScratchStore<T>(_ body: (RecordStore) throws -> T) throws -> T {
        try withScratchDirectory { try body(try RecordStore.open(directory: $0)) }
    }

    /// Runs `body` with a fresh directory, removed afterwards.
    public static func withScratchDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let directory = try makeScratchDirectory()
        defer { removeScratch(directory) }
        return try body(directory)
    }

    public static func withScratchDirectory<T>(_ body: (String) async throws -> T) async throws -> T {
        let directory = try makeScratchDirectory()
        defer { removeScratch(directory) }
        return try await body(directory)
    }

    private static func makeScratchDirectory() throws -> String {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "natter-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory.path
    }

    private static func removeScratch(_ directory: String) {
        do {
            try FileManager.default.removeItem(atPath: directory)
        } catch {
            FileHandle.standardError.write(Data("notice: could not remove \(directory): \(error)\n".utf8))
        }
    }
}

/// A causally consistent workload: `authors` writers taking turns in one conversation, each record depending on
/// everything written before it (so every record carries a full vector clock), signed up front.
public struct BenchWorkload: Sendable {
    public let records: [Record]

    public static func make(records count: Int, authors: Int) -> BenchWorkload {
        var rng = SeededGenerator(seed: 42)
        let identities = (0..<authors).map { _ in try! IdentityKeyPair(seed: rng.bytes(32)) }
        let conversation = ConversationID(bytes: rng.bytes(32))
        let epoch = EpochID(bytes: rng.bytes(32))
        var clock = [AuthorID: UInt64]()
        var heads = [AuthorID: RecordID]()
        var lamport: UInt64 = 0
        var records = [Record]()
        records.reserveCapacity(count)
        let payload = rng.bytes(200)
        for index in 0..<count {
            let identity = identities[index % authors]
            let author = AuthorID(identity.publicKey)
            let sequence = (clock[author] ?? 0) + 1
            let header = RecordHeader(
                kind: .content, conversation: conversation, author: author, sequence: sequence,
                previous: heads[author] ?? .none, epoch: epoch, lamport: lamport + 1,
                createdAtMillis: 1_700_000_000_000 + Int64(index), dependencies: VectorClock(clock))
            let record = try! Record.sign(header: header, payload: payload, by: identity)
            records.append(record)
            clock[author] = sequence
            heads[author] = record.id
            lamport += 1
        }
        return BenchWorkload(records: records)
    }
}

