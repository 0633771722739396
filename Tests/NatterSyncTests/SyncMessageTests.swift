import Foundation
import NatterCrypto
import NatterModel
import Testing

// Goal: show that every sync message decodes to exactly what was encoded, and that every truncation, trailing byte,
// over-limit count, bad flag, unsorted list or out-of-place message from a peer is a named error, never a crash or
// an allocation sized by the peer. Method: one valid encoding of each message type, cut at every length and
// extended by a byte; hand-made headers with hostile counts; seeded random bytes and random mutations fed to the
// decoder and to a live session; protocol violations fed to a session one message at a time.
@testable import NatterSync

@Suite("Sync messages")
struct SyncMessageTests {
    static let alice = Fixture.identity(0x20)
    static let records = Fixture.feed(alice, in: Fixture.conversation(1), count: 3)
    static let feed = FeedKey(conversation: Fixture.conversation(1), author: Fixture.author(alice))

    static let samples: [SyncMessage] = [
        .summary(
            isFinal: true,
            entries: [
                SummaryEntry(conversation: Fixture.conversation(1), digest: .of([])),
                SummaryEntry(conversation: Fixture.conversation(2), digest: SyncDigest(high: 1, low: 2)),
            ].sorted { $0.conversation < $1.conversation }),
        .summary(isFinal: false, entries: []),
        .heads([
            HeadsEntry(
                conversation: Fixture.conversation(1), isFinal: true, wantsReply: true,
                feeds: [FeedHead(author: Fixture.author(alice), sequence: 3, head: records[2].id)]),
            HeadsEntry(conversation: Fixture.conversation(2), isFinal: false, wantsReply: false, feeds: []),
        ]),
        .records(records),
        .credit(4),
        .request(feed, from: 2),
        .done,
        .ping,
        .prune([feed, FeedKey(conversation: Fixture.conversation(1), author: Fixture.author(Fixture.identity(0x60)))].sorted()),
        .priorityRecords(records, credit: 1),
        .priorityRecords([records[0]]),
        .priorityCredit(2),
    ]

    static func decode(_ bytes: [UInt8]) -> Result<SyncMessage, SyncMessageError> {
        Result { () throws(SyncMessageError) in try SyncMessage.decode(bytes) }
    }

    static func error(_ bytes: [UInt8]) -> SyncMessageError? {
        if case .failure(let error) = decode(bytes) { return error }
        return nil
    }

    @Test("every message round-trips", arguments: samples)
    func roundTrip(message: SyncMessage) {
        #expect(Self.decode(message.encoded()) == .success(message))
    }

    @Test("every truncation is named, and a trailing byte is refused", arguments: samples)
    func truncationsAndTrailing(message: SyncMessage) {
        let bytes = message.encoded()
        #expect(Self.error([]) == .empty)
        for length in 1..<bytes.count {
            guard case .truncated = Self.error(Array(bytes.prefix(length))) else {
                Issue.record(
                    "prefix \(length) of \(bytes.count) is not a truncation: \(Self.decode(Array(bytes.prefix(length))))"
                )
                return
            }
        }
        #expect(Self.error(bytes + [0]) == .trailingBytes(1))
    }

    @Test("the fuzz corpus's sync seeds are messages that re-encode to themselves")
    func corpusSeeds() throws {
        let corpus = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Fuzz/sync")
        for name in ["prune", "reroute", "leaving", "priority-records", "priority-credit"] {
            let bytes = Array(try Data(contentsOf: corpus.appendingPathComponent("sync-\(name).bin")))
            #expect(SyncFrameKind.name(of: bytes) == name)
            #expect(SyncMessageFuzzing.reencodes(bytes) == true, "sync-\(name).bin")
        }
    }

    @Test("unknown types are refused")
    func unknownTypes() {
        for type: UInt8 in [0, 8, 9, 0x7f, 0xff] { #expect(Self.error([type]) == .unknownType(type)) }
    }

    @Test("over-limit counts are refused on their value, before anything is read or reserved")
    func overLimitCounts() {
        let summaryCount = UInt16(Limits.syncSummaryEntriesPerMessageMax + 1)
        #expect(
            Self.error([1, 1, UInt8(summaryCount >> 8), UInt8(summaryCount & 0xff)])
                == .tooMany(
                    field: "summary entries", count: Int(summaryCount), limit: Limits.syncSummaryEntriesPerMessageMax))
        #expect(Self.error([1, 1, 0xff, 0xff]) == .tooMany(field: "summary entries", count: 65535, limit: 8192))
        let conversations = UInt16(Limits.syncHeadsConversationsPerMessageMax + 1)
        #expect(
            Self.error([2, UInt8(conversations >> 8), UInt8(conversations & 0xff)])
                == .tooMany(field: "heads conversations", count: 1025, limit: 1024))
        // A feed count announced without its heads is a truncation; one above the limit is refused on its value.
        var heads: [UInt8] = [2, 0, 1] + Fixture.conversation(1).bytes + [1, 0x10, 0x00]
        #expect(Self.error(heads) == .truncated(field: "feed heads"))
        heads = [2, 0, 1] + Fixture.conversation(1).bytes + [1, 0x20, 0x01]
        #expect(Self.error(heads) == .tooMany(field: "feed heads", count: 8193, limit: 8192))
        // Two conversations whose feed counts add up past the limit: refused at the second count.
        heads = [2, 0, 2] + Fixture.conversation(1).bytes + [1, 0x10, 0x00]
        for index in 0..<4096 {
            heads += [UInt8](repeating: 0, count: 30) + [UInt8(index >> 8), UInt8(index & 0xff)]
            appendBigEndian(UInt64(1), to: &heads)
            heads += [UInt8](repeating: 9, count: 32)
        }
        heads += Fixture.conversation(2).bytes + [1, 0x10, 0x01]
        #expect(Self.error(heads) == .tooMany(field: "feed heads", count: 8193, limit: 8192))
        #expect(Self.error([3, 0, 9, 0, 1]) == .tooMany(field: "credit batches", count: 9, limit: 8))
        #expect(Self.error([3, 0, 0, 0, 0]) == .zeroCount(field: "records in the batch"))
        #expect(Self.error([3, 0, 8, 1, 1]) == .tooMany(field: "records in the batch", count: 257, limit: 256))
        #expect(Self.error([3, 0, 0, 0, 1, 0, 1, 0, 1]) == .recordTooLarge(65537))
        #expect(Self.error([3, 0, 0, 0, 1, 0xff, 0xff, 0xff, 0xff]) == .recordTooLarge(0xffff_ffff))
        #expect(Self.error([4, 0, 0]) == .zeroCount(field: "credit"))
        #expect(Self.error([4, 0, 9]) == .tooMany(field: "credit batches", count: 9, limit: 8))
        // The priority lane: the same layouts, its own window and caps.
        #expect(Self.error([14, 0, 9, 0, 1]) == .tooMany(field: "priority credit batches", count: 9, limit: 8))
        #expect(Self.error([14, 0, 0, 0, 0]) == .zeroCount(field: "records in the priority batch"))
        #expect(Self.error([14, 0, 2, 0, 33]) == .tooMany(field: "records in the priority batch", count: 33, limit: 32))
        #expect(Self.error([14, 0, 0, 0, 1, 0, 1, 0, 1]) == .recordTooLarge(65537))
        #expect(Self.error([15, 0, 0]) == .zeroCount(field: "priority credit"))
        #expect(Self.error([15, 0, 9]) == .tooMany(field: "priority credit batches", count: 9, limit: 8))
        #expect(Self.error([15, 0xff, 0xff]) == .tooMany(field: "priority credit batches", count: 65535, limit: 8))
    }

    @Test("a batch above the byte cap is refused at the record that crosses it")
    func batchBytes() {
        let large = Fixture.feed(Self.alice, in: Fixture.conversation(2), count: 5, payloadBytes: 60_000)
        let bytes = SyncMessage.encodeRecords(large.map(\.bytes))
        let total = large.reduce(0) { $0 + $1.bytes.count }
        #expect(total > Limits.syncBatchBytesMax)
        #expect(Self.error(bytes) == .batchTooLarge(large.prefix(5).reduce(0) { $0 + $1.bytes.count }))
        // The priority lane's cap is one largest record: two of 60,000 bytes cross it at the second.
        let priority = SyncMessage.encodeRecords(large.prefix(2).map(\.bytes), lane: .priority)
        #expect(Self.error(priority) == .batchTooLarge(large.prefix(2).reduce(0) { $0 + $1.bytes.count }))
        #expect(Limits.syncPriorityBatchBytesMax >= NatterModel.Limits.recordBytesMax, "every record fits")
        #expect(Self.decode(SyncMessage.encodeRecords([large[0].bytes], lane: .priority)) == .success(.priorityRecords([large[0]])))
    }

    @Test("bad flags, orders, sequences and records are named")
    func fieldRules() {
        let one = Fixture.conversation(1).bytes
        let two = Fixture.conversation(2).bytes
        let (low, high) = one.lexicographicallyPrecedes(two) ? (one, two) : (two, one)
        let digest = [UInt8](repeating: 7, count: 16)
        #expect(Self.error([1, 2, 0, 0]) == .invalidFlags(2))
        #expect(Self.error([1, 1, 0, 2] + high + digest + low + digest) == .unsorted(field: "summary conversations"))
        #expect(Self.error([1, 1, 0, 2] + low + digest + low + digest) == .unsorted(field: "summary conversations"))

        let author = Fixture.author(Self.alice).bytes
        let head = Self.records[0].id.bytes
        func headsMessage(flags: UInt8, sequence: UInt64, head: [UInt8]) -> [UInt8] {
            var out: [UInt8] = [2, 0, 1] + one + [flags, 0, 1] + author
            appendBigEndian(sequence, to: &out)
            return out + head
        }
        #expect(Self.error(headsMessage(flags: 4, sequence: 1, head: head)) == .invalidFlags(4))
        #expect(
            Self.error(headsMessage(flags: 1, sequence: 0, head: head))
                == .sequenceOutOfRange(field: "feed sequence", 0))
        #expect(
            Self.error(headsMessage(flags: 1, sequence: (1 << 62) + 1, head: head))
                == .sequenceOutOfRange(field: "feed sequence", (1 << 62) + 1))
        #expect(Self.error(headsMessage(flags: 1, sequence: 1, head: [UInt8](repeating: 0, count: 32))) == .zeroHead)
        var twice: [UInt8] = [2, 0, 1] + one + [1, 0, 2]
        for _ in 0..<2 {
            twice += author
            appendBigEndian(UInt64(1), to: &twice)
            twice += head
        }
        #expect(Self.error(twice) == .unsorted(field: "feed authors"))
        let unfinished: [UInt8] = [2, 0, 2] + one + [0, 0, 0] + two + [1, 0, 0]
        #expect(Self.error(unfinished) == .unexpected("an unfinished heads entry before another"))

        var request: [UInt8] = [5] + one + author
        appendBigEndian(UInt64(0), to: &request)
        #expect(Self.error(request) == .sequenceOutOfRange(field: "from", 0))

        var broken = Self.records[1].bytes
        broken[0] = 2
        #expect(
            Self.error(SyncMessage.encodeRecords([Self.records[0].bytes, broken]))
                == .invalidRecord(index: 1, .unsupportedVersion(2)))
        #expect(
            Self.error(SyncMessage.encodeRecords([Array(Self.records[0].bytes.dropLast())]))
                == .invalidRecord(index: 0, .truncated(field: "signature")))
    }

    @Test("random bytes and random mutations never crash the decoder or a session")
    func randomInput() {
        var generator = SeededGenerator(seed: 2024)
        let valid = Self.samples.map { $0.encoded() }
        var session = SyncSession(source: Fixture.log(Self.records))
        _ = session.start(now: .zero)
        var decoded = 0
        for round in 0..<20_000 {
            var bytes: [UInt8]
            if round % 2 == 0 {
                bytes = generator.bytes(Int.random(in: 0...200, using: &generator))
                if !bytes.isEmpty { bytes[0] = UInt8.random(in: 0...15, using: &generator) }
            } else {
                bytes = valid[Int.random(in: 0..<valid.count, using: &generator)]
                for _ in 0..<Int.random(in: 1...4, using: &generator) where !bytes.isEmpty {
                    bytes[Int.random(in: 0..<bytes.count, using: &generator)] = UInt8.random(
                        in: 0...255, using: &generator)
                }
                if Bool.random(using: &generator) {
                    bytes = Array(bytes.prefix(Int.random(in: 0...bytes.count, using: &generator)))
                }
            }
            if case .success = Self.decode(bytes) { decoded += 1 }
            if round < 2_000 {
                // A fresh session per message, so each one meets a session in its initial state.
                var fresh = SyncSession(source: Fixture.log(Self.records))
                _ = fresh.start(now: .zero)
                for action in fresh.receive(message: bytes, now: .zero) {
                    if case .close(let error) = action, case .malformed = error { continue }
                    if case .close(let error) = action { Issue.record("unexpected close \(error)") }
                }
            }
            _ = session.receive(message: bytes, now: .zero)
        }
        #expect(decoded > 0)
    }
}

@Suite("Sync protocol violations")
struct SyncViolationTests {
    static let alice = Fixture.identity(0x20)
    static let records = Fixture.feed(alice, in: Fixture.conversation(1), count: 3)

    static func session() -> SyncSession<InMemoryRecordSource> {
        var session = SyncSession(source: InMemoryRecordSource())
        _ = session.start(now: .zero)
        return session
    }

    static func closes(_ actions: [SyncAction]) -> SyncError? {
        for case .close(let error) in actions { return error }
        return nil
    }

    @Test("a batch beyond its lane's window closes the link", arguments: SyncLane.allCases)
    func beyondWindow(lane: SyncLane) {
        var session = Self.session()
        let batch = SyncMessage.encodeRecords([Self.records[0].bytes], lane: lane)
        for _ in 0..<lane.windowBatches {
            #expect(Self.closes(session.receive(message: batch, now: .zero)) == nil)
        }
        let expected = lane == .bulk ? "a batch beyond the 8-batch window" : "a priority batch beyond the 8-batch priority window"
        #expect(Self.closes(session.receive(message: batch, now: .zero)) == .malformed(.unexpected(expected)))
        // The other lane's window is apart: it still takes a batch.
        let other = SyncMessage.encodeRecords([Self.records[0].bytes], lane: lane == .bulk ? .priority : .bulk)
        var apart = Self.session()
        for _ in 0..<lane.windowBatches { _ = apart.receive(message: batch, now: .zero) }
        #expect(Self.closes(apart.receive(message: other, now: .zero)) == nil)
    }

    @Test("credit never spent closes the link, alone or riding on a batch, on either lane", arguments: SyncLane.allCases)
    func creditOverflow(lane: SyncLane) {
        let expected = lane == .bulk
            ? "credit of 1 batches beyond the window" : "priority credit of 1 batches beyond the priority window"
        var session = Self.session()
        let alone = lane == .bulk ? SyncMessage.credit(1) : .priorityCredit(1)
        #expect(Self.closes(session.receive(message: alone.encoded(), now: .zero)) == .malformed(.unexpected(expected)))
        var riding = Self.session()
        let batch = SyncMessage.encodeRecords([Self.records[0].bytes], credit: 1, lane: lane)
        #expect(Self.closes(riding.receive(message: batch, now: .zero)) == .malformed(.unexpected(expected)))
    }

    @Test("a second DONE closes the link")
    func secondDone() {
        var session = Self.session()
        #expect(Self.closes(session.receive(message: SyncMessage.done.encoded(), now: .zero)) == nil)
        #expect(
            Self.closes(session.receive(message: SyncMessage.done.encoded(), now: .zero))
                == .malformed(.unexpected("a second DONE")))
    }

    @Test("parts out of place close the link")
    func partsOutOfPlace() {
        let (one, two) = (Fixture.conversation(1), Fixture.conversation(2))
        let (low, high) = one < two ? (one, two) : (two, one)
        var session = Self.session()
        let unfinished = HeadsEntry(conversation: low, isFinal: false, wantsReply: false, feeds: [])
        let other = HeadsEntry(conversation: high, isFinal: true, wantsReply: false, feeds: [])
        #expect(Self.closes(session.receive(message: SyncMessage.heads([unfinished]).encoded(), now: .zero)) == nil)
        #expect(
            Self.closes(session.receive(message: SyncMessage.heads([other]).encoded(), now: .zero))
                == .malformed(.unexpected("heads of another conversation before the last part of the previous one")))

        var summaries = Self.session()
        let digest = SyncDigest(high: 0, low: 0)
        let first = SyncMessage.summary(isFinal: false, entries: [SummaryEntry(conversation: high, digest: digest)])
        let second = SyncMessage.summary(isFinal: true, entries: [SummaryEntry(conversation: low, digest: digest)])
        #expect(Self.closes(summaries.receive(message: first.encoded(), now: .zero)) == nil)
        #expect(
            Self.closes(summaries.receive(message: second.encoded(), now: .zero))
                == .malformed(.unsorted(field: "summary conversations across parts")))
    }

    @Test("a record the store rejects closes the link as the peer's fault")
    func rejectedRecord() {
        var session = Self.session()
        _ = session.receive(message: SyncMessage.records([Self.records[0]]).encoded(), now: .zero)
        #expect(Self.closes(session.ingested([.rejected(.badSignature)], now: .zero)) == .invalidRecord(.badSignature))
    }
}
