import Foundation
import NatterCrypto
public import NatterModel
import NatterNetwork
import NatterNode
import NatterStore
import Synchronization

/// The network benchmarks of `natter bench` (docs/performance.md): two real nodes in one process, each with its
/// own SQLite file on disk, linked over loopback TCP through the real transport, Noise channel and sync session.
public enum NetworkBench {
    /// Longest a benchmark waits for a link or for the other node before giving up (a broken build, not a slow one).
    static let waitLimit: Duration = .seconds(300)

    public struct CatchUpResult: Sendable {
        /// From the link's `peerUp` on the fresh node to its `caughtUp`.
        public let seconds: Double
        public let recordsHeld: Int
        public let recordsApplied: Int
    }

    /// A fresh node pulls `records` from a node that holds them: the time from link up to caught up.
    public static func catchUp(records: [Record], in directory: String) async throws -> CatchUpResult {
        let source = try openStore(directory + "/source")
        var index = 0
        while index < records.count {
            let slice = records[index..<min(index + 5_000, records.count)]
            _ = try source.store.ingest(slice.map(\.bytes), receivedAtMillis: 0)
            index += slice.count
        }
        let fresh = try openStore(directory + "/fresh")
        let (sourceNode, freshNode) = try await linkedPair(listening: source, dialling: fresh)
        let clock = ContinuousClock()
        let watcher = Task { () -> (ContinuousClock.Instant, ContinuousClock.Instant)? in
            var linked: ContinuousClock.Instant?
            for await event in freshNode.events {
                switch event {
                case .peerUp: linked = linked ?? clock.now
                case .caughtUp: if let linked { return (linked, clock.now) }
                case .linkFailed(_, let reason): print("catch-up: link failed: \(reason)")
                default: break
                }
            }
            return nil
        }
        let times = try await running([sourceNode, freshNode]) { await watcher.value }
        guard let (linked, caughtUp) = times else { throw BenchError("the fresh node never caught up") }
        let statistics = try fresh.store.statistics()
        return CatchUpResult(
            seconds: seconds(caughtUp - linked), recordsHeld: statistics.recordsHeld,
            recordsApplied: statistics.recordsApplied)
    }

    public struct LatencyResult: Sendable {
        /// Send on one node → stored (committed, applied, reported) on the other, one message at a time, in
        /// milliseconds.
        public let millis: [Double]
        /// Send → durable on the other node: its store synced the commit (`Node.observeSyncs`), which it does
        /// before it sends anything in the same turn.
        public let durableMillis: [Double]
        /// `appendOwn` alone (sign, seal, one committed and fsynced transaction) on the sending node.
        public let appendMillis: [Double]
    }

    /// `messages` group messages sent one at a time, `pause` apart, between two nodes in this process: the time
    /// from the call to `send` until the other node reports the record applied (ingested and committed), and until
    /// its store synced it. `LatencyPeer.sendLatency` is the same with the receiver in another process.
    public static func sendLatency(messages: Int, pause: Duration, in directory: String) async throws -> LatencyResult {
        let sender = try openStore(directory + "/sender")
        let receiver = try openStore(directory + "/receiver")
        _ = try Conversations(store: sender.store, identity: sender.identity).publishProfile(
            name: "Sender", now: WallClock.nowMillis())
        _ = try Conversations(store: receiver.store, identity: receiver.identity).publishProfile(
            name: "Receiver", now: WallClock.nowMillis())
        let (senderNode, receiverNode) = try await linkedPair(listening: sender, dialling: receiver)
        // Each arrival is timed on the receiving node as it reports the record applied (its transaction committed),
        // not when the probe gets round to reading the report: on two cores, the sender's table refresh (which
        // follows the send) and the receiver's turn can hold both while the record is already stored.
        let reports = LatencyReports()
        await receiverNode.observeEvents { event, _ in
            if case .applied(let refs) = event { reports.applied(refs.map(\.id), at: monotonicNanos()) }
        }
        await receiverNode.observeSyncs { _ in reports.synced(at: monotonicNanos()) }
        return try await running([senderNode, receiverNode]) {
            try await probe(
                from: senderNode, to: receiver.identity.author, reports: reports, messages: messages, pause: pause)
        }
    }

    /// Nanoseconds on the machine-wide monotonic clock: one clock for every process on the machine.
    static func monotonicNanos() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// What the receiving node reported, stamped with `monotonicNanos` where it happened: each record it applied and
    /// each sync of its store (from its observers in this process, or from a child's report lines), and, for a
    /// child, who it is and where it listens.
    final class LatencyReports: Sendable {
        struct State {
            var author: AuthorID?
            var port: Int?
            var applied: [RecordID: Int64] = [:]
            var syncs: [Int64] = []
            /// The reporter is gone (a child exited): waiting is over.
            var ended = false
        }
        let state = Mutex(State())

        func applied(_ ids: [RecordID], at nanos: Int64) {
            state.withLock { for id in ids { $0.applied[id] = nanos } }
        }

        func synced(at nanos: Int64) { state.withLock { $0.syncs.append(nanos) } }

        /// Waits (bounded by `waitLimit`) until `ready` finds what it needs in the reports.
        func wait<T>(_ what: String, _ ready: (inout State) -> T?) async throws -> T {
            let start = ContinuousClock.now
            while true {
                if let value = state.withLock({ ready(&$0) }) { return value }
                guard !state.withLock({ $0.ended }) else { throw BenchError("the receiver stopped before \(what)") }
                guard ContinuousClock.now - start < waitLimit else { throw BenchError("no \(what) in time") }
                try await Task.sleep(for: .microseconds(100))
            }
        }
    }

    /// The probe loop of both send-latency modes: once `node` holds the receiver's profile, founds a group with it,
    /// then sends `messages` one at a time, `pause` apart, each timed from the call to `send` until `reports` has it
    /// applied and then synced on the receiver.
    static func probe(
        from node: Node, to receiver: AuthorID, reports: LatencyReports, messages: Int, pause: Duration
    ) async throws -> LatencyResult {
        // The sender needs the receiver's profile (its encryption key) before it can found the group.
        let profileWait = ContinuousClock.now
        while try await !node.read({ try $0.hasProfile(receiver) }) {
            guard ContinuousClock.now - profileWait < waitLimit else { throw BenchError("the nodes never linked") }
            try await Task.sleep(for: .milliseconds(10))
        }
        let founding = try await node.author(.createGroup(title: "bench", members: [receiver]))
        let group = founding.conversation
        for record in founding.records {
            _ = try await reports.wait("the founding records") { $0.applied[record.id] }
        }
        var millis = [Double]()
        var durableMillis = [Double]()
        var appendMillis = [Double]()
        for number in 0..<messages {
            let start = monotonicNanos()
            let record = try await node.author(.send("latency probe \(number)", in: group)).record
            appendMillis.append(Double(monotonicNanos() - start) / 1e6)
            let arrival = try await reports.wait("probe \(number)") { $0.applied[record.id] }
            millis.append(Double(arrival - start) / 1e6)
            // The receiver syncs in the turn that stored it, before that turn's sends.
            let synced = try await reports.wait("the sync of probe \(number)") { state in
                state.syncs.first { $0 >= arrival }
            }
            durableMillis.append(Double(synced - start) / 1e6)
            reports.state.withLock { $0.syncs.removeAll { $0 < arrival } }
            // Chat pace rather than a flood: the nodes finish rewriting their conversation tables (which follows
            // delivery, off the measured path) before the next message.
            try await Task.sleep(for: pause)
        }
        return LatencyResult(millis: millis, durableMillis: durableMillis, appendMillis: appendMillis)
    }

    // MARK: - Plumbing

    /// The benchmarks time the ingest path, not the quotas (SPEC F16: "scripts and benchmarks can raise" them): no
    /// per-link or per-author rate holds a catch-up back (by default a link brings 2,000 new records a second after
    /// a burst of 20,000), and the fresh node — not a member of the benchmark conversation, so a relay for it — may
    /// hold all of it (by default 64 MiB, less than 100,000 records).
    static var benchQuotas: QuotaConfiguration {
        var quotas = QuotaConfiguration()
        quotas.peerRecordsPerSecond = 1e9
        quotas.peerRecordsBurst = 1 << 40
        quotas.authorRecordsPerSecond = 1e9
        quotas.authorRecordsBurst = 1 << 40
        quotas.relayBytesMax = 1 << 40
        return quotas
    }

    /// Two nodes on loopback under one fresh network key, without discovery: the second dials the first.
    private static func linkedPair(
        listening first: (identity: LocalIdentity, store: RecordStore),
        dialling second: (identity: LocalIdentity, store: RecordStore)
    ) async throws -> (Node, Node) {
        let networkKey = NetworkKey.generate()
        let loopback = PeerAddress(host: "127.0.0.1", port: 0)
        let listener = try await Node(
            store: first.store, identity: first.identity, networkKey: networkKey, listen: loopback, peers: [],
            discovery: nil, quotas: benchQuotas)
        let dialler = try await Node(
            store: second.store, identity: second.identity, networkKey: networkKey, listen: loopback,
            peers: [PeerAddress(host: "127.0.0.1", port: listener.port)], discovery: nil, quotas: benchQuotas)
        return (listener, dialler)
    }

    static func openStore(_ path: String) throws -> (identity: LocalIdentity, store: RecordStore) {
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        let identity = LocalIdentity.generate()
        let store = try RecordStore.open(directory: path)
        try store.bind(to: identity.author, directory: path)
        return (identity, store)
    }

    /// Runs `nodes` while `body` runs, then shuts them down. A watchdog shuts them down after `waitLimit`, which
    /// ends their event streams and so every wait on them.
    static func running<T: Sendable>(_ nodes: [Node], _ body: () async throws -> T) async throws -> T {
        let tasks = nodes.map { node in Task { await node.run() } }
        let watchdog = Task {
            try await Task.sleep(for: waitLimit)
            for node in nodes { await node.shutdown() }
        }
        defer {
            watchdog.cancel()
            for task in tasks { task.cancel() }
        }
        do {
            let result = try await body()
            for node in nodes { await node.shutdown() }
            return result
        } catch {
            for node in nodes { await node.shutdown() }
            throw error
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }
}

public struct BenchError: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}
