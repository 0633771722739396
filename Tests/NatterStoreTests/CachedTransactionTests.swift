// Goal: the store's own transaction helper (cached BEGIN and COMMIT, `Database.inImmediateTransaction`) keeps GRDB's
// promises — a body that throws writes nothing, SQLite's own rollback is not rolled back twice, the connection is
// usable afterwards — and the raw `synchronous` switch really switches. Method: a real SQLite file in WAL mode.
import Foundation
import GRDB
import Testing

@testable import NatterStore

@Suite("Cached transactions")
struct CachedTransactionTests {
    struct Refused: Error {}

    /// A pool on a fresh file (WAL, as the store's) with one table whose UNIQUE conflict makes SQLite itself roll the
    /// whole transaction back.
    func pool() throws -> (DatabasePool, URL) {
        let directory = try freshDirectory("natter-tx")
        let pool = try DatabasePool(path: directory.appendingPathComponent("t.sqlite").path)
        try transaction(pool) { db in
            try db.execute(sql: "CREATE TABLE t (x INTEGER NOT NULL UNIQUE ON CONFLICT ROLLBACK)")
        }
        return (pool, directory)
    }

    /// A new directory of the test's own under the temporary directory.
    func freshDirectory(_ prefix: String) throws -> URL {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("\(prefix)-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        return directory
    }

    /// Removes a test's directory; `try?`: one left behind in the temporary directory harms no test or result.
    func remove(_ directory: URL) { try? FileManager.default.removeItem(at: directory) }

    /// A write transaction through the store's helper, on a pool of the test's own.
    func transaction<T>(_ pool: DatabasePool, _ body: (Database) throws -> T) throws -> T {
        try pool.writeWithoutTransaction { db in try db.inImmediateTransaction { try body(db) } }
    }

    func values(_ pool: DatabasePool) throws -> [Int] {
        try pool.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") }
    }

    @Test("a commit is visible; a body that throws writes nothing; the next transaction reuses the statements")
    func commitAndRollback() throws {
        let (pool, directory) = try pool()
        defer { remove(directory) }
        try transaction(pool) { db in try db.execute(sql: "INSERT INTO t (x) VALUES (1)") }
        #expect(throws: Refused.self) {
            try transaction(pool) { db in
                try db.execute(sql: "INSERT INTO t (x) VALUES (2)")
                throw Refused()
            }
        }
        pool.writeWithoutTransaction { db in #expect(!db.isInsideTransaction) }
        let three = try transaction(pool) { db in
            try db.execute(sql: "INSERT INTO t (x) VALUES (3)")
            return 3
        }
        #expect(three == 3)
        #expect(try values(pool) == [1, 3])
    }

    @Test("when SQLite rolled the transaction back itself, its error comes out, not a failed second rollback")
    func sqliteRolledBack() throws {
        let (pool, directory) = try pool()
        defer { remove(directory) }
        try transaction(pool) { db in try db.execute(sql: "INSERT INTO t (x) VALUES (1)") }
        do {
            try transaction(pool) { db in
                try db.execute(sql: "INSERT INTO t (x) VALUES (2)")
                try db.execute(sql: "INSERT INTO t (x) VALUES (1)")  // ON CONFLICT ROLLBACK: SQLite ends it
            }
            Issue.record("the conflicting insert was accepted")
        } catch let error as DatabaseError {
            #expect(error.resultCode == .SQLITE_CONSTRAINT)
        }
        pool.writeWithoutTransaction { db in #expect(!db.isInsideTransaction) }
        #expect(try values(pool) == [1])
        try transaction(pool) { db in try db.execute(sql: "INSERT INTO t (x) VALUES (4)") }
        #expect(try values(pool) == [1, 4])
    }

    @Test("setSynchronous switches the connection's level both ways")
    func synchronousSwitch() throws {
        let (pool, directory) = try pool()
        defer { remove(directory) }
        try pool.writeWithoutTransaction { db in
            try db.setSynchronous(.full)
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2)
            try db.setSynchronous(.normal)
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 1)
            try db.setSynchronous(.full)
            #expect(try Int.fetchOne(db, sql: "PRAGMA synchronous") == 2)
        }
    }

    @Test("the writer runs an unsynced write at NORMAL, every other at FULL, and switches only when needed")
    func levelsFollowTheWrites() throws {
        let directory = try freshDirectory("natter-lv")
        defer { remove(directory) }
        let store = try RecordStore.open(directory: directory.path)
        func level(_ db: Database) throws -> Int? { try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        func current() throws -> Int? { try store.writer.writeWithoutTransaction(level) }
        #expect(try current() == 2)
        #expect(try store.writeDerived(level) == 1)
        #expect(try current() == 1, "left at NORMAL: the next unsynced write switches nothing")
        #expect(try store.writeDerived(level) == 1)
        #expect(try store.writeTransaction(level) == 2, "a durable write after an unsynced one runs at FULL")
        #expect(try current() == 2)
        _ = try store.writeDerived(level)
        #expect(try store.synchronousMode() == 2)
    }
}
