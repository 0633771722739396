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

    /// Re-derives `conversation` and rewrites its derived rows (list entry, members, timeline, reactions, epoch
    /// keys) in one transaction. The tables are a cache of `snapshot(of:)`: dropping and refreshing them gives the
    /// same rows.
    @discardableResult
    public func refresh(_ conversation: ConversationID) throws -> TimelineChanges {
        let snapshot = try snapshot(of: conversation)
        let state = snapshot.state
        // Arrival times are read for conversations with rows to write (not for those this node only relays).
        let received = state.kind == nil ? [:] : try store.receiveTimes(of: conversation)
        // Names are read before the write transaction (database methods are not reentrant).
        var people = Set(state.members.keys)
        for item in state.timeline {
            switch item {
            case .message(let message): people.insert(message.author)
            case .system(let event):
                people.insert(event.author)
                switch event.change {
                case .created(_, _, let members), .added(let members), .removed(let members): people.formUnion(members)
                case .roleChanged(let member, _), .flagsChanged(let member, _): people.insert(member)
                case .left, .renamed, .rekeyed: break
                }
            }
        }
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
        if state.kind != nil {
            func row(_ values: (any DatabaseValueConvertible)?...) -> [DatabaseValue] {
                values.map { $0?.databaseValue ?? .null }
            }
            for message in state.retracted.values {
                let arrived = received[message.id] ?? 0
                timeline.append(
                    row(
                        Data(message.id.bytes), key, Int64(message.position.lamport), Data(message.author.bytes),
                        false, message.text, nil, message.replyTo.map { Data($0.bytes) }, 0, false, true,
                        min(message.displayedAtMillis, max(arrived, 0)), arrived))
            }
            let myRead = state.receipts[identity.author]?.read ?? VectorClock()
            for item in state.timeline {
                let arrived = received[item.id] ?? 0
                lastActivity = max(lastActivity, arrived)
                switch item {
                case .message(let message):
                    let displayed = min(message.displayedAtMillis, max(arrived, 0))
                    timeline.append(
                        row(
                            Data(message.id.bytes), key, Int64(message.position.lamport), Data(message.author.bytes),
                            false, message.deleted ? nil : message.text, nil, message.replyTo.map { Data($0.bytes) },
                            message.editCount, message.deleted, false, displayed, arrived))
                    if let file = message.file {
                        files.append(
                            row(
                                Data(message.id.bytes), key, file.name, file.mediaType, Int64(file.size),
                                file.chunks.count))
                    }
                    if !message.deleted {
                        // A file message has no text: its file name is what search finds.
                        let searchable = message.file?.name ?? message.text
                        if !searchable.isEmpty {
                            documents.append(
                                SearchIndex.Document(
                                    message: Data(message.id.bytes), text: searchable, shownMillis: displayed))
                        }
                        let line = message.file.map { "[file] \($0.name)" } ?? message.text
                        let text = String(line.prefix(Self.previewCharacters))
                        preview = state.kind == .group ? "\(name(message.author)): \(text)" : text
                    }
                    if message.author != identity.author && myRead[message.author] < message.sequence { unread += 1 }
                    for (person, reaction) in state.reactions[message.id] ?? [:] {
                        reactions.append(row(Data(message.id.bytes), Data(person.bytes), Int(reaction.rawValue)))
                    }
                case .system(let event):
                    timeline.append(
                        row(
                            Data(event.id.bytes), key, Int64(event.position.lamport), Data(event.author.bytes), true,
                            nil, describe(event, name: name), nil, 0, false, false,
                            min(event.displayedAtMillis, max(arrived, 0)), arrived))
                }
            }
        }
        return try store.writer.write { db -> TimelineChanges in
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
                return changes
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
                    Data(state.digest()), lastActivity, preview, unread,
                ])
            try SearchIndex.update(conversation: key, to: documents, in: db)
            // New activity brings an archived conversation back into the list (a first fill is not activity).
            if !shown.isEmpty && !changes.added.isEmpty {
                try db.execute(
                    sql: "UPDATE conversation_setting SET archived = 0 WHERE conversation = ?", arguments: [key])
            }
            return changes
        }
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
            let isProfileFeed = try store.feeds(of: conversation).contains {
                $0.conversation == .profileFeed(of: $0.author)
            }
            if isProfileFeed {
                try store.writer.write { db in
                    try db.execute(
                        sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [Data(conversation.bytes)])
                }
                continue
            }
            changes[conversation] = try refresh(conversation)
        }
        return changes
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
