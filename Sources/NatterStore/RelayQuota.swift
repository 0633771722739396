import Foundation
import GRDB
public import NatterModel

/// The bounds of what a store holds for conversations its node is not a member of (SPEC F16, DESIGN §3).
public struct RelayQuota: Sendable, Equatable {
    /// Relay-only conversations held at most.
    public var conversationsMax: Int
    /// Record bytes held at most in relay-only conversations.
    public var bytesMax: Int
    /// Where an eviction stops once one is needed (at most the bounds): below them, so that a steady stream of relay
    /// traffic costs one eviction, and one measuring query, per stretch of headroom rather than one per ingest.
    public var conversationsAfterEviction: Int
    public var bytesAfterEviction: Int

    /// `headroomDivisor`: an eviction frees that fraction of each bound beyond the bound itself (8: down to seven
    /// eighths); nil evicts only down to the bounds.
    public init(conversationsMax: Int, bytesMax: Int, headroomDivisor: Int? = nil) {
        self.conversationsMax = conversationsMax
        self.bytesMax = bytesMax
        conversationsAfterEviction = conversationsMax - (headroomDivisor.map { conversationsMax / max(1, $0) } ?? 0)
        bytesAfterEviction = bytesMax - (headroomDivisor.map { bytesMax / max(1, $0) } ?? 0)
    }

    /// Whether `conversations` relay-only conversations holding `bytes` record bytes exceed a bound.
    public func isExceeded(conversations: Int, bytes: Int) -> Bool {
        conversations > conversationsMax || bytes > bytesMax
    }
}

/// What an enforcement of the relay quota did: the conversations it evicted and the relay-only usage left.
public struct RelayEnforcement: Equatable, Sendable {
    public let evicted: [ConversationID]
    /// The relay-only conversations left, in eviction order (`RecordStore.relayUsage`).
    public let remaining: [RelayUsage]
}

/// What one relay-only conversation costs the store.
public struct RelayUsage: Equatable, Sendable {
    public let conversation: ConversationID
    public let records: Int
    public let bytes: Int
    /// Local receive time of its newest record: eviction goes least recently active first.
    public let lastActivityMillis: Int64
    /// Whether one of the node's neighbours (the peers given to `relayUsage`) writes in it: such conversations are
    /// what this node relays for the peers next to it, and go only after every other one.
    public let servesNeighbour: Bool
}

extension RecordStore {
    /// The conversations held only as a relay, least recently active first. A conversation is *not* relay-only —
    /// never counted, never evicted — when the derived tables say this node is a member, when this node wrote in
    /// it, when it is a profile feed, or while its derived state is pending (`dirty_conversation`: its membership
    /// cannot be told yet). Once derived, a conversation whose genesis this node cannot read counts as relay-only:
    /// an invitation later brings it back (`forgetEviction`).
    ///
    /// Eviction order (the result's order): conversations none of `neighbours` writes in first, then the others;
    /// least recently active first within each. A flood from throwaway identities cannot write as a neighbour, so
    /// it cannot push out a conversation of the members next to this node before its own.
    public func relayUsage(member: AuthorID, neighbours: Set<AuthorID> = []) throws -> [RelayUsage] {
        try read { db in
            let candidates = try Row.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT conversation, MIN(author), MAX(author = ?), SUM(stored_sequence), SUM(stored_bytes),
                            MAX(last_received_ms)
                        FROM feed
                        WHERE stored_sequence > 0
                          AND conversation NOT IN (SELECT id FROM conversation WHERE is_member = 1)
                          AND conversation NOT IN (SELECT id FROM dirty_conversation)
                        GROUP BY conversation
                        """),
                arguments: [Data(member.bytes)])
            var usage = [RelayUsage]()
            for row in candidates {
                let conversation = ConversationID(bytes: row[0] as Data)
                let wrote: Bool = row[2]
                if wrote || conversation == .profileFeed(of: AuthorID(bytes: row[1] as Data)) { continue }
                var servesNeighbour = false
                if !neighbours.isEmpty {
                    servesNeighbour = try Data.fetchAll(
                        db.cachedStatement(sql: "SELECT author FROM feed WHERE conversation = ?"),
                        arguments: [row[0] as Data]
                    ).contains { neighbours.contains(AuthorID(bytes: $0)) }
                }
                usage.append(
                    RelayUsage(
                        conversation: conversation, records: row[3], bytes: row[4], lastActivityMillis: row[5],
                        servesNeighbour: servesNeighbour))
            }
            return usage.sorted {
                ($0.servesNeighbour ? 1 : 0, $0.lastActivityMillis, $0.conversation)
                    < ($1.servesNeighbour ? 1 : 0, $1.lastActivityMillis, $1.conversation)
            }
        }
    }

    /// When `quota` is exceeded, evicts whole relay-only conversations in `relayUsage`'s order until the usage is
    /// within `quota.conversationsAfterEviction` and `quota.bytesAfterEviction`: every record, feed row, piece of
    /// fork evidence and derived row of each goes, in one transaction, and the conversation is remembered as evicted
    /// at `nowMillis`.
    public func enforce(
        _ quota: RelayQuota, member: AuthorID, neighbours: Set<AuthorID> = [], nowMillis: Int64, rememberedMax: Int
    ) throws -> RelayEnforcement {
        var usage = try relayUsage(member: member, neighbours: neighbours)
        var bytes = usage.reduce(0) { $0 + $1.bytes }
        var victims = [ConversationID]()
        if quota.isExceeded(conversations: usage.count, bytes: bytes) {
            while !usage.isEmpty,
                usage.count > quota.conversationsAfterEviction || bytes > quota.bytesAfterEviction
            {
                let oldest = usage.removeFirst()
                bytes -= oldest.bytes
                victims.append(oldest.conversation)
            }
        }
        guard !victims.isEmpty else { return RelayEnforcement(evicted: [], remaining: usage) }
        // Feed rows and records go: the cache forgets everything, whether or not the transaction commits.
        defer { invalidateCaches() }
        try writeTransaction { db in
            for conversation in victims {
                let key = Data(conversation.bytes)
                for table in ["record", "fork_evidence", "feed"] {
                    try db.execute(sql: "DELETE FROM \(table) WHERE conversation = ?", arguments: [key])
                }
                try db.execute(
                    sql: "DELETE FROM reaction WHERE message IN (SELECT id FROM timeline WHERE conversation = ?)",
                    arguments: [key])
                for table in ["conversation_member", "epoch_key", "timeline", "timeline_file"] {
                    try db.execute(sql: "DELETE FROM \(table) WHERE conversation = ?", arguments: [key])
                }
                for table in ["conversation", "dirty_conversation"] {
                    try db.execute(sql: "DELETE FROM \(table) WHERE id = ?", arguments: [key])
                }
                try SearchIndex.update(conversation: key, to: [], in: db)
                try db.execute(
                    sql: "INSERT OR REPLACE INTO evicted_conversation (id, evicted_ms) VALUES (?, ?)",
                    arguments: [key, nowMillis])
            }
            // Bounded: the oldest evictions are forgotten first.
            try db.execute(
                sql: """
                    DELETE FROM evicted_conversation WHERE id NOT IN
                        (SELECT id FROM evicted_conversation ORDER BY evicted_ms DESC, id LIMIT ?)
                    """,
                arguments: [max(0, rememberedMax)])
        }
        return RelayEnforcement(evicted: victims, remaining: usage)
    }

    /// The record bytes of each conversation whose derived state is pending and that may be relay-only
    /// (`possiblyRelayOnly`): what `relayUsage` leaves out until the refresh, for an estimate that must not.
    public func pendingRelayBytes(member: AuthorID) throws -> [ConversationID: Int] {
        let pending = try read { db in
            try Data.fetchAll(db.cachedStatement(sql: "SELECT id FROM dirty_conversation")).map {
                ConversationID(bytes: $0)
            }
        }
        let candidates = try possiblyRelayOnly(Set(pending), member: member)
        return try read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT COALESCE(SUM(stored_bytes), 0) FROM feed WHERE conversation = ?")
            var bytes = [ConversationID: Int]()
            for conversation in candidates {
                bytes[conversation] = try Int.fetchOne(statement, arguments: [Data(conversation.bytes)]) ?? 0
            }
            return bytes
        }
    }

    /// Of `conversations`, those that may be relay-only: not known to the derived tables as conversations this node
    /// is a member of, and not written in by `member`. A conversation not derived yet counts (its membership cannot
    /// be told), so the answer errs towards relay-only: it feeds an upper estimate (`RelayTally`).
    public func possiblyRelayOnly(_ conversations: Set<ConversationID>, member: AuthorID) throws -> Set<ConversationID>
    {
        try read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT EXISTS (SELECT 1 FROM conversation WHERE id = ?1 AND is_member = 1)
                        OR EXISTS (SELECT 1 FROM feed WHERE conversation = ?1 AND author = ?2 AND stored_sequence > 0)
                    """)
            return try conversations.filter { conversation in
                try Bool.fetchOne(statement, arguments: [Data(conversation.bytes), Data(member.bytes)]) != true
            }
        }
    }

    /// Evicted conversations and when, evicted since `sinceMillis` (older entries are deleted).
    public func evictedConversations(sinceMillis: Int64) throws -> [ConversationID: Int64] {
        try writeTransaction { db in
            try db.execute(sql: "DELETE FROM evicted_conversation WHERE evicted_ms < ?", arguments: [sinceMillis])
            var result = [ConversationID: Int64]()
            for row in try Row.fetchAll(db, sql: "SELECT id, evicted_ms FROM evicted_conversation") {
                result[ConversationID(bytes: row[0] as Data)] = row[1]
            }
            return result
        }
    }

    /// Forgets that `conversation` was evicted (the node was invited into it: it is fetched normally again).
    public func forgetEviction(_ conversation: ConversationID) throws {
        try writeTransaction { db in
            try db.execute(
                sql: "DELETE FROM evicted_conversation WHERE id = ?", arguments: [Data(conversation.bytes)])
        }
    }
}

extension RecordStore {
    /// Reduces junk feeds of a conversation this node reads to their frontier (DESIGN §3): the feed rows stay (the
    /// frontier, so sync stops fetching them, and what others' dependencies need: ids and Lamport numbers), the
    /// record bodies go (and the bodies of later records as they arrive), and the conversation is marked for a
    /// refresh. Returns the bytes dropped.
    @discardableResult
    public func reduceJunk(conversation: ConversationID, authors: [AuthorID]) throws -> Int {
        defer { invalidateCaches() }  // feed rows and bodies change: the caches forget everything
        return try writeTransaction { db in
            var dropped = 0
            for author in authors {
                let arguments: StatementArguments = [Data(conversation.bytes), Data(author.bytes)]
                dropped +=
                    try Int.fetchOne(
                        db, sql: "SELECT stored_bytes FROM feed WHERE conversation = ? AND author = ?",
                        arguments: arguments) ?? 0
                try db.execute(
                    sql: "UPDATE record SET bytes = X'' WHERE conversation = ? AND author = ?", arguments: arguments)
                try db.execute(
                    sql: "UPDATE feed SET junk = 1, stored_bytes = 0 WHERE conversation = ? AND author = ?",
                    arguments: arguments)
            }
            try db.execute(
                sql: "INSERT OR IGNORE INTO dirty_conversation (id) VALUES (?)", arguments: [Data(conversation.bytes)])
            return dropped
        }
    }
}

extension RecordStore {
    /// Whether some conversation's derived state is pending (`dirty_conversation`): its membership cannot be told
    /// yet, so the relay quota leaves it out until the refresh, and checks again after.
    public func hasPendingConversations() throws -> Bool {
        try read { db in
            try Bool.fetchOne(db.cachedStatement(sql: "SELECT EXISTS (SELECT 1 FROM dirty_conversation)")) ?? false
        }
    }
}
