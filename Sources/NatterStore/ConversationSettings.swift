import Foundation
import GRDB
public import NatterModel

/// Local settings of a conversation (SPEC F5, F15): this node's choices, in `conversation_setting` (schema v5).
/// They are never written as records, never synced, and never part of a digest; rebuilding the derived tables
/// keeps them.
extension Conversations {
    /// Silences notices for `conversation` until `until` (ms, the caller's clock), or for ever when nil.
    /// Muting again replaces the previous time.
    public func mute(_ conversation: ConversationID, until: Int64?) throws {
        try setting(conversation, column: "muted_until_ms", to: until ?? .max)
    }

    /// Ends a mute (nothing happens if it was not muted).
    public func unmute(_ conversation: ConversationID) throws {
        try setting(conversation, column: "muted_until_ms", to: nil)
    }

    /// Hides `conversation` from the list until a new line (message or system line) arrives in it, or until
    /// `unarchive`.
    public func archive(_ conversation: ConversationID) throws {
        try setting(conversation, column: "archived", to: 1)
    }

    /// Brings an archived conversation back into the list.
    public func unarchive(_ conversation: ConversationID) throws {
        try setting(conversation, column: "archived", to: 0)
    }

    /// Whether notices for `conversation` are silenced at `nowMillis` (the node asks before printing one).
    public func isMuted(_ conversation: ConversationID, at nowMillis: Int64) throws -> Bool {
        let until = try store.read { db in
            try Int64.fetchOne(
                db, sql: "SELECT muted_until_ms FROM conversation_setting WHERE conversation = ?",
                arguments: [Data(conversation.bytes)])
        }
        return until.map { nowMillis < $0 } ?? false
    }

    /// Writes one setting of a conversation this node can read; `ConversationError.noSuchConversation` otherwise.
    private func setting(_ conversation: ConversationID, column: String, to value: Int64?) throws {
        let key = Data(conversation.bytes)
        try store.writeTransaction { db in
            guard try Bool.fetchOne(db, sql: "SELECT 1 FROM conversation WHERE id = ?", arguments: [key]) != nil else {
                throw ConversationError.noSuchConversation
            }
            try db.execute(
                sql: """
                    INSERT INTO conversation_setting (conversation, \(column)) VALUES (?, ?)
                    ON CONFLICT (conversation) DO UPDATE SET \(column) = excluded.\(column)
                    """,
                arguments: [key, value])
        }
    }
}
