/// The trace's encoder and decoder (layout in NodeTrace.swift). The decoder checks every length against
/// `TraceLimits` before it allocates, accepts only what the encoder writes (booleans 0 or 1, known tags, no bytes
/// left over in a body), and says where it stopped.
public enum TraceCodec {
    /// The file's start: magic, version, and the header.
    public static func encode(_ header: TraceHeader) -> [UInt8] {
        var body = [UInt8]()
        body += header.node.bytes
        put(UInt64(bitPattern: header.startMillis), &body)
        body += header.initialLogDigest
        put16(header.settings.count, &body)
        for (name, value) in header.settings {
            let bytes = Array(name.utf8.prefix(255))
            body.append(UInt8(bytes.count))
            body += bytes
            put(UInt64(bitPattern: value), &body)
        }
        put32(header.initialDraws.count, &body)
        for draw in header.initialDraws { put(draw, &body) }
        put32(header.initialRecords.count, &body)
        for ref in header.initialRecords { putRef(ref, &body) }
        var out = TraceHeader.magic + [TraceHeader.version]
        put32(body.count, &out)
        return out + body
    }

    /// One entry, with its length prefix.
    public static func encode(_ entry: TraceEntry) -> [UInt8] {
        var body = [entry.call.kind]
        put(UInt64(bitPattern: entry.at), &body)
        putCall(entry.call, &body)
        put32(entry.draws.count, &body)
        for draw in entry.draws { put(draw, &body) }
        put16(entry.writes.count, &body)
        for write in entry.writes {
            put16(write.count, &body)
            for result in write {
                switch result {
                case .refused: body.append(0)
                case .wrote(let conversation, let records):
                    body.append(1)
                    body += conversation.bytes
                    putRecords(records, &body)
                }
            }
        }
        var out = [UInt8]()
        out.reserveCapacity(body.count + 4)
        put32(body.count, &out)
        return out + body
    }

    /// A whole trace: the header and every entry, or where and why it does not decode.
    public static func decode(_ bytes: [UInt8]) throws(TraceFormatError) -> (TraceHeader, [TraceEntry]) {
        let (header, entries, _) = try decode(bytes, cutEnd: false)
        return (header, entries)
    }

    /// As `decode`, for the trace of a node that may have died while writing it: a last entry cut short is left out,
    /// and the byte where it starts is returned (nil: the trace is whole). Anything else malformed is still refused.
    public static func decodeCut(_ bytes: [UInt8]) throws(TraceFormatError) -> (TraceHeader, [TraceEntry], cutAt: Int?)
    {
        try decode(bytes, cutEnd: true)
    }

    private static func decode(_ bytes: [UInt8], cutEnd: Bool) throws(TraceFormatError) -> (
        TraceHeader, [TraceEntry], cutAt: Int?
    ) {
        var reader = TraceReader(bytes)
        let header = try decodeHeader(&reader)
        var entries = [TraceEntry]()
        while !reader.atEnd {
            if cutEnd, reader.remaining < 4 { return (header, entries, reader.offset) }
            let length = try reader.count32(max: TraceLimits.entryBytesMax, "entry length")
            if cutEnd, length > reader.remaining { return (header, entries, reader.offset - 4) }
            var body = TraceReader(try reader.take(length, "entry of \(length) bytes"), base: reader.offset - length)
            entries.append(try decodeEntry(&body))
            guard body.atEnd else { throw body.error("\(body.remaining) bytes after entry \(entries.count)") }
        }
        return (header, entries, nil)
    }

    private static func decodeHeader(_ reader: inout TraceReader) throws(TraceFormatError) -> TraceHeader {
        guard try reader.take(TraceHeader.magic.count, "magic") == TraceHeader.magic else {
            throw TraceFormatError(offset: 0, "not a natter trace (no \"natter-trace\" magic)")
        }
        let version = try reader.byte("version")
        guard version == TraceHeader.version else {
            throw TraceFormatError(offset: 12, "version \(version) (this natter reads \(TraceHeader.version))")
        }
        let length = try reader.count32(max: TraceLimits.headerBytesMax, "header length")
        var body = TraceReader(try reader.take(length, "header of \(length) bytes"), base: reader.offset - length)
        let node = AuthorID(bytes: try body.take(32, "node"))
        let start = Int64(bitPattern: try body.u64("start time"))
        let digest = try body.take(32, "initial log digest")
        var settings = [(name: String, value: Int64)]()
        for _ in 0..<(try body.count16(max: TraceLimits.settingsMax, "settings")) {
            let nameBytes = try body.take(Int(try body.byte("setting name length")), "setting name")
            guard nameBytes.allSatisfy({ (0x21...0x7e).contains($0) }), !nameBytes.isEmpty else {
                throw body.error("a setting name that is not printable ASCII")
            }
            settings.append((String(decoding: nameBytes, as: UTF8.self), Int64(bitPattern: try body.u64("setting"))))
        }
        var draws = [UInt64]()
        for _ in 0..<(try body.count32(max: TraceLimits.drawsMax, "initial draws")) {
            draws.append(try body.u64("draw"))
        }
        var records = [RecordRef]()
        let count = try body.count32(max: TraceLimits.headerBytesMax / 104, "initial records")
        guard count * 104 <= body.remaining else { throw body.error("\(count) initial records do not fit the header") }
        for _ in 0..<count { records.append(try body.ref()) }
        guard body.atEnd else { throw body.error("\(body.remaining) bytes after the header") }
        return TraceHeader(
            node: node, startMillis: start, initialLogDigest: digest, settings: settings, initialDraws: draws,
            initialRecords: records)
    }

    private static func decodeEntry(_ reader: inout TraceReader) throws(TraceFormatError) -> TraceEntry {
        let kind = try reader.byte("kind")
        let at = Int64(bitPattern: try reader.u64("time"))
        let call = try decodeCall(kind, &reader)
        var draws = [UInt64]()
        for _ in 0..<(try reader.count32(max: TraceLimits.drawsMax, "draws")) { draws.append(try reader.u64("draw")) }
        var writes = [[TraceWrite]]()
        for _ in 0..<(try reader.count16(max: TraceLimits.writesMax, "writes")) {
            var results = [TraceWrite]()
            for _ in 0..<(try reader.count16(max: TraceLimits.resultsMax, "results")) {
                switch try reader.byte("result") {
                case 0: results.append(.refused)
                case 1:
                    let conversation = ConversationID(bytes: try reader.take(32, "conversation"))
                    results.append(.wrote(conversation, try reader.records()))
                case let other: throw reader.error("result tag \(other)")
                }
            }
            writes.append(results)
        }
        return TraceEntry(at: at, call: call, draws: draws, writes: writes)
    }

    private static func decodeCall(_ kind: UInt8, _ reader: inout TraceReader) throws(TraceFormatError) -> TraceCall {
        switch kind {
        case 1: return .linkOpened(try reader.u64("link"), initiator: try reader.bool("initiator"))
        case 2:
            let link = try reader.u64("link")
            let length = try reader.count32(max: TraceLimits.entryBytesMax, "received length")
            return .received(link, try reader.take(length, "received bytes"))
        case 3: return .linkClosed(try reader.u64("link"))
        case 4: return .writable(try reader.u64("link"), try reader.bool("writable"))
        case 5: return .tick
        case 6: return .heard(try reader.u64("link"))
        case 7: return .refresh
        case 8:
            var peers = [AuthorID]()
            for _ in 0..<(try reader.count32(max: TraceLimits.refusedMax, "refused")) {
                peers.append(AuthorID(bytes: try reader.take(32, "peer")))
            }
            return .refused(peers)
        case 9: return .published(try reader.records())
        case 10:
            var marks = [Bool]()
            for _ in 0..<(try reader.count16(max: TraceLimits.resultsMax, "intents")) {
                marks.append(try reader.bool("marks read"))
            }
            return .author(markRead: marks)
        case 11:
            return .view(try reader.bool("viewing") ? ConversationID(bytes: try reader.take(32, "conversation")) : nil)
        case 12: return .review
        case 13: return .writePending
        case 14: return .closeAll
        case 15: return .retire(try reader.u64("link"))
        case 16:
            let message = RecordID(bytes: try reader.take(32, "message"))
            return .fetchFile(message, in: ConversationID(bytes: try reader.take(32, "conversation")))
        case 17: return .cancelFetch(RecordID(bytes: try reader.take(32, "message")))
        case 18: return .typing(ConversationID(bytes: try reader.take(32, "conversation")))
        case 19: return .stoppedTyping(ConversationID(bytes: try reader.take(32, "conversation")))
        case 20: return .forceWrite
        case 21:
            let log = try reader.take(32, "log digest")
            var conversations = [TraceDigests.Conversation]()
            for _ in 0..<(try reader.count32(max: TraceLimits.digestsMax, "conversation digests")) {
                let id = ConversationID(bytes: try reader.take(32, "conversation"))
                conversations.append(.init(id: id, digest: try reader.take(32, "conversation digest")))
            }
            return .digests(TraceDigests(log: log, conversations: conversations))
        case 22: return .truncated
        default: throw reader.error("entry kind \(kind)")
        }
    }

    private static func putCall(_ call: TraceCall, _ out: inout [UInt8]) {
        switch call {
        case .linkOpened(let link, let initiator):
            put(link, &out)
            out.append(initiator ? 1 : 0)
        case .received(let link, let bytes):
            put(link, &out)
            put32(bytes.count, &out)
            out += bytes
        case .linkClosed(let link), .heard(let link), .retire(let link): put(link, &out)
        case .writable(let link, let writable):
            put(link, &out)
            out.append(writable ? 1 : 0)
        case .tick, .refresh, .review, .writePending, .closeAll, .forceWrite, .truncated: break
        case .refused(let peers):
            put32(peers.count, &out)
            for peer in peers { out += peer.bytes }
        case .published(let records): putRecords(records, &out)
        case .author(let marks):
            put16(marks.count, &out)
            out += marks.map { $0 ? 1 : 0 }
        case .view(let conversation):
            out.append(conversation == nil ? 0 : 1)
            if let conversation { out += conversation.bytes }
        case .fetchFile(let message, let conversation): out += message.bytes + conversation.bytes
        case .cancelFetch(let message): out += message.bytes
        case .typing(let conversation), .stoppedTyping(let conversation): out += conversation.bytes
        case .digests(let digests):
            out += digests.log
            put32(digests.conversations.count, &out)
            for conversation in digests.conversations { out += conversation.id.bytes + conversation.digest }
        }
    }

    private static func putRecords(_ records: [TraceRecord], _ out: inout [UInt8]) {
        put16(records.count, &out)
        for record in records {
            switch record {
            case .bytes(let bytes):
                out.append(0)
                put32(bytes.count, &out)
                out += bytes
            case .held(let ref):
                out.append(1)
                putRef(ref, &out)
            }
        }
    }

    private static func putRef(_ ref: RecordRef, _ out: inout [UInt8]) {
        out += ref.position.conversation.bytes + ref.position.author.bytes
        put(ref.position.sequence, &out)
        out += ref.id.bytes
    }

    private static func put(_ value: UInt64, _ out: inout [UInt8]) {
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    private static func put32(_ value: Int, _ out: inout [UInt8]) {
        for shift in stride(from: 24, through: 0, by: -8) { out.append(UInt8(truncatingIfNeeded: value >> shift)) }
    }

    private static func put16(_ value: Int, _ out: inout [UInt8]) {
        out.append(UInt8(truncatingIfNeeded: value >> 8))
        out.append(UInt8(truncatingIfNeeded: value))
    }
}

/// Reads a trace's bytes front to back; every failure says what was being read and where.
private struct TraceReader {
    private let bytes: [UInt8]
    private var position = 0
    private let base: Int

    init(_ bytes: [UInt8], base: Int = 0) {
        self.bytes = bytes
        self.base = base
    }

    var atEnd: Bool { position == bytes.count }
    var remaining: Int { bytes.count - position }
    var offset: Int { base + position }

    func error(_ reason: String) -> TraceFormatError { TraceFormatError(offset: offset, reason) }

    mutating func take(_ count: Int, _ what: String) throws(TraceFormatError) -> [UInt8] {
        guard count >= 0, count <= remaining else {
            throw error("\(what): \(count) bytes wanted, \(remaining) left (the trace is cut short)")
        }
        defer { position += count }
        return Array(bytes[position..<(position + count)])
    }

    mutating func byte(_ what: String) throws(TraceFormatError) -> UInt8 { try take(1, what)[0] }

    mutating func bool(_ what: String) throws(TraceFormatError) -> Bool {
        switch try byte(what) {
        case 0: return false
        case 1: return true
        case let other: throw error("\(what): \(other) is not 0 or 1")
        }
    }

    mutating func u64(_ what: String) throws(TraceFormatError) -> UInt64 {
        try take(8, what).reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func count32(max: Int, _ what: String) throws(TraceFormatError) -> Int {
        let value = Int(try take(4, what).reduce(UInt32(0)) { $0 << 8 | UInt32($1) })
        guard value <= max else { throw error("\(what) \(value) is over the limit \(max)") }
        return value
    }

    mutating func count16(max: Int, _ what: String) throws(TraceFormatError) -> Int {
        let value = Int(try take(2, what).reduce(UInt16(0)) { $0 << 8 | UInt16($1) })
        guard value <= max else { throw error("\(what) \(value) is over the limit \(max)") }
        return value
    }

    mutating func ref() throws(TraceFormatError) -> RecordRef {
        let conversation = ConversationID(bytes: try take(32, "conversation"))
        let author = AuthorID(bytes: try take(32, "author"))
        let sequence = try u64("sequence")
        let id = RecordID(bytes: try take(32, "record id"))
        return RecordRef(
            id: id, position: RecordPosition(conversation: conversation, author: author, sequence: sequence))
    }

    mutating func records() throws(TraceFormatError) -> [TraceRecord] {
        var records = [TraceRecord]()
        for _ in 0..<(try count16(max: TraceLimits.recordsMax, "records")) {
            switch try byte("record form") {
            case 0:
                let length = try count32(max: Limits.recordBytesMax, "record length")
                records.append(.bytes(try take(length, "record bytes")))
            case 1: records.append(.held(try ref()))
            case let other: throw error("record form \(other)")
            }
        }
        return records
    }
}
