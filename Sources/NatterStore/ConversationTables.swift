import Foundation
import GRDB
import NatterCrypto
public import NatterModel

/// A row of the conversation list (SPEC F5).
public struct ConversationRow: Hashable, Sendable {
    public let id: ConversationID
    public let kind: ConversationKind
    /// The title, or for direct chats the other person's name, or for untitled groups the members' names.
    public let title: String
    public let isMember: Bool
    /// Local receive time of the last activity: what the list sorts by.
    public let lastActivityMillis: Int64
    /// The last message's first 100 characters ("Name: text" in groups), or nil.
    public let preview: String?
    public let unread: Int
    /// Local setting: muted until this time (ms), `Int64.max` for ever; nil when not muted. See `isMuted(at:)`.
    public let mutedUntilMillis: Int64?
    /// Local setting: archived, and no new line since (the list leaves it out unless asked).
    public let archived: Bool

    /// Whether notices for this conversation are silenced at `nowMillis`.
    public func isMuted(at nowMillis: Int64) -> Bool { mutedUntilMillis.map { nowMillis < $0 } ?? false }
}

/// A line of a conversation's history.
public struct TimelineRow: Hashable, Sendable {
    public let id: RecordID
    public let author: AuthorID
    public let lamport: UInt64
    public let isSystem: Bool
    /// The current text (nil when deleted or for system lines).
    public let text: String?
    /// A system line's description ("Alice added Bob").
    public let systemText: String?
    public let replyTo: RecordID?
    public let editCount: Int
    public let deleted: Bool
    /// A late record (a concurrent removal of its author) invalidated this line: show it marked "retracted".
    public let retracted: Bool
    /// The creation time clamped between the causal predecessors' and the local receive time.
    public let displayedAtMillis: Int64
    /// For a file message: what to show of the file (SPEC F13). `Conversations.fileStatus` tells how much of it
    /// this node holds.
    public var file: FileSummary? = nil

    /// A cursor for the page of older lines before this one.
    public var cursor: TimelineCursor { TimelineCursor(lamport: lamport, id: id) }
}

/// What a refresh changed in a conversation's timeline: the node turns it into events.
public struct TimelineChanges: Equatable, Sendable {
    /// Lines that were not shown before (new, or late arrivals placed in their position).
    public let added: [RecordID]
    /// Lines that were shown and are now rejected: a late record (a concurrent removal) invalidated them. They
    /// are marked "retracted", never silently dropped (SPEC F4).
    public let retracted: [RecordID]
}

/// What `Conversations.refresh` last wrote for a conversation: enough to write only what changed next time, with
/// the engine's change log (`ConversationEngine.changes(since:)`). Valid while the conversation row carries
/// `digest` and the tables hold as many rows as it says (`Conversations.stillHeld`).
struct WrittenTables: Sendable {
    /// The engine's change log position the tables reflect.
    var cursor: ChangeCursor
    var digest: Data
    /// The name of every person the rows show (system lines, previews, titles were built with these).
    var names: [AuthorID: String]
    /// Ids of the timeline rows (lines shown, retracted ones included), of those retracted, of the file rows.
    var shown: Set<RecordID>
    var retracted: Set<RecordID>
    var files: Set<RecordID>
    var documents: SearchIndex.Held
    var lastActivity: Int64
}

/// Where a history page ends: lines strictly before (Lamport number, id).
public struct TimelineCursor: Hashable, Sendable {
    public let lamport: UInt64
    public let id: RecordID
}

extension Conversations {
    /// Characters of a message shown in the conversation list.
    public static let previewCharacters = 100
    /// Lines in a history page (SPEC F11).
    public static let pageSize = 50

    /// Re-derives `conversation` and brings its derived rows (list entry, members, timeline, reactions, files, epoch
    /// keys, search documents) up to date in one transaction. The tables are a cache of `snapshot(of:)`: dropping
    /// and refreshing them gives the same rows. After the first refresh, only the lines the engine reports changed
    /// (`ConversationEngine.changes(since:)`) are built and written (`refreshChanges`), so a refresh after one new
    /// message costs that message, not the conversation's history; anything the change log cannot follow (a
    /// re-derivation, a new name for someone shown, tables written by someone else) refreshes every row.
    @discardableResult
    public func refresh(_ conversation: ConversationID) throws -> TimelineChanges {
        let snapshot = try snapshot(of: conversation)
        // Taken out while in use, put back only after a commit: a failed refresh leaves no memory to mislead the
        // next one.
        let previous = written.withLock { $0.removeValue(forKey: conversation) }
        var result: (TimelineChanges, WrittenTables?)
        if let previous, snapshot.state.kind != nil,
            let changed = snapshot.engine.changes(since: previous.cursor),
            let incremental = try refreshChanges(conversation, snapshot, since: previous, changed: Set(changed))
        {
            result = incremental
        } else {
            result = try refreshWhole(conversation, snapshot)
        }
        if let tables = result.1 { written.withLock { $0[conversation] = tables } }
        return result.0
    }

    /// Writes only the lines in `changed` (and the list entry, members and keys, which are small), or returns nil
    /// when the tables are not what `previous` says or a name shown changed (then `refreshWhole`).
    private func refreshChanges(
        _ conversation: ConversationID, _ snapshot: ConversationSnapshot, since previous: WrittenTables,
        changed: Set<RecordID>
    ) throws -> (TimelineChanges, WrittenTables)? {
        let state = snapshot.state
        guard let kind = state.kind else { return nil }
        let key = Data(conversation.bytes)
        guard try store.writer.read({ db in try Self.stillHeld(previous, conversation: key, in: db) }) else { return nil }
        // Names: every one shown must be unchanged; people new in the changed lines (and members) are added.
        var names = previous.names
        for (person, shown) in previous.names where try (profile(of: person)?.name ?? person.publicKey.fingerprint) != shown {
            return nil
        }
        var people = Set(state.members.keys)
        for id in changed {
            if let item = state.item(id) {
                people.formUnion(Self.people(shownBy: item))
            } else if let message = state.retracted[id] {
                people.insert(message.author)
            }
        }
        for person in people where names[person] == nil {
            names[person] = try profile(of: person)?.name ?? person.publicKey.fingerprint
        }
        let known = names
        func name(_ author: AuthorID) -> String { known[author] ?? author.publicKey.fingerprint }
        let ordered = changed.sorted()
        let received = try store.receiveTimes(of: ordered.compactMap { snapshot.engine.ref(of: $0) })
        // The changed lines' rows, files, reactions and documents (nil: the line has none any more).
        var lines = [[DatabaseValue]]()
        var files = [RecordID: [DatabaseValue]?]()
        var reactions = [RecordID: [[DatabaseValue]]]()
        var documents = [RecordID: SearchIndex.Document?]()
        var lastActivity = previous.lastActivity
        for id in ordered {
            let arrived = received[id] ?? 0
            if let item = state.item(id) {
                lastActivity = max(lastActivity, arrived)
                lines.append(lineRow(item, key: key, arrived: arrived, name: name))
                if case .message(let message) = item {
                    files[id] = .some(Self.fileRow(message, key: key))
                    documents[id] = .some(Self.document(of: message, arrived: arrived))
                }
            } else if let message = state.retracted[id] {
                lines.append(Self.retractedRow(message, key: key, arrived: arrived))
            }
            reactions[id] = Self.reactionRows(of: id, in: state)
        }
        let (unread, preview) = listSummary(of: state, kind: kind, name: name)
        let addedIDs = ordered.filter { state.item($0) != nil && !previous.shown.contains($0) }
        let changes = TimelineChanges(
            added: addedIDs.sorted { state.item($0)!.position < state.item($1)!.position },
            retracted: ordered.filter { state.retracted[$0] != nil && !previous.retracted.contains($0) })
        var next = previous
        next.cursor = snapshot.engine.changeCursor
        next.digest = Data(state.digest())
        next.names = known
        next.lastActivity = lastActivity
        try store.writeDerived { db in
            try db.execute(sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [key])
            let upsertLine = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO timeline (\(Self.timelineWriteColumns)) VALUES (\(Self.placeholders(13)))")
            for line in lines { try upsertLine.execute(arguments: StatementArguments(line)) }
            for (id, file) in files {
                try db.execute(sql: "DELETE FROM timeline_file WHERE id = ?", arguments: [Data(id.bytes)])
                next.files.remove(id)
                if let file {
                    try db.execute(
                        sql: "INSERT INTO timeline_file (\(Self.fileWriteColumns)) VALUES (\(Self.placeholders(6)))",
                        arguments: StatementArguments(file))
                    next.files.insert(id)
                }
            }
            for (id, rows) in reactions {
                try db.execute(sql: "DELETE FROM reaction WHERE message = ?", arguments: [Data(id.bytes)])
                for row in rows {
                    try db.execute(
                        sql: "INSERT INTO reaction (message, person, reaction) VALUES (?, ?, ?)",
                        arguments: StatementArguments(row))
                }
            }
            for (id, document) in documents {
                try SearchIndex.set(
                    Data(id.bytes), to: document, conversation: key, held: &next.documents, in: db)
            }
            try writeListEntry(
                of: state, snapshot: snapshot, key: key, kind: kind, digest: next.digest, lastActivity: lastActivity,
                preview: preview, unread: unread, name: name, in: db)
            if !previous.shown.isEmpty && !changes.added.isEmpty {
                try db.execute(
                    sql: "UPDATE conversation_setting SET archived = 0 WHERE conversation = ?", arguments: [key])
            }
        }
        next.shown.formUnion(ordered.filter { state.item($0) != nil || state.retracted[$0] != nil })
        next.retracted.formUnion(ordered.filter { state.retracted[$0] != nil })
        return (changes, next)
    }

    // MARK: - Rows (both refresh paths build them here, so a partial refresh writes what a whole one would)

    private static func row(_ values: (any DatabaseValueConvertible)?...) -> [DatabaseValue] {
        values.map { $0?.databaseValue ?? .null }
    }

    /// The time a line shows: its clamped creation time, never after its arrival here.
    private static func shown(_ displayedAtMillis: Int64, arrived: Int64) -> Int64 {
        min(displayedAtMillis, max(arrived, 0))
    }

    /// The timeline row of a line shown: a message or a system line.
    private func lineRow(_ item: TimelineItem, key: Data, arrived: Int64, name: (AuthorID) -> String)
        -> [DatabaseValue]
    {
        switch item {
        case .message(let message):
            Self.row(
                Data(message.id.bytes), key, Int64(message.position.lamport), Data(message.author.bytes), false,
                message.deleted ? nil : message.text, nil, message.replyTo.map { Data($0.bytes) }, message.editCount,
                message.deleted, false, Self.shown(message.displayedAtMillis, arrived: arrived), arrived)
        case .system(let event):
            Self.row(
                Data(event.id.bytes), key, Int64(event.position.lamport), Data(event.author.bytes), true, nil,
                describe(event, name: name), nil, 0, false, false,
                Self.shown(event.displayedAtMillis, arrived: arrived), arrived)
        }
    }

    /// The timeline row of a retracted message (marked, never dropped: SPEC F4).
    private static func retractedRow(_ message: TimelineMessage, key: Data, arrived: Int64) -> [DatabaseValue] {
        row(
            Data(message.id.bytes), key, Int64(message.position.lamport), Data(message.author.bytes), false,
            message.text, nil, message.replyTo.map { Data($0.bytes) }, 0, false, true,
            shown(message.displayedAtMillis, arrived: arrived), arrived)
    }

    private static func fileRow(_ message: TimelineMessage, key: Data) -> [DatabaseValue]? {
        message.file.map { row(Data(message.id.bytes), key, $0.name, $0.mediaType, Int64($0.size), $0.chunks.count) }
    }

    private static func reactionRows(of message: RecordID, in state: ConversationState) -> [[DatabaseValue]] {
        (state.reactions[message] ?? [:]).sorted { $0.key < $1.key }.map { person, reaction in
            row(Data(message.bytes), Data(person.bytes), Int(reaction.rawValue))
        }
    }

    /// What search holds for a message: its text, or a file message's name; nothing when deleted or empty.
    private static func document(of message: TimelineMessage, arrived: Int64) -> SearchIndex.Document? {
        let searchable = message.file?.name ?? message.text
        guard !message.deleted, !searchable.isEmpty else { return nil }
        return SearchIndex.Document(
            message: Data(message.id.bytes), text: searchable,
            shownMillis: shown(message.displayedAtMillis, arrived: arrived))
    }

    /// The list entry's unread count (messages by others after this node's read receipt) and preview (the last
    /// message not deleted, "Name: text" in groups).
    private func listSummary(of state: ConversationState, kind: ConversationKind, name: (AuthorID) -> String)
        -> (unread: Int, preview: String?)
    {
        let myRead = state.receipts[identity.author]?.read ?? VectorClock()
        var unread = 0
        for item in state.timeline {
            guard case .message(let message) = item else { continue }
            if message.author != identity.author && myRead[message.author] < message.sequence { unread += 1 }
        }
        for item in state.timeline.reversed() {
            guard case .message(let message) = item, !message.deleted else { continue }
            let text = String((message.file.map { "[file] \($0.name)" } ?? message.text).prefix(Self.previewCharacters))
            return (unread, kind == .group ? "\(name(message.author)): \(text)" : text)
        }
        return (unread, nil)
    }

    /// The members, epoch keys and list row of a conversation this node reads, rewritten (they are small).
    private func writeListEntry(
        of state: ConversationState, snapshot: ConversationSnapshot, key: Data, kind: ConversationKind, digest: Data,
        lastActivity: Int64, preview: String?, unread: Int, name: (AuthorID) -> String, in db: Database
    ) throws {
        for table in ["conversation_member", "epoch_key"] {
            try db.execute(sql: "DELETE FROM \(table) WHERE conversation = ?", arguments: [key])
        }
        for (epoch, epochKey) in snapshot.keys {
            try db.execute(
                sql: "INSERT INTO epoch_key (conversation, epoch, key) VALUES (?, ?, ?)",
                arguments: [key, Data(epoch.bytes), Data(epochKey.secret.exposedCopy())])
        }
        for member in state.sortedMembers {
            let info = state.members[member]!
            try db.execute(
                sql: """
                    INSERT INTO conversation_member (conversation, member, role, flags, is_creator)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key, Data(member.bytes), Int(info.role.rawValue), Int(info.flags.rawValue),
                    member == state.creator,
                ])
        }
        let others = state.sortedMembers.filter { $0 != identity.author }
        let title = state.title ?? (others.isEmpty ? "(just you)" : others.map(name).joined(separator: ", "))
        try db.execute(
            sql: """
                INSERT OR REPLACE INTO conversation (id, kind, title, creator, current_epoch, is_member, digest,
                    last_activity_ms, preview, unread)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                key, Int(kind.rawValue), title, state.creator.map { Data($0.bytes) },
                state.currentEpoch.map { Data($0.bytes) }, state.members[identity.author] != nil,
                digest, lastActivity, preview, unread,
            ])
    }

    /// The people a line names: its author and, for a system line, the members it is about.
    private static func people(shownBy item: TimelineItem) -> [AuthorID] {
        switch item {
        case .message(let message): return [message.author]
        case .system(let event):
            switch event.change {
            case .created(_, _, let members), .added(let members), .removed(let members): return [event.author] + members
            case .roleChanged(let member, _), .flagsChanged(let member, _): return [event.author, member]
            case .left, .renamed, .rekeyed: return [event.author]
            }
        }
    }

    private static func placeholders(_ count: Int) -> String {
        Array(repeating: "?", count: count).joined(separator: ", ")
    }

    /// Whether the tables still hold what `written` says was written: the conversation row carries its digest and
    /// the timeline, file and search rows are as many (counted on their conversation index, without reading them).
    /// Anything else that writes these tables — an eviction, a rebuild, a hand-made deletion — fails this check.
    private static func stillHeld(_ written: WrittenTables, conversation: Data, in db: Database) throws -> Bool {
        guard try Data.fetchOne(db, sql: "SELECT digest FROM conversation WHERE id = ?", arguments: [conversation])
            == written.digest
        else { return false }
        let counts = try Row.fetchOne(
            db,
            sql: """
                SELECT (SELECT COUNT(*) FROM timeline WHERE conversation = ?1),
                       (SELECT COUNT(*) FROM timeline_file WHERE conversation = ?1),
                       (SELECT COUNT(*) FROM search_document WHERE conversation = ?1)
                """, arguments: [conversation])!
        return counts[0] == written.shown.count && counts[1] == written.files.count
            && counts[2] == written.documents.count
    }

    /// Refreshes every row of `conversation` from `snapshot`, comparing with what the tables hold; returns the changes
    /// and, for a conversation this node reads, what was written (for `refreshChanges` next time).
    private func refreshWhole(_ conversation: ConversationID, _ snapshot: ConversationSnapshot) throws
        -> (TimelineChanges, WrittenTables?)
    {
        let state = snapshot.state
        // Arrival times are read for conversations with rows to write (not for those this node only relays).
        let received = state.kind == nil ? [:] : try store.receiveTimes(of: conversation)
        // Names are read before the write transaction (database methods are not reentrant).
        var people = Set(state.members.keys)
        for item in state.timeline { people.formUnion(Self.people(shownBy: item)) }
        var names = [AuthorID: String]()
        for person in people { names[person] = try profile(of: person)?.name ?? person.publicKey.fingerprint }
        let known = names
        func name(_ author: AuthorID) -> String { known[author] ?? author.publicKey.fingerprint }
        let key = Data(conversation.bytes)
        // The rows the state calls for, built before the write transaction; only differences are written below.
        var timeline = [[DatabaseValue]]()
        var files = [[DatabaseValue]]()
        var reactions = [[DatabaseValue]]()
        var documents = [SearchIndex.Document]()
        var lastActivity: Int64 = 0
        var preview: String?
        var unread = 0
        if let kind = state.kind {
            for message in state.retracted.values {
                timeline.append(Self.retractedRow(message, key: key, arrived: received[message.id] ?? 0))
            }
            for item in state.timeline {
                let arrived = received[item.id] ?? 0
                lastActivity = max(lastActivity, arrived)
                timeline.append(lineRow(item, key: key, arrived: arrived, name: name))
                guard case .message(let message) = item else { continue }
                if let file = Self.fileRow(message, key: key) { files.append(file) }
                if let document = Self.document(of: message, arrived: arrived) { documents.append(document) }
                reactions += Self.reactionRows(of: message.id, in: state)
            }
            (unread, preview) = listSummary(of: state, kind: kind, name: name)
        }
        let digest = Data(state.digest())
        let (changes, held) = try store.writeDerived { db -> (TimelineChanges, SearchIndex.Held?) in
            try db.execute(sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [key])
            // Read before anything is written: reactions are found through the timeline rows they hang on.
            let heldTimeline = try Self.heldRows(
                in: db, sql: "SELECT \(Self.timelineWriteColumns) FROM timeline WHERE conversation = ?", key)
            let heldReactions = try Self.heldRows(
                in: db,
                sql: """
                    SELECT r.message, r.person, r.reaction FROM reaction r JOIN timeline t ON t.id = r.message
                    WHERE t.conversation = ?
                    """, key)
            let heldFiles = try Self.heldRows(
                in: db, sql: "SELECT \(Self.fileWriteColumns) FROM timeline_file WHERE conversation = ?", key)
            // Column 0 is the id, column 10 `retracted`.
            let shown = Set(heldTimeline.map { RecordID(bytes: Data.fromDatabaseValue($0[0])!) })
            let wasRetracted = Set(
                heldTimeline.filter { $0[10] == true.databaseValue }.map {
                    RecordID(bytes: Data.fromDatabaseValue($0[0])!)
                })
            let changes = TimelineChanges(
                added: state.timeline.map(\.id).filter { !shown.contains($0) },
                retracted: state.retracted.keys.filter { !wasRetracted.contains($0) }.sorted())
            for table in ["conversation_member", "epoch_key"] {
                try db.execute(sql: "DELETE FROM \(table) WHERE conversation = ?", arguments: [key])
            }
            try Self.writeDifferences(
                in: db, table: "reaction", columns: "message, person, reaction", keyColumns: ["message", "person"],
                held: heldReactions, wanted: reactions)
            try Self.writeDifferences(
                in: db, table: "timeline", columns: Self.timelineWriteColumns, keyColumns: ["id"], held: heldTimeline,
                wanted: timeline)
            try Self.writeDifferences(
                in: db, table: "timeline_file", columns: Self.fileWriteColumns, keyColumns: ["id"], held: heldFiles,
                wanted: files)
            guard let kind = state.kind else {
                try db.execute(sql: "DELETE FROM conversation WHERE id = ?", arguments: [key])
                try SearchIndex.update(conversation: key, to: [], in: db)
                return (changes, nil)
            }
            try writeListEntry(
                of: state, snapshot: snapshot, key: key, kind: kind, digest: digest, lastActivity: lastActivity,
                preview: preview, unread: unread, name: name, in: db)
            let held = try SearchIndex.update(conversation: key, to: documents, in: db)
            // New activity brings an archived conversation back into the list (a first fill is not activity).
            if !shown.isEmpty && !changes.added.isEmpty {
                try db.execute(
                    sql: "UPDATE conversation_setting SET archived = 0 WHERE conversation = ?", arguments: [key])
            }
            return (changes, held)
        }
        guard let held else { return (changes, nil) }
        let written = WrittenTables(
            cursor: snapshot.engine.changeCursor, digest: digest, names: known,
            shown: Set(state.timeline.map(\.id) + state.retracted.keys), retracted: Set(state.retracted.keys),
            files: Set(state.timeline.compactMap { item in
                if case .message(let message) = item, message.file != nil { message.id } else { nil }
            }),
            documents: held, lastActivity: lastActivity)
        return (changes, written)
    }

    /// The timeline columns `refresh` writes, in the order of its rows.
    private static let timelineWriteColumns = """
        id, conversation, lamport, author, is_system, text, system_change, reply_to, edit_count, deleted, retracted, \
        displayed_ms, received_ms
        """
    private static let fileWriteColumns = "id, conversation, name, media_type, size, chunk_count"

    /// The rows `sql` selects for one conversation (its only argument), as values.
    private static func heldRows(in db: Database, sql: String, _ conversation: Data) throws -> [[DatabaseValue]] {
        try Row.fetchAll(db, sql: sql, arguments: [conversation]).map { Array($0.databaseValues) }
    }

    /// Brings `table` from the `held` rows to the `wanted` ones (both in `columns` order, keyed by the first
    /// `keyColumns.count` values) by deleting, inserting and replacing only rows that differ, so refreshing a
    /// long conversation after one new message writes a few rows instead of all of them.
    private static func writeDifferences(
        in db: Database, table: String, columns: String, keyColumns: [String], held: [[DatabaseValue]],
        wanted: [[DatabaseValue]]
    ) throws {
        let width = keyColumns.count
        var stale = [ArraySlice<DatabaseValue>: [DatabaseValue]]()
        for row in held { stale[row.prefix(width)] = row }
        var changed = [[DatabaseValue]]()
        for row in wanted {
            if stale.removeValue(forKey: row.prefix(width)) != row { changed.append(row) }
        }
        if !stale.isEmpty {
            let delete = try db.cachedStatement(
                sql: "DELETE FROM \(table) WHERE " + keyColumns.map { "\($0) = ?" }.joined(separator: " AND "))
            for key in stale.keys { try delete.execute(arguments: StatementArguments(Array(key))) }
        }
        if !changed.isEmpty {
            let placeholders = Array(repeating: "?", count: changed[0].count).joined(separator: ", ")
            let upsert = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO \(table) (\(columns)) VALUES (\(placeholders))")
            for row in changed { try upsert.execute(arguments: StatementArguments(row)) }
        }
    }

    /// Refreshes every conversation whose applied records changed since its last refresh (after ingest, and at
    /// start-up to catch up after a crash). Returns the changes per conversation.
    @discardableResult
    public func refreshChanged() throws -> [ConversationID: TimelineChanges] {
        let dirty = try store.writer.read { db in
            try Data.fetchAll(db, sql: "SELECT id FROM dirty_conversation ORDER BY id").map {
                ConversationID(bytes: $0)
            }
        }
        var changes = [ConversationID: TimelineChanges]()
        for conversation in dirty {
            let isProfileFeed = try store.liveFeeds(of: conversation).contains {
                $0.conversation == .profileFeed(of: $0.author)
            }
            if isProfileFeed {
                try store.writeDerived { db in
                    try db.execute(
                        sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [Data(conversation.bytes)])
                }
                continue
            }
            if try staysKeyless(conversation) {
                try store.writeDerived { db in
                    try db.execute(
                        sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [Data(conversation.bytes)])
                }
                continue
            }
            changes[conversation] = try refresh(conversation)
            let cache = caches.withLock { $0[conversation] }
            if let cache, cache.keys.isEmpty { keyless.withLock { $0[conversation] = cache.applied } }
        }
        return changes
    }

    /// Whether `conversation`, refreshed before without a key, still gives this node none: no commit applied since
    /// opens a slot for it. Then its state has nothing to show (no readable create commit: no kind, no rows) and
    /// the refresh is skipped; what was applied is read when a snapshot is next asked for. Keys come only from
    /// slots in commits, or from the history chain of a commit whose key is held, so with no key the commits are
    /// all there is to check. False when unknown, when a feed shrank (a fork) or when a key turned up: refresh.
    private func staysKeyless(_ conversation: ConversationID) throws -> Bool {
        guard let checked = keyless.withLock({ $0.removeValue(forKey: conversation) }),
            caches.withLock({ $0[conversation]?.keys.isEmpty ?? true })
        else { return false }
        let feeds = try store.feeds(of: conversation)
        if feeds.contains(where: { $0.applied < checked[$0.author] ?? 0 }) { return false }
        var commits = [NatterModel.Record]()
        for feed in feeds where feed.applied > checked[feed.author] ?? 0 {
            commits += try store.records(
                conversation: conversation, author: feed.author, from: (checked[feed.author] ?? 0) + 1,
                through: feed.applied, kind: .commit)
        }
        if !commits.isEmpty {
            let reader = ConversationReader(member: identity.author, keyPair: identity.encryption)
            guard reader.read(commits).keys.isEmpty else { return false }
        }
        var positions = checked
        for feed in feeds { positions[feed.author] = feed.applied }
        keyless.withLock { $0[conversation] = positions }
        return true
    }

    /// Every conversation this node can read, most recent activity first; `filter` matches titles and names.
    /// Archived conversations are left out unless `includeArchived` (resolving a name the user typed should
    /// include them).
    public func conversationList(filter: String? = nil, includeArchived: Bool = false) throws -> [ConversationRow] {
        try store.writer.read { db in
            var sql = """
                SELECT id, kind, title, is_member, last_activity_ms, preview, unread, s.muted_until_ms,
                    COALESCE(s.archived, 0)
                FROM conversation LEFT JOIN conversation_setting s ON s.conversation = conversation.id
                WHERE (? OR COALESCE(s.archived, 0) = 0)
                """
            var arguments: StatementArguments = [includeArchived]
            if let filter, !filter.isEmpty {
                sql += " AND title LIKE ? ESCAPE '\\'"
                let escaped = filter.replacingOccurrences(of: "\\", with: "\\\\")
                    .replacingOccurrences(of: "%", with: "\\%").replacingOccurrences(of: "_", with: "\\_")
                arguments += ["%\(escaped)%"]
            }
            sql += " ORDER BY last_activity_ms DESC, id"
            return try Row.fetchAll(db, sql: sql, arguments: arguments).map { row in
                ConversationRow(
                    id: ConversationID(bytes: row[0] as Data), kind: ConversationKind(rawValue: UInt8(row[1] as Int))!,
                    title: row[2], isMember: row[3], lastActivityMillis: row[4], preview: row[5], unread: row[6],
                    mutedUntilMillis: row[7], archived: row[8])
            }
        }
    }

    /// Total unread messages across the conversations the list shows (not archived): the prompt's counter.
    public func totalUnread() throws -> Int {
        try store.writer.read { db in
            try Int.fetchOne(
                db,
                sql: """
                    SELECT COALESCE(SUM(unread), 0) FROM conversation
                    WHERE id NOT IN (SELECT conversation FROM conversation_setting WHERE archived = 1)
                    """) ?? 0
        }
    }

    /// The last `limit` lines before `cursor` (the newest when nil), oldest first (SPEC F11).
    public func history(_ conversation: ConversationID, before cursor: TimelineCursor? = nil, limit: Int = pageSize)
        throws -> [TimelineRow]
    {
        try store.writer.read { db in
            var sql = "SELECT \(Self.timelineColumns) FROM \(Self.timelineTables) WHERE t.conversation = ?"
            var arguments: StatementArguments = [Data(conversation.bytes)]
            if let cursor {
                sql += " AND (t.lamport < ? OR (t.lamport = ? AND t.id < ?))"
                arguments += [Int64(cursor.lamport), Int64(cursor.lamport), Data(cursor.id.bytes)]
            }
            sql += " ORDER BY t.lamport DESC, t.id DESC LIMIT ?"
            arguments += [limit]
            return try Row.fetchAll(db, sql: sql, arguments: arguments).reversed().map(Self.timelineRow)
        }
    }

    /// Up to `limit` lines around `message` (about half before it, it, then the rest after), oldest first: where
    /// opening a search hit jumps to. Older pages continue with `history(_:before:)` from the first line's cursor.
    /// Empty when the conversation shows no such line.
    public func history(_ conversation: ConversationID, around message: RecordID, limit: Int = pageSize) throws
        -> [TimelineRow]
    {
        let key = Data(conversation.bytes)
        let lamport = try store.writer.read { db in
            try Int64.fetchOne(
                db, sql: "SELECT lamport FROM timeline WHERE id = ? AND conversation = ?",
                arguments: [Data(message.bytes), key])
        }
        guard let lamport, limit > 0 else { return [] }
        let at = TimelineCursor(lamport: UInt64(lamport), id: message)
        let after = try store.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT \(Self.timelineColumns) FROM \(Self.timelineTables)
                    WHERE t.conversation = ? AND (t.lamport > ? OR (t.lamport = ? AND t.id >= ?))
                    ORDER BY t.lamport, t.id LIMIT ?
                    """,
                arguments: [key, lamport, lamport, Data(message.bytes), limit - limit / 2]
            ).map(Self.timelineRow)
        }
        return try history(conversation, before: at, limit: limit - after.count) + after
    }

    /// What a `TimelineRow` is read from (`timelineRow` maps the columns).
    private static let timelineColumns = """
        t.id, t.author, t.lamport, t.is_system, t.text, t.system_change, t.reply_to, t.edit_count,
            t.deleted, t.displayed_ms, t.retracted, f.name, f.media_type, f.size, f.chunk_count
        """
    private static let timelineTables = "timeline t LEFT JOIN timeline_file f ON f.id = t.id"

    private static func timelineRow(_ row: Row) -> TimelineRow {
        let name: String? = row[11]
        return TimelineRow(
            id: RecordID(bytes: row[0] as Data), author: AuthorID(bytes: row[1] as Data),
            lamport: UInt64(row[2] as Int64), isSystem: row[3], text: row[4], systemText: row[5],
            replyTo: (row[6] as Data?).map { RecordID(bytes: $0) }, editCount: row[7], deleted: row[8],
            retracted: row[10], displayedAtMillis: row[9],
            file: name.map {
                FileSummary(name: $0, mediaType: row[12], size: UInt64(row[13] as Int64), chunkCount: row[14])
            })
    }

    private func describe(_ event: SystemEvent, name: (AuthorID) -> String) -> String {
        let who = name(event.author)
        switch event.change {
        case .created(let kind, let title, _):
            return kind == .direct
                ? "\(who) started the conversation"
                : "\(who) created the group" + (title.map { " \"\($0)\"" } ?? "")
        case .added(let members): return "\(who) added \(members.map(name).joined(separator: ", "))"
        case .removed(let members): return "\(who) removed \(members.map(name).joined(separator: ", "))"
        case .left: return "\(who) left"
        case .renamed(let title): return title.map { "\(who) renamed the group to \($0)" } ?? "\(who) removed the title"
        case .roleChanged(let member, let role):
            return "\(who) made \(name(member)) \(role == .admin ? "an admin" : "a member")"
        case .flagsChanged(let member, let flags):
            let rights = [(MemberFlags.canAdd, "add"), (.canRemove, "remove"), (.canRename, "rename")]
                .filter { flags.contains($0.0) }.map(\.1)
            return "\(who) set \(name(member))'s rights: " + (rights.isEmpty ? "none" : rights.joined(separator: ", "))
        case .rekeyed: return "\(who) renewed the group key"
        }
    }
}
