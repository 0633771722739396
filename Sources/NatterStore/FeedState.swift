import Foundation
import GRDB
public import NatterModel

/// One feed (an author's records in one conversation) as this node holds it.
public struct FeedState: Equatable, Sendable {
    public let conversation: ConversationID
    public let author: AuthorID
    /// Length of the contiguous chain held (records 1...stored).
    public var stored: UInt64
    /// Id of the record at `stored` (`.none` when empty).
    public var storedHead: RecordID
    /// Length of the applied prefix: records whose dependencies are applied, whose Lamport number is right and
    /// that come before any fork. Always ≤ `stored`.
    public var applied: UInt64
    public var appliedHead: RecordID
    /// Lamport number of the record at `applied` (0 when none).
    public var appliedLamport: UInt64
    /// The lowest sequence at which the author is known to have signed two different records; nothing from
    /// here on is ever applied.
    public var forkSequence: UInt64?
    /// Why the record after `applied` can never be applied (it breaks a rule), if so.
    public var stalledReason: String?

    /// A junk feed (DESIGN §3): its author was never in the roster of a conversation this node reads. Its frontier
    /// is kept and still advances (so sync stops fetching it, and records that depend on it apply); its record
    /// bodies are dropped, now and as they arrive (`RecordStore.reduceJunk`).
    public var isJunk = false

    /// Bytes of the feed's records held (a junk feed's dropped bodies count nothing), and the local receive time of
    /// its newest record: kept with the feed, so what a conversation costs the store (`RecordStore.relayUsage`)
    /// is a sum over its feeds rather than a scan of its records.
    public var storedBytes = 0
    public var lastReceivedMillis: Int64 = 0

    /// An empty feed.
    public init(conversation: ConversationID, author: AuthorID) {
        self.conversation = conversation
        self.author = author
        stored = 0
        storedHead = .none
        applied = 0
        appliedHead = .none
        appliedLamport = 0
        forkSequence = nil
        stalledReason = nil
    }

    /// The columns `init(row:)` reads, in its order.
    static let columns =
        """
        conversation, author, stored_sequence, stored_head, applied_sequence, applied_head, applied_lamport, \
        fork_sequence, stalled_reason, junk, stored_bytes, last_received_ms
        """

    /// Reads a row of `columns` by position (the schema's order), which is much cheaper than by name; the ids are
    /// read in place, without a copy of each blob (every ingest reads its conversation's feed rows).
    init(row: Row) throws {
        func id(_ index: Int) throws -> Bytes32 { try row.withUnsafeData(atIndex: index) { Bytes32($0 ?? Data()) } }
        conversation = ConversationID(raw: try id(0))
        author = AuthorID(raw: try id(1))
        stored = UInt64(row[2] as Int64)
        storedHead = RecordID(raw: try id(3))
        applied = UInt64(row[4] as Int64)
        appliedHead = RecordID(raw: try id(5))
        appliedLamport = UInt64(row[6] as Int64)
        forkSequence = (row[7] as Int64?).map(UInt64.init)
        stalledReason = row[8]
        isJunk = row[9]
        storedBytes = row[10]
        lastReceivedMillis = row[11]
    }

    static func fetchAll(_ db: Database, conversation: ConversationID?) throws -> [FeedState] {
        // Cached statements: these run for every ingested batch and every sync read, and preparing the SQL each
        // time cost as much as running it (a quarter of the lab's time, measured with perf).
        // Read through a cursor: each row is decoded in place, not copied first.
        if let conversation {
            return try Array(
                Row.fetchCursor(
                    db.cachedStatement(sql: "SELECT \(columns) FROM feed WHERE conversation = ? ORDER BY author"),
                    arguments: [Data(conversation.bytes)]
                ).map(FeedState.init(row:)))
        }
        return try Array(
            Row.fetchCursor(db.cachedStatement(sql: "SELECT \(columns) FROM feed ORDER BY conversation, author"))
                .map(FeedState.init(row:)))
    }

    /// The feeds of `conversation` that are not junk, ordered by author, through the partial index `feed_live`:
    /// the cost follows the live feeds, not the junk ones.
    static func fetchLive(_ db: Database, conversation: ConversationID) throws -> [FeedState] {
        try Array(
            Row.fetchCursor(
                db.cachedStatement(
                    sql:
                        "SELECT \(columns) FROM feed INDEXED BY feed_live WHERE conversation = ? AND junk = 0 ORDER BY author"),
                arguments: [Data(conversation.bytes)]
            ).map(FeedState.init(row:)))
    }

    /// Writes this feed's row. An existing row whose junk mark stays is updated in place, its key and mark untouched:
    /// SQLite then leaves the partial index `feed_live` alone, where `INSERT OR REPLACE` deleted and reinserted the row
    /// and its index entry — a page more in the WAL for every record stored (one in five of a live record's pages).
    func save(_ db: Database) throws {
        let update = try db.cachedStatement(
            sql: """
                UPDATE feed SET stored_sequence = ?, stored_head = ?, applied_sequence = ?, applied_head = ?,
                    applied_lamport = ?, fork_sequence = ?, stalled_reason = ?, stored_bytes = ?, last_received_ms = ?
                WHERE conversation = ? AND author = ? AND junk = ?
                """)
        try update.execute(arguments: [
            Int64(stored), Data(storedHead.bytes), Int64(applied), Data(appliedHead.bytes), Int64(appliedLamport),
            forkSequence.map(Int64.init), stalledReason, storedBytes, lastReceivedMillis, Data(conversation.bytes),
            Data(author.bytes), isJunk,
        ])
        if db.changesCount == 0 {  // a new feed, or its junk mark changed
            try db.cachedStatement(
                sql: """
                    INSERT OR REPLACE INTO feed (\(Self.columns))
                    VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                    """
            ).execute(arguments: [
                Data(conversation.bytes), Data(author.bytes), Int64(stored), Data(storedHead.bytes), Int64(applied),
                Data(appliedHead.bytes), Int64(appliedLamport), forkSequence.map(Int64.init), stalledReason, isJunk,
                storedBytes, lastReceivedMillis,
            ])
        }
        try saveProfileAuthor(db)
    }

    /// Keeps `profile_author` in step with this row: its author is listed while its profile feed is applied.
    private func saveProfileAuthor(_ db: Database) throws {
        guard conversation == .profileFeed(of: author) else { return }
        try db.cachedStatement(
            sql: applied > 0
                ? "INSERT OR IGNORE INTO profile_author (author) VALUES (?)" : "DELETE FROM profile_author WHERE author = ?"
        ).execute(arguments: [Data(author.bytes)])
    }
}
