// Goal: every record the store acknowledged survives a power cut at any moment, which the SIGKILL test cannot show
// because the page cache outlives a killed process. Method: a test VFS (CPowerCutVFS) that drops every write not
// yet fsynced when the power is cut, cuts at seeded random I/O events while the store appends its own records and
// ingests peers' batches, a reopen through `RecordStore.open` after each cut with integrity, presence, contiguity
// and sequence checks, and a negative control with synchronous=NORMAL that must lose acknowledged records.
import CPowerCutVFS
import Foundation
import GRDB
import NatterCrypto
import NatterModel
import NatterStore
import Testing

// The VFS is SQLite's default while a test runs (GRDB has no VFS option and the store builds its own path), so the
// tests run one at a time. Other suites are not affected: only files under the test's own directory are tracked.
@Suite("Power cuts", .serialized)
struct PowerCutTests {
    // MARK: - The VFS itself

    @Test("VFS: a commit never fsynced is gone after a cut, a synced one stays, and the crashed connection is dead")
    func unsyncedWritesAreDropped() throws {
        let directory = try powerCutDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try withPowerCutVFS(over: directory) {
            let path = directory + "/vfs.sqlite"
            var queue: DatabaseQueue? = try DatabaseQueue(path: path)
            try queue!.writeWithoutTransaction { db in
                #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal")
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "CREATE TABLE t (x INTEGER)")
                try db.execute(sql: "INSERT INTO t VALUES (1)")
                try db.execute(sql: "PRAGMA synchronous = OFF")
                try db.execute(sql: "INSERT INTO t VALUES (2)")
            }
            let syncsBefore = powercut_get_stats().syncs
            powercut_simulate()
            let stats = powercut_get_stats()
            #expect(stats.cuts == 1)
            #expect(stats.last_cut_bytes > 0, "the unsynced commit left nothing to take back")
            #expect(stats.syncs == syncsBefore)
            #expect(stats.dead_files == stats.open_files && stats.open_files > 0)
            #expect(throws: (any Error).self) {
                try queue!.write { db in try db.execute(sql: "INSERT INTO t VALUES (3)") }
            }
            queue = nil
            #expect(powercut_reset() == 0)
            let reopened = try DatabaseQueue(path: path)
            #expect(try reopened.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") } == [1])
            #expect(try reopened.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        }
    }

    // In rollback-journal mode SQLite deletes the journal to commit; with synchronous=FULL it does not sync the
    // directory afterwards, so a power cut right after the commit can bring the journal back and roll the
    // transaction back (the SQLite documentation's reason for synchronous=EXTRA). The VFS must reproduce exactly that.
    @Test(
        "VFS: a delete is undone by a cut unless the directory was synced (rollback journal: FULL vs EXTRA)",
        arguments: zip(["FULL", "EXTRA"], [false, true]))
    func deletesNeedADirectorySync(mode: String, survives: Bool) throws {
        let directory = try powerCutDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try withPowerCutVFS(over: directory) {
            let path = directory + "/journal.sqlite"
            var queue: DatabaseQueue? = try DatabaseQueue(path: path)
            try queue!.writeWithoutTransaction { db in
                #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode = DELETE") == "delete")
                try db.execute(sql: "PRAGMA synchronous = \(mode)")
                try db.execute(sql: "CREATE TABLE t (x INTEGER)")
                try db.execute(sql: "PRAGMA synchronous = EXTRA")
                try db.execute(sql: "INSERT INTO t VALUES (1)")
                try db.execute(sql: "PRAGMA synchronous = \(mode)")
                try db.execute(sql: "INSERT INTO t VALUES (2)")
            }
            #expect(!FileManager.default.fileExists(atPath: path + "-journal"))
            powercut_simulate()
            #expect(FileManager.default.fileExists(atPath: path + "-journal") == !survives)
            queue = nil
            #expect(powercut_reset() == 0)
            let reopened = try DatabaseQueue(path: path)
            let rows = try reopened.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") }
            #expect(rows == (survives ? [1, 2] : [1]))
            #expect(try reopened.read { db in try String.fetchOne(db, sql: "PRAGMA integrity_check") } == "ok")
        }
    }

    @Test("VFS: an armed cut fires at the chosen I/O event, and files outside the directory are untouched")
    func armedCutAndUntrackedFiles() throws {
        let directory = try powerCutDirectory()
        let elsewhere = try powerCutDirectory()
        defer {
            try? FileManager.default.removeItem(atPath: directory)
            try? FileManager.default.removeItem(atPath: elsewhere)
        }
        try withPowerCutVFS(over: directory) {
            let other = try DatabaseQueue(path: elsewhere + "/other.sqlite")
            try other.writeWithoutTransaction { db in
                try db.execute(sql: "PRAGMA synchronous = OFF")
                try db.execute(sql: "CREATE TABLE t (x INTEGER)")
            }
            var queue: DatabaseQueue? = try DatabaseQueue(path: directory + "/armed.sqlite")
            try queue!.writeWithoutTransaction { db in
                // WAL, synchronous=FULL: the table's commit is durable when it returns.
                #expect(try String.fetchOne(db, sql: "PRAGMA journal_mode = WAL") == "wal")
                try db.execute(sql: "PRAGMA synchronous = FULL")
                try db.execute(sql: "CREATE TABLE t (x INTEGER)")
            }
            let before = powercut_get_stats()
            powercut_arm(3)
            try other.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
            #expect(powercut_get_stats().events == before.events, "an untracked file's writes were counted")
            #expect(throws: (any Error).self) {
                try queue!.write { db in try db.execute(sql: "INSERT INTO t VALUES (1)") }
            }
            let after = powercut_get_stats()
            #expect(after.cuts == before.cuts + 1)
            #expect(after.events == before.events + 3)
            #expect(after.last_cut_event != 0)
            // The untracked database still works and kept its unsynced row.
            try other.write { db in try db.execute(sql: "INSERT INTO t VALUES (2)") }
            #expect(try other.read { db in try Int.fetchAll(db, sql: "SELECT x FROM t ORDER BY x") } == [1, 2])
            queue = nil
            #expect(powercut_reset() == 0)
            let reopened = try DatabaseQueue(path: directory + "/armed.sqlite")
            #expect(try reopened.read { db in try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM t") } == 0)
        }
    }

    // MARK: - The store

    @Test("a power cut at 60 seeded moments loses no acknowledged record and never reuses a sequence number")
    func acknowledgedRecordsSurvivePowerCuts() throws {
        let report = try runPowerCutScenario(seed: 0x5EED_0001, lives: 60, forceNormal: false)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.acknowledgedLost == 0, "acknowledged records lost in \(report.livesLosingAcknowledged) lives")
        #expect(report.sequenceReuses == 0)
        #expect(report.cuts >= 50)
        #expect(Set(report.cutPoints).count >= 50, "cuts landed at only \(Set(report.cutPoints).count) distinct points")
        #expect(report.positionsInOperation.count >= 20, "\(report.positionsInOperation.sorted())")
        // The cuts hit every phase and both kinds of I/O, and took back real data.
        #expect(report.cutsByPhase["open", default: 0] >= 1)
        #expect(report.cutsByPhase["append", default: 0] >= 10)
        #expect(report.cutsByPhase["ingest", default: 0] >= 10)
        #expect(report.cutsByEvent[1, default: 0] >= 10, "few cuts interrupted a write")
        #expect(report.cutsByEvent[3, default: 0] >= 5, "few cuts interrupted an fsync")
        #expect(report.cutsTakingBackData >= 40)
        #expect(report.acknowledgedChecked >= 300)
        print("power cuts, synchronous=FULL: \(report.summary)")
    }

    @Test("deferred ingests: a power cut takes back only what no syncDeferred or fsynced append has covered yet")
    func deferredIngestsAreDurableOnceSynced() throws {
        let report = try runPowerCutScenario(seed: 0x5EED_0002, lives: 60, forceNormal: false, deferIngests: true)
        #expect(report.problems.isEmpty, "\(report.problems)")
        #expect(report.acknowledgedLost == 0, "acknowledged records lost in \(report.livesLosingAcknowledged) lives")
        #expect(report.sequenceReuses == 0)
        #expect(report.cuts >= 50)
        // Deferred ingests were acknowledged through both routes, and cuts did take back deferred records not yet
        // synced: the deferral is real (a store that fsynced them anyway would pass the first checks too).
        #expect(report.deferredAcknowledgedBySync >= 20)
        #expect(report.deferredAcknowledgedByAppend >= 20)
        #expect(report.deferredLost >= 1, "no cut took back an unsynced deferred ingest")
        print("power cuts, deferred ingests: \(report.summary); \(report.deferredLost) unsynced deferred records lost")
    }

    @Test("negative control: with synchronous=NORMAL the same power cuts do lose acknowledged records")
    func normalSynchronousLosesRecords() throws {
        let report = try runPowerCutScenario(seed: 0x5EED_0001, lives: 20, forceNormal: true)
        // WAL with NORMAL does not fsync a commit, so a cut takes back records already acknowledged.
        #expect(report.livesLosingAcknowledged >= 1)
        #expect(report.acknowledgedLost >= 1)
        // Unsynced is not corrupt: the file is still sound and every feed still a contiguous chain.
        #expect(report.problems.isEmpty, "\(report.problems)")
        print("power cuts, synchronous=NORMAL (negative control): \(report.summary)")
    }
}

// MARK: - Scenario

/// What one scenario run saw.
struct PowerCutReport {
    var cuts = 0
    var cutsByPhase: [String: Int] = [:]
    /// By the I/O event interrupted: 1 write, 2 truncate, 3 sync, 4 delete.
    var cutsByEvent: [Int32: Int] = [:]
    /// Where each cut landed: after how many acknowledged operations, in which phase, after how many I/O events of
    /// the interrupted operation.
    var cutPoints: [String] = []
    /// The distinct (phase, I/O events into the operation) positions cuts landed at.
    var positionsInOperation: Set<String> = []
    var ingestBatches = 0
    var cutsTakingBackData = 0
    var acknowledgedChecked = 0
    var acknowledgedLost = 0
    var livesLosingAcknowledged = 0
    var sequenceReuses = 0
    var cleanRestarts = 0
    var ownAcknowledged = 0
    var ingestAcknowledged = 0
    /// Deferred ingests acknowledged when a later `syncDeferred`, or a later fsynced append, returned.
    var deferredAcknowledgedBySync = 0
    var deferredAcknowledgedByAppend = 0
    /// Deferred records never acknowledged that a cut took back.
    var deferredLost = 0
    var problems: [String] = []

    var summary: String {
        "\(cuts) cuts \(cutsByPhase.sorted { $0.key < $1.key }), by event \(cutsByEvent.sorted { $0.key < $1.key }), "
            + "\(Set(cutPoints).count) distinct points, \(positionsInOperation.count) positions in an operation, "
            + "\(cutsTakingBackData) took back data; \(ownAcknowledged) own appends and \(ingestAcknowledged) "
            + "ingested records acknowledged, \(cleanRestarts) clean restarts; \(acknowledgedLost) acknowledged "
            + "records lost in \(livesLosingAcknowledged) lives, \(sequenceReuses) sequence numbers reused"
    }
}

/// One node's store in a data directory on the power-cut VFS. Each "life" powers on (open through
/// `RecordStore.open`), checks what survived, appends one own record (which must not reuse a sequence number),
/// sometimes restarts cleanly, then arms a cut at a seeded random I/O event and appends own records and ingests
/// peers' batches until the power goes. Only operations that returned before the cut count as acknowledged.
func runPowerCutScenario(seed: UInt64, lives: Int, forceNormal: Bool, deferIngests: Bool = false) throws
    -> PowerCutReport
{
    let directory = try powerCutDirectory()
    defer { try? FileManager.default.removeItem(atPath: directory) }
    return try withPowerCutVFS(over: directory) {
        var scenario = try PowerCutScenario(
            directory: directory, seed: seed, forceNormal: forceNormal, deferIngests: deferIngests)
        for life in 0..<lives { try scenario.live(life) }
        return scenario.report
    }
}

private struct PowerCutScenario {
    let directory: String
    let forceNormal: Bool
    /// Half the ingests commit `.deferred`; their records count as acknowledged only once a `syncDeferred` or an
    /// own append (an fsynced commit after them in the WAL) returns.
    let deferIngests: Bool
    var rng: SeededGenerator
    let me: LocalIdentity
    let conversations: [ConversationID]
    /// In-memory authors whose records the store ingests; each writes only its own feed, so its records apply.
    let peers: [Writer]
    /// Per peer and conversation, the records it has written so far, in sequence order.
    var peerRecords: [[[NatterModel.Record]]]
    /// Per peer and conversation, how many of its records the store holds (as far as this scenario knows).
    var delivered: [[Int]]
    var ownAcknowledged: [ConversationID: [UInt64: RecordID]] = [:]
    /// Every own record ever acknowledged, kept even when a cut lost it (the negative control), to catch reuse.
    var ownEverAcknowledged: [ConversationID: [UInt64: RecordID]] = [:]
    /// Ingested records whose batch returned: id → (conversation, author, sequence).
    var ingestAcknowledged: [RecordID: (ConversationID, AuthorID, UInt64)] = [:]
    /// Deferred ingests not yet covered by a sync: not acknowledged.
    var deferredPending: [RecordID: (ConversationID, AuthorID, UInt64)] = [:]
    var clock: Int64 = 1_700_000_000_000
    var report = PowerCutReport()

    init(directory: String, seed: UInt64, forceNormal: Bool, deferIngests: Bool) throws {
        self.directory = directory
        self.forceNormal = forceNormal
        self.deferIngests = deferIngests
        rng = SeededGenerator(seed: seed)
        me = try Writer(seed: seed ^ 0xFFFF).identity
        conversations = [conversationID("powercut/a"), conversationID("powercut/b")]
        peers = try (1...3).map { try Writer(seed: seed &+ UInt64($0)) }
        peerRecords = Array(repeating: Array(repeating: [], count: conversations.count), count: peers.count)
        delivered = Array(repeating: Array(repeating: 0, count: conversations.count), count: peers.count)
    }

    /// Opens the store the way the node does; in the negative control, then forces synchronous=NORMAL.
    func open() throws -> RecordStore {
        let store = try RecordStore.open(directory: directory)
        if forceNormal {
            try store.writer.writeWithoutTransaction { db in try db.execute(sql: "PRAGMA synchronous = NORMAL") }
        }
        return store
    }

    mutating func live(_ life: Int) throws {
        // Power on, unarmed: everything acknowledged must be there.
        var store: RecordStore? = try open()
        try verify(store!, life: life)
        guard try appendOwn(store!, life: life) else {
            throw TestFailure("life \(life): an unarmed append saw a power cut")
        }
        // Sometimes restart cleanly first: closing checkpoints and deletes the WAL without syncing the directory,
        // and the armed cut may then land inside `RecordStore.open`.
        var phase = "open"
        let cutsBefore = powercut_get_stats().cuts
        if Int.random(in: 0..<5, using: &rng) == 0 {
            store = nil
            report.cleanRestarts += 1
        }
        // The cut: mostly at any write, truncation, sync or delete; in some lives right at a commit's fsync, and
        // after a clean restart often within the first few events, inside `RecordStore.open`.
        if store == nil && Int.random(in: 0..<3, using: &rng) > 0 {
            powercut_arm(Int64.random(in: 1...6, using: &rng))
        } else if Int.random(in: 0..<3, using: &rng) == 0 {
            powercut_arm_at_sync(Int64.random(in: 1...8, using: &rng))
        } else {
            powercut_arm(Int64.random(in: 1...150, using: &rng))
        }
        var operationStart = powercut_get_stats().events
        var acknowledgedBefore = report.ownAcknowledged + report.ingestBatches
        do {
            if store == nil { store = try open() }
            var operations = 0
            while powercut_get_stats().cuts == cutsBefore {
                operationStart = powercut_get_stats().events
                acknowledgedBefore = report.ownAcknowledged + report.ingestBatches
                operations += 1
                if operations > 40 {
                    // The armed event has not come (with synchronous=NORMAL syncs are rare): cut between two
                    // operations instead.
                    phase = "idle"
                    powercut_simulate()
                    break
                }
                if Bool.random(using: &rng) {
                    phase = "append"
                    _ = try appendOwn(store!, life: life)
                } else {
                    phase = "ingest"
                    try ingestBatch(store!, life: life)
                }
            }
        } catch {
            // The operation the power cut interrupted fails, as it must, and is not acknowledged. Anything else is
            // a real failure.
            guard powercut_get_stats().cuts != cutsBefore else { throw error }
        }
        // The crashed connections are closed (they can do nothing but fail); then the power comes back.
        store = nil
        let dead = powercut_reset()
        guard dead == 0 else { throw TestFailure("life \(life): \(dead) crashed SQLite handles are still open") }
        let stats = powercut_get_stats()
        report.cuts += 1
        report.cutsByPhase[phase, default: 0] += 1
        report.cutsByEvent[stats.last_cut_event, default: 0] += 1
        let within = stats.events - operationStart
        report.cutPoints.append("after \(acknowledgedBefore) acknowledged operations, \(phase) event \(within)")
        report.positionsInOperation.insert("\(phase) event \(within)")
        if stats.last_cut_bytes > 0 || stats.last_cut_names > 0 { report.cutsTakingBackData += 1 }
    }

    /// Appends an own record; returns false when the power was cut before it returned (not acknowledged).
    mutating func appendOwn(_ store: RecordStore, life: Int) throws -> Bool {
        let conversation = conversations[Int.random(in: 0..<conversations.count, using: &rng)]
        clock += 1000
        let cutsBefore = powercut_get_stats().cuts
        let record = try store.appendOwn(
            conversation: conversation, kind: .content, epoch: testEpoch, createdAtMillis: clock,
            identity: me.signing
        ) { header in Array("own record \(header.sequence)".utf8) }
        guard powercut_get_stats().cuts == cutsBefore else { return false }
        let sequence = record.header.sequence
        if let earlier = ownEverAcknowledged[conversation]?[sequence], earlier != record.id {
            report.sequenceReuses += 1
        }
        ownAcknowledged[conversation, default: [:]][sequence] = record.id
        ownEverAcknowledged[conversation, default: [:]][sequence] = record.id
        report.ownAcknowledged += 1
        report.deferredAcknowledgedByAppend += acknowledgeDeferred()
        return true
    }

    /// Ingests the next few records of one or two peer feeds (sometimes with an old one again) in one batch.
    mutating func ingestBatch(_ store: RecordStore, life: Int) throws {
        var batch = [NatterModel.Record]()
        var advanced = [(peer: Int, conversation: Int, count: Int)]()
        for _ in 0..<Int.random(in: 1...2, using: &rng) {
            let peer = Int.random(in: 0..<peers.count, using: &rng)
            let conversation = Int.random(in: 0..<conversations.count, using: &rng)
            guard !advanced.contains(where: { $0.peer == peer && $0.conversation == conversation }) else { continue }
            let from = delivered[peer][conversation]
            let count = Int.random(in: 1...4, using: &rng)
            while peerRecords[peer][conversation].count < from + count {
                peerRecords[peer][conversation].append(try peers[peer].write(conversations[conversation], "peer"))
            }
            if from > 0 && Int.random(in: 0..<4, using: &rng) == 0 {
                batch.append(peerRecords[peer][conversation][Int.random(in: 0..<from, using: &rng)])
            }
            batch += peerRecords[peer][conversation][from..<(from + count)]
            advanced.append((peer, conversation, count))
        }
        let cutsBefore = powercut_get_stats().cuts
        let durability: RecordStore.IngestDurability = deferIngests && Bool.random(using: &rng) ? .deferred : .synced
        let outcome = try store.ingest(batch.map(\.bytes), receivedAtMillis: clock, durability: durability)
        guard powercut_get_stats().cuts == cutsBefore else { return }
        report.ingestBatches += 1
        for (record, result) in zip(batch, outcome.outcomes) {
            switch result {
            case .stored, .duplicate:
                let header = record.header
                if durability == .deferred {
                    deferredPending[record.id] = (header.conversation, header.author, header.sequence)
                } else {
                    ingestAcknowledged[record.id] = (header.conversation, header.author, header.sequence)
                    report.ingestAcknowledged += 1
                }
            default:
                report.problems.append("life \(life): ingest of a peer record gave \(result)")
            }
        }
        for (peer, conversation, count) in advanced { delivered[peer][conversation] += count }
        if durability == .deferred && Bool.random(using: &rng) {
            try store.syncDeferred()
            guard powercut_get_stats().cuts == cutsBefore else { return }
            report.deferredAcknowledgedBySync += acknowledgeDeferred()
        }
    }

    /// A sync (or fsynced commit) returned: every deferred ingest so far is acknowledged. How many records.
    mutating func acknowledgeDeferred() -> Int {
        let count = deferredPending.count
        for (id, position) in deferredPending where ingestAcknowledged[id] == nil {
            ingestAcknowledged[id] = position
            report.ingestAcknowledged += 1
        }
        deferredPending = [:]
        return count
    }

    /// After power-on: the file is sound, every feed is a contiguous chain fully applied, and every acknowledged
    /// record is held with its id. Lost records are counted (and forgotten, so later lives are judged afresh).
    mutating func verify(_ store: RecordStore, life: Int) throws {
        let integrity = try store.integrityCheck()
        if integrity != "ok" { report.problems.append("life \(life): integrity_check says \(integrity)") }
        var held = [String: RecordID]()  // "conversation/author/sequence" → id
        // Peers' feeds resume from what the store holds (a feed it no longer has at all, from the beginning).
        delivered = Array(repeating: Array(repeating: 0, count: conversations.count), count: peers.count)
        for feed in try store.feeds() {
            let records = try store.records(
                conversation: feed.conversation, author: feed.author, from: 1, limit: Int(feed.stored) + 1)
            var previous = RecordID.none
            for (index, record) in records.enumerated() {
                if record.header.sequence != UInt64(index + 1) || record.header.previous != previous {
                    report.problems.append("life \(life): feed \(feed.author) breaks at sequence \(index + 1)")
                    break
                }
                previous = record.id
                held["\(feed.conversation)/\(feed.author)/\(index + 1)"] = record.id
            }
            if records.count != Int(feed.stored) || previous != feed.storedHead {
                report.problems.append(
                    "life \(life): feed \(feed.author) claims \(feed.stored) records, holds \(records.count)")
            }
            if feed.applied != feed.stored || feed.forkSequence != nil || feed.stalledReason != nil {
                report.problems.append("life \(life): feed \(feed.author) not fully applied: \(feed)")
            }
            for (peer, writer) in peers.enumerated() where writer.author == feed.author {
                delivered[peer][conversations.firstIndex(of: feed.conversation)!] = Int(feed.stored)
            }
        }
        // Deferred records that no sync covered are not acknowledged: a cut may take them (counted, then forgotten).
        for (_, (conversation, author, sequence)) in deferredPending
        where held["\(conversation)/\(author)/\(sequence)"] == nil {
            report.deferredLost += 1
        }
        deferredPending = [:]
        var lost = 0
        for (conversation, records) in ownAcknowledged {
            for (sequence, id) in records {
                report.acknowledgedChecked += 1
                if held["\(conversation)/\(me.author)/\(sequence)"] != id {
                    lost += 1
                    ownAcknowledged[conversation]![sequence] = nil
                }
            }
        }
        for (id, (conversation, author, sequence)) in ingestAcknowledged {
            report.acknowledgedChecked += 1
            if held["\(conversation)/\(author)/\(sequence)"] != id {
                lost += 1
                ingestAcknowledged[id] = nil
            }
        }
        if lost > 0 {
            report.acknowledgedLost += lost
            report.livesLosingAcknowledged += 1
        }
    }
}

// MARK: - Helpers

/// A fresh directory for a power-cut test.
func powerCutDirectory() throws -> String {
    let path = FileManager.default.temporaryDirectory.appendingPathComponent("natter-powercut-\(UUID().uuidString)")
        .path
    try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    return path
}

/// Runs `body` with the power-cut VFS installed over `directory`, removing it afterwards even when `body` throws.
func withPowerCutVFS<T>(over directory: String, _ body: () throws -> T) throws -> T {
    let installed = powercut_install(directory)
    guard installed == 0 else { throw TestFailure("cannot install the power-cut VFS: SQLite code \(installed)") }
    defer {
        let stillOpen = powercut_uninstall()
        #expect(stillOpen == 0, "\(stillOpen) tracked files were still open when the power-cut VFS was removed")
    }
    return try body()
}
