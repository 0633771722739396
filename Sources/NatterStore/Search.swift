import Foundation
import GRDB
import NatterCrypto
public import NatterModel

/// A message found by `Conversations.search` (SPEC F14).
public struct SearchHit: Hashable, Sendable {
    public let conversation: ConversationID
    /// The conversation's title as the list shows it.
    public let conversationTitle: String
    public let message: RecordID
    public let sender: AuthorID
    /// The sender's display name (their key's fingerprint until their profile arrives).
    public let senderName: String
    /// The time the line shows (as `TimelineRow.displayedAtMillis`).
    public let displayedAtMillis: Int64
    /// A plain-text excerpt of the message around the matches, with "…" where it was cut.
    public let snippet: String
    /// The matched words in `snippet`, in order and not overlapping.
    public let highlights: [Range<String.Index>]

    /// The snippet with every match wrapped in `open` and `close` (colour codes, brackets). Message text never
    /// contains control characters (SPEC F6), so markers made of them cannot be forged by a sender.
    public func snippet(marking open: String, _ close: String) -> String {
        var marked = ""
        var position = snippet.startIndex
        for range in highlights {
            marked += snippet[position..<range.lowerBound] + open + snippet[range] + close
            position = range.upperBound
        }
        return marked + snippet[position...]
    }
}

/// Why a search could not run, in words a person can act on.
public enum SearchError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Nothing but spaces.
    case emptyQuery
    /// Only punctuation, symbols or emoji: nothing the index holds (it indexes letters and digits).
    case noWords(String)
    /// More words than one search takes.
    case tooManyWords(Int)

    public var description: String {
        switch self {
        case .emptyQuery: "Type one or more words to search for"
        case .noWords(let query):
            "Nothing to search for in \"\(query)\": search matches words (letters and digits), not punctuation or emoji"
        case .tooManyWords(let count):
            "Too many words to search for (\(count); max \(SearchIndex.wordsMax))"
        }
    }
}

/// The full-text index over readable messages (`search_document` and its FTS5 index `message_search`, schema
/// v5): how documents are keyed, kept in step with the timeline, and queried.
enum SearchIndex {
    /// Words in one query.
    static let wordsMax = 32
    /// Tokens of context in a snippet (FTS5 allows up to 64).
    static let snippetTokens = 16
    /// rowid = (shown ms << slotBits) + n: room for 2^20 messages shown in the same millisecond.
    static let slotBits: Int64 = 20
    /// Shown times are clamped to 0 ..< 2^42 ms (until the year 2109) so rowids stay below 2^62.
    static let shownMillisMax: Int64 = (1 << 42) - 1
    /// Snippet markers: control characters, which message text never contains (SPEC F6).
    static let open: Unicode.Scalar = "\u{1}"
    static let close: Unicode.Scalar = "\u{2}"

    /// What the index holds for one message: its current text and the time it shows.
    struct Document {
        let message: Data
        let text: String
        let shownMillis: Int64
    }

    /// The token that names a conversation in the `scope` column: "c" and the first 8 bytes of its id in hex.
    /// (A collision between two conversations only costs a filter: queries also check the full id.)
    static func scope(of conversation: Data) -> String {
        "c" + Hex.encode([UInt8](conversation.prefix(8)))
    }

    /// Adds a message. Its rowid is the first free one at its shown time, so that rowid order is time order;
    /// after 2^20 messages in one millisecond, the next rowid after every other. One statement (every message shown
    /// is indexed on every node), with the rowid a scalar subquery: an INSERT … SELECT reading its own table would
    /// have SQLite stage the row in a temporary table first.
    @discardableResult
    static func insert(_ document: Document, conversation: Data, in db: Database) throws -> Int64 {
        let base = min(max(document.shownMillis, 0), shownMillisMax) << slotBits
        let top = base + (1 << slotBits) - 1
        try db.cachedStatement(
            sql: """
                INSERT INTO search_document (rowid, message, conversation, scope, text) VALUES (
                    (SELECT CASE WHEN m IS NULL THEN ?1 WHEN m < ?2 THEN m + 1
                        ELSE (SELECT MAX(rowid) FROM search_document) + 1 END
                    FROM (SELECT MAX(rowid) AS m FROM search_document WHERE rowid BETWEEN ?1 AND ?2)),
                    ?3, ?4, ?5, ?6)
                """
        ).execute(arguments: [base, top, document.message, conversation, scope(of: conversation), document.text])
        return db.lastInsertedRowID
    }

    /// Documents waiting in `search_pending` at which a refresh indexes them (`flushIfFull`): 256. One FTS5
    /// segment per that many messages instead of one per transaction; a search indexes what waits first, so the
    /// bound only caps the work a search may find to do.
    static let pendingMax = 256

    /// Indexes every pending document (schema v14) in one statement.
    static func flush(in db: Database) throws {
        try db.executeCached(
            sql: """
                INSERT INTO message_search (rowid, text, scope)
                SELECT d.rowid, d.text, d.scope FROM search_pending p JOIN search_document d ON d.rowid = p.rowid
                """)
        try db.executeCached(sql: "DELETE FROM search_pending")
    }

    /// Indexes the pending documents once `pendingMax` wait: called at the end of each refresh's transaction.
    static func flushIfFull(in db: Database) throws {
        let waiting = try Int.fetchOne(db.cachedStatement(sql: "SELECT count(*) FROM search_pending")) ?? 0
        if waiting >= pendingMax { try flush(in: db) }
    }

    /// Whether documents wait to be indexed.
    static func hasPending(in db: Database) throws -> Bool {
        try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM search_pending)")) ?? false
    }

    /// A conversation's documents as held: per message, its rowid and text.
    typealias Held = [Data: (rowid: Int64, text: String)]

    /// Makes the conversation's documents exactly `documents`: unchanged ones stay, edited ones are replaced,
    /// deleted, retracted or vanished ones are removed (the triggers keep the FTS5 index in step). Returns what the
    /// index holds for the conversation afterwards.
    @discardableResult
    static func update(conversation: Data, to documents: [Document], in db: Database) throws -> Held {
        var held = Held()
        let rows = try Row.fetchCursor(
            db, sql: "SELECT rowid, message, text FROM search_document WHERE conversation = ?",
            arguments: [conversation])
        while let row = try rows.next() { held[row[1]] = (row[0], row[2]) }
        let wanted = Set(documents.map(\.message))
        for message in held.keys where !wanted.contains(message) {
            try set(message, to: nil, conversation: conversation, held: &held, in: db)
        }
        for document in documents {
            try set(document.message, to: document, conversation: conversation, held: &held, in: db)
        }
        return held
    }

    /// Makes one message's document `document` (nil: none), given what the index holds for its conversation
    /// (`held`, kept up to date): an unchanged text stays, a changed one is replaced.
    static func set(
        _ message: Data, to document: Document?, conversation: Data, held: inout Held, in db: Database
    ) throws {
        let current = held[message]
        if let current, current.text == document?.text { return }
        if let current {
            try db.cachedStatement(sql: "DELETE FROM search_document WHERE rowid = ?").execute(arguments: [current.rowid])
            held[message] = nil
        }
        if let document { held[message] = (try insert(document, conversation: conversation, in: db), document.text) }
    }

    /// The FTS5 expression for what a person typed: every whitespace-separated word becomes a quoted phrase (so
    /// quotes, `AND`, `NEAR`, `-`, `:` … are just text), all of them required, in the `text` column only. A word
    /// ending in `*` matches as a prefix (`meet*` finds "meeting").
    static func expression(for query: String, scope: String?) throws(SearchError) -> String {
        let words = query.split(whereSeparator: \.isWhitespace)
        guard !words.isEmpty else { throw .emptyQuery }
        var phrases = [String]()
        for word in words {
            var body = Substring(word)
            let prefix = body.count > 1 && body.hasSuffix("*")
            while prefix, body.hasSuffix("*") { body = body.dropLast() }
            guard body.contains(where: { $0.isLetter || $0.isNumber }) else { continue }
            phrases.append("\"" + body.replacingOccurrences(of: "\"", with: "\"\"") + "\"" + (prefix ? " *" : ""))
        }
        guard !phrases.isEmpty else { throw .noWords(query.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard phrases.count <= wordsMax else { throw .tooManyWords(phrases.count) }
        let text = "text : (" + phrases.joined(separator: " ") + ")"
        return scope.map { "scope : \"\($0)\" AND " + text } ?? text
    }

    /// Splits FTS5 `snippet` output (matches between `open` and `close`) into plain text and ranges.
    static func parseSnippet(_ marked: String) -> (String, [Range<String.Index>]) {
        var plain = String.UnicodeScalarView()
        var offsets = [(Int, Int)]()
        var start: Int?
        var length = 0
        for scalar in marked.unicodeScalars {
            switch scalar {
            case open: start = length
            case close:
                if let from = start, from < length { offsets.append((from, length)) }
                start = nil
            default:
                plain.append(scalar)
                length += 1
            }
        }
        let text = String(plain)
        let scalars = text.unicodeScalars
        let ranges = offsets.map { from, to in
            scalars.index(scalars.startIndex, offsetBy: from)..<scalars.index(scalars.startIndex, offsetBy: to)
        }
        return (text, ranges)
    }
}

extension Conversations {
    /// Results of a search unless told otherwise.
    public static let searchLimit = 50

    /// The messages this node can read whose current text contains every word of `query`, newest first: across
    /// all conversations, or in one. Deleted and retracted lines are never found; edited ones by their new text.
    /// Words match whole (case and Latin accents ignored: "cafe" finds "Café"); `word*` matches a prefix.
    public func search(_ query: String, in conversation: ConversationID? = nil, limit: Int = searchLimit) throws
        -> [SearchHit]
    {
        let key = conversation.map { Data($0.bytes) }
        let expression = try SearchIndex.expression(for: query, scope: key.map(SearchIndex.scope(of:)))
        guard limit > 0 else { return [] }
        // What the refreshes left pending is indexed first, so a search finds every message shown.
        if try store.read({ try SearchIndex.hasPending(in: $0) }) {
            try store.writeDerived { try SearchIndex.flush(in: $0) }
        }
        let rows = try store.read { db in
            var sql = """
                SELECT d.message, d.conversation, c.title, t.author, t.displayed_ms,
                    snippet(message_search, 0, char(1), char(2), '…', \(SearchIndex.snippetTokens))
                FROM message_search
                JOIN search_document d ON d.rowid = message_search.rowid
                JOIN timeline t ON t.id = d.message
                JOIN conversation c ON c.id = d.conversation
                WHERE message_search MATCH ?
                """
            var arguments: StatementArguments = [expression]
            if let key {
                sql += " AND d.conversation = ?"
                arguments += [key]
            }
            sql += " ORDER BY message_search.rowid DESC LIMIT ?"
            arguments += [limit]
            return try Row.fetchAll(db, sql: sql, arguments: arguments)
        }
        var names = [AuthorID: String]()
        return try rows.map { row in
            let sender = AuthorID(bytes: row[3] as Data)
            if names[sender] == nil { names[sender] = try profile(of: sender)?.name ?? sender.publicKey.fingerprint }
            let (snippet, highlights) = SearchIndex.parseSnippet(row[5] as String? ?? "")
            return SearchHit(
                conversation: ConversationID(bytes: row[1] as Data), conversationTitle: row[2] as String? ?? "",
                message: RecordID(bytes: row[0] as Data), sender: sender, senderName: names[sender]!,
                displayedAtMillis: row[4], snippet: snippet, highlights: highlights)
        }
    }
}
