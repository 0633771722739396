import Foundation
import GRDB
import NatterModel

/// Bounds of the store, each with its reason.
public enum StoreLimits {
    /// Contradicting records kept per feed. One pair proves a fork; a few more help diagnosis. Beyond this a
    /// forking author could fill the disk, so further evidence is counted but not kept.
    public static let forkEvidencePerFeedMax = 16
}

/// The work of one write transaction: chain checks and inserts, then the applied-prefix update for every
/// conversation touched. Feed rows are cached for the transaction and written back once at the end.
struct IngestSession {
    private struct FeedKey: Hashable {
        let conversation: ConversationID
        let author: AuthorID
    }

    let db: Database
    let receivedAtMillis: Int64
    /// The store's cache of feed rows and Lamport numbers, read instead of the tables; what this transaction writes
    /// reaches it only once the transaction commits (`committed`). Nil: read the tables only (an earlier write of the
    /// same transaction is not in the cache).
    private let feedCache: FeedCache?
    /// The store's memory of the records it stored last (nil: none), where `heldAlready` finds most copies.
    private let recent: RecentRecords?
    /// Feed rows read or written by this transaction, by conversation: `feeds(in:)` hands one conversation's out
    /// whole, without a pass over every conversation's (and a new dictionary) per call.
    private var cache: [ConversationID: [AuthorID: FeedState]] = [:]
    private var fullyLoaded: Set<ConversationID> = []
    private var dirty: Set<FeedKey> = []
    private var touched: [ConversationID: Set<AuthorID>] = [:]
    private var needsRebuild: Set<ConversationID> = []
    /// Headers of records inserted in this transaction, so applying them does not read them back.
    private var fresh: [RecordPosition: (RecordHeader, RecordID)] = [:]
    /// Lamport numbers of applied records read for this transaction: the records of a batch name mostly the same
    /// dependencies.
    private var lamports: [RecordPosition: UInt64] = [:]
    /// Feed rows `finish` wrote, for the store's cache once the transaction commits.
    private var written: [FeedState] = []
    /// Records stored with their bodies, for `RecentRecords` once the transaction commits.
    private var storedBodies: [NatterModel.Record] = []

    /// What the store's caches learn once this transaction commits: the feed rows written, the records stored
    /// (position and Lamport number), and those kept with their bodies.
    var committed: RecordStore.CacheEffects {
        let stored = fresh.map { ($0.key, $0.value.0.lamport) }.sorted { $0.0.sequence < $1.0.sequence }
        return (written, stored, storedBodies, receivedAtMillis)
    }

    init(db: Database, receivedAtMillis: Int64, records: Int = 0, feedCache: FeedCache?, recent: RecentRecords? = nil) {
        self.db = db
        self.receivedAtMillis = receivedAtMillis
        self.feedCache = feedCache
        self.recent = recent
        // Sized for the batch at once: grown record by record it was rehashed nine times in a sync window.
        fresh.reserveCapacity(records)
    }

    // MARK: - Feeds

    private mutating func feed(_ key: FeedKey) throws -> FeedState {
        if let cached = self[cached: key] { return cached }
        if let feeds = feedCache?.feeds(of: key.conversation) {
            let state = feeds[key.author] ?? FeedState(conversation: key.conversation, author: key.author)
            self[cached: key] = state
            return state
        }
        let row = try Row.fetchOne(
            db.cachedStatement(sql: "SELECT \(FeedState.columns) FROM feed WHERE conversation = ? AND author = ?"),
            arguments: [Data(key.conversation.bytes), Data(key.author.bytes)])
        let state = try row.map(FeedState.init(row:)) ?? FeedState(conversation: key.conversation, author: key.author)
        self[cached: key] = state
        return state
    }

    private subscript(cached key: FeedKey) -> FeedState? {
        get { cache[key.conversation]?[key.author] }
        set { cache[key.conversation, default: [:]][key.author] = newValue }
    }

    private mutating func update(_ state: FeedState) {
        let key = FeedKey(conversation: state.conversation, author: state.author)
        self[cached: key] = state
        dirty.insert(key)
    }

    /// The state of one author's feed in `conversation` (empty when none is held).
    mutating func feed(of author: AuthorID, in conversation: ConversationID) throws -> FeedState {
        try feed(FeedKey(conversation: conversation, author: author))
    }

    /// The feeds of `conversation` that are not junk (cached ones win), read through `feed_live`: what an own
    /// record depends on, at a cost that follows the live feeds however many junk ones the conversation holds.
    mutating func liveFeeds(in conversation: ConversationID) throws -> [AuthorID: FeedState] {
        // Once this session holds every feed of the conversation (a `finish` applied records there), its own states
        // are the whole truth, feeds this transaction created included: a batch of own appends reads them once.
        if fullyLoaded.contains(conversation) { return try feeds(in: conversation).filter { !$0.value.isJunk } }
        var result = [AuthorID: FeedState]()
        let live = try feedCache?.feeds(of: conversation).map { $0.values.filter { !$0.isJunk } }
            ?? FeedState.fetchLive(db, conversation: conversation)
        for state in live {
            let key = FeedKey(conversation: conversation, author: state.author)
            let current = self[cached: key] ?? state
            if self[cached: key] == nil { self[cached: key] = state }
            if !current.isJunk { result[state.author] = current }
        }
        return result
    }

    /// Every feed of `conversation` (cached ones win over the database's, which may be older).
    mutating func feeds(in conversation: ConversationID) throws -> [AuthorID: FeedState] {
        if !fullyLoaded.contains(conversation) {
            var all = feedCache?.feeds(of: conversation).map { Array($0.values) }
            if all == nil {
                // Read before this transaction writes any feed row (`finish` writes them last): what is committed.
                let generation = feedCache?.generation
                all = try FeedState.fetchAll(db, conversation: conversation)
                if let feedCache, let generation { feedCache.fill(conversation, all!, generation: generation) }
            }
            for state in all! {
                let key = FeedKey(conversation: conversation, author: state.author)
                if self[cached: key] == nil { self[cached: key] = state }
            }
            fullyLoaded.insert(conversation)
        }
        return cache[conversation] ?? [:]
    }

    // MARK: - Storing

    /// Indices of the records (their ids, and the positions they claim) that the log holds already: byte-for-byte
    /// copies of records checked before. Only a record whose claimed position is one its feed holds can be one
    /// (then the id at that position is compared), so a record that extends its feed costs no lookup (a node
    /// catching up looks up nothing).
    func heldAlready(ids: [RecordID], claimed: [RecordPosition?]) throws -> Set<Int> {
        let storedLength = try db.cachedStatement(
            sql: "SELECT stored_sequence FROM feed WHERE conversation = ? AND author = ?")
        // Read apart from the session's feed rows (the store's feed cache, else the table): the claims are
        // unchecked, and a feed made up by one must not become a row. Gossip's copies arrive soon after the first:
        // their ids are nearly always in memory (`recent`).
        var lengths = [FeedKey: UInt64]()
        var found = Set<Int>()
        for (index, position) in claimed.enumerated() {
            guard let position else { continue }
            let key = FeedKey(conversation: position.conversation, author: position.author)
            if lengths[key] == nil {
                lengths[key] =
                    try self[cached: key]?.stored
                    ?? feedCache?.feeds(of: position.conversation).map { $0[position.author]?.stored ?? 0 }
                    ?? UInt64.fetchOne(
                        storedLength, arguments: [Data(position.conversation.bytes), Data(position.author.bytes)]) ?? 0
            }
            // The log is addressed by position: a copy is the record whose id sits at the position it claims.
            guard position.sequence <= lengths[key]!,
                try recent?.id(at: position) ?? recordID(at: position) == ids[index]
            else { continue }
            found.insert(index)
        }
        return found
    }

    /// Applies the chain rules to one verified record and stores it, as a feed record or as fork evidence.
    mutating func store(_ record: NatterModel.Record) throws -> IngestOutcome {
        let header = record.header
        let key = FeedKey(conversation: header.conversation, author: header.author)
        var state = try feed(key)
        let sequence = header.sequence
        if sequence <= state.stored {
            if try recordID(at: header.position) == record.id { return .duplicate(record.id) }
            return try keepEvidence(record, state: &state, forkAt: sequence)
        }
        guard sequence == state.stored + 1 else {
            return .outOfOrder(record.id, missingFrom: state.stored + 1)
        }
        guard header.previous == state.storedHead else {
            // It names a different record at sequence - 1 than the one we hold: the author forked there.
            return try keepEvidence(record, state: &state, forkAt: sequence - 1)
        }
        // A junk feed's frontier advances (records depending on it must apply) but its bodies are not kept.
        try RecordRowInsert.execute(db, record: record, receivedAtMillis: receivedAtMillis, keepBytes: !state.isJunk)
        if !state.isJunk { storedBodies.append(record) }
        state.stored = sequence
        state.storedHead = record.id
        if !state.isJunk { state.storedBytes += record.bytes.count }
        state.lastReceivedMillis = max(state.lastReceivedMillis, receivedAtMillis)
        update(state)
        touched[key.conversation, default: []].insert(key.author)
        fresh[header.position] = (header, record.id)
        return .stored(record.id)
    }

    private mutating func keepEvidence(_ record: NatterModel.Record, state: inout FeedState, forkAt fork: UInt64) throws
        -> IngestOutcome
    {
        let header = record.header
        let feedArguments: StatementArguments = [Data(header.conversation.bytes), Data(header.author.bytes)]
        let known =
            try Bool.fetchOne(
                db,
                sql:
                    "SELECT EXISTS (SELECT 1 FROM fork_evidence WHERE conversation = ? AND author = ? AND record_id = ?)",
                arguments: feedArguments + [Data(record.id.bytes)]) ?? false
        if known { return .duplicate(record.id) }
        let held =
            try Int.fetchOne(
                db, sql: "SELECT COUNT(*) FROM fork_evidence WHERE conversation = ? AND author = ?",
                arguments: feedArguments) ?? 0
        if held < StoreLimits.forkEvidencePerFeedMax {
            try db.execute(
                sql: """
                    INSERT INTO fork_evidence (conversation, author, sequence, record_id, bytes, received_ms)
                    VALUES (?, ?, ?, ?, ?, ?)
                    """,
                arguments: feedArguments + [
                    Int64(header.sequence), Data(record.id.bytes), Data(record.bytes), receivedAtMillis,
                ])
        }
        let newFork = min(state.forkSequence ?? fork, fork)
        if newFork != state.forkSequence {
            state.forkSequence = newFork
            update(state)
            needsRebuild.insert(header.conversation)
        }
        return .forkEvidence(record.id, forkSequence: newFork)
    }

    private func recordID(at position: RecordPosition) throws -> RecordID? {
        if let (_, id) = fresh[position] { return id }
        return try Data.fetchOne(
            db.cachedStatement(sql: "SELECT id FROM record WHERE conversation = ? AND author = ? AND sequence = ?"),
            arguments: position.arguments
        ).map { RecordID(bytes: Array($0)) }
    }

    /// The header and id of a stored record; nil for a junk feed's record past its applied frontier that is not
    /// in this transaction (its body is dropped: it waits for ever, as it never gets applied elsewhere either).
    private func header(at position: RecordPosition) throws -> (RecordHeader, RecordID)? {
        if let cached = fresh[position] { return cached }
        guard
            let row = try Row.fetchOne(
                db.cachedStatement(
                    sql: "SELECT id, bytes FROM record WHERE conversation = ? AND author = ? AND sequence = ?"),
                arguments: position.arguments)
        else { preconditionFailure("feed row claims a record that is not stored: \(position)") }
        guard !(row[1] as Data).isEmpty else { return nil }
        // Stored records were checked when they arrived: parsing the header is enough.
        return (try RecordCodec.storedHeader(Array(row[1] as Data)), RecordID(bytes: row[0] as Data))
    }

    private mutating func lamport(at position: RecordPosition) throws -> UInt64 {
        if let (header, _) = fresh[position] { return header.lamport }
        if let known = lamports[position] ?? feedCache?.lamport(at: position) { return known }
        let value = try Int64.fetchOne(
            db.cachedStatement(
                sql: "SELECT lamport FROM record WHERE conversation = ? AND author = ? AND sequence = ?"),
            arguments: position.arguments)
        guard let value else { preconditionFailure("applied record missing at \(position)") }
        lamports[position] = UInt64(value)
        return UInt64(value)
    }

    // MARK: - Applying

    /// Advances applied prefixes (rebuilding conversations where a fork appeared) and writes feed rows back.
    /// Returns the newly applied records in apply order and the rebuilt conversations.
    mutating func finish() throws -> (applied: [RecordRef], rebuilt: [ConversationID]) {
        var applied = [RecordRef]()
        let rebuilt = needsRebuild.sorted()
        for conversation in rebuilt {
            var all = try feeds(in: conversation)
            let appliedBefore = all.mapValues(\.applied)
            // Junk feeds keep their applied frontier: their bodies are gone, so they could not be re-applied.
            for author in all.keys.sorted() where !all[author]!.isJunk {
                all[author]!.applied = 0
                all[author]!.appliedHead = .none
                all[author]!.appliedLamport = 0
                all[author]!.stalledReason = nil
                update(all[author]!)
            }
            // Re-applied from scratch: what was applied before is no news; what this transaction's records (or the
            // fork's cut) let apply beyond it is.
            applied += try advance(conversation, candidates: Set(all.keys)).filter {
                $0.position.sequence > appliedBefore[$0.position.author] ?? 0
            }
        }
        var changedConversations = Set<ConversationID>()
        for conversation in touched.keys.sorted() where !needsRebuild.contains(conversation) {
            let newlyApplied = try advance(conversation, candidates: touched[conversation]!)
            if !newlyApplied.isEmpty { changedConversations.insert(conversation) }
            applied += newlyApplied
        }
        for key in dirty.sorted(by: { ($0.conversation, $0.author) < ($1.conversation, $1.author) }) {
            let state = self[cached: key]!
            try state.save(db)
            written.append(state)
        }
        // Mark conversations whose applied records changed, in this same transaction, for the derived tables.
        for conversation in changedConversations.union(rebuilt).sorted() {
            try db.cachedStatement(sql: "INSERT OR IGNORE INTO dirty_conversation (id) VALUES (?)")
                .execute(arguments: [Data(conversation.bytes)])
        }
        touched = [:]
        needsRebuild = []
        dirty = []
        return (applied, rebuilt)
    }

    /// The applied-prefix fixpoint for one conversation, starting from the feeds in `candidates`: a record is
    /// applied when its feed predecessor is, it comes before any fork, every dependency is applied (a dependency
    /// reaching into a forked region counts up to the last record before the fork), and its Lamport number is
    /// exactly one more than its largest dependency's (at least that, when a dependency was cut at a fork).
    private mutating func advance(_ conversation: ConversationID, candidates: Set<AuthorID>) throws -> [RecordRef] {
        var feeds = try feeds(in: conversation)
        // Feeds left waiting by earlier transactions may be unblocked by this one's records: consider them too.
        var start = candidates
        for (author, state) in feeds where state.applied < state.stored && state.stalledReason == nil {
            start.insert(author)
        }
        var queue = start.sorted()
        var queued = start
        var waiting = [AuthorID: [AuthorID]]()
        var applied = [RecordRef]()
        var head = 0
        while head < queue.count {
            let author = queue[head]
            head += 1
            queued.remove(author)
            while var state = feeds[author] {
                let next = state.applied + 1
                guard next <= state.stored, state.stalledReason == nil else { break }
                if let fork = state.forkSequence, next >= fork { break }
                guard
                    let (header, id) = try header(
                        at: RecordPosition(conversation: conversation, author: author, sequence: next))
                else { break }
                var bound: UInt64 = 0
                var cutAtFork = false
                var blockedOn: AuthorID?
                for dependency in header.dependencies {
                    let target =
                        feeds[dependency.author]
                        ?? FeedState(conversation: conversation, author: dependency.author)
                    var sequence = dependency.sequence
                    var beyondFork: UInt64 = 0
                    if let fork = target.forkSequence, sequence >= fork {
                        beyondFork = sequence - (fork - 1)
                        sequence = fork - 1
                        cutAtFork = true
                    }
                    guard target.applied >= sequence else {
                        blockedOn = dependency.author
                        break
                    }
                    let lamport: UInt64
                    if sequence == 0 {
                        lamport = 0
                    } else if sequence == target.applied {
                        lamport = target.appliedLamport
                    } else {
                        lamport = try self.lamport(
                            at: RecordPosition(
                                conversation: conversation, author: dependency.author, sequence: sequence))
                    }
                    // Each record of a feed has a larger Lamport number than the one before, so records cut off
                    // at a fork had at least these numbers.
                    bound = max(bound, lamport + beyondFork)
                }
                if let blockedOn {
                    waiting[blockedOn, default: []].append(author)
                    break
                }
                let expected = bound + 1
                guard cutAtFork ? header.lamport >= expected : header.lamport == expected else {
                    state.stalledReason =
                        "Lamport number \(header.lamport) at sequence \(next), expected "
                        + (cutAtFork ? "at least " : "") + "\(expected)"
                    feeds[author] = state
                    update(state)
                    break
                }
                state.applied = next
                state.appliedHead = id
                state.appliedLamport = header.lamport
                feeds[author] = state
                update(state)
                applied.append(RecordRef(id: id, position: header.position))
                for waiter in waiting.removeValue(forKey: author) ?? [] where !queued.contains(waiter) {
                    queue.append(waiter)
                    queued.insert(waiter)
                }
            }
        }
        return applied
    }
}
