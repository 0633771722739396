import NatterModel

/// What a run really exercised: the rare interleavings a sweep claims to cover, counted as they happen (or, for
/// the races, read from the ledger at the end), so that a sweep's summary shows it did not pass vacuously.
public struct LabCoverage: Sendable, Equatable {
    /// Feeds that forked: a twin wrote at a sequence its original had written too.
    public var forks = 0
    /// Removals raced by a message of the member removed, written before it could know (concurrent removals).
    public var racedRemovals = 0
    public var partitions = 0
    /// Partitions that struck, and partition heals that came, while some link was in its initial exchange.
    public var partitionsMidSync = 0
    public var healsMidSync = 0
    /// Links cut by a fault (reset, partition, crash) after their handshake and before their initial exchange
    /// finished.
    public var linksCutMidSync = 0
    public var crashes = 0
    /// Crashes while a batch of records (RECORDS or PRIORITY RECORDS) was in flight to or from the node, or
    /// deliveries waited for its ingest.
    public var crashesMidBatch = 0
    /// Epoch-opening commits (adds, removals, re-keys) concurrent with a message, reaction or receipt of another
    /// member, written under the epoch they replace.
    public var rekeysRacingMessages = 0
    public var lateJoins = 0

    public init() {}

    /// Each counter with its name, in a fixed order (report lines, JSON, sweep totals).
    public var counts: [(name: String, count: Int)] {
        [
            ("forks", forks), ("raced removals", racedRemovals), ("partitions", partitions),
            ("partitions mid-sync", partitionsMidSync), ("heals mid-sync", healsMidSync),
            ("links cut mid-sync", linksCutMidSync), ("crashes", crashes), ("crashes mid-batch", crashesMidBatch),
            ("re-keys racing a message", rekeysRacingMessages), ("late joins", lateJoins),
        ]
    }

    public static func == (lhs: Self, rhs: Self) -> Bool { lhs.counts.map(\.count) == rhs.counts.map(\.count) }
}

extension Simulation {
    /// Whether some link is in its initial exchange (established, its sync not caught up yet on one side).
    func hasSyncInProgress() -> Bool {
        nodes.contains { !$0.syncing.isEmpty }
    }

    /// A fault ends `connection` (reset, partition, crash): counts it if it cut an initial exchange.
    func noteCut(_ connection: Connection) {
        let midSync = (0..<2).contains { side in
            nodes[connection.nodes[side]].syncing.contains(connection.link(side))
        }
        if midSync { coverage.linksCutMidSync += 1 }
    }

    /// Node `index` is about to crash: counts it, and whether a batch was in flight or waiting.
    func noteCrash(_ index: Int) {
        coverage.crashes += 1
        let node = nodes[index]
        let inFlight = node.ends.values.contains { id in
            connections[id]?.directions.contains { $0.carriesRecords } ?? false
        }
        if inFlight || (node.core?.hasIngestDue(now: now) ?? false) { coverage.crashesMidBatch += 1 }
    }

    /// Reads the races of the run from the ledger: removals raced by their member's message, and epoch-opening
    /// commits concurrent with another member's operation (neither had applied the other when it was written).
    func countRaces() {
        let operations = (0..<ledger.count).filter { ledger[$0].kind.isContent }
        for position in 0..<ledger.count where ledger[position].kind.opensEpoch {
            let commit = ledger[position]
            let racing = operations.contains { other in
                let operation = ledger[other]
                guard operation.author != commit.author else { return false }
                let commitSeen = commit.appliedAt[operation.author].map { $0 <= operation.publishedAt } ?? false
                let operationSeen = operation.appliedAt[commit.author].map { $0 <= commit.publishedAt } ?? false
                return !commitSeen && !operationSeen
            }
            if racing { coverage.rekeysRacingMessages += 1 }
        }
    }
}

extension OperationKind {
    /// A message, reaction or receipt (a record under an epoch's key, of any member).
    var isContent: Bool {
        switch self {
        case .message, .reaction, .receipt, .raced, .twin: true
        case .profile, .create, .add, .remove, .rekey: false
        }
    }

    /// A commit that opens an epoch.
    var opensEpoch: Bool {
        switch self {
        case .create, .add, .remove, .rekey: true
        case .profile, .message, .reaction, .receipt, .raced, .twin: false
        }
    }
}
