import Foundation
import GRDB
import NatterModel

/// The database schema. **Migrations are append-only: never edit one that has been released; add a new one.**
enum Schema {
    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-record-log") { db in
            // Every stored record: indexed header columns plus the canonical bytes. rowid is local arrival order.
            try db.execute(
                sql: """
                    CREATE TABLE record (
                        rowid INTEGER PRIMARY KEY,
                        id BLOB NOT NULL UNIQUE,
                        conversation BLOB NOT NULL,
                        author BLOB NOT NULL,
                        sequence INTEGER NOT NULL,
                        kind INTEGER NOT NULL,
                        epoch BLOB NOT NULL,
                        lamport INTEGER NOT NULL,
                        created_ms INTEGER NOT NULL,
                        received_ms INTEGER NOT NULL,
                        bytes BLOB NOT NULL,
                        UNIQUE (conversation, author, sequence)
                    );
                    """)
            // One row per (conversation, author) feed: the contiguous stored chain, the applied prefix (causally
            // ready, before any fork), and the lowest sequence at which the author is known to have equivocated.
            try db.execute(
                sql: """
                    CREATE TABLE feed (
                        conversation BLOB NOT NULL,
                        author BLOB NOT NULL,
                        stored_sequence INTEGER NOT NULL,
                        stored_head BLOB NOT NULL,
                        applied_sequence INTEGER NOT NULL,
                        applied_head BLOB NOT NULL,
                        applied_lamport INTEGER NOT NULL,
                        fork_sequence INTEGER,
                        stalled_reason TEXT,
                        PRIMARY KEY (conversation, author)
                    ) WITHOUT ROWID;
                    """)
            // Validly signed records that contradict a stored one: proof that their author forked the feed.
            try db.execute(
                sql: """
                    CREATE TABLE fork_evidence (
                        conversation BLOB NOT NULL,
                        author BLOB NOT NULL,
                        sequence INTEGER NOT NULL,
                        record_id BLOB NOT NULL,
                        bytes BLOB NOT NULL,
                        received_ms INTEGER NOT NULL,
                        PRIMARY KEY (conversation, author, sequence, record_id)
                    ) WITHOUT ROWID;
                    """)
            // Small facts about the store itself, such as whose identity wrote it.
            try db.execute(sql: "CREATE TABLE meta (key TEXT PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID")
        }
        migrator.registerMigration("v2-conversations") { db in
            // Derived state of the conversations this node can read: a cache of ConversationRules.derive, rebuilt
            // from the log at any time. Viewer-specific columns (unread, last activity) live here too.
            try db.execute(
                sql: """
                    CREATE TABLE conversation (
                        id BLOB PRIMARY KEY NOT NULL,
                        kind INTEGER NOT NULL,
                        title TEXT,
                        creator BLOB,
                        current_epoch BLOB,
                        is_member INTEGER NOT NULL,
                        digest BLOB NOT NULL,
                        last_activity_ms INTEGER NOT NULL,
                        preview TEXT,
                        unread INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX conversation_by_activity ON conversation (last_activity_ms DESC);
                    CREATE TABLE conversation_member (
                        conversation BLOB NOT NULL,
                        member BLOB NOT NULL,
                        role INTEGER NOT NULL,
                        flags INTEGER NOT NULL,
                        is_creator INTEGER NOT NULL,
                        PRIMARY KEY (conversation, member)
                    ) WITHOUT ROWID;
                    CREATE TABLE timeline (
                        id BLOB PRIMARY KEY NOT NULL,
                        conversation BLOB NOT NULL,
                        lamport INTEGER NOT NULL,
                        author BLOB NOT NULL,
                        is_system INTEGER NOT NULL,
                        text TEXT,
                        system_change TEXT,
                        reply_to BLOB,
                        edit_count INTEGER NOT NULL,
                        deleted INTEGER NOT NULL,
                        retracted INTEGER NOT NULL,
                        displayed_ms INTEGER NOT NULL,
                        received_ms INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX timeline_by_position ON timeline (conversation, lamport, id);
                    CREATE TABLE reaction (
                        message BLOB NOT NULL,
                        person BLOB NOT NULL,
                        reaction INTEGER NOT NULL,
                        PRIMARY KEY (message, person)
                    ) WITHOUT ROWID;
                    """)
            // Conversations whose applied records changed since their tables were last refreshed. Written in the
            // ingest (or append) transaction, cleared by the refresh that catches up: after a crash in between, the
            // node refreshes what is still marked, so the tables never stay behind the log.
            try db.execute(sql: "CREATE TABLE dirty_conversation (id BLOB PRIMARY KEY NOT NULL) WITHOUT ROWID")
            // Epoch keys, apart from everything else: the one table that must never be shown or exported.
            try db.execute(
                sql: """
                    CREATE TABLE epoch_key (
                        conversation BLOB NOT NULL,
                        epoch BLOB NOT NULL,
                        key BLOB NOT NULL,
                        PRIMARY KEY (conversation, epoch)
                    ) WITHOUT ROWID;
                    """)
        }
        migrator.registerMigration("v3-named-peers") { db in
            // Peers named with --peer: remembered, and redialled on every later start.
            try db.execute(
                sql: """
                    CREATE TABLE named_peer (
                        address TEXT PRIMARY KEY NOT NULL,
                        added_ms INTEGER NOT NULL
                    ) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("v4-file-chunks") { db in
            // Encrypted file chunks (SPEC F13), by content address (BLAKE2b-256 of the ciphertext). Outside the
            // record log and its feeds: served to any peer that asks, droppable at any time without touching a feed.
            try db.execute(
                sql: """
                    CREATE TABLE chunk (
                        id BLOB PRIMARY KEY NOT NULL,
                        bytes BLOB NOT NULL,
                        stored_ms INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    """)
            // What the timeline shows of a file message (derived, like `timeline`; the key and chunk ids stay in the
            // encrypted record and are read from the conversation state when needed).
            try db.execute(
                sql: """
                    CREATE TABLE timeline_file (
                        id BLOB PRIMARY KEY NOT NULL,
                        conversation BLOB NOT NULL,
                        name TEXT NOT NULL,
                        media_type TEXT NOT NULL,
                        size INTEGER NOT NULL,
                        chunk_count INTEGER NOT NULL
                    ) WITHOUT ROWID;
                    CREATE INDEX timeline_file_by_conversation ON timeline_file (conversation);
                    """)
        }
        migrator.registerMigration("v5-search-and-local-settings") { db in
            // The full-text index (SPEC F14): one row per message this node can read and show — current text, not
            // deleted, not retracted — maintained by `Conversations.refresh` beside the timeline, so it is a cache
            // of the derived state like the timeline itself and never holds ciphertext.
            //
            // rowid = (shown time in ms << 20) + n: FTS5 walks its doclists in rowid order, so "newest first, the
            // first 50" is an index walk that stops early instead of a sort of every match (docs/performance.md).
            // `scope` is one token naming the conversation ("c" + 16 hex digits of its id), so a search in one
            // conversation intersects doclists instead of filtering every match.
            try db.execute(
                sql: """
                    CREATE TABLE search_document (
                        rowid INTEGER PRIMARY KEY,
                        message BLOB NOT NULL UNIQUE,
                        conversation BLOB NOT NULL,
                        scope TEXT NOT NULL,
                        text TEXT NOT NULL
                    );
                    CREATE INDEX search_document_by_conversation ON search_document (conversation);
                    CREATE VIRTUAL TABLE message_search USING fts5(
                        text, scope,
                        content = 'search_document', content_rowid = 'rowid',
                        tokenize = 'unicode61 remove_diacritics 2'
                    );
                    CREATE TRIGGER search_document_inserted AFTER INSERT ON search_document BEGIN
                        INSERT INTO message_search (rowid, text, scope) VALUES (new.rowid, new.text, new.scope);
                    END;
                    CREATE TRIGGER search_document_deleted AFTER DELETE ON search_document BEGIN
                        INSERT INTO message_search (message_search, rowid, text, scope)
                        VALUES ('delete', old.rowid, old.text, old.scope);
                    END;
                    """)
            // Backfill from the timeline an older database already holds (a conversation still marked dirty is
            // brought up to date by the next refresh, which diffs the index against the derived state). A file
            // message is found by its file name.
            let lines = try Row.fetchAll(
                db,
                sql: """
                    SELECT t.id, t.conversation, COALESCE(f.name, t.text), t.displayed_ms
                    FROM timeline t LEFT JOIN timeline_file f ON f.id = t.id
                    WHERE t.is_system = 0 AND t.deleted = 0 AND t.retracted = 0 AND COALESCE(f.name, t.text) <> ''
                    ORDER BY t.conversation, t.lamport, t.id
                    """)
            for line in lines {
                try SearchIndex.insert(
                    SearchIndex.Document(message: line[0], text: line[2], shownMillis: line[3]),
                    conversation: line[1], in: db)
            }
            // Local, per-node settings of a conversation (SPEC F5): never synced, never part of any digest.
            // muted_until_ms: NULL = not muted, 9223372036854775807 (Int64.max) = muted for ever; archived: hidden
            // from the list until a new line arrives (the refresh that adds it clears the flag).
            try db.execute(
                sql: """
                    CREATE TABLE conversation_setting (
                        conversation BLOB PRIMARY KEY NOT NULL,
                        muted_until_ms INTEGER,
                        archived INTEGER NOT NULL DEFAULT 0
                    ) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("v6-relay-evictions") { db in
            // Conversations the relay quota evicted (SPEC F16): their records are refused unchecked until the entry
            // expires or an invitation into the conversation arrives. Bounded (`QuotaConfiguration`).
            try db.execute(
                sql: """
                    CREATE TABLE evicted_conversation (
                        id BLOB PRIMARY KEY NOT NULL,
                        evicted_ms INTEGER NOT NULL
                    ) WITHOUT ROWID
                    """)
        }
        migrator.registerMigration("v7-junk-feeds") { db in
            // Junk feeds (DESIGN §3): feeds of authors never in the roster of a conversation this node reads. Their
            // rows (the frontier) stay; their records keep id and header columns, with empty bytes.
            try db.execute(sql: "ALTER TABLE feed ADD COLUMN junk INTEGER NOT NULL DEFAULT 0")
        }
        migrator.registerMigration("v8-durability-mark") { db in
            // One row that `RecordStore.syncDeferred` rewrites with synchronous=FULL: its fsync of the WAL makes
            // every earlier commit durable (WAL keeps commits in order). Since 2026-11-29 only its fallback: it
            // syncs the WAL file through SQLite's handle instead, when SQLite has one open.
            try db.execute(
                sql: "CREATE TABLE durability_mark (id INTEGER PRIMARY KEY CHECK (id = 1), syncs INTEGER NOT NULL)")
            try db.execute(sql: "INSERT INTO durability_mark (id, syncs) VALUES (1, 0)")
        }
        migrator.registerMigration("v9-record-log-by-position") { db in
            // The log is addressed by position (conversation, author, sequence), whose index grows at the end of
            // each feed. The UNIQUE index on record ids (random keys) cost every ingest transaction about one page
            // write per record, through the WAL and again at the checkpoint (docs/performance.md), and nothing needs
            // it: a copy is found at the position it claims, and readers name records by `RecordRef`. SQLite cannot
            // drop a UNIQUE constraint, so the table is rebuilt, rows and rowids (arrival order) kept.
            try db.execute(
                sql: """
                    CREATE TABLE record_by_position (
                        rowid INTEGER PRIMARY KEY,
                        id BLOB NOT NULL,
                        conversation BLOB NOT NULL,
                        author BLOB NOT NULL,
                        sequence INTEGER NOT NULL,
                        kind INTEGER NOT NULL,
                        epoch BLOB NOT NULL,
                        lamport INTEGER NOT NULL,
                        created_ms INTEGER NOT NULL,
                        received_ms INTEGER NOT NULL,
                        bytes BLOB NOT NULL,
                        UNIQUE (conversation, author, sequence)
                    );
                    INSERT INTO record_by_position
                        SELECT rowid, id, conversation, author, sequence, kind, epoch, lamport, created_ms, received_ms,
                            bytes
                        FROM record ORDER BY rowid;
                    DROP TABLE record;
                    ALTER TABLE record_by_position RENAME TO record;
                    """)
        }
        migrator.registerMigration("v10-feed-sizes") { db in
            // What each feed costs the store, kept with the feed (`FeedState.storedBytes`, `lastReceivedMillis`):
            // the relay quota's measurement, once a second on a busy relay, sums feeds instead of scanning every
            // record of every relay-only conversation (docs/performance.md). Filled from the records once.
            try db.execute(
                sql: """
                    ALTER TABLE feed ADD COLUMN stored_bytes INTEGER NOT NULL DEFAULT 0;
                    ALTER TABLE feed ADD COLUMN last_received_ms INTEGER NOT NULL DEFAULT 0;
                    UPDATE feed SET
                        stored_bytes = (
                            SELECT COALESCE(SUM(length(r.bytes)), 0) FROM record r
                            WHERE r.conversation = feed.conversation AND r.author = feed.author),
                        last_received_ms = (
                            SELECT COALESCE(MAX(r.received_ms), 0) FROM record r
                            WHERE r.conversation = feed.conversation AND r.author = feed.author);
                    """)
        }
        migrator.registerMigration("v11-profile-authors") { db in
            // The authors whose profile feed is applied here (`RecordStore.profileAuthors`): every conversation
            // snapshot asks who could be the other party of a direct conversation, and reading every feed row for
            // that cost a scan of the whole feed table per snapshot (thousands of junk feeds under a flood).
            // `FeedState.save` keeps it; filled from the feed table once, by this migration's own query (not
            // `FeedState`'s, whose columns later migrations may extend).
            try db.execute(sql: "CREATE TABLE profile_author (author BLOB PRIMARY KEY NOT NULL) WITHOUT ROWID")
            let insert = try db.makeStatement(sql: "INSERT OR IGNORE INTO profile_author (author) VALUES (?)")
            for row in try Row.fetchAll(db, sql: "SELECT conversation, author FROM feed WHERE applied_sequence > 0") {
                let author = AuthorID(bytes: row[1] as Data)
                if ConversationID(bytes: row[0] as Data) == .profileFeed(of: author) {
                    try insert.execute(arguments: [Data(author.bytes)])
                }
            }
        }
        migrator.registerMigration("v12-live-feeds") { db in
            // The feeds of a conversation that are not junk (`RecordStore.liveFeeds`): what authoring depends on
            // and what a snapshot reads. A flood from throwaway identities leaves thousands of junk feeds in a
            // member conversation; without this index each message read all of them (docs/performance.md).
            try db.execute(sql: "CREATE INDEX feed_live ON feed(conversation, author) WHERE junk = 0")
        }
        migrator.registerMigration("v13-written-token") { db in
            // The list row carried the conversation's shared-state digest, recomputed over the whole state at every
            // refresh only to check that the tables were still what the refresh had written: it made a message
            // cost O(history). A token of the refresh that wrote the row does that check; `natter digest`
            // computes the digest when asked.
            try db.execute(sql: "ALTER TABLE conversation RENAME COLUMN digest TO written")
        }
        migrator.registerMigration("v14-search-pending") { db in
            // A new search document is listed in `search_pending` instead of entering the FTS5 index at once: FTS5
            // writes a segment (and merges) at every commit that touched it, which cost each message shown about
            // 90 µs when messages arrive one per transaction; `SearchIndex.flush` indexes the pending ones in one
            // statement, when enough are waiting and before any search (docs/performance.md). A document deleted
            // while pending never reached the index, so only an indexed one is deleted from it.
            try db.execute(
                sql: """
                    CREATE TABLE search_pending (rowid INTEGER PRIMARY KEY);
                    DROP TRIGGER search_document_inserted;
                    CREATE TRIGGER search_document_inserted AFTER INSERT ON search_document BEGIN
                        INSERT INTO search_pending (rowid) VALUES (new.rowid);
                    END;
                    DROP TRIGGER search_document_deleted;
                    CREATE TRIGGER search_document_deleted AFTER DELETE ON search_document BEGIN
                        INSERT INTO message_search (message_search, rowid, text, scope)
                        SELECT 'delete', old.rowid, old.text, old.scope
                        WHERE NOT EXISTS (SELECT 1 FROM search_pending WHERE rowid = old.rowid);
                        DELETE FROM search_pending WHERE rowid = old.rowid;
                    END;
                    """)
        }
        return migrator
    }
}
