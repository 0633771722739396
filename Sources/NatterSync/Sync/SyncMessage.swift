internal import NatterCrypto
internal import NatterModel

/// A 16-byte digest of one conversation's feed heads (BLAKE2b-128), compared to skip unchanged conversations.
struct SyncDigest: Hashable, Sendable {
    static let byteCount = 16
    let high: UInt64
    let low: UInt64

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// Exactly 16 bytes.
    init(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count == Self.byteCount, "a sync digest is 16 bytes")
        var words: [UInt64] = [0, 0]
        for (index, byte) in bytes.enumerated() { words[index / 8] = words[index / 8] << 8 | UInt64(byte) }
        self.init(high: words[0], low: words[1])
    }

    var bytes: [UInt8] {
        var out = [UInt8]()
        appendBigEndian(high, to: &out)
        appendBigEndian(low, to: &out)
        return out
    }

    /// The ASCII label that opens every digest, so it can never equal a hash made for another purpose.
    static let label = Array("natter/v1/sync-digest".utf8)

    /// BLAKE2b-128 of the label followed by each feed head (author, sequence as u64, head id) in ascending author
    /// order, exactly as the heads travel in a HEADS message.
    static func of(_ heads: [FeedHead]) -> SyncDigest {
        var bytes = label
        bytes.reserveCapacity(label.count + heads.count * SyncMessage.feedHeadBytes)
        for feed in heads {
            feed.author.raw.appendBytes(to: &bytes)
            appendBigEndian(feed.sequence, to: &bytes)
            feed.head.raw.appendBytes(to: &bytes)
        }
        return SyncDigest(Blake2b.hash(bytes, outputBytes: byteCount))
    }
}

/// One conversation in a SUMMARY.
struct SummaryEntry: Hashable, Sendable {
    let conversation: ConversationID
    let digest: SyncDigest
}

/// One conversation's part in a HEADS message.
struct HeadsEntry: Hashable, Sendable {
    let conversation: ConversationID
    /// The last part of this conversation's heads (the receiver may then treat absent authors as empty feeds).
    let isFinal: Bool
    /// The sender wants the receiver's heads of this conversation in return (an offer, not an answer).
    let wantsReply: Bool
    /// Strictly ascending by author.
    let feeds: [FeedHead]
}

/// The messages of a sync session, one per secure-channel application message. Layouts: docs/protocol.md §3.
enum SyncMessage: Equatable, Sendable {
    /// Per conversation a digest of its feed heads; `isFinal` marks the last part of one summary.
    case summary(isFinal: Bool, entries: [SummaryEntry])
    /// Full feed heads of some conversations.
    case heads([HeadsEntry])
    /// A batch of records; it spends one unit of the receiver's credit and returns `credit` batches of the
    /// sender's (0 when none is due), so a link with records flowing both ways needs no CREDIT messages.
    case records([Record], credit: Int = 0)
    /// The receiver returns this many batches of credit.
    case credit(Int)
    /// Please send this feed from `from` on (the node found it missing).
    case request(FeedKey, from: UInt64)
    /// The sender has sent everything of the initial exchange.
    case done
    /// Heartbeat.
    case ping
    /// Stop pushing these feeds' new records to the sender live: it gets them over another link (a REQUEST for
    /// the feed undoes it). Strictly ascending, 1…`syncPruneFeedsPerMessageMax`.
    case prune([FeedKey])
    /// The sender will close this link once its grace period is over: graft elsewhere the feeds it supplies.
    case leaving
    /// The sender's supply of these feeds changed (it lost or left its tree parent and grafted them back): a
    /// receiver whose parent for one of them is the sender races it again. Same layout as PRUNE.
    case reroute([FeedKey])
    /// A batch on the priority lane (docs/protocol.md §3.7): the layout of RECORDS, under the priority window and
    /// the priority caps; `credit` returns priority batches.
    case priorityRecords([Record], credit: Int = 0)
    /// The receiver returns this many batches of priority credit.
    case priorityCredit(Int)

    /// Message type bytes (the first byte of every message).
    enum Tag: UInt8 {
        case summary = 1
        case heads = 2
        case records = 3
        case credit = 4
        case request = 5
        case done = 6
        case ping = 7
        case prune = 11
        case leaving = 12
        case reroute = 13
        // 14 and 15 were free: 8–10 are file frames (FileFrame), 16 is TYPING (TypingFrame).
        case priorityRecords = 14
        case priorityCredit = 15
    }

    /// Bytes of one summary entry: conversation and digest.
    static let summaryEntryBytes = 32 + SyncDigest.byteCount
    /// Bytes of one feed head: author, sequence, head id.
    static let feedHeadBytes = 32 + 8 + 32
    /// Bytes before a conversation's feed heads in HEADS: conversation, flags, feed count.
    static let headsEntryFixedBytes = 32 + 1 + 2
    /// Bytes of one feed in PRUNE: conversation, author.
    static let pruneFeedBytes = 32 + 32

    static let summaryFinalFlag: UInt8 = 0x01
    static let headsFinalFlag: UInt8 = 0x01
    static let headsWantsReplyFlag: UInt8 = 0x02

    // MARK: - Encoding

    /// The message's bytes. Callers respect the limits; the encoder checks them as preconditions.
    func encoded() -> [UInt8] {
        var out = [UInt8]()
        switch self {
        case .summary(let isFinal, let entries):
            precondition(entries.count <= Limits.syncSummaryEntriesPerMessageMax)
            out.reserveCapacity(4 + entries.count * Self.summaryEntryBytes)
            out.append(Tag.summary.rawValue)
            out.append(isFinal ? Self.summaryFinalFlag : 0)
            appendBigEndian(UInt16(entries.count), to: &out)
            for entry in entries {
                entry.conversation.raw.appendBytes(to: &out)
                appendBigEndian(entry.digest.high, to: &out)
                appendBigEndian(entry.digest.low, to: &out)
            }
        case .heads(let entries):
            precondition(entries.count <= Limits.syncHeadsConversationsPerMessageMax)
            precondition(entries.map(\.feeds.count).reduce(0, +) <= Limits.syncFeedHeadsPerMessageMax)
            out.append(Tag.heads.rawValue)
            appendBigEndian(UInt16(entries.count), to: &out)
            for entry in entries {
                entry.conversation.raw.appendBytes(to: &out)
                out.append(
                    (entry.isFinal ? Self.headsFinalFlag : 0) | (entry.wantsReply ? Self.headsWantsReplyFlag : 0))
                appendBigEndian(UInt16(entry.feeds.count), to: &out)
                for feed in entry.feeds {
                    feed.author.raw.appendBytes(to: &out)
                    appendBigEndian(feed.sequence, to: &out)
                    feed.head.raw.appendBytes(to: &out)
                }
            }
        case .records(let records, let credit):
            out = Self.encodeRecords(records.map(\.bytes), credit: credit)
        case .priorityRecords(let records, let credit):
            out = Self.encodeRecords(records.map(\.bytes), credit: credit, lane: .priority)
        case .credit(let batches):
            precondition((1...Limits.syncWindowBatches).contains(batches))
            out.append(Tag.credit.rawValue)
            appendBigEndian(UInt16(batches), to: &out)
        case .priorityCredit(let batches):
            precondition((1...Limits.syncPriorityWindowBatches).contains(batches))
            out.append(Tag.priorityCredit.rawValue)
            appendBigEndian(UInt16(batches), to: &out)
        case .request(let feed, let from):
            out.append(Tag.request.rawValue)
            feed.conversation.raw.appendBytes(to: &out)
            feed.author.raw.appendBytes(to: &out)
            appendBigEndian(from, to: &out)
        case .done:
            out.append(Tag.done.rawValue)
        case .ping:
            out.append(Tag.ping.rawValue)
        case .leaving:
            out.append(Tag.leaving.rawValue)
        case .prune(let feeds), .reroute(let feeds):
            precondition((1...Limits.syncPruneFeedsPerMessageMax).contains(feeds.count))
            out.reserveCapacity(3 + feeds.count * Self.pruneFeedBytes)
            if case .prune = self { out.append(Tag.prune.rawValue) } else { out.append(Tag.reroute.rawValue) }
            appendBigEndian(UInt16(feeds.count), to: &out)
            for feed in feeds {
                feed.conversation.raw.appendBytes(to: &out)
                feed.author.raw.appendBytes(to: &out)
            }
        }
        return out
    }

    /// A RECORDS (or, on the priority lane, PRIORITY RECORDS) message from raw record bytes (the sending hot path:
    /// no decoding of our own records).
    static func encodeRecords(_ records: [[UInt8]], credit: Int = 0, lane: SyncLane = .bulk) -> [UInt8] {
        precondition((1...lane.batchRecordsMax).contains(records.count))
        precondition((0...lane.windowBatches).contains(credit))
        var out = [UInt8]()
        out.reserveCapacity(5 + records.reduce(0) { $0 + 4 + $1.count })
        out.append(lane == .bulk ? Tag.records.rawValue : Tag.priorityRecords.rawValue)
        appendBigEndian(UInt16(credit), to: &out)
        appendBigEndian(UInt16(records.count), to: &out)
        for record in records {
            appendBigEndian(UInt32(record.count), to: &out)
            out.append(contentsOf: record)
        }
        return out
    }

    // MARK: - Decoding

    /// Decodes one message, checking every count and length against the bytes present and its limit before
    /// allocating, and rejecting trailing bytes. Records in a batch are decoded structurally (`Record.decode`);
    /// their signatures are the store's business.
    static func decode(_ bytes: [UInt8]) throws(SyncMessageError) -> SyncMessage {
        var reader = SyncReader(bytes)
        guard !bytes.isEmpty else { throw .empty }
        let type = try reader.u8("type")
        guard let tag = Tag(rawValue: type) else { throw .unknownType(type) }
        let message: SyncMessage
        switch tag {
        case .summary: message = try decodeSummary(&reader)
        case .heads: message = try decodeHeads(&reader)
        case .records: message = try decodeRecords(&reader, lane: .bulk)
        case .priorityRecords: message = try decodeRecords(&reader, lane: .priority)
        case .credit, .priorityCredit:
            let lane: SyncLane = tag == .credit ? .bulk : .priority
            let batches = Int(try reader.u16("\(lane.prefix)credit"))
            guard batches >= 1 else { throw .zeroCount(field: "\(lane.prefix)credit") }
            guard batches <= lane.windowBatches else {
                throw .tooMany(field: "\(lane.prefix)credit batches", count: batches, limit: lane.windowBatches)
            }
            message = lane == .bulk ? .credit(batches) : .priorityCredit(batches)
        case .request:
            let conversation = ConversationID(raw: try reader.bytes32("conversation"))
            let author = AuthorID(raw: try reader.bytes32("author"))
            let from = try reader.u64("from")
            guard (1...NatterModel.Limits.sequenceMax).contains(from) else {
                throw .sequenceOutOfRange(field: "from", from)
            }
            message = .request(FeedKey(conversation: conversation, author: author), from: from)
        case .done: message = .done
        case .ping: message = .ping
        case .prune: message = try decodePrune(&reader, field: "pruned feeds")
        case .leaving: message = .leaving
        case .reroute:
            guard case .prune(let feeds) = try decodePrune(&reader, field: "rerouted feeds") else { fatalError() }
            message = .reroute(feeds)
        }
        try reader.finish()
        return message
    }

    private static func decodeSummary(_ reader: inout SyncReader) throws(SyncMessageError) -> SyncMessage {
        let flags = try reader.u8("flags")
        guard flags & ~summaryFinalFlag == 0 else { throw .invalidFlags(flags) }
        let count = try reader.counted(
            "entry count", "summary entries", limit: Limits.syncSummaryEntriesPerMessageMax,
            entryBytes: summaryEntryBytes)
        var entries = [SummaryEntry]()
        entries.reserveCapacity(count)
        for _ in 0..<count {
            let conversation = ConversationID(raw: try reader.bytes32("conversation"))
            let digest = SyncDigest(high: try reader.u64("digest"), low: try reader.u64("digest"))
            if let last = entries.last, !(last.conversation < conversation) {
                throw .unsorted(field: "summary conversations")
            }
            entries.append(SummaryEntry(conversation: conversation, digest: digest))
        }
        return .summary(isFinal: flags & summaryFinalFlag != 0, entries: entries)
    }

    private static func decodeHeads(_ reader: inout SyncReader) throws(SyncMessageError) -> SyncMessage {
        let count = Int(try reader.u16("conversation count"))
        guard count <= Limits.syncHeadsConversationsPerMessageMax else {
            throw .tooMany(
                field: "heads conversations", count: count, limit: Limits.syncHeadsConversationsPerMessageMax)
        }
        try reader.require(count * headsEntryFixedBytes, "heads entries")
        var entries = [HeadsEntry]()
        entries.reserveCapacity(count)
        var feedTotal = 0
        for index in 0..<count {
            let conversation = ConversationID(raw: try reader.bytes32("conversation"))
            let flags = try reader.u8("flags")
            guard flags & ~(headsFinalFlag | headsWantsReplyFlag) == 0 else { throw .invalidFlags(flags) }
            let isFinal = flags & headsFinalFlag != 0
            // Parts of one conversation are contiguous: only the last entry of a message may leave it unfinished.
            guard isFinal || index == count - 1 else { throw .unexpected("an unfinished heads entry before another") }
            let feedCount = Int(try reader.u16("feed count"))
            feedTotal += feedCount
            guard feedTotal <= Limits.syncFeedHeadsPerMessageMax else {
                throw .tooMany(field: "feed heads", count: feedTotal, limit: Limits.syncFeedHeadsPerMessageMax)
            }
            try reader.require(feedCount * feedHeadBytes, "feed heads")
            var feeds = [FeedHead]()
            feeds.reserveCapacity(feedCount)
            for _ in 0..<feedCount {
                let author = AuthorID(raw: try reader.bytes32("author"))
                let sequence = try reader.u64("sequence")
                let head = RecordID(raw: try reader.bytes32("head"))
                guard (1...NatterModel.Limits.sequenceMax).contains(sequence) else {
                    throw .sequenceOutOfRange(field: "feed sequence", sequence)
                }
                guard head != .none else { throw .zeroHead }
                if let last = feeds.last, !(last.author < author) { throw .unsorted(field: "feed authors") }
                feeds.append(FeedHead(author: author, sequence: sequence, head: head))
            }
            entries.append(
                HeadsEntry(
                    conversation: conversation, isFinal: isFinal, wantsReply: flags & headsWantsReplyFlag != 0,
                    feeds: feeds))
        }
        return .heads(entries)
    }

    /// A PRUNE's feed list (REROUTE has the same), returned as a PRUNE.
    private static func decodePrune(_ reader: inout SyncReader, field: String) throws(SyncMessageError) -> SyncMessage {
        let count = try reader.counted(
            "feed count", field, limit: Limits.syncPruneFeedsPerMessageMax, entryBytes: pruneFeedBytes,
            atLeastOne: true)
        var feeds = [FeedKey]()
        feeds.reserveCapacity(count)
        for _ in 0..<count {
            let feed = FeedKey(
                conversation: ConversationID(raw: try reader.bytes32("conversation")),
                author: AuthorID(raw: try reader.bytes32("author")))
            if let last = feeds.last, !(last < feed) { throw .unsorted(field: field) }
            feeds.append(feed)
        }
        return .prune(feeds)
    }

    /// A RECORDS or PRIORITY RECORDS message (one layout, the lane's caps).
    private static func decodeRecords(_ reader: inout SyncReader, lane: SyncLane) throws(SyncMessageError)
        -> SyncMessage
    {
        let credit = Int(try reader.u16("\(lane.prefix)credit"))
        guard credit <= lane.windowBatches else {
            throw .tooMany(field: "\(lane.prefix)credit batches", count: credit, limit: lane.windowBatches)
        }
        let count = Int(try reader.u16("record count"))
        let field = "records in the \(lane.prefix)batch"
        guard count >= 1 else { throw .zeroCount(field: field) }
        guard count <= lane.batchRecordsMax else {
            throw .tooMany(field: field, count: count, limit: lane.batchRecordsMax)
        }
        try reader.require(count * 4, "record lengths")
        var records = [Record]()
        records.reserveCapacity(count)
        var total = 0
        for index in 0..<count {
            let length = Int(try reader.u32("record length"))
            guard length <= NatterModel.Limits.recordBytesMax else { throw .recordTooLarge(length) }
            total += length
            guard total <= lane.batchBytesMax else { throw .batchTooLarge(total) }
            let bytes = try reader.take(length, "record")
            do {
                records.append(try Record.decode(bytes))
            } catch {
                throw .invalidRecord(index: index, error)
            }
        }
        return lane == .bulk ? .records(records, credit: credit) : .priorityRecords(records, credit: credit)
    }
}

/// Reads big-endian fields from a message, checking that each is present before reading it.
struct SyncReader {
    private let bytes: [UInt8]
    private(set) var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    var remaining: Int { bytes.count - offset }

    /// Fails unless `count` more bytes are present (used before reserving room for a counted list).
    func require(_ count: Int, _ field: String) throws(SyncMessageError) {
        guard remaining >= count else { throw .truncated(field: field) }
    }

    mutating func u8(_ field: String) throws(SyncMessageError) -> UInt8 {
        try require(1, field)
        defer { offset += 1 }
        return bytes[offset]
    }

    /// Reads a u16 count of `entries`, checks it against `limit` (and that it is not zero when `atLeastOne`), then
    /// that `count × entryBytes` bytes are present: the order §3.1 requires, before anything is reserved.
    mutating func counted(
        _ countField: String, _ entries: String, limit: Int, entryBytes: Int, atLeastOne: Bool = false
    ) throws(SyncMessageError) -> Int {
        let count = Int(try u16(countField))
        if atLeastOne, count == 0 { throw .zeroCount(field: entries) }
        guard count <= limit else { throw .tooMany(field: entries, count: count, limit: limit) }
        try require(count * entryBytes, entries)
        return count
    }

    mutating func u16(_ field: String) throws(SyncMessageError) -> UInt16 { UInt16(try uint(2, field)) }
    mutating func u32(_ field: String) throws(SyncMessageError) -> UInt32 { UInt32(try uint(4, field)) }
    mutating func u64(_ field: String) throws(SyncMessageError) -> UInt64 { try uint(8, field) }

    private mutating func uint(_ width: Int, _ field: String) throws(SyncMessageError) -> UInt64 {
        try require(width, field)
        var value: UInt64 = 0
        for index in offset..<(offset + width) { value = value << 8 | UInt64(bytes[index]) }
        offset += width
        return value
    }

    mutating func bytes32(_ field: String) throws(SyncMessageError) -> Bytes32 {
        try require(32, field)
        defer { offset += 32 }
        return Bytes32(bytes[offset..<(offset + 32)])
    }

    mutating func take(_ count: Int, _ field: String) throws(SyncMessageError) -> [UInt8] {
        try require(count, field)
        defer { offset += count }
        return Array(bytes[offset..<(offset + count)])
    }

    /// Fails if bytes follow the last field.
    func finish() throws(SyncMessageError) {
        guard remaining == 0 else { throw .trailingBytes(remaining) }
    }
}

@inline(__always)
func appendBigEndian<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    var big = value.bigEndian
    withUnsafeBytes(of: &big) { out.append(contentsOf: $0) }
}

/// The sync message decoder as a fuzz target sees it (Sources/natter-fuzz): decodes any bytes and, if they are a
/// sync message, checks that it re-encodes to exactly them (one encoding per message). Decodes nothing for the
/// session; `nil` when the bytes are not a sync message.
public enum SyncMessageFuzzing {
    /// Whether `bytes` decode and re-encode to themselves; nil when the decoder refuses them.
    public static func reencodes(_ bytes: [UInt8]) -> Bool? {
        guard let message = try? SyncMessage.decode(bytes) else { return nil }
        return message.encoded() == bytes
    }

    /// One message of every type but RECORDS and PRIORITY RECORDS (whose seeds carry real records), encoded: the
    /// fuzz target's generated seeds.
    public static var seeds: [(name: String, bytes: [UInt8])] {
        let conversation = ConversationID(bytes: [UInt8](repeating: 0x11, count: 32))
        let author = AuthorID(raw: Bytes32([UInt8](repeating: 0x22, count: 32)))
        let feed = FeedKey(conversation: conversation, author: author)
        let head = FeedHead(author: author, sequence: 3, head: RecordID(bytes: [UInt8](repeating: 0x33, count: 32)))
        let messages: [(String, SyncMessage)] = [
            ("summary", .summary(isFinal: true, entries: [SummaryEntry(conversation: conversation, digest: .of([head]))])),
            ("summary-empty", .summary(isFinal: true, entries: [])),
            (
                "heads",
                .heads([HeadsEntry(conversation: conversation, isFinal: true, wantsReply: true, feeds: [head])])
            ),
            ("credit", .credit(4)),
            ("request", .request(feed, from: 1)),
            ("done", .done),
            ("ping", .ping),
        ]
        return messages.map { ("sync-\($0.0)", $0.1.encoded()) }
    }
}

/// Names the type of an application message (its first byte, §3.2 and §11.3), for counting frames by kind in
/// reports and diagnostics. Decodes nothing else.
public enum SyncFrameKind {
    public static func name(of message: [UInt8]) -> String {
        switch message.first {
        case 1: "summary"
        case 2: "heads"
        case 3: "records"
        case 4: "credit"
        case 5: "request"
        case 6: "done"
        case 7: "ping"
        case 8: "chunk-request"
        case 9: "chunk"
        case 10: "chunk-unavailable"
        case 11: "prune"
        case 12: "leaving"
        case 13: "reroute"
        case 14: "priority-records"
        case 15: "priority-credit"
        default: "unknown"
        }
    }
}
