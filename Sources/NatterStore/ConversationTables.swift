import Foundation
import GRDB
import NatterCrypto
public import NatterModel

/// What `Conversations.refresh` last wrote for a conversation: enough to write only what changed next time, with
/// the engine's change log (`ConversationEngine.changes(since:)`). Valid while the conversation row carries `token`
/// (`Conversations.stillHeld`): only a refresh of this process writes it, and anything else that rewrites the
/// conversation's rows (an eviction, a rebuild) removes or replaces the row.
struct WrittenTables: Sendable {
    /// The engine's change log position the tables reflect.
    var cursor: ChangeCursor
    /// What this process wrote in the row's `written` column.
    var token: Data
    /// The name of every person the rows show (system lines, previews, titles were built with these), and the
    /// profile generation they were read at (`Conversations.profileGeneration`): while it is unchanged, so are they.
    var names: [AuthorID: String]
    var profiles: Int
    /// Ids of the timeline rows (lines shown, retracted ones included), of those retracted, of the file rows.
    var shown: Set<RecordID>
    var retracted: Set<RecordID>
    var files: Set<RecordID>
    /// Ids of messages that may have reaction rows (a superset: the others have none, so their rows need no delete).
    var reacted: Set<RecordID>
    var documents: SearchIndex.Held
    var lastActivity: Int64
    /// How many epoch keys and which members the tables hold (rewritten only when they change).
    var keys: Int
    var members: [AuthorID: MemberInfo]
    /// What the deltas remember (statuses being followed, details last reported).
    var deltas: DeltaMemory
}

extension Conversations {
    /// Characters of a message shown in the conversation list.
    public static let previewCharacters = 100
    /// Lines in a history page (SPEC F11).
    public static let pageSize = 50

    /// Re-derives `conversation`, brings its derived rows (list entry, members, timeline, reactions, files, epoch
    /// keys, search documents) up to date in one transaction, and returns what changed (`ConversationDelta`). The
    /// tables are a cache of `snapshot(of:)`: dropping and refreshing them gives the same rows. After the first
    /// refresh, only the lines the engine reports changed (`ConversationEngine.changes(since:)`) are built and
    /// written (`refreshChanges`), so a refresh after one new message costs that message, not the conversation's
    /// history; anything the change log cannot follow (a re-derivation, a new name for someone shown, tables written
    /// by someone else) refreshes every row, and its delta comes from comparing the rows.
    @discardableResult
    public func refresh(_ conversation: ConversationID) throws -> ConversationDelta {
        let snapshot = try snapshot(of: conversation)
        // Taken out while in use, put back only after a commit: a failed refresh leaves no memory to mislead the
        // next one.
        var previous = written.withLock { $0.removeValue(forKey: conversation) }
        var result: (ConversationDelta, WrittenTables?)
        if var tables = previous, snapshot.state.kind != nil,
            let touches = snapshot.engine.changes(since: tables.cursor)
        {
            // `tables` is then the only reference to its sets and dictionaries, so the refresh updates them in place:
            // a copy would cost the conversation's length (every line shown, every search document) per refresh.
            previous = nil
            if let delta = try refreshChanges(conversation, snapshot, tables: &tables, touches: touches) {
                result = (delta, tables)
            } else {
                result = try refreshWhole(conversation, snapshot, previous: tables)
            }
        } else {
            result = try refreshWhole(conversation, snapshot, previous: previous)
        }
        if let tables = result.1 { written.withLock { $0[conversation] = tables } }
        return result.0
    }

    /// Writes only the lines the change log names (and the list entry, and members and keys when they changed) and
    /// brings `next` (what the last refresh wrote) up to date with them, in place; or returns nil, `next` untouched,
    /// when the tables are not what `next` says or a name shown changed (then `refreshWhole`). After a throw `next`
    /// may be half updated: the caller drops it.
    private func refreshChanges(
        _ conversation: ConversationID, _ snapshot: ConversationSnapshot, tables next: inout WrittenTables,
        touches: ArraySlice<LineTouch>
    ) throws -> ConversationDelta? {
        let state = snapshot.state
        guard let kind = state.kind else { return nil }
        let key = Data(conversation.bytes)
        let token = next.token
        guard try store.read({ db in try Self.stillHeld(token, conversation: key, in: db) }) else { return nil }
        // Names: every one shown must be unchanged (only a new profile can change one); people new in the changed
        // lines (and members) are added.
        var names = next.names
        let profiles = profileGeneration.withLock { $0 }
        if profiles != next.profiles {
            for (person, shown) in next.names where try displayName(of: person) != shown { return nil }
        }
        let changed = Set(touches.map(\.id))
        var people = Set(state.members.keys)
        for id in changed {
            if let item = state.item(id) {
                people.formUnion(Self.people(shownBy: item))
            } else if let message = state.retracted[id] {
                people.insert(message.author)
            }
        }
        for person in people where names[person] == nil { names[person] = try displayName(of: person) }
        let known = names
        func name(_ author: AuthorID) -> String { known[author] ?? author.publicKey.fingerprint }
        let ordered = changed.sorted()
        let received = try store.receiveTimes(of: ordered.compactMap { snapshot.engine.ref(of: $0) })
        // The changed lines' rows, files, reactions and documents (nil: the line has none any more).
        var lines = [[DatabaseValue]]()
        var files = [RecordID: [DatabaseValue]?]()
        var reactions = [RecordID: [[DatabaseValue]]]()
        var documents = [RecordID: SearchIndex.Document?]()
        var lastActivity = next.lastActivity
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
        let shownBefore = !next.shown.isEmpty
        let rewriteKeys = snapshot.keys.count != next.keys
        let rewriteMembers = state.members != next.members
        next.cursor = snapshot.engine.changeCursor
        next.token = nextToken()
        next.names = known
        next.profiles = profiles
        next.lastActivity = lastActivity
        let delta = deltaFromLog(touches, state: state, snapshot: snapshot, name: name, memory: &next)
        next.keys = snapshot.keys.count
        next.members = state.members
        try store.writeDerived { db in
            try db.executeCached(sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [key])
            let upsertLine = try db.cachedStatement(
                sql: "INSERT OR REPLACE INTO timeline (\(Self.timelineWriteColumns)) VALUES (\(Self.placeholders(13)))")
            for line in lines { try upsertLine.execute(arguments: StatementArguments(line)) }
            // A line's old rows are deleted only where the memory says it has some: a new line costs its inserts.
            for (id, file) in files {
                if next.files.remove(id) != nil {
                    try db.executeCached(sql: "DELETE FROM timeline_file WHERE id = ?", arguments: [Data(id.bytes)])
                }
                if let file {
                    try db.executeCached(
                        sql: "INSERT INTO timeline_file (\(Self.fileWriteColumns)) VALUES (\(Self.placeholders(6)))",
                        arguments: StatementArguments(file))
                    next.files.insert(id)
                }
            }
            for (id, rows) in reactions {
                if next.reacted.contains(id) {
                    try db.executeCached(sql: "DELETE FROM reaction WHERE message = ?", arguments: [Data(id.bytes)])
                }
                if rows.isEmpty { next.reacted.remove(id) } else { next.reacted.insert(id) }
                for row in rows {
                    try db.executeCached(
                        sql: "INSERT INTO reaction (message, person, reaction) VALUES (?, ?, ?)",
                        arguments: StatementArguments(row))
                }
            }
            for (id, document) in documents {
                try SearchIndex.set(
                    Data(id.bytes), to: document, conversation: key, held: &next.documents, in: db)
            }
            if !documents.isEmpty { try SearchIndex.flushIfFull(in: db) }
            if rewriteKeys { try writeKeys(snapshot, key: key, in: db) }
            if rewriteMembers { try writeMembers(state, key: key, in: db) }
            try writeListRow(
                of: state, key: key, kind: kind, token: next.token, lastActivity: lastActivity, preview: preview,
                unread: unread, name: name, in: db)
            if shownBefore && delta.lines.contains(where: { $0.kind == .new }) {
                try db.executeCached(
                    sql: "UPDATE conversation_setting SET archived = 0 WHERE conversation = ?", arguments: [key])
            }
        }
        next.shown.formUnion(ordered.filter { state.item($0) != nil || state.retracted[$0] != nil })
        next.retracted.formUnion(ordered.filter { state.retracted[$0] != nil })
        return delta
    }

    /// The delta of an incremental refresh, from the change log: new, edited, deleted and retracted lines in
    /// timeline order, reactions that changed (each person's last), statuses that moved, and the details if they
    /// changed. `memory` (the lines it shows, not yet counting these) is updated with what was reported.
    private func deltaFromLog(
        _ touches: ArraySlice<LineTouch>, state: ConversationState, snapshot: ConversationSnapshot,
        name: (AuthorID) -> String, memory: inout WrittenTables
    ) -> ConversationDelta {
        var kinds = [RecordID: LineChange.Kind]()
        var reacted = [LinePair]()
        var seen = Set<LinePair>()
        for touch in touches {
            switch touch.change {
            case .created where !memory.shown.contains(touch.id): kinds[touch.id] = .new
            case .created: break
            case .edited where kinds[touch.id] != .new: kinds[touch.id] = .edited
            case .deleted where kinds[touch.id] != .new: kinds[touch.id] = .deleted
            case .edited, .deleted: break
            case .retracted: kinds[touch.id] = .retracted
            case .reaction(let person):
                let pair = LinePair(message: touch.id, person: person)
                if seen.insert(pair).inserted { reacted.append(pair) }
            }
        }
        return delta(
            kinds: kinds, reacted: reacted, state: state, snapshot: snapshot, name: name, memory: &memory.deltas)
    }

    /// A message and a person (a reaction's place).
    private struct LinePair: Hashable {
        let message: RecordID
        let person: AuthorID
    }

    /// Builds a delta from the lines' kinds and the reactions that changed, following this node's statuses.
    private func delta(
        kinds: [RecordID: LineChange.Kind], reacted: [LinePair], state: ConversationState,
        snapshot: ConversationSnapshot, name: (AuthorID) -> String, memory: inout DeltaMemory
    ) -> ConversationDelta {
        let me = identity.author
        var delta = ConversationDelta(conversation: snapshot.id)
        func position(_ id: RecordID) -> EntryPosition? { state.item(id)?.position ?? state.retracted[id]?.position }
        let ordered = kinds.keys.compactMap { id in position(id).map { (id, $0) } }.sorted { $0.1 < $1.1 }.map(\.0)
        delta.statuses = memory.statusChanges(in: state)
        for id in ordered {
            guard let line = state.line(id, viewer: me) else { continue }
            delta.lines.append(LineChange(kind: kinds[id]!, line: line))
            if kinds[id] == .new, let status = line.status { memory.track(id, status) }
        }
        for pair in reacted where kinds[pair.message] != .new {
            guard let message = state.message(pair.message) else { continue }
            delta.reactions.append(
                ReactionChange(
                    message: pair.message, messageAuthor: message.author, person: pair.person,
                    reaction: state.reactions[pair.message]?[pair.person],
                    summary: state.reactionSummary(of: pair.message, viewer: me)))
        }
        let details = self.details(of: state, snapshot: snapshot, name: name)
        if details != memory.details {
            delta.details = details
            memory.details = details
        }
        return delta
    }

    /// The conversation's details now (nil when this node cannot read it): what a front end starts from before the
    /// deltas tell it what changes.
    public func details(of conversation: ConversationID) throws -> ConversationDetails? {
        let snapshot = try snapshot(of: conversation)
        var names = [AuthorID: String]()
        for member in snapshot.state.members.keys { names[member] = try displayName(of: member) }
        return details(of: snapshot.state, snapshot: snapshot) { names[$0] ?? $0.publicKey.fingerprint }
    }

    /// The conversation's details as the deltas report them.
    private func details(
        of state: ConversationState, snapshot: ConversationSnapshot, name: (AuthorID) -> String
    ) -> ConversationDetails? {
        guard let kind = state.kind else { return nil }
        let me = identity.author
        let names = state.sortedMembers.filter { $0 != me }.map(name)
        return ConversationDetails(
            kind: kind, ownTitle: state.title,
            title: state.title ?? (names.isEmpty ? "(just you)" : names.joined(separator: ", ")),
            members: state.members, creator: state.creator, isMember: state.members[me] != nil,
            lockedOut: snapshot.lockedOut, unread: state.unreadCount(viewer: me))
    }

    /// A person's name as rows show it: their profile's, else their fingerprint.
    private func displayName(of person: AuthorID) throws -> String {
        try profile(of: person)?.name ?? person.publicKey.fingerprint
    }

    /// A fresh token for the conversation row (`WrittenTables.token`): a counter of this process's refreshes.
    private func nextToken() -> Data {
        var value = refreshCount.withLock { count -> UInt64 in
            count += 1
            return count
        }
        return Data(bytes: &value, count: MemoryLayout<UInt64>.size)
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

    /// The list entry's unread count (messages by others after this node's read receipt, `unreadCount`) and preview
    /// (the last message not deleted, "Name: text" in groups): neither reads the whole timeline.
    private func listSummary(of state: ConversationState, kind: ConversationKind, name: (AuthorID) -> String)
        -> (unread: Int, preview: String?)
    {
        let unread = state.unreadCount(viewer: identity.author)
        for item in state.timeline.reversed() {
            guard case .message(let message) = item, !message.deleted else { continue }
            let text = String((message.file.map { "[file] \($0.name)" } ?? message.text).prefix(Self.previewCharacters))
            return (unread, kind == .group ? "\(name(message.author)): \(text)" : text)
        }
        return (unread, nil)
    }

    /// The epoch keys this node holds for the conversation, rewritten (kept apart from every other table).
    private func writeKeys(_ snapshot: ConversationSnapshot, key: Data, in db: Database) throws {
        try db.executeCached(sql: "DELETE FROM epoch_key WHERE conversation = ?", arguments: [key])
        for (epoch, epochKey) in snapshot.keys {
            try db.executeCached(
                sql: "INSERT INTO epoch_key (conversation, epoch, key) VALUES (?, ?, ?)",
                arguments: [key, Data(epoch.bytes), Data(epochKey.secret.exposedCopy())])
        }
    }

    /// The roster with roles and flags, rewritten.
    private func writeMembers(_ state: ConversationState, key: Data, in db: Database) throws {
        try db.executeCached(sql: "DELETE FROM conversation_member WHERE conversation = ?", arguments: [key])
        for member in state.sortedMembers {
            let info = state.members[member]!
            try db.executeCached(
                sql: """
                    INSERT INTO conversation_member (conversation, member, role, flags, is_creator)
                    VALUES (?, ?, ?, ?, ?)
                    """,
                arguments: [
                    key, Data(member.bytes), Int(info.role.rawValue), Int(info.flags.rawValue),
                    member == state.creator,
                ])
        }
    }

    /// The conversation's list row, carrying `token` (what `stillHeld` checks).
    private func writeListRow(
        of state: ConversationState, key: Data, kind: ConversationKind, token: Data, lastActivity: Int64,
        preview: String?, unread: Int, name: (AuthorID) -> String, in db: Database
    ) throws {
        let others = state.sortedMembers.filter { $0 != identity.author }
        let title = state.title ?? (others.isEmpty ? "(just you)" : others.map(name).joined(separator: ", "))
        try db.executeCached(
            sql: """
                INSERT OR REPLACE INTO conversation (id, kind, title, creator, current_epoch, is_member, written,
                    last_activity_ms, preview, unread)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """,
            arguments: [
                key, Int(kind.rawValue), title, state.creator.map { Data($0.bytes) },
                state.currentEpoch.map { Data($0.bytes) }, state.members[identity.author] != nil,
                token, lastActivity, preview, unread,
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

    /// Whether the tables still hold what the refresh that wrote `token` wrote: the conversation row carries the token this
    /// process wrote with them. Whatever else rewrites a conversation's rows (an eviction, a rebuild) removes or
    /// replaces that row, and fails this check; rows changed by hand with `sqlite3` while the node runs are not
    /// noticed until the next start.
    private static func stillHeld(_ token: Data, conversation: Data, in db: Database) throws -> Bool {
        let statement = try db.cachedStatement(sql: "SELECT written FROM conversation WHERE id = ?")
        return try Data.fetchOne(statement, arguments: [conversation]) == token
    }

    /// Refreshes every row of `conversation` from `snapshot`, comparing with what the tables hold; returns the delta
    /// (the lines and reactions that differ from the rows held) and, for a conversation this node reads, what was
    /// written (for `refreshChanges` next time). `previous`: what the last refresh of this process remembered, if
    /// any (the statuses it follows).
    private func refreshWhole(
        _ conversation: ConversationID, _ snapshot: ConversationSnapshot, previous: WrittenTables?
    ) throws -> (ConversationDelta, WrittenTables?) {
        let state = snapshot.state
        // Arrival times are read for conversations with rows to write (not for those this node only relays).
        let received = state.kind == nil ? [:] : try store.receiveTimes(of: conversation)
        // Names are read before the write transaction (database methods are not reentrant).
        var people = Set(state.members.keys)
        for item in state.timeline { people.formUnion(Self.people(shownBy: item)) }
        var names = [AuthorID: String]()
        let profiles = profileGeneration.withLock { $0 }
        for person in people { names[person] = try displayName(of: person) }
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
        let token = nextToken()
        let (differences, held) = try store.writeDerived { db -> (RowDifferences, SearchIndex.Held?) in
            try db.executeCached(sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [key])
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
            let differences = RowDifferences(
                heldTimeline: heldTimeline, wantedTimeline: timeline, heldReactions: heldReactions,
                wantedReactions: reactions)
            try Self.writeDifferences(
                in: db, table: "reaction", columns: "message, person, reaction", keyColumns: ["message", "person"],
                held: heldReactions, wanted: reactions)
            try Self.writeDifferences(
                in: db, table: "timeline", columns: Self.timelineWriteColumns, keyColumns: ["id"], held: heldTimeline,
                wanted: timeline)
            try Self.writeDifferences(
                in: db, table: "timeline_file", columns: Self.fileWriteColumns, keyColumns: ["id"], held: heldFiles,
                wanted: files)
            try writeKeys(snapshot, key: key, in: db)
            try writeMembers(state, key: key, in: db)
            guard let kind = state.kind else {
                try db.executeCached(sql: "DELETE FROM conversation WHERE id = ?", arguments: [key])
                try SearchIndex.update(conversation: key, to: [], in: db)
                return (differences, nil)
            }
            try writeListRow(
                of: state, key: key, kind: kind, token: token, lastActivity: lastActivity, preview: preview,
                unread: unread, name: name, in: db)
            let held = try SearchIndex.update(conversation: key, to: documents, in: db)
            try SearchIndex.flushIfFull(in: db)
            // New activity brings an archived conversation back into the list (a first fill is not activity).
            if differences.hadRows && differences.kinds.values.contains(.new) {
                try db.executeCached(
                    sql: "UPDATE conversation_setting SET archived = 0 WHERE conversation = ?", arguments: [key])
            }
            return (differences, held)
        }
        guard let held else { return (ConversationDelta(conversation: conversation), nil) }
        var memory = previous?.deltas ?? followedStatuses(in: state)
        let delta = delta(
            kinds: differences.kinds, reacted: differences.reacted, state: state, snapshot: snapshot, name: name,
            memory: &memory)
        let written = WrittenTables(
            cursor: snapshot.engine.changeCursor, token: token, names: known, profiles: profiles,
            shown: Set(state.timeline.map(\.id) + state.retracted.keys), retracted: Set(state.retracted.keys),
            files: Set(state.timeline.compactMap { item in
                if case .message(let message) = item, message.file != nil { message.id } else { nil }
            }),
            reacted: Set(state.reactions.keys), documents: held, lastActivity: lastActivity,
            keys: snapshot.keys.count, members: state.members, deltas: memory)
        return (delta, written)
    }

    /// What the deltas follow after a first refresh in this process: the statuses of this node's newest messages
    /// that are not read yet (as they are now: no change is reported for them until they move on).
    private func followedStatuses(in state: ConversationState) -> DeltaMemory {
        var memory = DeltaMemory()
        memory.receipts = state.receipts
        memory.members = Set(state.members.keys)
        var own = [(RecordID, MessageStatus)]()
        for item in state.timeline.reversed() where own.count < DeltaMemory.statusesTrackedMax {
            guard case .message(let message) = item, message.author == identity.author,
                let status = state.status(of: message.id)
            else { continue }
            if status.phase == .read { break }  // statuses never go backwards: older ones are read too
            own.append((message.id, status))
        }
        for (id, status) in own.reversed() { memory.track(id, status) }
        return memory
    }

    /// How the rows held differ from the rows wanted, as line kinds and reactions (a re-derivation's delta).
    private struct RowDifferences {
        var kinds = [RecordID: LineChange.Kind]()
        var reacted = [LinePair]()
        /// Whether the conversation had rows before (its first fill is not new activity).
        var hadRows = false

        /// Timeline rows are in `timelineWriteColumns` order: column 0 the id, 8 `edit_count`, 9 `deleted`, 10
        /// `retracted`; reaction rows are (message, person, reaction).
        init(
            heldTimeline: [[DatabaseValue]], wantedTimeline: [[DatabaseValue]], heldReactions: [[DatabaseValue]],
            wantedReactions: [[DatabaseValue]]
        ) {
            hadRows = !heldTimeline.isEmpty
            var held = [DatabaseValue: [DatabaseValue]]()
            for row in heldTimeline { held[row[0]] = row }
            for row in wantedTimeline {
                let id = RecordID(bytes: Data.fromDatabaseValue(row[0])!)
                let retracted = row[10] == true.databaseValue
                guard let before = held[row[0]] else {
                    kinds[id] = retracted ? .retracted : .new
                    continue
                }
                if retracted != (before[10] == true.databaseValue) {
                    kinds[id] = retracted ? .retracted : .new
                } else if row[9] != before[9] {
                    kinds[id] = .deleted
                } else if row[8] != before[8] {
                    kinds[id] = .edited
                }
            }
            var heldReaction = [ArraySlice<DatabaseValue>: DatabaseValue]()
            for row in heldReactions { heldReaction[row.prefix(2)] = row[2] }
            var pairs = Set<ArraySlice<DatabaseValue>>()
            for row in wantedReactions where heldReaction.removeValue(forKey: row.prefix(2)) != row[2] {
                pairs.insert(row.prefix(2))
            }
            pairs.formUnion(heldReaction.keys)  // held, no longer wanted: removed
            reacted = pairs.map {
                LinePair(
                    message: RecordID(bytes: Data.fromDatabaseValue($0[$0.startIndex])!),
                    person: AuthorID(bytes: Data.fromDatabaseValue($0[$0.startIndex + 1])!))
            }.sorted { ($0.message, $0.person) < ($1.message, $1.person) }
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

    /// What `refreshChanged` found: the people whose profile changed (names first: the lines below may show them),
    /// then the delta of each conversation refreshed.
    public struct Refreshed: Sendable, Equatable {
        public var profiles: [AuthorID] = []
        public var deltas: [ConversationID: ConversationDelta] = [:]
    }

    /// Refreshes every conversation whose applied records changed since its last refresh (after ingest, and at
    /// start-up to catch up after a crash). Profiles first, so that the rows written after show the new names.
    @discardableResult
    public func refreshChanged() throws -> Refreshed {
        let dirty = try store.read { db in
            try Data.fetchAll(db.cachedStatement(sql: "SELECT id FROM dirty_conversation ORDER BY id")).map {
                ConversationID(bytes: $0)
            }
        }
        var refreshed = Refreshed()
        var conversations = [ConversationID]()
        for conversation in dirty {
            let owner = try store.liveFeeds(of: conversation).first { $0.conversation == .profileFeed(of: $0.author) }
            if let owner {
                refreshed.profiles.append(owner.author)
                try clean(conversation)
            } else {
                conversations.append(conversation)
            }
        }
        if !refreshed.profiles.isEmpty { profileGeneration.withLock { $0 += 1 } }
        for conversation in conversations {
            if try staysKeyless(conversation) {
                try clean(conversation)
                continue
            }
            refreshed.deltas[conversation] = try refresh(conversation)
            let cache = caches.withLock { $0[conversation] }
            if let cache, cache.keys.isEmpty { keyless.withLock { $0[conversation] = cache.applied } }
        }
        return refreshed
    }

    /// Marks a conversation refreshed without anything to write (a profile feed; one this node has no key for).
    private func clean(_ conversation: ConversationID) throws {
        try store.writeDerived { db in
            try db.executeCached(sql: "DELETE FROM dirty_conversation WHERE id = ?", arguments: [Data(conversation.bytes)])
        }
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
