import GRDB
import GRDBSQLite
import NatterModel

/// The insert of one row of `record`, its values bound straight from the record through SQLite's C API on GRDB's
/// cached statement (GRDB's documented raw access, `Statement.sqliteStatement`).
///
/// Why not `execute(arguments:)`: it boxes each of the ten values as a `DatabaseValue`, five of them as `Data`
/// copied from a fresh byte array, about a dozen allocations per row. Ingest inserts every record on the node's
/// own thread, the one the catch-up waits on; binding from the values' own bytes allocates nothing.
struct RecordRowInsert {
    static let sql = """
        INSERT INTO record (id, conversation, author, sequence, kind, epoch, lamport, created_ms,
            received_ms, bytes)
        VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
        """

    /// Inserts the row of `record` received at `receivedAtMillis`; `keepBytes` false stores an empty body (a junk
    /// feed's record: its frontier advances, its body is not kept).
    static func execute(
        _ db: Database, record: NatterModel.Record, receivedAtMillis: Int64, keepBytes: Bool
    ) throws {
        let statement = try db.cachedStatement(sql: sql)
        let raw = statement.sqliteStatement
        let header = record.header
        // A failed earlier step was reported then; the reset's echo of it is not this insert's error.
        _ = sqlite3_reset(raw)
        var code = SQLITE_OK
        // SQLite keeps its own copy of each blob (SQLITE_TRANSIENT): nothing bound outlives these calls.
        func blob(_ index: CInt, _ value: Bytes32) {
            guard code == SQLITE_OK else { return }
            code = value.withUnsafeBytes { sqlite3_bind_blob(raw, index, $0.baseAddress, 32, transient) }
        }
        func integer(_ index: CInt, _ value: Int64) {
            guard code == SQLITE_OK else { return }
            code = sqlite3_bind_int64(raw, index, value)
        }
        blob(1, record.id.raw)
        blob(2, header.conversation.raw)
        blob(3, header.author.raw)
        integer(4, Int64(header.sequence))
        integer(5, Int64(header.kind.rawValue))
        blob(6, header.epoch.raw)
        integer(7, Int64(header.lamport))
        integer(8, header.createdAtMillis)
        integer(9, receivedAtMillis)
        if code == SQLITE_OK {
            // An empty body is a zero-length blob, not NULL (the column is NOT NULL).
            code =
                keepBytes
                ? record.bytes.withUnsafeBytes {
                    sqlite3_bind_blob(raw, 10, $0.baseAddress, CInt($0.count), transient)
                } : sqlite3_bind_zeroblob(raw, 10, 0)
        }
        if code == SQLITE_OK {
            code = sqlite3_step(raw)
            if code == SQLITE_DONE { code = SQLITE_OK }
        }
        guard code == SQLITE_OK else {
            let message = String(cString: sqlite3_errmsg(db.sqliteConnection))
            _ = sqlite3_reset(raw)
            throw DatabaseError(resultCode: ResultCode(rawValue: code), message: message, sql: sql)
        }
        _ = sqlite3_reset(raw)
    }

    /// SQLite's "copy the value now" destructor.
    private static let transient = unsafeBitCast(OpaquePointer(bitPattern: -1), to: sqlite3_destructor_type.self)
}
