// Goal: the parallel ingest path (signatures checked on worker threads, chunk by chunk, while the caller inserts)
// decides exactly what the sequential path decides. Method: seeded batches mixing honest records, forks, forgeries
// (one flipped bit), garbage, duplicates and out-of-order records, ingested into one store as one large batch
// (parallel) and into another one record at a time (sequential); outcomes, stored rows, feeds, fork evidence and
// digests must be identical.
import Foundation
import NatterCrypto
import NatterModel
import Testing

@testable import NatterStore

@Suite("Parallel ingest")
struct ParallelIngestTests {
    /// A seeded mix of everything ingest has to tell apart, in a random order, at least a few chunks long.
    static func mixedBatch(seed: UInt64) throws -> [[UInt8]] {
        var rng = SeededGenerator(seed: seed)
        var records = try ConvergencePropertyTests.scenario(seed: seed, withFork: seed % 2 == 0).records
        // More scenarios until the batch spans several verification chunks.
        var extra = seed &* 7_919
        while records.count < 150 {
            extra &+= 1
            records += try ConvergencePropertyTests.scenario(seed: extra, withFork: extra % 3 == 0).records
        }
        var batch = records.map(\.bytes)
        for _ in 0..<(batch.count / 10) {
            // Forgeries: one bit flipped anywhere.
            var forged = records.randomElement(using: &rng)!.bytes
            let bit = Int.random(in: 0..<(forged.count * 8), using: &rng)
            forged[bit / 8] ^= 1 << (bit % 8)
            batch.append(forged)
        }
        batch.append(rng.bytes(300))  // not a record at all
        for _ in 0..<(batch.count / 8) { batch.append(records.randomElement(using: &rng)!.bytes) }  // duplicates
        batch.shuffle(using: &rng)  // out of order: gaps, successors before predecessors
        return batch
    }

    @Test("stores sharing a signature memo decide what a store without one does; the memo holds valid ids only",
        arguments: 0..<4)
    func sharedMemoChangesNoOutcome(seed: UInt64) throws {
        let batch = try Self.mixedBatch(seed: seed)
        let memo = SignatureMemo()
        let plain = try RecordStore.inMemory().ingest(batch, receivedAtMillis: 1).outcomes
        let first = try RecordStore.inMemory(signatureMemo: memo).ingest(batch, receivedAtMillis: 1).outcomes
        let valid = Set(
            first.compactMap { outcome -> RecordID? in
                switch outcome {
                case .stored(let id), .duplicate(let id), .forkEvidence(let id, _), .outOfOrder(let id, _): id
                case .rejected: nil
                }
            })
        #expect(first == plain)
        #expect(first.contains { if case .rejected(.badSignature) = $0 { true } else { false } }, "forgeries tried")
        #expect(memo.count == valid.count && valid.allSatisfy(memo.contains), "every valid id, and nothing else")
        // A second store meets every record checked already: the same outcomes, one record at a time too.
        let second = try RecordStore.inMemory(signatureMemo: memo)
        #expect(try batch.flatMap { try second.ingest([$0], receivedAtMillis: 1).outcomes } == plain)
        #expect(memo.count == valid.count)
    }

    @Test("a store takes the memo's word: an id in it is not checked again")
    func memoIsConsulted() throws {
        let record = try Self.mixedBatch(seed: 1).compactMap { try? Record.decode($0) }.first!
        var forged = record.bytes
        forged[forged.count - 1] ^= 1  // the signature's last byte: decodes, does not verify
        let forgedID = RecordID.of(forged)
        #expect(try RecordStore.inMemory().ingest([forged], receivedAtMillis: 1).outcomes == [.rejected(.badSignature)])
        let memo = SignatureMemo()
        memo.insert(forgedID)  // what no check would ever put there
        #expect(
            try RecordStore.inMemory(signatureMemo: memo).ingest([forged], receivedAtMillis: 1).outcomes.first
                != .rejected(.badSignature))
    }

    @Test("one large batch (parallel) and one record at a time (sequential) give the same outcomes and state",
        arguments: 0..<12)
    func parallelEqualsSequential(seed: UInt64) throws {
        let batch = try Self.mixedBatch(seed: seed)
        #expect(batch.count >= 4 * 32, "the batch spans several verification chunks")
        let parallel = try RecordStore.inMemory()
        let sequential = try RecordStore.inMemory()
        let report = try parallel.ingest(batch, receivedAtMillis: 1)
        var outcomes = [IngestOutcome]()
        var applied = Set<RecordRef>()
        var rebuilt = false
        for bytes in batch {
            let single = try sequential.ingest([bytes], receivedAtMillis: 1)
            outcomes += single.outcomes
            applied.formUnion(single.applied)
            rebuilt = rebuilt || !single.rebuilt.isEmpty
        }
        #expect(report.outcomes == outcomes)
        // A conversation rebuilt after a fork reports no applied ids (the caller re-reads it): compare the applied
        // lists only when nothing forked; the state comparison below covers the rest.
        if !rebuilt && report.rebuilt.isEmpty {
            #expect(Set(report.applied) == applied)
            #expect(report.applied.count == applied.count, "each record is applied once")
        }
        try expectSameState(parallel, sequential)
        // Every kind of outcome occurred, so the comparison is not vacuous.
        #expect(outcomes.contains { if case .stored = $0 { true } else { false } })
        #expect(outcomes.contains { if case .duplicate = $0 { true } else { false } })
        #expect(outcomes.contains { if case .outOfOrder = $0 { true } else { false } })
        #expect(outcomes.contains { if case .rejected = $0 { true } else { false } })
    }

    @Test("batches around the parallel threshold and chunk size decide alike", arguments: [31, 32, 33, 64, 65, 97])
    func batchSizes(size: Int) throws {
        let batch = try Self.mixedBatch(seed: 99)
        let chunked = try RecordStore.inMemory()
        let sequential = try RecordStore.inMemory()
        var chunkedOutcomes = [IngestOutcome]()
        var index = 0
        while index < batch.count {
            let slice = Array(batch[index..<min(index + size, batch.count)])
            chunkedOutcomes += try chunked.ingest(slice, receivedAtMillis: 1).outcomes
            index += slice.count
        }
        var outcomes = [IngestOutcome]()
        for bytes in batch { outcomes += try sequential.ingest([bytes], receivedAtMillis: 1).outcomes }
        #expect(chunkedOutcomes == outcomes)
        try expectSameState(chunked, sequential)
    }

    @Test("the parallel path on a file-backed store gives the same digest as in memory")
    func onDisk() throws {
        let batch = try Self.mixedBatch(seed: 5)
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-parallel-\(UUID())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let disk = try RecordStore.open(directory: directory.path)
        let memory = try RecordStore.inMemory()
        let onDisk = try disk.ingest(batch, receivedAtMillis: 1).outcomes
        #expect(try onDisk == memory.ingest(batch, receivedAtMillis: 1).outcomes)
        try expectSameState(disk, memory)
    }

    @Test(
        "checks started ahead (any part of the batch, overlapping, some never ingested) decide as checks at ingest",
        arguments: 0..<8)
    func verifiedAhead(seed: UInt64) throws {
        let batch = try Self.mixedBatch(seed: seed)
        var rng = SeededGenerator(seed: seed &+ 1_000)
        let ahead = try RecordStore.inMemory()
        let sequential = try RecordStore.inMemory()
        // Overlapping slices of the batch (forgeries and garbage included), and records no ingest will bring.
        for _ in 0..<4 {
            let start = Int.random(in: 0..<batch.count, using: &rng)
            let end = Int.random(in: start...min(batch.count, start + 120), using: &rng)
            ahead.verifyAhead(Array(batch[start..<end]))
        }
        let strangers = try ConvergencePropertyTests.scenario(seed: seed &+ 5_000, withFork: false).records.map(\.bytes)
        ahead.verifyAhead(strangers)
        #expect(ahead.verifiedAhead.started > strangers.count, "the batch was partly checked ahead")
        var outcomes = [IngestOutcome]()
        var index = 0
        while index < batch.count {
            let slice = Array(batch[index..<min(index + Int.random(in: 1...100, using: &rng), batch.count)])
            outcomes += try ahead.ingest(slice, receivedAtMillis: 1).outcomes
            index += slice.count
        }
        var expected = [IngestOutcome]()
        for bytes in batch { expected += try sequential.ingest([bytes], receivedAtMillis: 1).outcomes }
        #expect(outcomes == expected)
        try expectSameState(ahead, sequential)
        // What was never ingested (the strangers, copies already held when they came) waits; nothing else does.
        #expect(ahead.verifiedAhead.waiting >= strangers.count)
        #expect(ahead.verifiedAhead.waiting < ahead.verifiedAhead.started)
    }

    @Test("records the session decoded (only their signatures left) decide as their bytes do", arguments: 0..<6)
    func decodedEqualsBytes(seed: UInt64) throws {
        // What a session passes on: whatever decodes (forged signatures included), in the batch's order.
        let decoded = try Self.mixedBatch(seed: seed).compactMap { try? Record.decode($0) }
        #expect(decoded.contains { !$0.hasValidSignature }, "forgeries that decode are among them")
        var rng = SeededGenerator(seed: seed &+ 2_000)
        let fromRecords = try RecordStore.inMemory()
        let fromBytes = try RecordStore.inMemory()
        fromRecords.verifyAhead(Array(decoded.prefix(decoded.count / 2)))
        var outcomes = [IngestOutcome]()
        var expected = [IngestOutcome]()
        var index = 0
        while index < decoded.count {
            let slice = Array(decoded[index..<min(index + Int.random(in: 1...90, using: &rng), decoded.count)])
            outcomes += try fromRecords.ingest(slice, receivedAtMillis: 1).outcomes
            expected += try fromBytes.ingest(slice.map(\.bytes), receivedAtMillis: 1).outcomes
            index += slice.count
        }
        #expect(outcomes == expected)
        #expect(expected.contains { if case .rejected(.badSignature) = $0 { true } else { false } })
        try expectSameState(fromRecords, fromBytes)
    }

    @Test("a reader checks the chunks no worker took: with no workers at all, every result is still there, in order")
    func readerChecksWhatNoWorkerTook() throws {
        let batch = try Self.mixedBatch(seed: 3)
        let verification = ParallelVerification(batch.map { .bytes($0) }, workerCount: 0)
        var reader = ParallelVerification.OrderedReader(verification)
        for (index, bytes) in batch.enumerated() {
            let expected = Result { () throws(RecordFormatError) in try Record.decodeVerified(bytes) }
            #expect(reader.outcome(at: index) == expected, "record \(index)")
        }
        // Out of order, and again: each chunk is checked once and then read by anyone.
        let again = ParallelVerification(batch.map { .bytes($0) }, workerCount: 1)
        for index in batch.indices.reversed() {
            #expect(again.outcome(at: index) == verification.outcome(at: index))
        }
    }

    @Test("records checked ahead and then ingested are taken, not checked again; the ones waiting are bounded")
    func verifiedAheadTakenAndBounded() throws {
        let records = try ConvergencePropertyTests.scenario(seed: 77, withFork: false).records.map(\.bytes)
        try #require(records.count >= 14)
        let store = try RecordStore.inMemory()
        store.verifyAhead(records)
        store.verifyAhead(records)  // started once while remembered
        #expect(store.verifiedAhead == (waiting: records.count, started: records.count))
        _ = try store.ingest(records, receivedAtMillis: 1)
        #expect(store.verifiedAhead.waiting == 0)

        let bounded = VerificationAhead(recordsMax: 10)
        let ids = records.map { RecordID.of($0) }
        bounded.start(records.prefix(8).map { .bytes($0) }, ids: Array(ids.prefix(8)), workerCount: 2)
        bounded.start(records[8..<14].map { .bytes($0) }, ids: Array(ids[8..<14]), workerCount: 2)
        #expect(bounded.count == 10, "the oldest are forgotten past the bound")
        #expect(bounded.take(ids[0]) == nil && bounded.take(ids[3]) == nil, "the four oldest were forgotten")
        let (verification, position) = try #require(bounded.take(ids[13]))
        #expect(try verification.outcome(at: position).get().bytes == records[13])
        #expect(bounded.take(ids[13]) == nil, "taken once")
        #expect(bounded.count == 9)
    }

    private func expectSameState(_ a: RecordStore, _ b: RecordStore) throws {
        #expect(try a.logDigest() == b.logDigest())
        #expect(try a.feeds() == b.feeds())
        #expect(try a.statistics() == b.statistics())
        #expect(try a.allRecords().map(\.id) == b.allRecords().map(\.id))
        for feed in try a.feeds() {
            #expect(
                try a.forkEvidence(conversation: feed.conversation, author: feed.author)
                    == b.forkEvidence(conversation: feed.conversation, author: feed.author))
        }
    }
}
