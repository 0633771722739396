// Goal: every rule of the log layer's ingest — forgery, replay, chain gaps, forks, dependencies and Lamport
// numbers — behaves as docs/protocol.md says. Method: real records signed by real identities, ingested into real
// SQLite stores (in memory), with the store's own reads as the oracle.
import Foundation
import GRDB
import NatterCrypto
import NatterModel
import Testing

@testable import NatterStore

@Suite("Ingest rules")
struct IngestTests {
    let chat = conversationID("chat")

    @Test("a record with any single bit flipped in header, payload or signature is rejected and not stored")
    func forgeryIsRejected() throws {
        let alice = try Writer(seed: 1)
        let record = try alice.write(chat, "the quick brown fox")
        let observer = try RecordStore.inMemory()
        let headerBits = RecordCodec.headerByteCount(record.header.dependencies.count) * 8
        let payloadStart = headerBits / 8 + 4
        // A sample of positions in each region (every bit of all three would be 2,000+ SQLite transactions).
        let positions =
            Array(stride(from: 0, to: headerBits, by: 7))
            + Array(stride(from: payloadStart * 8, to: (payloadStart + record.payload.count) * 8, by: 3))
            + Array(stride(from: (record.bytes.count - 64) * 8, to: record.bytes.count * 8, by: 1))
        var rejected = 0
        for bit in positions {
            var bytes = record.bytes
            bytes[bit / 8] ^= 1 << (bit % 8)
            let report = try observer.ingest([bytes], receivedAtMillis: 1)
            guard case .rejected = report.outcomes[0] else {
                Issue.record("bit \(bit) flipped was accepted: \(report.outcomes[0])")
                continue
            }
            rejected += 1
        }
        #expect(rejected == positions.count)
        #expect(try observer.statistics().recordsHeld == 0)
        #expect(try observer.feeds().isEmpty)
    }

    @Test("the same record delivered 100 times is stored once")
    func replayIsIdempotent() throws {
        let alice = try Writer(seed: 2)
        let first = try alice.write(chat)
        let second = try alice.write(chat)
        let observer = try RecordStore.inMemory()
        var stored = 0
        for round in 0..<100 {
            let report = try observer.ingest([first.bytes, second.bytes, first.bytes], receivedAtMillis: Int64(round))
            stored += report.outcomes.filter { if case .stored = $0 { true } else { false } }.count
        }
        #expect(stored == 2)
        #expect(try observer.statistics().recordsHeld == 2)
        #expect(try observer.appliedClock(of: chat)[alice.author] == 2)
    }

    @Test("a record ahead of its feed is not stored and names the missing sequence")
    func gapIsReported() throws {
        let alice = try Writer(seed: 3)
        let records = try (0..<3).map { _ in try alice.write(chat) }
        let observer = try RecordStore.inMemory()
        let report = try observer.ingest([records[2].bytes], receivedAtMillis: 1)
        #expect(report.outcomes == [.outOfOrder(records[2].id, missingFrom: 1)])
        #expect(try observer.statistics().recordsHeld == 0)
        let rest = try observer.ingest(records.map(\.bytes), receivedAtMillis: 2)
        #expect(rest.applied == records.map(\.ref))
    }

    @Test("a record waits, stored but unapplied, until its dependencies are applied")
    func dependenciesGateApplication() throws {
        let alice = try Writer(seed: 4)
        let bob = try Writer(seed: 5)
        let a1 = try alice.write(chat)
        let a2 = try alice.write(chat)
        try bob.receive([a1, a2])
        let b1 = try bob.write(chat)
        #expect(b1.header.dependencies[alice.author] == 2)
        #expect(b1.header.lamport == a2.header.lamport + 1)

        let observer = try RecordStore.inMemory()
        let early = try observer.ingest([a1.bytes, b1.bytes], receivedAtMillis: 1)
        #expect(early.outcomes == [.stored(a1.id), .stored(b1.id)])
        #expect(early.applied == [a1.ref])
        #expect(try observer.appliedClock(of: chat)[bob.author] == 0)
        let late = try observer.ingest([a2.bytes], receivedAtMillis: 2)
        #expect(late.applied == [a2.ref, b1.ref])
    }

    @Test("a record whose Lamport number is not one more than its largest dependency's stalls its feed")
    func wrongLamportStallsFeed() throws {
        let alice = try Writer(seed: 6)
        let a1 = try alice.write(chat)
        var header = RecordHeader(
            kind: .content, conversation: chat, author: alice.author, sequence: 2, previous: a1.id, epoch: testEpoch,
            lamport: 50, createdAtMillis: 1, dependencies: VectorClock([alice.author: 1]))
        let pinned = try Record.sign(header: header, payload: [1], by: alice.identity.signing)
        header.lamport = 2
        let observer = try RecordStore.inMemory()
        let report = try observer.ingest([a1.bytes, pinned.bytes], receivedAtMillis: 1)
        #expect(report.outcomes == [.stored(a1.id), .stored(pinned.id)])
        #expect(report.applied == [a1.ref])
        let feed = try #require(try observer.feeds(of: chat).first)
        #expect(feed.stored == 2 && feed.applied == 1)
        #expect(feed.stalledReason?.contains("expected 2") == true)
    }

    @Test("an equivocating pair is kept as evidence and freezes the feed before the fork, in either arrival order")
    func equivocationResolvesIdentically() throws {
        let alice = try Writer(seed: 7)
        let twin = try Writer(twinOf: alice)
        let common = try (0..<2).map { _ in try alice.write(chat) }
        try twin.receive(common)
        let left = try (0..<3).map { _ in try alice.write(chat, "left") }
        let right = try (0..<2).map { _ in try twin.write(chat, "right") }
        #expect(left[0].header.sequence == 3 && right[0].header.sequence == 3 && left[0].id != right[0].id)

        var digests = Set<[UInt8]>()
        for order in [common + left + right, common + right + left, (common + left + right).reversed()] {
            let observer = try RecordStore.inMemory()
            _ = try deliver(Array(order), to: observer, batchSizes: 1...1, rng: nil)
            let feed = try #require(try observer.feeds(of: chat).first)
            #expect(feed.forkSequence == 3)
            #expect(feed.applied == 2 && feed.appliedHead == common[1].id)
            #expect(try !observer.forkEvidence(conversation: chat, author: alice.author).isEmpty)
            digests.insert(try observer.logDigest())
        }
        #expect(digests.count == 1)
    }

    @Test("records that depended on a forked region still apply, cut at the fork")
    func dependentsOfForkApply() throws {
        let alice = try Writer(seed: 8)
        let twin = try Writer(twinOf: alice)
        let bob = try Writer(seed: 9)
        let a1 = try alice.write(chat)
        try twin.receive([a1])
        let a2 = try alice.write(chat, "left")
        let t2 = try twin.write(chat, "right")
        try bob.receive([a1, a2])
        let b1 = try bob.write(chat)
        var digests = Set<[UInt8]>()
        for order in [[a1, a2, b1, t2], [a1, t2, b1, a2], [b1, t2, a2, a1]] {
            let observer = try RecordStore.inMemory()
            _ = try deliver(order, to: observer, batchSizes: 1...1, rng: nil)
            let clock = try observer.appliedClock(of: chat)
            #expect(clock[alice.author] == 1)
            #expect(clock[bob.author] == 1)
            digests.insert(try observer.logDigest())
        }
        #expect(digests.count == 1)
    }

    @Test("own records continue the feed: sequence, previous id, dependencies and Lamport are chosen by the store")
    func ownAppendsChain() throws {
        let alice = try Writer(seed: 10)
        let records = try (0..<5).map { _ in try alice.write(chat) }
        for (index, record) in records.enumerated() {
            #expect(record.header.sequence == UInt64(index + 1))
            #expect(record.header.lamport == UInt64(index + 1))
            #expect(record.header.previous == (index == 0 ? .none : records[index - 1].id))
            #expect(record.hasValidSignature)
        }
    }

    @Test("a node refuses to extend its own feed once it is forked")
    func ownForkedFeedIsFrozen() throws {
        let alice = try Writer(seed: 11)
        let twin = try Writer(twinOf: alice)
        _ = try alice.write(chat)
        let other = try twin.write(chat, "elsewhere")
        try alice.receive([other])
        #expect(throws: StoreError.self) { try alice.write(chat) }
    }
}

@Suite("The record log addressed by position (migration v9)")
struct RecordLogByPositionTests {
    @Test("a log written with the id index (v8) upgrades: rows, rowids and arrival times kept, only the position index")
    func upgradesFromV8() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-v9-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let scenario = try ConvergencePropertyTests.scenario(seed: 9, withFork: true).records
        let before: [Row]
        do {
            let store = try RecordStore.open(directory: directory)
            for (index, record) in scenario.enumerated() {
                _ = try store.ingest([record.bytes], receivedAtMillis: Int64(index))
            }
            let older = try DatabaseQueue()
            try Schema.migrator.migrate(older, upTo: "v8-durability-mark")
            try SearchMigrationTests().downgrade(store.writer, to: older)
            #expect(try SearchMigrationTests().schema(store.writer) == SearchMigrationTests().schema(older))
            #expect(try Self.recordIndexes(store.writer) == 2, "v8: the id index and the position index")
            before = try store.writer.read { db in try Row.fetchAll(db, sql: "SELECT rowid, * FROM record ORDER BY rowid") }
        }
        let reopened = try RecordStore.open(directory: directory)
        #expect(try Self.recordIndexes(reopened.writer) == 1, "only the position index")
        #expect(try reopened.writer.read { db in try Row.fetchAll(db, sql: "SELECT rowid, * FROM record ORDER BY rowid") } == before)
        #expect(try reopened.integrityCheck() == "ok")
        // Copies are still found (at the position they claim), forks still kept as evidence, records read back.
        let again = try reopened.ingest(scenario.map(\.bytes), receivedAtMillis: 99)
        #expect(again.outcomes.allSatisfy { if case .stored = $0 { false } else { true } })
        for record in scenario where try reopened.record(record.ref) != nil {
            #expect(try reopened.record(at: record.header.position)?.id == record.id)
        }
        #expect(try reopened.allRecords().count == before.count)
    }

    @Test("a record is read back by its ref only at its own position; a ref with another id finds nothing")
    func readByRef() throws {
        let alice = try Writer(seed: 21)
        let records = try (0..<4).map { _ in try alice.write(conversationID("refs")) }
        let store = try RecordStore.inMemory()
        _ = try store.ingest(records.dropLast().map(\.bytes), receivedAtMillis: 1)
        for record in records.dropLast() {
            #expect(try store.record(record.ref) == record)
            #expect(try store.holds(record.ref))
        }
        #expect(try !store.holds(records[3].ref))
        let wrong = RecordRef(id: records[0].id, position: records[1].header.position)
        #expect(try store.record(wrong) == nil)
        #expect(try !store.holds(wrong))
        #expect(try store.record(at: records[1].header.position) == records[1])
        #expect(try store.receiveTimes(of: [records[2].ref, wrong]) == [records[2].id: 1])
    }

    static func recordIndexes(_ database: any DatabaseReader) throws -> Int {
        try database.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'record'")!
        }
    }
}
