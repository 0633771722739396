import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterStore

/// `natter bench`: the machine's physical limits beside natter's own ingest rate, measured in the same run, so
/// later work can be judged against them (docs/performance.md).
struct BenchCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Ed25519 verification, SQLite inserts and full record ingest on this machine.")

    @Option(help: "Records for the insert and ingest measurements.")
    var records: Int = 100_000

    @Option(help: "Signature verifications to time.")
    var verifications: Int = 20_000

    @Option(help: "Authors writing into the benchmark conversation (each record depends on all of them).")
    var authors: Int = 8

    @Option(help: "Records per ingest transaction.")
    var batch: Int = 500

    @Flag(help: "Print one JSON object instead of the table.")
    var json = false

    @Flag(help: "Benchmark the conversation queries instead: list and open with --messages across --conversations.")
    var queries = false

    @Option(help: "Conversations for --queries.")
    var conversations: Int = 100

    @Option(help: "Messages in all for --queries.")
    var messages: Int = 100_000

    func validate() throws {
        guard records >= 1, verifications >= 1, (1...Limits.dependenciesMax).contains(authors), batch >= 1 else {
            throw ValidationError("counts must be positive and --authors at most \(Limits.dependenciesMax)")
        }
    }

    func run() throws {
        if queries {
            try runQueries()
            return
        }
        let workload = BenchWorkload.make(records: records, authors: authors)
        let sample = workload.records[min(authors, workload.records.count - 1)]
        let verify = measureVerify(sample)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let verifyAll = measureVerifyOnAllCores(sample, cores: cores)
        let decode = measure(count: workload.records.count) {
            for record in workload.records { _ = try? Record.decodeVerified(record.bytes) }
        }
        let insert = try measureInsert(workload.records)
        let ingest = try measureIngest(workload.records)
        let results: [(String, Int, Double, String)] = [
            ("ed25519_verify", verifications, verify, "one core, \(sample.bytes.count)-byte records"),
            ("verify_all_cores", verifications, verifyAll, "\(cores) cores in parallel"),
            ("decode_verify", workload.records.count, decode, "decode + canonical check + signature, one core"),
            (
                "sqlite_insert", workload.records.count, insert,
                "record rows, \(batch) per transaction, synchronous=FULL"
            ),
            (
                "full_ingest", workload.records.count, ingest,
                "RecordStore.ingest, \(batch) per batch, \(authors) authors"
            ),
        ]
        if json {
            let fields = results.map { "\"\($0.0)_per_second\": \(Int($0.1))" }.joined(separator: ", ")
            print(
                "{\(fields), \"records\": \(records), \"authors\": \(authors), \"cores\": \(ProcessInfo.processInfo.activeProcessorCount)}"
            )
            return
        }
        print(
            "natter bench: \(records) records, \(authors) authors, \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        for (name, count, rate, note) in results {
            print(
                name.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + "\(count)".leftPadded(9) + " ops " + "\(Int(rate))".leftPadded(9) + " /s   " + note)
        }
        let limit = min(verifyAll, insert)
        print(
            "full ingest reaches \(Int((ingest / limit * 100).rounded()))% of the lower physical limit "
                + "(min of verify on all cores and insert)")
    }

    private func runQueries() throws {
        let result = try withScratchDirectory {
            try QueryBench(conversations: conversations, messages: messages).run(in: $0)
        }
        func quantiles(_ values: [Double]) -> String {
            String(
                format: "p50 %.2f ms  p90 %.2f ms  max %.2f ms", values[values.count / 2],
                values[values.count * 9 / 10], values.last!)
        }
        print(
            "natter bench --queries: \(messages) messages in \(conversations) conversations "
                + String(format: "(populated in %.1f s)", result.populateSeconds))
        print("list conversations   " + quantiles(result.listMillis))
        print("open (last 50)       " + quantiles(result.openMillis))
        print("filter the list      " + quantiles(result.filterMillis))
    }

    /// Rate (per second) of `count` operations done by `body`.
    private func measure(count: Int, _ body: () throws -> Void) rethrows -> Double {
        let clock = ContinuousClock()
        let elapsed = try clock.measure(body)
        let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
        return Double(count) / max(seconds, 1e-9)
    }

    private func measureVerify(_ record: NatterModel.Record) -> Double {
        var valid = 0
        let rate = measure(count: verifications) {
            for _ in 0..<verifications where record.hasValidSignature { valid += 1 }
        }
        precondition(valid == verifications, "benchmark record failed to verify")
        return rate
    }

    private func measureVerifyOnAllCores(_ record: NatterModel.Record, cores: Int) -> Double {
        let perCore = max(1, verifications / cores)
        return measure(count: perCore * cores) {
            DispatchQueue.concurrentPerform(iterations: cores) { _ in
                for _ in 0..<perCore { precondition(record.hasValidSignature) }
            }
        }
    }

    private func measureInsert(_ records: [NatterModel.Record]) throws -> Double {
        try withScratchStore { store in
            try measure(count: records.count) {
                try store.insertRowsForBenchmark(records, batchSize: batch)
            }
        }
    }

    private func measureIngest(_ records: [NatterModel.Record]) throws -> Double {
        try withScratchStore { store in
            var applied = 0
            let rate = try measure(count: records.count) {
                var index = 0
                while index < records.count {
                    let slice = records[index..<min(index + batch, records.count)]
                    applied += try store.ingest(slice.map(\.bytes), receivedAtMillis: 0).applied.count
                    index += slice.count
                }
            }
            guard applied == records.count else {
                throw ValidationError(
                    "ingest applied \(applied) of \(records.count) records: benchmark workload broken")
            }
            return rate
        }
    }

    private func withScratchStore<T>(_ body: (RecordStore) throws -> T) throws -> T {
        try withScratchDirectory { try body(try RecordStore.open(directory: $0)) }
    }

    private func withScratchDirectory<T>(_ body: (String) throws -> T) throws -> T {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent(
            "natter-bench-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        return try body(directory.path)
    }
}

/// A causally consistent workload: `authors` writers taking turns in one conversation, each record depending on
/// everything written before it (so every record carries a full vector clock), signed up front.
struct BenchWorkload {
    let records: [Record]

    static func make(records count: Int, authors: Int) -> BenchWorkload {
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

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
