import Foundation
public import GRDB
import GRDBSQLite
public import NatterCrypto
public import NatterModel
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The node's durable record log in SQLite: every record it holds, per-feed frontiers and fork evidence.
///
/// **Every write is one transaction, and a commit that precedes an acknowledgement is durable** (WAL with
/// `synchronous=FULL` on the writer). Ingest checks what any node can check — size, canonical form, signature and
/// the feed's sequence/previous-hash chain — and then advances each feed's *applied* prefix: the records whose
/// dependencies are applied, whose Lamport number is right, and which come before any fork. The applied state is a
/// function of the set of records held, whatever the order they arrived in (docs/decisions/0003-fork-rule.md).
public final class RecordStore: Sendable {
    /// The database (a pool on disk, a queue in memory for the lab and tests).
    public let writer: any DatabaseWriter
    private let lock: DataDirectoryLock?
    /// Whether a `.deferred` ingest committed since the last `syncDeferred` (set and cleared on the writer's queue).
    private let deferredCommits = Mutex(false)
    /// The writer's `synchronous` level as last set (nil: unknown, after a switch failed). It is switched only when a
    /// transaction needs the other level — to NORMAL for an unsynced one, back to FULL before any other write — not
    /// twice around every unsynced one: each switch compiles a pragma (1.7 % of a fan-out member's CPU).
    private let writerLevel = Mutex<SynchronousLevel?>(.full)
    /// `deferredSyncs`.
    private let syncsMade = Mutex(0)
    /// Checks started ahead of ingest (`verifyAhead`).
    private let ahead = VerificationAhead()
    /// Signatures other stores of this process checked already (the lab's simulated nodes), or nil: each checked here.
    public let signatureMemo: SignatureMemo?
    /// The in-memory store's queue (nil on disk), which `read` uses without GRDB's read-only guard.
    private let memoryQueue: DatabaseQueue?
    /// Feed rows and Lamport numbers in memory (FeedCache.swift).
    let feedCache = FeedCache()
    /// The records stored last, in memory (RecentRecords.swift).
    let recentRecords = RecentRecords()
    /// Why own writes wait, if they do (`OwnHeadsDoubt`; persisted in `meta`, mirrored here for `appendOwn`).
    let ownHeads = Mutex<OwnHeadsDoubt?>(nil)

    private init(writer: any DatabaseWriter, lock: DataDirectoryLock?, signatureMemo: SignatureMemo? = nil)
        throws(StoreError)
    {
        self.writer = writer
        self.lock = lock
        self.signatureMemo = signatureMemo
        memoryQueue = writer as? DatabaseQueue
        do {
            try Schema.migrator.migrate(writer)
            // On the writer's connection, open already: a reader would open one more connection at every start.
            let doubt = try writer.writeWithoutTransaction { db in try Self.storedDoubt(db) }
            ownHeads.withLock { $0 = doubt }
        } catch {
            throw .database("\(error)")
        }
    }

    /// Opens (creating if needed) the store in `directory`, taking the directory's lock first. A directory that is not
    /// where it was last opened (copied, restored, moved to another machine) has its own heads doubted
    /// (`OwnHeadsDoubt.copied`): own writes wait until a peer has synced with the node.
    public static func open(directory: String) throws(StoreError) -> RecordStore {
        let lock = try DataDirectoryLock(directory: directory)
        let path = directory + "/natter.sqlite"
        // Create the file 0600 before SQLite does: its -wal and -shm files copy the database file's mode.
        let fd = Glibc.open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fileSystem(path: path, reason: String(cString: strerror(errno))) }
        close(fd)
        var configuration = Configuration()
        configuration.busyMode = .timeout(5)
        let pool: DatabasePool
        do {
            pool = try DatabasePool(path: path, configuration: configuration)
            // GRDB 7 resets the writer to synchronous=NORMAL after prepareDatabase; FULL is set here, afterwards,
            // so that every commit is fsynced before it returns (tested by reading the pragma back).
            try pool.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = FULL") }
        } catch {
            throw .database("cannot open \(path): \(error)")
        }
        // A node whose commits are not fsynced could acknowledge what a power cut takes back: it does not start.
        let mode: Int?
        do {
            mode = try pool.writeWithoutTransaction { db in try Int.fetchOne(db, sql: "PRAGMA synchronous") }
        } catch {
            throw .database("cannot read the durability setting of \(path): \(error)")
        }
        guard mode == 2 else {
            throw .database(
                "cannot make commits durable in \(path): synchronous is \(mode.map(String.init) ?? "unknown"), not FULL")
        }
        let store = try RecordStore(writer: pool, lock: lock)
        try store.checkHome(directory: directory, database: path)
        return store
    }

    /// A store in memory (lab and tests): the same schema and code, no file and no lock. It starts as a copy of
    /// `migratedEmpty` (the migrator then finds nothing to do): running every migration costs each new store about
    /// 20 ms of CPU, 6 % of an 8-node lab run that creates a few dozen stores. Stores given one `signatureMemo`
    /// check each record's signature once between them.
    public static func inMemory(signatureMemo: SignatureMemo? = nil) throws(StoreError) -> RecordStore {
        do {
            let queue = try DatabaseQueue()
            try migratedEmpty.get().backup(to: queue)
            return try RecordStore(writer: queue, lock: nil, signatureMemo: signatureMemo)
        } catch let error as StoreError {
            throw error
        } catch {
            throw .database("\(error)")
        }
    }

    /// An empty in-memory database with every migration applied, made once per process: what `inMemory` copies.
    private static let migratedEmpty = Result<DatabaseQueue, any Error> {
        let queue = try DatabaseQueue()
        try Schema.migrator.migrate(queue)
        return queue
    }

    /// A copy of this in-memory store as it is now, as a backup of the file would hold it (the lab restores one to
    /// make a node's twin). Only for stores in memory.
    public func copy() throws(StoreError) -> RecordStore {
        precondition(memoryQueue != nil, "only an in-memory store is copied")
        let copy = try RecordStore.inMemory(signatureMemo: signatureMemo)
        do {
            try writer.backup(to: copy.writer)
        } catch {
            throw .database("\(error)")
        }
        return copy
    }

    /// One write transaction of derived state only (conversation tables, search index: a cache that a refresh
    /// rebuilds from the log) committed with `synchronous=NORMAL`: not fsynced, so it does not queue for the disk
    /// ahead of a record's durable commit. WAL keeps commits in order: the next fsynced commit makes it durable too,
    /// and one lost to a power cut leaves its conversation marked dirty (that mark goes in the same transaction), so
    /// the next refresh writes it again.
    public func writeDerived<T>(_ updates: (Database) throws -> T) throws -> T {
        try writeUnsynced(updates, deferred: false)
    }

    /// One write transaction committed with `synchronous=NORMAL`; a `deferred` one is remembered for
    /// `syncDeferred`.
    private func writeUnsynced<T>(_ updates: (Database) throws -> T, deferred: Bool) throws -> T {
        try writer.writeWithoutTransaction { db in
            try level(.normal, db)
            let changesBefore = db.totalChangesCount
            let result = try db.inImmediateTransaction { try updates(db) }
            // A transaction that changed nothing (every record a duplicate) wrote nothing to make durable.
            if deferred && db.totalChangesCount != changesBefore { deferredCommits.withLock { $0 = true } }
            return result
        }
    }

    /// One write transaction fsynced at its commit (`synchronous=FULL`): every write of the store but
    /// `writeUnsynced`'s goes through here (or through GRDB's migrator, at open, before any switch).
    func writeTransaction<T>(_ updates: (Database) throws -> T) throws -> T {
        try writer.writeWithoutTransaction { db in
            try level(.full, db)
            return try db.inImmediateTransaction { try updates(db) }
        }
    }

    /// Puts the writer at `wanted` unless it is there already (on the writer's queue). In memory there is no fsync to
    /// make or skip: nothing is switched. A switch that fails leaves the level unknown, so the next one is made.
    private func level(_ wanted: SynchronousLevel, _ db: Database) throws {
        guard memoryQueue == nil, writerLevel.withLock({ $0 }) != wanted else { return }
        writerLevel.withLock { $0 = nil }
        try db.setSynchronous(wanted)
        writerLevel.withLock { $0 = wanted }
    }

    /// How an ingest commits. Received records exist elsewhere (their author holds them durably), so a node may
    /// show them before they reach the disk, as long as it acknowledges nothing about them before `syncDeferred`.
    public enum IngestDurability: Sendable {
        /// Fsynced before `ingest` returns (`synchronous=FULL`).
        case synced
        /// Committed (visible to every reader, safe from a crash of the process) but not fsynced
        /// (`synchronous=NORMAL`): a power cut before the next `syncDeferred` (or any fsynced commit) may take it
        /// back, whole transactions from the newest, never leaving a gap or a torn record.
        case deferred
    }

    /// Whether a `.deferred` ingest committed since the last `syncDeferred`.
    public var hasDeferredCommits: Bool { deferredCommits.withLock { $0 } }

    /// Makes every commit so far durable: fsyncs the WAL file, as a `synchronous=FULL` commit does after writing its
    /// frames (WAL keeps commits in order, so one sync covers every earlier one). No I/O when no deferred commit is
    /// waiting. The file is SQLite's own handle (`SQLITE_FCNTL_JOURNAL_POINTER`), so its VFS syncs it as SQLite would,
    /// the directory included on the first sync of a new WAL. Should SQLite have no WAL open, a one-row commit with
    /// `synchronous=FULL` (`durability_mark`) does the same at the cost of a transaction: it was the only way before,
    /// 3 % of a fan-out member's CPU (a page, a commit and the WAL lock per turn).
    public func syncDeferred() throws(StoreError) {
        do {
            try writer.writeWithoutTransaction { db in
                guard deferredCommits.withLock({ $0 }) else { return }
                // In memory nothing reaches a disk: no fsynced commit to make (2 % of a lab run's time).
                if memoryQueue == nil, try !Self.syncWAL(db) {
                    try level(.full, db)
                    try db.executeCached(sql: "UPDATE durability_mark SET syncs = syncs + 1 WHERE id = 1")
                }
                deferredCommits.withLock { $0 = false }
                syncsMade.withLock { $0 += 1 }
            }
        } catch {
            throw .database("\(error)")
        }
    }

    /// How many times `syncDeferred` made deferred commits durable (what the durability tests count).
    public var deferredSyncs: Int { syncsMade.withLock { $0 } }

    /// Fsyncs the WAL file of `db`'s main database through SQLite's handle; false when SQLite has none open.
    private static func syncWAL(_ db: Database) throws -> Bool {
        var file: UnsafeMutablePointer<sqlite3_file>?
        let found = sqlite3_file_control(db.sqliteConnection, "main", SQLITE_FCNTL_JOURNAL_POINTER, &file)
        guard found == SQLITE_OK, let file, let sync = file.pointee.pMethods?.pointee.xSync else { return false }
        let code = sync(file, SQLITE_SYNC_NORMAL)
        guard code == SQLITE_OK else { throw StoreError.database("cannot sync the WAL (SQLite error \(code))") }
        return true
    }

    /// Runs `body` as a read on the writer's connection, outside any transaction, serialized with every write (so it
    /// sees no write half done, and its statements see the same data). Not on a `DatabasePool` reader: nearly every
    /// read comes from the node's actor, which is also the only writer, so a reader's isolation bought nothing and
    /// cost a pool checkout, a BEGIN and a COMMIT per read, more than the reads themselves (7.5 % of a fan-out
    /// member's CPU against 6.4 %, perf 2026-11-28). In memory it is the one connection, without GRDB's read-only
    /// guard either: that guard toggles `PRAGMA query_only`, which expires every prepared statement of the
    /// connection (a third of a lab run's time, perf 2026-11-27). Callers never nest it in a write.
    func read<T>(_ body: (Database) throws -> T) throws -> T {
        if let memoryQueue { return try memoryQueue.inDatabase(body) }
        return try writer.writeWithoutTransaction(body)
    }

    /// The writer's `synchronous` pragma as a durable write finds it (2 = FULL; `writeTransaction` switches back
    /// from an unsynced write's NORMAL first): exposed so tests can prove durability is configured.
    public func synchronousMode() throws -> Int {
        try writer.writeWithoutTransaction { db in
            try level(.full, db)
            return try Int.fetchOne(db, sql: "PRAGMA synchronous") ?? -1
        }
    }

    /// Runs SQLite's integrity check; "ok" when the file is sound.
    public func integrityCheck() throws -> String {
        try read { db in try String.fetchAll(db, sql: "PRAGMA integrity_check").joined(separator: "; ") }
    }

    // MARK: - Identity binding

    /// Binds the store to `identity` on first use and refuses a store written by another identity afterwards.
    public func bind(to identity: AuthorID, directory: String) throws(StoreError) {
        do {
            let matches: Bool = try writeTransaction { db in
                if let existing = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'identity'") {
                    return existing == Data(identity.bytes)
                }
                try db.execute(
                    sql: "INSERT INTO meta (key, value) VALUES ('identity', ?)", arguments: [Data(identity.bytes)])
                return true
            }
            guard matches else { throw StoreError.identityMismatch(path: directory) }
        } catch let error as StoreError {
            throw error
        } catch {
            throw .database("\(error)")
        }
    }

    // MARK: - Ingest

    /// Starts checking `records` (decoded by the sync session: their signatures are left) on every core now, for an
    /// ingest of them that is to come (`VerificationAhead`): a node holding deliveries for its next turns has them
    /// checked while it works on this one. Changes nothing stored; an ingest gives the same outcome with or without
    /// it.
    public func verifyAhead(_ records: [NatterModel.Record]) {
        guard !records.isEmpty else { return }
        ahead.start(
            records.map { .decoded($0) }, ids: records.map(\.id), workerCount: Self.verificationWorkers,
            memo: signatureMemo)
    }

    /// The same for records as bytes (decoded as well as checked ahead). The node checks ahead only what its sessions
    /// decoded; this is for tests that mix undecodable bytes into what is checked ahead.
    func verifyAhead(_ batch: [[UInt8]]) {
        guard !batch.isEmpty else { return }
        ahead.start(
            batch.map { .bytes($0) }, ids: batch.map { RecordID.of($0) }, workerCount: Self.verificationWorkers,
            memo: signatureMemo)
    }

    /// Records `verifyAhead` is checking, or has checked, that no ingest has taken yet, and how many it started
    /// since the store was opened (diagnostics and tests).
    public var verifiedAhead: (waiting: Int, started: Int) { (ahead.count, ahead.started) }

    /// Checks and stores a batch of records received from elsewhere, in one transaction.
    ///
    /// Decoding and signature checks (the dominant cost) run on every core, chunk by chunk, while the calling thread
    /// applies the chain checks and inserts to the chunks already checked, inside the transaction; the applied-prefix
    /// update follows. Records whose checks `verifyAhead` started are not checked again. Results are consumed in
    /// input order, so the outcome is the same as checking one record after the other. The same record delivered
    /// any number of times is stored once.
    public func ingest(
        _ batch: [[UInt8]], receivedAtMillis: Int64, durability: IngestDurability = .synced
    ) throws(StoreError) -> IngestReport {
        try ingest(
            batch.map { .bytes($0) }, ids: batch.map { RecordID.of($0) },
            claimed: batch.map(RecordCodec.claimedPosition), receivedAtMillis: receivedAtMillis, durability: durability)
    }

    /// The same for records the sync session decoded (structure and canonical form checked, id computed): only
    /// their signatures are checked here, and nothing is decoded or hashed again. The outcome is what ingesting their
    /// bytes gives.
    public func ingest(
        _ records: [NatterModel.Record], receivedAtMillis: Int64, durability: IngestDurability = .synced
    ) throws(StoreError) -> IngestReport {
        try ingest(
            records.map { .decoded($0) }, ids: records.map(\.id), claimed: records.map(\.header.position),
            receivedAtMillis: receivedAtMillis, durability: durability)
    }

    /// One ingest transaction over records to check, with their ids and the positions they claim (nil: bytes too
    /// short to say; they are rejected when checked).
    private func ingest(
        _ batch: [UncheckedRecord], ids: [RecordID], claimed: [RecordPosition?], receivedAtMillis: Int64,
        durability: IngestDurability
    ) throws(StoreError) -> IngestReport {
        // A record whose id is stored already is a byte-for-byte copy of one verified before (the id hashes the
        // whole encoding): it is a duplicate without decoding or checking its signature again. Gossip delivers
        // most records more than once, so this skips most signature checks on a busy group. Looked up inside the
        // write transaction, on the writer's warm cache, and only for records at a position their feed holds.
        var held = Set<Int>()
        let result: Ingested
        var committed: CacheEffects = ([], [], [], 0)
        do {
            result = try write(durability) { db in
                var session = IngestSession(
                    db: db, receivedAtMillis: receivedAtMillis, records: batch.count, feedCache: feedCache,
                    recent: recentRecords)
                held = try session.heldAlready(ids: ids, claimed: claimed)
                let fresh = batch.indices.filter { !held.contains($0) }
                let verified = Verified(
                    fresh.map { batch[$0] }, ids: fresh.map { ids[$0] }, ahead: ahead,
                    parallelFrom: Self.parallelVerifyThreshold, workerCount: Self.verificationWorkers,
                    memo: signatureMemo)
                let ingested = try Self.store(verified, in: &session)
                committed = session.committed
                return ingested
            }
            noteCommitted(committed)
        } catch {
            throw .database("\(error)")
        }
        return Self.report(ids: ids, stored: held, result)
    }

    /// Threads that decode and check records: one per core.
    private static let verificationWorkers = ProcessInfo.processInfo.activeProcessorCount

    /// Where each record of an ingest gets its decode-and-verify result: a check `verifyAhead` started, a check
    /// started now on every core for the rest (when there are at least `parallelFrom` of them), or this thread.
    private struct Verified {
        let records: [UncheckedRecord]
        private let memo: SignatureMemo?
        private let started: [(ParallelVerification, Int)?]
        private let parallel: ParallelVerification?
        /// Index in `parallel` of each record not started ahead.
        private let parallelIndex: [Int: Int]

        init(
            _ records: [UncheckedRecord], ids: [RecordID], ahead: VerificationAhead, parallelFrom: Int = .max,
            workerCount: Int = 1, memo: SignatureMemo? = nil
        ) {
            self.records = records
            self.memo = memo
            let started = ids.map { ahead.take($0) }
            self.started = started
            let rest = records.indices.filter { started[$0] == nil }
            let parallel =
                rest.count >= parallelFrom
                ? ParallelVerification(rest.map { records[$0] }, workerCount: workerCount, memo: memo) : nil
            self.parallel = parallel
            parallelIndex = parallel == nil ? [:] : Dictionary(uniqueKeysWithValues: rest.enumerated().map { ($1, $0) })
        }

        /// Results in input order.
        func forEachInOrder(_ body: (ParallelVerification.Outcome) throws -> Void) rethrows {
            var reader = parallel.map(ParallelVerification.OrderedReader.init)
            for index in records.indices {
                if let (verification, position) = started[index] {
                    try body(verification.outcome(at: position))
                } else if let position = parallelIndex[index] {
                    try body(reader!.outcome(at: position))
                } else {
                    try body(records[index].checked(memo))
                }
            }
        }
    }

    /// Stores the `verified` records in one transaction, in order.
    private static func store(_ verified: Verified, in session: inout IngestSession) throws -> Ingested {
        var outcomes = [IngestOutcome]()
        outcomes.reserveCapacity(verified.records.count)
        try verified.forEachInOrder { decoded in
            switch decoded {
            case .success(let record): outcomes.append(try session.store(record))
            case .failure(let error): outcomes.append(.rejected(error))
            }
        }
        let (applied, rebuilt) = try session.finish()
        return (outcomes, applied, rebuilt)
    }

    /// What one ingest transaction did with the records it checked: their outcomes, the records it applied, the
    /// conversations whose applied state it rebuilt.
    private typealias Ingested = (outcomes: [IngestOutcome], applied: [RecordRef], rebuilt: [ConversationID])

    /// The report in input order: the copies already stored, and the outcomes of the rest.
    private static func report(
        ids: [RecordID], stored: Set<Int>, _ result: Ingested
    ) -> IngestReport {
        var freshOutcomes = result.outcomes.makeIterator()
        let outcomes = ids.indices.map { stored.contains($0) ? .duplicate(ids[$0]) : freshOutcomes.next()! }
        return IngestReport(outcomes: outcomes, applied: result.applied, rebuilt: result.rebuilt)
    }

    /// One ingest transaction, fsynced at commit (`.synced`) or not (`.deferred`: remembered for `syncDeferred`
    /// when it changed anything).
    private func write<T>(_ durability: IngestDurability, _ updates: (Database) throws -> T) throws -> T {
        durability == .synced ? try writeTransaction(updates) : try writeUnsynced(updates, deferred: true)
    }

    /// Below this many records a batch is checked on the calling thread (a live message: no hand-off to other
    /// threads); from this many on, on every core while the caller inserts (`ParallelVerification`).
    static let parallelVerifyThreshold = 32

    // MARK: - Own records

    /// Appends a record authored by this node, durably, before anything may send it. Refused with
    /// `StoreError.ownHeadsUnconfirmed` while the own feeds may be behind other nodes' (`ownHeadsDoubt`): every own
    /// write of every front end comes through here, so none can fork this identity's feeds.
    ///
    /// The sequence number, previous hash, dependencies (the conversation's applied frontier) and Lamport number
    /// are chosen inside the write transaction, so after a crash the next record continues from what is on disk
    /// and a sequence number is never reused. `makePayload` receives the final header (the associated data for
    /// encryption) and returns the payload as it will be carried.
    public func appendOwn(
        conversation: ConversationID, kind: RecordKind, epoch: EpochID, createdAtMillis: Int64,
        identity: IdentityKeyPair, makePayload: (RecordHeader) throws -> [UInt8]
    ) throws -> NatterModel.Record {
        if let doubt = ownHeadsDoubt { throw StoreError.ownHeadsUnconfirmed(doubt) }
        let (record, committed) = try withoutActuallyEscaping(makePayload) { makePayload in
            try writeTransaction { db in
                var session = IngestSession(db: db, receivedAtMillis: createdAtMillis, feedCache: feedCache)
                let record = try Self.prepareOwn(
                    OwnAppend(conversation: conversation, kind: kind, epoch: epoch, makePayload: makePayload),
                    createdAtMillis: createdAtMillis, identity: identity, session: &session)
                try Self.storeOwn(record, session: &session)
                return (record, session.committed)
            }
        }
        noteCommitted(committed)
        return record
    }

    /// What a committed transaction tells the caches (`noteCommitted`).
    typealias CacheEffects = (
        feeds: [FeedState], stored: [(RecordPosition, UInt64)], bodies: [NatterModel.Record], receivedAtMillis: Int64
    )

    /// A transaction committed: the feed cache and the recent records learn what it wrote.
    private func noteCommitted(_ effects: CacheEffects) {
        feedCache.committed(feeds: effects.feeds, stored: effects.stored)
        recentRecords.remember(effects.bodies, receivedAtMillis: effects.receivedAtMillis)
    }

    /// Forgets the records and feed rows held in memory: for whatever changes the record or feed tables other than
    /// through this store's writes (the lab's broken variants).
    public func invalidateCaches() {
        feedCache.invalidate()
        recentRecords.invalidate()
    }

    /// One own record to append (`appendOwn(_:createdAtMillis:identity:)`): where, of what kind, under which epoch,
    /// and how its payload is made from its final header.
    public struct OwnAppend {
        public let conversation: ConversationID
        public let kind: RecordKind
        public let epoch: EpochID
        public let makePayload: (RecordHeader) throws -> [UInt8]

        public init(
            conversation: ConversationID, kind: RecordKind, epoch: EpochID,
            makePayload: @escaping (RecordHeader) throws -> [UInt8]
        ) {
            self.conversation = conversation
            self.kind = kind
            self.epoch = epoch
            self.makePayload = makePayload
        }
    }

    /// Appends several own records in one write transaction — one commit, one fsync — each exactly as
    /// `appendOwn(conversation:…)` would, in order (a later one depends on the earlier ones of its conversation).
    /// One whose payload cannot be made (the rules refuse it) is left out and reported, the others are written: a
    /// refusal comes before anything of that append is written. Nothing is durable, and nothing may be sent, before
    /// this returns; if the commit fails, it throws and none is written. Refused whole while the own heads are in
    /// doubt (as the single append is: `StoreError.ownHeadsUnconfirmed`). One ingest session serves the whole
    /// batch: its feed states follow each append in memory, so the batch reads each conversation's feeds once
    /// (through the feed cache, which the transaction's own writes never get ahead of: the session's win).
    public func appendOwn(_ appends: [OwnAppend], createdAtMillis: Int64, identity: IdentityKeyPair) throws
        -> [Result<NatterModel.Record, any Error>]
    {
        if let doubt = ownHeadsDoubt { throw StoreError.ownHeadsUnconfirmed(doubt) }
        let (results, committed) = try writeTransaction { db in
            var session = IngestSession(db: db, receivedAtMillis: createdAtMillis, feedCache: feedCache)
            var results = [Result<NatterModel.Record, any Error>]()
            for append in appends {
                let record: NatterModel.Record
                do {
                    record = try Self.prepareOwn(
                        append, createdAtMillis: createdAtMillis, identity: identity, session: &session)
                } catch let error as DatabaseError {
                    throw error  // the transaction itself failed: nothing is written
                } catch {
                    results.append(.failure(error))
                    continue
                }
                try Self.storeOwn(record, session: &session)  // a failure here fails the whole transaction
                results.append(.success(record))
            }
            return (results, session.committed)
        }
        noteCommitted(committed)
        return results
    }

    /// The next own record of `append`'s conversation, signed, from the session's feed states; writes nothing, so a
    /// refusal (a frozen feed, too many authors, a payload the rules refuse) leaves the transaction as it was.
    private static func prepareOwn(
        _ append: OwnAppend, createdAtMillis: Int64, identity: IdentityKeyPair, session: inout IngestSession
    ) throws -> NatterModel.Record {
        let author = AuthorID(identity.publicKey)
        let conversation = append.conversation
        let feeds = try session.liveFeeds(in: conversation)
        let own: FeedState? = try session.feed(of: author, in: conversation)
        if let own, own.forkSequence != nil || own.stalledReason != nil || own.applied != own.stored {
            throw StoreError.ownFeedFrozen(conversation: conversation)
        }
        var dependencies = [AuthorID: UInt64]()
        var lamport: UInt64 = 0
        // Junk feeds are no dependency: a member who never held them (they are dropped everywhere) must apply this.
        for (feedAuthor, feed) in feeds where feed.applied > 0 {
            dependencies[feedAuthor] = feed.applied
            lamport = max(lamport, feed.appliedLamport)
        }
        guard dependencies.count <= Limits.dependenciesMax else {
            throw StoreError.tooManyAuthors(conversation: conversation, count: dependencies.count)
        }
        let sequence = (own?.stored ?? 0) + 1
        let header = RecordHeader(
            kind: append.kind, conversation: conversation, author: author, sequence: sequence,
            previous: own?.storedHead ?? .none, epoch: append.epoch, lamport: lamport + 1,
            createdAtMillis: createdAtMillis, dependencies: VectorClock(dependencies))
        do {
            return try NatterModel.Record.sign(header: header, payload: try append.makePayload(header), by: identity)
        } catch let error as RecordFormatError {
            throw StoreError.invalidOwnRecord(error)
        }
    }

    /// Stores and applies a record `prepareOwn` made, inside the session's transaction.
    private static func storeOwn(_ record: NatterModel.Record, session: inout IngestSession) throws {
        let outcome = try session.store(record)
        _ = try session.finish()
        precondition(outcome == .stored(record.id), "own record must extend own feed: \(outcome)")
    }

    // MARK: - Reads

    /// The record at `position`, if held there (a junk feed's dropped body is not). The log is addressed by
    /// position: there is no index of ids, whose random keys would cost every ingest transaction a page write per
    /// record (docs/performance.md); `RecordRef` carries both.
    public func record(at position: RecordPosition) throws -> NatterModel.Record? {
        try column("bytes", at: position).map { try NatterModel.Record.decode(Array($0)) }
    }

    /// The record `ref` names, if held: the one at its position, when its id matches.
    public func record(_ ref: RecordRef) throws -> NatterModel.Record? {
        try record(at: ref.position).flatMap { $0.id == ref.id ? $0 : nil }
    }

    /// Whether the record `ref` names is held with its body: `record(ref) != nil` without reading and decoding the
    /// body (the lab asks it of every record on every node at the end of a run).
    public func holds(_ ref: RecordRef) throws -> Bool {
        try column("id", at: ref.position) == Data(ref.id.bytes)
    }

    /// One blob column (`bytes` or `id`) of the record held at `position` with its body.
    private func column(_ name: StaticString, at position: RecordPosition) throws -> Data? {
        try read { db in
            try Data.fetchOne(
                db.cachedStatement(
                    sql: """
                        SELECT \(name) FROM record WHERE conversation = ? AND author = ? AND sequence = ?
                            AND length(bytes) > 0
                        """),
                arguments: position.arguments)
        }
    }

    /// Up to `limit` records of one feed from sequence `from` on, in sequence order (what sync streams).
    public func records(
        conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int
    ) throws -> [NatterModel.Record] {
        if let held = recentRun(conversation: conversation, author: author, from: from, limit: limit) { return held }
        return try read { db in
            try Data.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT bytes FROM record WHERE conversation = ? AND author = ? AND sequence >= ?
                            AND length(bytes) > 0
                        ORDER BY sequence LIMIT ?
                        """),
                arguments: [Data(conversation.bytes), Data(author.bytes), Int64(from), limit]
            ).map { try NatterModel.Record.decode(Array($0)) }
        }
    }

    /// The records of one kind in a feed from sequence `from` through `through`, in sequence order. A relay asks for
    /// the commits among what it newly applied (only a commit can give it a key) without reading the rest.
    public func records(
        conversation: ConversationID, author: AuthorID, from: UInt64, through: UInt64, kind: RecordKind
    ) throws -> [NatterModel.Record] {
        try read { db in
            try Data.fetchAll(
                db.cachedStatement(
                    sql: """
                        SELECT bytes FROM record WHERE conversation = ? AND author = ? AND sequence BETWEEN ? AND ?
                            AND kind = ? AND length(bytes) > 0
                        ORDER BY sequence
                        """),
                arguments: [
                    Data(conversation.bytes), Data(author.bytes), Int64(from), Int64(through), Int64(kind.rawValue),
                ]
            ).map { try NatterModel.Record.decode(Array($0)) }
        }
    }

    /// The canonical bytes of up to `limit` records of one feed from sequence `from` on, in sequence order: what sync
    /// streams, without decoding (the receiver checks every record anyway).
    public func recordBytes(
        conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int
    ) throws -> [[UInt8]] {
        if let held = recentRun(conversation: conversation, author: author, from: from, limit: limit) {
            return held.map(\.bytes)
        }
        return try read { db in
            let statement = try db.cachedStatement(
                sql: """
                    SELECT bytes FROM record WHERE conversation = ? AND author = ? AND sequence >= ?
                        AND length(bytes) > 0
                    ORDER BY sequence LIMIT ?
                    """)
            return try Data.fetchAll(
                statement, arguments: [Data(conversation.bytes), Data(author.bytes), Int64(from), limit]
            ).map { Array($0) }
        }
    }

    /// What `records(conversation:author:from:limit:)` would read, when memory holds all of it: the recent run from
    /// `from`, complete when it is `limit` long or reaches the feed's stored head (as the feed cache has it). Nil
    /// when the store has to be read.
    private func recentRun(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int)
        -> [NatterModel.Record]?
    {
        guard limit > 0 else { return nil }
        let run = recentRecords.run(conversation: conversation, author: author, from: from, limit: limit)
        guard !run.isEmpty else { return nil }
        if run.count == limit { return run }
        let stored = feedCache.feeds(of: conversation)?[author]?.stored
        return stored == from + UInt64(run.count) - 1 ? run : nil
    }

    /// Changes (after the commit) whenever `profileAuthors()` may have: read it first, and while it is unchanged the
    /// authors read are still all there are.
    public var profileAuthorsGeneration: UInt64 { feedCache.profileGeneration }

    /// The authors whose profile feed is applied here, in order: the people this node can name and seal keys to.
    /// Read from `profile_author`, not from a scan of every feed.
    public func profileAuthors() throws -> [AuthorID] {
        try read { db in
            try Data.fetchAll(db.cachedStatement(sql: "SELECT author FROM profile_author ORDER BY author"))
                .map { AuthorID(bytes: $0) }
        }
    }

    /// The conversations of which this node holds records, in order (what a sync summary lists): read from the feed
    /// table's key, without decoding its rows.
    public func conversationsHeld() throws -> [ConversationID] {
        try read { db in
            try Data.fetchAll(
                db.cachedStatement(sql: "SELECT DISTINCT conversation FROM feed WHERE stored_sequence > 0 ORDER BY conversation")
            ).map { ConversationID(bytes: $0) }
        }
    }

    /// Every feed's state, ordered by conversation then author.
    public func feeds() throws -> [FeedState] {
        try read { db in try FeedState.fetchAll(db, conversation: nil) }
    }

    /// The feeds of one conversation, ordered by author.
    public func feeds(of conversation: ConversationID) throws -> [FeedState] {
        if let cached = feedCache.feeds(of: conversation) { return cached.values.sorted { $0.author < $1.author } }
        let generation = feedCache.generation
        let feeds = try read { db in try FeedState.fetchAll(db, conversation: conversation) }
        feedCache.fill(conversation, feeds, generation: generation)
        return feeds
    }

    /// The feeds of one conversation that are not junk, ordered by author: read through an index of those alone, so
    /// thousands of junk feeds (a flood from throwaway identities) cost nothing here.
    public func liveFeeds(of conversation: ConversationID) throws -> [FeedState] {
        if let cached = feedCache.feeds(of: conversation) {
            return cached.values.filter { !$0.isJunk }.sorted { $0.author < $1.author }
        }
        return try read { db in try FeedState.fetchLive(db, conversation: conversation) }
    }

    /// A conversation's applied vector clock: the causal frontier every member converges on. Junk feeds are no part
    /// of it (as they are no dependency of what this node writes).
    public func appliedClock(of conversation: ConversationID) throws -> VectorClock {
        var positions = [AuthorID: UInt64]()
        for feed in try liveFeeds(of: conversation) where feed.applied > 0 { positions[feed.author] = feed.applied }
        return VectorClock(positions)
    }

    /// Fork evidence held for one feed (the contradicting records' bytes).
    public func forkEvidence(conversation: ConversationID, author: AuthorID) throws -> [[UInt8]] {
        try read { db in
            try Data.fetchAll(
                db,
                sql: """
                    SELECT bytes FROM fork_evidence WHERE conversation = ? AND author = ?
                    ORDER BY sequence, record_id
                    """,
                arguments: [Data(conversation.bytes), Data(author.bytes)]
            ).map { Array($0) }
        }
    }

    /// Counts for status lines and the digest command.
    public func statistics() throws -> LogStatistics {
        try read { db in
            let row = try Row.fetchOne(
                db,
                sql: """
                    SELECT (SELECT COUNT(*) FROM record), (SELECT COALESCE(SUM(applied_sequence), 0) FROM feed),
                           (SELECT COUNT(*) FROM feed), (SELECT COUNT(*) FROM feed WHERE fork_sequence IS NOT NULL),
                           (SELECT COUNT(DISTINCT conversation) FROM feed)
                    """)!
            return LogStatistics(
                recordsHeld: row[0], recordsApplied: row[1], feeds: row[2], forkedFeeds: row[3], conversations: row[4])
        }
    }

    /// The log digest: BLAKE2b-256 over every feed in (conversation, author) order of its applied frontier
    /// (sequence and head id) and fork point. Equal on nodes that hold the same records, whatever the arrival
    /// order. Exact definition in docs/protocol.md ("Log digest").
    public func logDigest() throws -> [UInt8] {
        try read { db in
            var hasher = Blake2bHasher(outputBytes: 32)
            hasher.update(Array("natter/v1/log-digest".utf8))
            let cursor = try Row.fetchCursor(
                db,
                sql: """
                    SELECT conversation, author, applied_sequence, applied_head, COALESCE(fork_sequence, 0)
                    FROM feed WHERE applied_sequence > 0 OR fork_sequence IS NOT NULL
                    ORDER BY conversation, author
                    """)
            while let row = try cursor.next() {
                hasher.update(Array(row[0] as Data))
                hasher.update(Array(row[1] as Data))
                hasher.update(bigEndian: UInt64(row[2] as Int64))
                hasher.update(Array(row[3] as Data))
                hasher.update(bigEndian: UInt64(row[4] as Int64))
            }
            return hasher.finalize()
        }
    }
}

/// What happened to one record of an ingest batch.
public enum IngestOutcome: Equatable, Sendable {
    /// New: appended to its feed.
    case stored(RecordID)
    /// Already held (in the feed or as evidence); nothing changed.
    case duplicate(RecordID)
    /// A validly signed record contradicting a held one: kept as evidence, the feed frozen before `forkSequence`.
    case forkEvidence(RecordID, forkSequence: UInt64)
    /// Its feed has a gap: the caller should hold it and fetch from `missingFrom` on.
    case outOfOrder(RecordID, missingFrom: UInt64)
    /// Malformed or wrongly signed: not stored.
    case rejected(RecordFormatError)
}

/// The result of an ingest batch.
public struct IngestReport: Sendable {
    /// One outcome per input, in input order.
    public let outcomes: [IngestOutcome]
    /// Records that became applied, in the order they were applied (causal order), with where they sit.
    public let applied: [RecordRef]
    /// Conversations whose applied state was recomputed from scratch because a fork was discovered.
    public let rebuilt: [ConversationID]
}

/// Sizes of the log.
public struct LogStatistics: Equatable, Sendable {
    public let recordsHeld: Int
    public let recordsApplied: Int
    public let feeds: Int
    public let forkedFeeds: Int
    public let conversations: Int
}

extension RecordStore {
    /// Inserts `records` as bare rows in transactions of `batchSize`, with none of ingest's checks: the SQLite
    /// ceiling that `natter bench` compares full ingest against. Only for an empty scratch store.
    public func insertRowsForBenchmark(_ records: [NatterModel.Record], batchSize: Int) throws {
        var index = 0
        while index < records.count {
            let slice = records[index..<min(index + batchSize, records.count)]
            try writeTransaction { db in
                let statement = try db.cachedStatement(
                    sql: """
                        INSERT INTO record (id, conversation, author, sequence, kind, epoch, lamport, created_ms,
                            received_ms, bytes) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                        """)
                for record in slice {
                    let header = record.header
                    try statement.execute(arguments: [
                        Data(record.id.bytes), Data(header.conversation.bytes), Data(header.author.bytes),
                        Int64(header.sequence), Int64(header.kind.rawValue), Data(header.epoch.bytes),
                        Int64(header.lamport), header.createdAtMillis, 0, Data(record.bytes),
                    ])
                }
            }
            index += slice.count
        }
    }
}

extension RecordStore {
    /// Every applied record of a conversation, in local arrival order. Applied records are causally closed, so
    /// the conversation rules can take them as they are.
    public func appliedRecords(of conversation: ConversationID) throws -> [NatterModel.Record] {
        try read { db in
            try Data.fetchAll(
                db,
                sql: """
                    SELECT r.bytes FROM record r JOIN feed f ON f.conversation = r.conversation AND f.author = r.author
                    WHERE r.conversation = ? AND r.sequence <= f.applied_sequence AND length(r.bytes) > 0
                    ORDER BY r.rowid
                    """,
                arguments: [Data(conversation.bytes)]
            ).map { try NatterModel.Record.decode(Array($0)) }
        }
    }

    /// Ids of every conversation with at least one applied record.
    public func conversationIDs() throws -> [ConversationID] {
        try read { db in
            try Data.fetchAll(
                db, sql: "SELECT DISTINCT conversation FROM feed WHERE applied_sequence > 0 ORDER BY conversation"
            ).map { ConversationID(bytes: Array($0)) }
        }
    }
}

extension RecordStore {
    /// Every stored record in local arrival order (tests and tools; sync streams per feed instead).
    public func allRecords() throws -> [NatterModel.Record] {
        try read { db in
            try Data.fetchAll(db, sql: "SELECT bytes FROM record WHERE length(bytes) > 0 ORDER BY rowid").map {
                try NatterModel.Record.decode(Array($0))
            }
        }
    }
}

extension RecordStore {
    /// Local receive times of the records at these positions (those held), by id.
    public func receiveTimes(of refs: [RecordRef]) throws -> [RecordID: Int64] {
        var times = [RecordID: Int64]()
        var unknown = [RecordRef]()
        for ref in refs {
            if let time = recentRecords.receivedAtMillis(of: ref) { times[ref.id] = time } else { unknown.append(ref) }
        }
        if unknown.isEmpty { return times }
        return try read { db in
            let statement = try db.cachedStatement(
                sql: "SELECT id, received_ms FROM record WHERE conversation = ? AND author = ? AND sequence = ?")
            for ref in unknown {
                guard let row = try Row.fetchOne(statement, arguments: ref.position.arguments),
                    RecordID(bytes: row[0] as Data) == ref.id
                else { continue }
                times[ref.id] = row[1]
            }
            return times
        }
    }

    /// When each applied record of a conversation arrived here (local, viewer-specific time).
    public func receiveTimes(of conversation: ConversationID) throws -> [RecordID: Int64] {
        try read { db in
            var times = [RecordID: Int64]()
            let rows = try Row.fetchCursor(
                db, sql: "SELECT id, received_ms FROM record WHERE conversation = ?",
                arguments: [Data(conversation.bytes)])
            while let row = try rows.next() { times[RecordID(bytes: row[0] as Data)] = row[1] }
            return times
        }
    }
}

extension RecordStore {
    /// Remembers peers named on the command line ("HOST:PORT"), so later starts dial them without being told.
    public func rememberPeers(_ addresses: [String], atMillis: Int64) throws {
        try writeTransaction { db in
            for address in addresses {
                try db.execute(
                    sql: "INSERT OR IGNORE INTO named_peer (address, added_ms) VALUES (?, ?)",
                    arguments: [address, atMillis])
            }
        }
    }

    /// Every remembered peer address, oldest first.
    public func namedPeers() throws -> [String] {
        try read { db in
            try String.fetchAll(db, sql: "SELECT address FROM named_peer ORDER BY added_ms, address")
        }
    }
}

extension RecordPosition {
    /// The arguments of `conversation = ? AND author = ? AND sequence = ?`: the record table's key, in that order.
    var arguments: StatementArguments { [Data(conversation.bytes), Data(author.bytes), Int64(sequence)] }
}
