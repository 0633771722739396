import Foundation
import GRDB
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

/// Where a history page ends: lines strictly before (Lamport number, id).
public struct TimelineCursor: Hashable, Sendable {
    public let lamport: UInt64
    public let id: RecordID
}

extension Conversations {
    /// Every conversation this node can read, most recent activity first; `filter` matches titles and names.
    /// Archived conversations are left out unless `includeArchived` (resolving a name the user typed should
    /// include them).
    public func conversationList(filter: String? = nil, includeArchived: Bool = false) throws -> [ConversationRow] {
        try store.read { db in
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
        try store.read { db in
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
        try store.read { db in
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
        let lamport = try store.read { db in
            try Int64.fetchOne(
                db, sql: "SELECT lamport FROM timeline WHERE id = ? AND conversation = ?",
                arguments: [Data(message.bytes), key])
        }
        guard let lamport, limit > 0 else { return [] }
        let at = TimelineCursor(lamport: UInt64(lamport), id: message)
        let after = try store.read { db in
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
}
