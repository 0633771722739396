import GRDB

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
            try db.execute(sql: """
                CREATE TABLE named_peer (
                    address TEXT PRIMARY KEY NOT NULL,
                    added_ms INTEGER NOT NULL
                ) WITHOUT ROWID
                """)
        }
        return migrator
    }
}
