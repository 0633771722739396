public import NatterModel

/// One feed, named by its conversation and author.
public struct FeedKey: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let conversation: ConversationID
    public let author: AuthorID

    public init(conversation: ConversationID, author: AuthorID) {
        self.conversation = conversation
        self.author = author
    }

    /// Conversation first, then author: the order summaries, heads and digests use.
    public static func < (lhs: FeedKey, rhs: FeedKey) -> Bool {
        (lhs.conversation, lhs.author) < (rhs.conversation, rhs.author)
    }

    public var description: String { "\(author.shortHex)@\(conversation.shortHex)" }
}

/// Where one author's feed of a conversation stands: the contiguous chain held (records 1...sequence) and the id of
/// its last record. Two nodes with the same sequence and different heads hold different forks.
public struct FeedHead: Hashable, Sendable {
    public let author: AuthorID
    /// Length of the contiguous chain held; at least 1 (empty feeds are not reported).
    public let sequence: UInt64
    /// Id of the record at `sequence`.
    public let head: RecordID

    public init(author: AuthorID, sequence: UInt64, head: RecordID) {
        self.author = author
        self.sequence = sequence
        self.head = head
    }
}

/// The only way a sync session reads the local record log: narrow and synchronous, so the session stays pure and
/// deterministic while the log can hold millions of records. The node passes its SQLite store; tests and the lab
/// may pass `InMemoryRecordSource`.
///
/// The session calls these from inside its inputs and expects them to reflect every record the node has reported
/// through `SyncSession.localRecordsStored` (and nothing it has not yet reported, beyond what the node is about to
/// report next).
public protocol RecordSource {
    /// Every conversation with at least one stored record, strictly ascending.
    func conversations() -> [ConversationID]
    /// The non-empty feeds of `conversation`, strictly ascending by author; empty for an unknown conversation.
    func feedHeads(of conversation: ConversationID) -> [FeedHead]
    /// Up to `limit` records (their canonical bytes) of one feed's contiguous chain, from sequence `from` on, in
    /// sequence order without gaps; fewer when the chain ends.
    func records(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int) -> [[UInt8]]
    /// The fork evidence held for the feeds of `conversation` (records kept because they contradict a chain), by
    /// feed and sequence; empty when none of its feeds forked (the common case, which should cost no more than
    /// `feedHeads`).
    func forkEvidence(of conversation: ConversationID) -> [StoredRecord]
}

/// A record the local node has just stored, from any source (its own, this link, another link): what live push
/// forwards to the peer.
public struct StoredRecord: Hashable, Sendable {
    public let conversation: ConversationID
    public let author: AuthorID
    public let sequence: UInt64
    /// The record's canonical bytes.
    public let bytes: [UInt8]
    /// Whether it was stored as fork evidence (it contradicts the chain) rather than appended to the feed.
    public let isForkEvidence: Bool

    public init(
        conversation: ConversationID, author: AuthorID, sequence: UInt64, bytes: [UInt8], isForkEvidence: Bool = false
    ) {
        self.conversation = conversation
        self.author = author
        self.sequence = sequence
        self.bytes = bytes
        self.isForkEvidence = isForkEvidence
    }

    /// The fields of a decoded record.
    public init(_ record: Record, isForkEvidence: Bool = false) {
        self.init(
            conversation: record.header.conversation, author: record.header.author, sequence: record.header.sequence,
            bytes: record.bytes, isForkEvidence: isForkEvidence)
    }

    public var feed: FeedKey { FeedKey(conversation: conversation, author: author) }
}

/// What the node's store made of one delivered record (NatterStore's `IngestOutcome` without its payloads).
public enum SyncIngestOutcome: Equatable, Sendable {
    /// Appended to its feed.
    case stored
    /// Already held; nothing changed.
    case duplicate
    /// It contradicts a held record: kept as evidence; the feed is forked.
    case forkEvidence
    /// Its feed has a gap before it: records from `missingFrom` on are missing.
    case outOfOrder(missingFrom: UInt64)
    /// Malformed or wrongly signed: not stored.
    case rejected(RecordFormatError)
}

/// The two lanes a link's records travel in (docs/protocol.md §3.7), each with its own credit window and its own
/// order of deliveries. Bulk (RECORDS, CREDIT) carries everything; the priority lane (PRIORITY RECORDS, PRIORITY
/// CREDIT) carries only the live records of priority authors (the node's own and its neighbours'), so a chat message
/// passes a bulk window full of a flood. Priority sorts first.
public enum SyncLane: Int, Sendable, Hashable, Comparable, CaseIterable {
    case priority = 0
    case bulk = 1

    public static func < (lhs: SyncLane, rhs: SyncLane) -> Bool { lhs.rawValue < rhs.rawValue }

    /// Batches outstanding at most (the lane's implicit initial credit).
    public var windowBatches: Int {
        self == .bulk ? Limits.syncWindowBatches : Limits.syncPriorityWindowBatches
    }

    /// Records per batch at most.
    public var batchRecordsMax: Int {
        self == .bulk ? Limits.syncBatchRecordsMax : Limits.syncPriorityBatchRecordsMax
    }

    /// Record bytes per batch at most.
    public var batchBytesMax: Int {
        self == .bulk ? Limits.syncBatchBytesMax : Limits.syncPriorityBatchBytesMax
    }

    /// Ingested batches whose credit goes back alone (in a CREDIT or PRIORITY CREDIT) when no batch carries it.
    var creditReturnBatches: Int {
        self == .bulk ? Limits.syncCreditReturnBatches : Limits.syncPriorityCreditReturnBatches
    }

    /// "" or "priority ", for the names of fields and errors.
    var prefix: String { self == .bulk ? "" : "priority " }
}

/// What the node must do after a sync session input, in order.
public enum SyncAction: Equatable, Sendable {
    /// Send these bytes as one application message on the link's secure channel.
    case send([UInt8])
    /// Ingest these records into the store (per feed in sequence order), then call `ingested` with one outcome per
    /// record, and `localRecordsStored` with what was stored. Every `deliver` gets exactly one `ingested`, in order;
    /// the session returns the peer's credit only then. Decoded by the session (structure, canonical form, id):
    /// their signatures are not checked yet.
    case deliver([Record])
    /// The same for a priority batch (PRIORITY RECORDS, docs/protocol.md §3.7): ingest, then call
    /// `ingested(_:lane: .priority, now:)`. Priority deliveries are reported in their own order, independently of
    /// bulk ones, so the node may ingest them ahead of bulk deliveries its quotas hold back.
    case deliverPriority([Record])
    /// The initial exchange is complete in both directions as far as this side can tell (emitted once; see
    /// docs/protocol.md §3, "Caught up").
    case caughtUp
    /// Initial sync progress: records received from the peer so far and the number it announced (≥ received).
    case progress(received: Int, expected: Int)
    /// The peer sent LEAVING: it closes the link after its grace period. Graft elsewhere every feed whose tree
    /// parent is this link, and take no new parent from it (docs/protocol.md §3.3, step 6).
    case peerLeaving
    /// The peer sent REROUTE: its supply of these feeds changed. For each whose tree parent is this link, graft it
    /// back on the other links so the next records race again, and pass the REROUTE on (docs/protocol.md §3.3).
    case rerouted([FeedKey])
    /// Close the link: the session is over. The node scores the peer for `.malformed` and `.invalidRecord`.
    case close(SyncError)
}
