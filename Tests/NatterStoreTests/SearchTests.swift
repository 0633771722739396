// Goal: search (SPEC F14) finds what the node can read and show — current text, newest first, in one
// conversation or all — and nothing else: not deleted, edited-away or retracted text, not conversations it relays
// without reading, not messages sent after it was removed; a person's query is words, never FTS syntax. Method:
// real replicas write through `Conversations`, `refresh` maintains the index, and `search` is checked against what
// was written.
import Foundation
import GRDB
import NatterCrypto
import NatterModel
@testable import NatterStore
import Testing

@Suite("Search")
struct SearchTests {
    /// Alice's group with Bob and Carol, everyone in sync.
    func lab(seed: UInt64) throws -> (Replica, Replica, Replica, ConversationID) {
        let (people, chat) = try ConversationTests().group(["Alice", "Bob", "Carol"], seed: seed)
        return (people[0], people[1], people[2], chat)
    }

    @Test("finds every word, newest first, across conversations or in one, with title, sender and highlights")
    func findsWords() throws {
        let (alice, bob, _, chat) = try lab(seed: 700)
        let other = try alice.conversations.createGroup(title: "Garden", members: [bob.id], now: alice.tick())
        let first = try alice.conversations.send("Lunch at noon? The usual place", in: chat, now: alice.tick())
        try alice.conversations.send("dinner instead", in: chat, now: alice.tick())
        let third = try alice.conversations.send("the tomatoes need lunch too", in: other, now: alice.tick())
        for id in [chat, other] { try alice.conversations.refresh(id) }

        let hits = try alice.conversations.search("lunch")
        #expect(hits.map(\.message) == [third.id, first.id])
        #expect(hits.map(\.conversationTitle) == ["Garden", "Lab"])
        #expect(hits[1].senderName == "Alice" && hits[1].sender == alice.id && hits[1].conversation == chat)
        #expect(hits[1].displayedAtMillis == first.header.createdAtMillis)
        #expect(hits[1].snippet == "Lunch at noon? The usual place")
        #expect(hits[1].snippet(marking: "[", "]") == "[Lunch] at noon? The usual place")
        #expect(try alice.conversations.search("LUNCH", in: chat).map(\.message) == [first.id])
        #expect(try alice.conversations.search("lunch", limit: 1).map(\.message) == [third.id])
        // Every word is required, in any order; none of them is enough on its own.
        #expect(try alice.conversations.search("place lunch").map(\.message) == [first.id])
        #expect(try alice.conversations.search("lunch breakfast").isEmpty)
        // A prefix only when asked for.
        #expect(try alice.conversations.search("tomato").isEmpty)
        #expect(try alice.conversations.search("tomato*").map(\.message) == [third.id])

        // Bob, a member, finds the same lines from the records he received.
        try bob.pull(from: alice)
        try bob.conversations.refreshChanged()
        #expect(try bob.conversations.search("lunch").map(\.message).sorted() == [first.id, third.id].sorted())
    }

    @Test("edits replace the indexed text; deleting removes it")
    func editsAndDeletes() throws {
        let (alice, bob, _, chat) = try lab(seed: 710)
        let line = try alice.conversations.send("meet at the station", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refresh(chat)
        #expect(try bob.conversations.search("station").map(\.message) == [line.id])

        try alice.conversations.edit(line.id, to: "meet at the harbour", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refresh(chat)
        #expect(try bob.conversations.search("station").isEmpty)
        let edited = try bob.conversations.search("harbour")
        #expect(edited.map(\.message) == [line.id] && edited.first?.snippet == "meet at the harbour")

        try alice.conversations.delete(line.id, in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refresh(chat)
        #expect(try bob.conversations.search("harbour").isEmpty)
        #expect(try bob.conversations.search("meet").isEmpty)
        #expect(try bob.store.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM search_document") } == 0)
    }

    @Test("a line retracted by a late concurrent removal is no longer found")
    func retractedLinesGone() throws {
        let (alice, bob, carol, chat) = try lab(seed: 720)
        try bob.conversations.refresh(chat)
        let line = try carol.conversations.send("my last words", in: chat, now: carol.tick())
        try alice.conversations.remove([carol.id], from: chat, now: alice.tick())
        try bob.pull(from: carol)
        try bob.conversations.refresh(chat)
        #expect(try bob.conversations.search("words").map(\.message) == [line.id])
        try bob.pull(from: alice)
        #expect(try bob.conversations.refresh(chat).lines.filter { $0.kind == .retracted }.map(\.line.id) == [line.id])
        #expect(try bob.conversations.search("words").isEmpty)
        #expect(try bob.conversations.search("last", in: chat).isEmpty)
    }

    @Test("a relay holding a conversation's records finds nothing; a removed member finds only what it could read")
    func unreadableNeverReturned() throws {
        let (alice, bob, carol, chat) = try lab(seed: 730)
        let relay = try Replica("Relay", seed: 733)
        try introduce([alice, bob, carol, relay])
        let kept = try alice.conversations.send("the plan is ready", in: chat, now: alice.tick())
        try syncAll([alice, bob, carol])
        try carol.conversations.refresh(chat)
        try alice.conversations.remove([carol.id], from: chat, now: alice.tick())
        try alice.conversations.send("the secret plan, without Carol", in: chat, now: alice.tick())
        try syncAll([alice, bob, carol])
        try relay.pull(from: alice)
        #expect(try relay.store.feeds(of: chat).count >= 1)  // the relay holds the ciphertext…
        try relay.conversations.refreshChanged()
        #expect(try relay.conversations.search("plan").isEmpty)  // …and finds none of it
        #expect(try relay.conversations.search("plan", in: chat).isEmpty)
        #expect(try relay.store.writer.read { db in try Int.fetchOne(db, sql: "SELECT count(*) FROM search_document") } == 0)

        try carol.conversations.refreshChanged()
        #expect(try carol.conversations.search("plan").map(\.message) == [kept.id])
        #expect(try carol.conversations.search("secret").isEmpty)
        try bob.conversations.refreshChanged()
        #expect(try bob.conversations.search("plan").count == 2)
    }

    @Test("Unicode words: case and Latin accents folded, Cyrillic and Greek words, CJK runs by prefix")
    func unicodeWords() throws {
        let (alice, _, _, chat) = try lab(seed: 740)
        let cafe = try alice.conversations.send("Rendez-vous au Café, c'est naïve", in: chat, now: alice.tick())
        let russian = try alice.conversations.send("Привет, мир", in: chat, now: alice.tick())
        let greek = try alice.conversations.send("Καλημέρα κόσμε", in: chat, now: alice.tick())
        let tokyo = try alice.conversations.send("東京タワーで会いましょう 🗼", in: chat, now: alice.tick())
        try alice.conversations.refresh(chat)
        #expect(try alice.conversations.search("cafe").map(\.message) == [cafe.id])
        #expect(try alice.conversations.search("CAFÉ NAIVE").map(\.message) == [cafe.id])
        #expect(try alice.conversations.search("привет").map(\.message) == [russian.id])
        #expect(try alice.conversations.search("МИР").map(\.message) == [russian.id])
        #expect(try alice.conversations.search("καλημέρα").map(\.message) == [greek.id])
        #expect(try alice.conversations.search("東京*").map(\.message) == [tokyo.id])
        let hit = try #require(try alice.conversations.search("привет").first)
        #expect(hit.snippet(marking: "<", ">") == "<Привет>, мир")
        #expect(hit.snippet[hit.highlights[0]] == "Привет")
    }

    @Test("a query is words: quotes, operators and column syntax are text; empty and word-less queries are refused")
    func queriesAreWords() throws {
        let (alice, _, _, chat) = try lab(seed: 750)
        let quoted = try alice.conversations.send("she said \"NOT now\" AND left (quietly)", in: chat, now: alice.tick())
        let other = try alice.conversations.send("now or never", in: chat, now: alice.tick())
        try alice.conversations.refresh(chat)
        for query in [
            "\"NOT", "NOT now\"", "AND", "\"she said", "(quietly", "left)", "left NOT said", "left : said",
            "she -said", "she + said", "{left}: said", "^she", "said*\"", "\"\"\"now\"\"\" she",
        ] {
            #expect(try alice.conversations.search(query).map(\.message) == [quoted.id], "query \(query)")
        }
        #expect(try alice.conversations.search("now").map(\.message) == [other.id, quoted.id])
        #expect(try alice.conversations.search("OR").map(\.message) == [other.id])
        #expect(try alice.conversations.search("NEAR").isEmpty)
        // The conversation's scope token is not text anyone wrote.
        #expect(try alice.conversations.search(SearchIndex.scope(of: Data(chat.bytes))).isEmpty)
        #expect(try alice.conversations.search("scope").isEmpty)

        #expect(throws: SearchError.emptyQuery) { try alice.conversations.search("") }
        #expect(throws: SearchError.emptyQuery) { try alice.conversations.search("  \n\t ") }
        #expect(throws: SearchError.noWords("\" * - ❤️")) { try alice.conversations.search(" \" * - ❤️ ") }
        let many = (0...SearchIndex.wordsMax).map { "w\($0)" }.joined(separator: " ")
        #expect(throws: SearchError.tooManyWords(SearchIndex.wordsMax + 1)) { try alice.conversations.search(many) }
        #expect(SearchError.emptyQuery.description == "Type one or more words to search for")
        #expect(try alice.conversations.search("now", limit: 0).isEmpty)
    }

    @Test("opening a hit: the lines around it, about half before, oldest first")
    func historyAroundAHit() throws {
        let (alice, _, _, chat) = try lab(seed: 780)
        for index in 0..<120 { try alice.conversations.send("line \(index)", in: chat, now: alice.tick()) }
        try alice.conversations.refresh(chat)
        let middle = try #require(try alice.conversations.search("60").first)
        let around = try alice.conversations.history(chat, around: middle.message)
        #expect(around.count == 50 && around[25].id == middle.message)
        #expect(around.first?.text == "line 35" && around.last?.text == "line 84")
        let late = try #require(try alice.conversations.search("115").first)
        let end = try alice.conversations.history(chat, around: late.message, limit: 10)
        #expect(end.compactMap(\.text) == (110...119).map { "line \($0)" })
        #expect(try alice.conversations.history(chat, around: RecordID(bytes: [UInt8](repeating: 1, count: 32))).isEmpty)
    }

    @Test("the index is a cache: dropping it and refreshing gives the same documents")
    func indexRebuildable() throws {
        let (alice, bob, _, chat) = try lab(seed: 760)
        let line = try alice.conversations.send("first draft", in: chat, now: alice.tick())
        try alice.conversations.send("second thoughts", in: chat, now: alice.tick())
        try alice.conversations.edit(line.id, to: "final draft", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refresh(chat)
        let before = try documents(bob.store)
        #expect(before.count == 2)
        try bob.store.writer.write { db in
            try db.execute(sql: "DELETE FROM search_document")
            try db.execute(sql: "DELETE FROM timeline")
        }
        // A node that starts again (no memory of what it wrote) refreshes every row and restores them. (While it
        // runs, rows deleted by hand are not noticed: its refresh only writes what changed.)
        let restarted = Conversations(store: bob.store, identity: bob.identity)
        try restarted.refresh(chat)
        #expect(try documents(bob.store) == before)
        #expect(try restarted.search("draft").map(\.message) == [line.id])
        // FTS5's own consistency check of the index against its content table.
        try bob.store.writer.write { db in
            try db.execute(sql: "INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)")
        }
    }

    @Test("documents wait in search_pending until a refresh finds 256 of them or a search runs; edits and deletes of waiting and indexed ones both hold")
    func pendingDocuments() throws {
        let (alice, bob, _, chat) = try lab(seed: 790)
        var lines = [RecordID]()
        // Refreshed every 25 lines: the index takes the first 256 documents in one flush, the rest wait.
        for index in 0..<300 {
            lines.append(try alice.conversations.send("word\(index) common", in: chat, now: alice.tick()).id)
            if index % 25 == 24 {
                try bob.pull(from: alice)
                try bob.conversations.refresh(chat)
            }
        }
        let pending = { try bob.store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM search_pending") } }
        let indexed = {
            try bob.store.writer.read { try Int.fetchOne($0, sql: "SELECT count(*) FROM message_search('common')") }
        }
        #expect(try indexed() == 275 && pending() == 25, "flushed at the refresh that reached 256 (line 275)")
        // Edit and delete one indexed document (line 3) and one waiting (line 290).
        try alice.conversations.edit(lines[3], to: "changed indexed", in: chat, now: alice.tick())
        try alice.conversations.edit(lines[290], to: "changed waiting", in: chat, now: alice.tick())
        try alice.conversations.delete(lines[4], in: chat, now: alice.tick())
        try alice.conversations.delete(lines[291], in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refresh(chat)
        #expect(try pending() == 25, "two waiting went, two edited came")
        // A search indexes what waits first: every current text is found, nothing edited or deleted away.
        #expect(try bob.conversations.search("common", limit: 400).count == 296)
        #expect(try pending() == 0)
        #expect(try bob.conversations.search("changed").map(\.message).sorted() == [lines[3], lines[290]].sorted())
        for gone in ["word3", "word4", "word290", "word291"] {
            #expect(try bob.conversations.search(gone).isEmpty, "\(gone)")
        }
        #expect(try bob.conversations.search("word299").map(\.message) == [lines[299]])
        // FTS5's own consistency check of the index against its content table.
        try bob.store.writer.write { db in
            try db.execute(sql: "INSERT INTO message_search (message_search, rank) VALUES ('integrity-check', 1)")
        }
    }

    func documents(_ store: RecordStore) throws -> [String] {
        try store.writer.read { db in
            try Row.fetchAll(db, sql: "SELECT rowid, message, conversation, scope, text FROM search_document ORDER BY 1")
                .map { "\($0)" }
        }
    }
}

@Suite("Search: upgrading an older database")
struct SearchMigrationTests {
    @Test(
        "a database left by older code (v3, or v4 with files) upgrades and finds its old messages (backfilled index)",
        arguments: ["v3-named-peers", "v4-file-chunks"])
    func upgrades(from version: String) throws {
        let alice = try Replica("Alice", seed: 770)
        let bob = try Replica("Bob", seed: 771)
        try introduce([alice, bob])
        let chat = try alice.conversations.createGroup(title: "Old times", members: [bob.id], now: alice.tick())
        let old = try alice.conversations.send("an old message about otters", in: chat, now: alice.tick())
        let gone = try alice.conversations.send("otters, deleted later", in: chat, now: alice.tick())
        try alice.conversations.delete(gone.id, in: chat, now: alice.tick())
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-test-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }

        // Bob's node as the older code left it: records and derived tables, nothing of the later migrations.
        do {
            let store = try RecordStore.open(directory: directory)
            let records = try alice.store.allRecords()
            _ = try deliver(records, to: store, batchSizes: 1...500, rng: nil)
            try Conversations(store: store, identity: bob.identity).refreshChanged()
            let older = try DatabaseQueue()
            try Schema.migrator.migrate(older, upTo: version)
            try downgrade(store.writer, to: older)
            // It is exactly what migrating a fresh database up to that version gives.
            #expect(try schema(store.writer) == schema(older))
        }

        let reopened = try RecordStore.open(directory: directory)
        let conversations = Conversations(store: reopened, identity: bob.identity)
        #expect(try conversations.search("otters").map(\.message) == [old.id])
        #expect(try conversations.search("message", in: chat).first?.conversationTitle == "Old times")
        // And the index keeps up from there.
        try conversations.refresh(chat)
        #expect(try conversations.search("otters").map(\.message) == [old.id])
        #expect(try conversations.conversationList().first?.archived == false)
    }

    /// Drops every table and column, and forgets every migration, that `older` does not have.
    func downgrade(_ store: any DatabaseWriter, to older: DatabaseQueue) throws {
        let (keptTables, keptMigrations) = try older.read { db in
            (
                Set(try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'table'")),
                try String.fetchAll(db, sql: "SELECT identifier FROM grdb_migrations")
            )
        }
        let olderTriggers = try older.read { old in
            try String.fetchAll(old, sql: "SELECT sql FROM sqlite_master WHERE type = 'trigger'")
        }
        try store.writeWithoutTransaction { db in
            // Triggers first: one a later migration rewrote (v14's, naming `search_pending`) would stop every later
            // schema change once its table is gone. The older schema's own are created again at the end.
            for trigger in try String.fetchAll(db, sql: "SELECT name FROM sqlite_master WHERE type = 'trigger'") {
                try db.execute(sql: "DROP TRIGGER \(trigger)")
            }
            // Then virtual tables, before the rest: dropping one drops its shadow tables.
            for virtual in [true, false] {
                let tables = try String.fetchAll(
                    db, sql: "SELECT name FROM sqlite_master WHERE type = 'table' AND (sql LIKE 'CREATE VIRTUAL%') = ?",
                    arguments: [virtual])
                for table in tables where !keptTables.contains(table) { try db.execute(sql: "DROP TABLE \(table)") }
            }
            // Indexes later migrations added (v12's `feed_live`), before the columns they cover go.
            let keptIndexes = try older.read { old in
                Set(try String.fetchAll(old, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"))
            }
            let indexes = try String.fetchAll(
                db, sql: "SELECT name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL")
            for index in indexes where !keptIndexes.contains(index) { try db.execute(sql: "DROP INDEX \(index)") }
            // Columns later migrations renamed (v13's `conversation.written`, once `digest`): named back.
            for table in keptTables.sorted() where try db.tableExists(table) {
                let olderColumns = try older.read { old in Set(try old.columns(in: table).map(\.name)) }
                let columns = Set(try db.columns(in: table).map(\.name))
                let added = columns.subtracting(olderColumns)
                let missing = olderColumns.subtracting(columns)
                if added.count == 1, missing.count == 1 {
                    try db.execute(sql: "ALTER TABLE \(table) RENAME COLUMN \(added.first!) TO \(missing.first!)")
                }
            }
            // Columns later migrations added to tables the older schema has (v7's `feed.junk`).
            for table in keptTables.sorted() where try db.tableExists(table) {
                let olderColumns = try older.read { old in Set(try old.columns(in: table).map(\.name)) }
                for column in try db.columns(in: table).map(\.name) where !olderColumns.contains(column) {
                    try db.execute(sql: "ALTER TABLE \(table) DROP COLUMN \(column)")
                }
            }
            // Tables a later migration rebuilt (v9's `record`, without its id index): rebuilt as the older schema
            // had them, rows and rowids kept, with the older schema's indexes.
            for table in keptTables.sorted() where try db.tableExists(table) {
                let olderSQL = try older.read { old in try Self.definition(of: table, in: old) }
                guard try Self.definition(of: table, in: db) != olderSQL, let olderSQL else { continue }
                let columns = try db.columns(in: table).map(\.name).joined(separator: ", ")
                try db.execute(sql: "ALTER TABLE \(table) RENAME TO downgraded_\(table)")
                try db.execute(sql: olderSQL)
                try db.execute(
                    sql: "INSERT INTO \(table) (rowid, \(columns)) SELECT rowid, \(columns) FROM downgraded_\(table)")
                try db.execute(sql: "DROP TABLE downgraded_\(table)")
                let indexes = try older.read { old in
                    try String.fetchAll(
                        old, sql: "SELECT sql FROM sqlite_master WHERE type = 'index' AND tbl_name = ? AND sql IS NOT NULL",
                        arguments: [table])
                }
                for index in indexes { try db.execute(sql: index) }
            }
            for trigger in olderTriggers { try db.execute(sql: trigger) }
            try db.execute(
                sql: "DELETE FROM grdb_migrations WHERE identifier NOT IN (SELECT value FROM json_each(?))",
                arguments: ["[" + keptMigrations.map { "\"\($0)\"" }.joined(separator: ",") + "]"])
        }
    }

    private static func definition(of table: String, in db: Database) throws -> String? {
        try String.fetchOne(db, sql: "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = ?", arguments: [table])
    }

    func schema(_ database: any DatabaseReader) throws -> [String] {
        try database.read { db in
            try String.fetchAll(
                db,
                sql: "SELECT type || ' ' || name || ' ' || COALESCE(sql, '') FROM sqlite_master ORDER BY type, name")
        }
    }
}

extension SearchTests {
    @Test("a document's rowid is the next free one at its shown millisecond, then past every other once the slot is full")
    func rowidsFollowShownTime() throws {
        let store = try RecordStore.inMemory()
        let conversation = Data(repeating: 7, count: 32)
        func document(_ n: UInt8, at millis: Int64) -> SearchIndex.Document {
            SearchIndex.Document(message: Data(repeating: n, count: 32), text: "word \(n)", shownMillis: millis)
        }
        let slot: Int64 = 1 << SearchIndex.slotBits
        try store.writer.write { db in
            let first = try SearchIndex.insert(document(1, at: 5), conversation: conversation, in: db)
            let second = try SearchIndex.insert(document(2, at: 5), conversation: conversation, in: db)
            let earlier = try SearchIndex.insert(document(3, at: 4), conversation: conversation, in: db)
            #expect([first, second, earlier] == [5 * slot, 5 * slot + 1, 4 * slot])
            // The slot of millisecond 4 full: the next document there goes after every rowid held.
            try db.execute(
                sql: "INSERT INTO search_document (rowid, message, conversation, scope, text) VALUES (?, ?, ?, ?, ?)",
                arguments: [5 * slot - 1, Data(repeating: 4, count: 32), conversation, "c", "filler"])
            let overflow = try SearchIndex.insert(document(5, at: 4), conversation: conversation, in: db)
            #expect(overflow == 5 * slot + 2)
            let stored = try Int64.fetchAll(db, sql: "SELECT rowid FROM search_document ORDER BY text")
            #expect(stored == [5 * slot - 1, 5 * slot, 5 * slot + 1, 4 * slot, 5 * slot + 2])
        }
    }
}
