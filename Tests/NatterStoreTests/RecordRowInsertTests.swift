// Goal: the record row bound through SQLite's C API (`RecordRowInsert`) holds exactly what the record says, an empty
// body is an empty blob (the column is NOT NULL), and a failed insert throws SQLite's error and leaves the cached
// statement usable. Method: real records inserted into a real store's `record` table, read back with GRDB.
import Foundation
import GRDB
import NatterModel
import Testing

@testable import NatterStore

@Suite("Record row insert")
struct RecordRowInsertTests {
    let chat = conversationID("row-insert")

    /// The first two records of a writer's feed, and an empty store to insert them into.
    func twoRecords(seed: UInt64) throws -> (
        first: NatterModel.Record, second: NatterModel.Record, store: RecordStore
    ) {
        let alice = try Writer(seed: seed)
        return (try alice.write(chat, "first"), try alice.write(chat, "second"), try RecordStore.inMemory())
    }

    @Test("every column holds the record's value; an empty body is a zero-length blob")
    func columnsRoundTrip() throws {
        let (first, second, store) = try twoRecords(seed: 41)
        try store.writer.write { db in
            try RecordRowInsert.execute(db, record: first, receivedAtMillis: 1_234, keepBytes: true)
            try RecordRowInsert.execute(db, record: second, receivedAtMillis: -5, keepBytes: false)
        }
        let rows = try store.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT id, conversation, author, sequence, kind, epoch, lamport, created_ms, received_ms, bytes,
                        typeof(bytes) AS bodyType
                    FROM record ORDER BY sequence
                    """)
        }
        #expect(rows.count == 2)
        for (row, (record, received, body)) in zip(
            rows, [(first, Int64(1_234), first.bytes), (second, Int64(-5), [UInt8]())])
        {
            let header = record.header
            #expect(row["id"] as Data == Data(record.id.bytes))
            #expect(row["conversation"] as Data == Data(header.conversation.bytes))
            #expect(row["author"] as Data == Data(header.author.bytes))
            #expect(row["sequence"] as Int64 == Int64(header.sequence))
            #expect(row["kind"] as Int64 == Int64(header.kind.rawValue))
            #expect(row["epoch"] as Data == Data(header.epoch.bytes))
            #expect(row["lamport"] as Int64 == Int64(header.lamport))
            #expect(row["created_ms"] as Int64 == header.createdAtMillis)
            #expect(row["received_ms"] as Int64 == received)
            #expect(row["bytes"] as Data == Data(body))
            #expect(row["bodyType"] as String == "blob")
        }
    }

    @Test("a failed insert throws SQLite's error and the statement inserts the next row")
    func failureLeavesStatementUsable() throws {
        let (first, second, store) = try twoRecords(seed: 42)
        try store.writer.write { db in
            try RecordRowInsert.execute(db, record: first, receivedAtMillis: 1, keepBytes: true)
            // The same feed position again: the table's key refuses it.
            #expect {
                try RecordRowInsert.execute(db, record: first, receivedAtMillis: 2, keepBytes: true)
            } throws: { error in
                (error as? DatabaseError)?.resultCode == .SQLITE_CONSTRAINT
            }
            try RecordRowInsert.execute(db, record: second, receivedAtMillis: 3, keepBytes: true)
        }
        let count = try store.writer.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM record") }
        #expect(count == 2)
    }
}
