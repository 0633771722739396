/// A node's trace (`natter run --trace FILE`): what its core received and decided, so that `natter lab replay`
/// drives a core against it and reaches the same state (docs/decisions/0011-trace-replay.md, docs/lab.md).
///
/// Layout (every integer big-endian):
///
///     "natter-trace" (12 bytes), version u8 (1), header length u32, header, then entries, each: length u32, body
///
/// Header: node (32-byte author id), start (i64 ms since 1970: the wall clock when the core's clock read zero), the
/// initial log digest (32 bytes), settings (u16 count; each: name u8 length + ASCII, value i64), initial draws (u32
/// count, u64 each: the values the core's generator gave while it was made), initial records (u32 count; each a
/// reference: conversation 32, author 32, sequence u64, id 32 — the records the store held at start, by reference).
///
/// Entry body: kind u8, time i64 (ns since start), the call's fields (`TraceCall`), draws (u32 count, u64 each),
/// writes (u16 count; each: u16 results; each result: u8 0 refused, or 1 then conversation 32 and records).
/// Records: u16 count; each u8 0 then u32 length and the record's bytes, or u8 1 then a reference as above.
/// Nothing in it is plaintext a person typed: received bytes are the transport's ciphertext, own records are the
/// encrypted records (profile records, which carry a name in clear, by reference only).
public enum TraceLimits {
    /// The default bound of a trace file: tens of minutes of a busy node's traffic; `--trace-mib` changes it.
    public static let bytesDefault = 32 << 20
    /// The largest entry: a turn's received bytes (the transport delivers a read at a time, well under this) with
    /// its draws and writes.
    public static let entryBytesMax = 16 << 20
    /// The largest header: a million initial record references (~100 MiB would be a store of a million records).
    public static let headerBytesMax = 128 << 20
    /// Settings in a header (the node has a few dozen).
    public static let settingsMax = 256
    /// Values drawn from the generator in one call (a handshake draws eight; typing a few).
    public static let drawsMax = 1 << 16
    /// Authorings in one call, results in one authoring, records in one result or one published call.
    public static let writesMax = 1 << 12
    public static let resultsMax = 1 << 13
    public static let recordsMax = 1 << 13
    /// Peers refused at once.
    public static let refusedMax = 1 << 16
    /// Conversations in a digest entry.
    public static let digestsMax = 1 << 16
}

/// A record as the trace holds it: its bytes (encrypted, signed), or a reference to the copy in the node's data
/// directory (records whose payload is not encrypted: profiles, and the records held at start).
public enum TraceRecord: Equatable, Sendable {
    case bytes([UInt8])
    case held(RecordRef)
}

/// One authoring's result, intent by intent.
public enum TraceWrite: Equatable, Sendable {
    /// Refused (nothing written; the reason is not kept: it could quote the intent).
    case refused
    case wrote(ConversationID, [TraceRecord])
}

/// Digests a node computed (`store.logDigest()` and each conversation it is a member of), to compare on replay.
public struct TraceDigests: Equatable, Sendable {
    public var log: [UInt8]
    public var conversations: [Conversation]

    public struct Conversation: Equatable, Sendable {
        public var id: ConversationID
        public var digest: [UInt8]
        public init(id: ConversationID, digest: [UInt8]) {
            self.id = id
            self.digest = digest
        }
    }

    public init(log: [UInt8], conversations: [Conversation]) {
        self.log = log
        self.conversations = conversations
    }

    /// The same digests with the conversations by id (nodes list them by local activity).
    public var normalized: TraceDigests {
        TraceDigests(log: log, conversations: conversations.sorted { $0.id < $1.id })
    }
}

/// A call the driver made to its core (links by their raw ids).
public enum TraceCall: Equatable, Sendable {
    case linkOpened(UInt64, initiator: Bool)
    case received(UInt64, [UInt8])
    case linkClosed(UInt64)
    case writable(UInt64, Bool)
    case tick
    /// Bytes arrived on a link while the node was busy (`NodeCore.heard`; the entry's time is the arrival).
    case heard(UInt64)
    case refresh
    case refused([AuthorID])
    /// Records written outside `author` (a file message, flood records): stored, then `published`.
    case published([TraceRecord])
    /// The person's intents, only whether each marks read (the rest is plaintext); their records are the writes.
    case author(markRead: [Bool])
    case view(ConversationID?)
    case review
    case writePending
    case closeAll
    case retire(UInt64)
    case fetchFile(RecordID, in: ConversationID)
    case cancelFetch(RecordID)
    case typing(ConversationID)
    case stoppedTyping(ConversationID)
    case forceWrite
    /// Not a call: the digests the node had at this point (as it stopped).
    case digests(TraceDigests)
    /// Not a call: the recorder stopped here (its bound reached); nothing after it was recorded.
    case truncated

    var kind: UInt8 {
        switch self {
        case .linkOpened: 1
        case .received: 2
        case .linkClosed: 3
        case .writable: 4
        case .tick: 5
        case .heard: 6
        case .refresh: 7
        case .refused: 8
        case .published: 9
        case .author: 10
        case .view: 11
        case .review: 12
        case .writePending: 13
        case .closeAll: 14
        case .retire: 15
        case .fetchFile: 16
        case .cancelFetch: 17
        case .typing: 18
        case .stoppedTyping: 19
        case .forceWrite: 20
        case .digests: 21
        case .truncated: 22
        }
    }
}

/// One step of the trace: a call at a time, the values the core drew from its generator meanwhile, and what it
/// authored (`NodeCore.author`: what the person asked for, and receipts and re-keys the node writes on its own).
public struct TraceEntry: Equatable, Sendable {
    /// Nanoseconds since the core's clock read zero.
    public var at: Int64
    public var call: TraceCall
    public var draws: [UInt64]
    public var writes: [[TraceWrite]]

    public init(at: Int64, call: TraceCall, draws: [UInt64] = [], writes: [[TraceWrite]] = []) {
        self.at = at
        self.call = call
        self.draws = draws
        self.writes = writes
    }

    /// Whether the decoder takes this entry back (`TraceLimits`): a recorder stops rather than write one it would
    /// refuse.
    public var isWithinLimits: Bool {
        func fits(_ records: [TraceRecord]) -> Bool {
            records.count <= TraceLimits.recordsMax
                && records.allSatisfy {
                    if case .bytes(let bytes) = $0 { bytes.count <= Limits.recordBytesMax } else { true }
                }
        }
        let results = writes.allSatisfy { write in
            write.count <= TraceLimits.resultsMax
                && write.allSatisfy { if case .wrote(_, let records) = $0 { fits(records) } else { true } }
        }
        let call: Bool
        switch self.call {
        case .received(_, let bytes): call = bytes.count <= TraceLimits.entryBytesMax
        case .refused(let peers): call = peers.count <= TraceLimits.refusedMax
        case .published(let records): call = fits(records)
        case .author(let marks): call = marks.count <= TraceLimits.resultsMax
        case .digests(let digests):
            call =
                digests.log.count == 32 && digests.conversations.count <= TraceLimits.digestsMax
                && digests.conversations.allSatisfy { $0.digest.count == 32 }
        default: call = true
        }
        return call && results && draws.count <= TraceLimits.drawsMax && writes.count <= TraceLimits.writesMax
    }
}

/// What the trace's header says: whose it is, when it started, and the state the core started from.
public struct TraceHeader: Equatable, Sendable {
    public static let magic = Array("natter-trace".utf8)
    public static let version: UInt8 = 1

    public var node: AuthorID
    public var startMillis: Int64
    public var initialLogDigest: [UInt8]
    /// The core's configuration, by name (`NodeConfiguration` fields; durations in ns, rates as Double bits).
    public var settings: [(name: String, value: Int64)]
    public var initialDraws: [UInt64]
    public var initialRecords: [RecordRef]

    public init(
        node: AuthorID, startMillis: Int64, initialLogDigest: [UInt8], settings: [(name: String, value: Int64)],
        initialDraws: [UInt64], initialRecords: [RecordRef]
    ) {
        self.node = node
        self.startMillis = startMillis
        self.initialLogDigest = initialLogDigest
        self.settings = settings
        self.initialDraws = initialDraws
        self.initialRecords = initialRecords
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.node == rhs.node && lhs.startMillis == rhs.startMillis && lhs.initialLogDigest == rhs.initialLogDigest
            && lhs.settings.map(\.name) == rhs.settings.map(\.name)
            && lhs.settings.map(\.value) == rhs.settings.map(\.value) && lhs.initialDraws == rhs.initialDraws
            && lhs.initialRecords == rhs.initialRecords
    }
}

/// Why a trace does not decode, with where.
public struct TraceFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    public let offset: Int
    public let reason: String

    public init(offset: Int, _ reason: String) {
        self.offset = offset
        self.reason = reason
    }

    public var description: String { "trace: \(reason) (at byte \(offset))" }
}
