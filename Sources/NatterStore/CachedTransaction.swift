import GRDB
import GRDBSQLite

extension Database {
    /// `inTransaction(.immediate)` with its `BEGIN` and `COMMIT` prepared once per connection: GRDB compiles both
    /// anew for every transaction (`execute(sql:)`), which cost a live message about 50 µs on each node's path
    /// (docs/performance.md, "Send → stored"). On an error the transaction is rolled back and the error rethrown;
    /// nothing is committed.
    func inImmediateTransaction<T>(_ body: () throws -> T) throws -> T {
        try cachedStatement(sql: "BEGIN IMMEDIATE TRANSACTION").execute()
        do {
            let result = try body()
            try cachedStatement(sql: "COMMIT TRANSACTION").execute()
            return result
        } catch {
            // GRDB's rollback does nothing when SQLite already ended the transaction (an aborting error).
            do {
                try rollback()
            } catch let rollbackError {
                throw StoreError.database("\(error); then the rollback failed: \(rollbackError)")
            }
            throw error
        }
    }

    /// Sets `PRAGMA synchronous` through SQLite itself: the pragma takes effect as it is compiled and expires its
    /// statement, so it cannot be cached, and GRDB's `execute(sql:)` added its own statement bookkeeping to SQLite's
    /// compile (with GRDB's `BEGIN` and `COMMIT`, 6 % of a receiving node's CPU, perf 2026-11-29). GRDB tracks
    /// nothing this pragma changes. `RecordStore.level` switches only when a transaction needs the other level.
    func setSynchronous(_ level: SynchronousLevel) throws {
        let sql = level == .full ? "PRAGMA synchronous = FULL" : "PRAGMA synchronous = NORMAL"
        let code = sqlite3_exec(sqliteConnection, sql, nil, nil, nil)
        guard code == SQLITE_OK else { throw StoreError.database("\(sql) failed (SQLite error \(code))") }
    }
}

/// The two `synchronous` levels the writer switches between: `full` fsyncs every commit, `normal` only checkpoints.
enum SynchronousLevel { case normal, full }
