import NatterCrypto
import NatterModel
import NatterNode
import NatterStore

/// The discrete-event simulator: real `NodeCore`s over in-memory stores, joined by simulated TCP connections, on a
/// virtual clock, with every decision drawn from one seeded generator.
///
/// One run goes through four phases. **Setup**: the initial nodes start, dial each other and exchange profiles;
/// once the first node (the group's creator) holds every profile it founds a group of all of them, and the
/// workload starts when every node has applied it. **Workload**: operations at the configured rate, and the faults.
/// **Heal**: every fault ends, crashed nodes that restart do so. **Settle**: the run continues until every live node
/// applied every record a live node holds (converged) or `LabLimits.settleMax` passes. Checkers and metrics read the
/// final state (`LabSimulation.report()`).
final class Simulation {
    enum Phase: Equatable { case setup, workload, settle, done }

    enum Event {
        case start(Int)
        case dialCheck(Int, incarnation: Int, generation: UInt64)
        case explore(Int, incarnation: Int)
        case connectArrive(UInt64)
        case connectEstablished(UInt64)
        case dialFailed(UInt64)
        case deliver(UInt64, side: Int)
        case notify(Int, incarnation: Int, link: LinkID)
        case tick(Int, incarnation: Int, generation: UInt64)
        case setupProbe
        case operation
        case membershipProbe
        /// The partition at this index of the plan's faults starts, or ends.
        case partitionStart(Int)
        case partitionEnd(Int)
        case crash(Int, restartAfter: Duration?)
        case restart(Int)
        case stall(length: Duration)
        /// The twin node at this index: its original's store is copied, or the copy starts.
        case twinBackup(Int)
        case twinStart(Int)
        case churnRemove
        case heal
        /// After the heal, while forks remain unknown to some node: checks again.
        case forkProbe
    }

    let configuration: LabConfiguration
    var rng: SeededGenerator
    let entropy: LabEntropy.Source
    let networkKey = NetworkKey.defaultNetwork
    var now = Duration.zero
    var queue = EventQueue<Event>()
    var nodes: [SimNode] = []
    var connections: [UInt64: Connection] = [:]
    var nextConnection: UInt64 = 1
    var phase = Phase.setup
    var eventsProcessed = 0

    // MARK: Faults
    /// Every fault of the run, drawn before it starts.
    let plan: FaultPlan
    /// The side of each node while a partition is on (nil: no partition).
    var partitionSide: [Int]?
    var activePartition: Int?
    var faultsActive = false
    var faultTrace: [String] = []
    var resetRate = 0.0
    var duplicateDials = 0.0
    /// Each twin node (after the configured ones) and the node whose backup it runs.
    var twinOf: [Int: Int] = [:]

    // MARK: Workload
    var ledger: Ledger
    var group: ConversationID?
    var createPosition: Int?
    var workloadStart: Duration?
    var healAt: Duration?
    var convergedAt: Duration?
    var pendingCopies = 0
    /// Per node, the ledger position of the commit that made it a member (nil: not a member now).
    var membership: [Int?]
    var lateJoiners: Set<Int> = []
    /// Removed members and when the creator adds them back (churn).
    var readmitAt: [Int: Duration] = [:]
    /// The ledger position of each member's latest removal (kept when it is added back: `membership` then holds the
    /// later add). The checkers expect whichever of the two last reached the network.
    var removed: [Int: Int] = [:]
    var recentMessages: [Int] = []
    var refused: [String: Int] = [:]
    var partitionHeals: [Duration] = []
    var partitionSpans: [LabWindow] = []
    var crashTimes: [Duration] = []
    var failures: [String] = []

    // MARK: Metrics
    var framesSetup = 0
    var framesMeasured = 0
    var bytesMeasured = 0
    var framesByNodeAtStart: [Int] = []
    var deliveredAtStart = 0
    var newAtStart = 0
    /// Frames of every node by kind at the workload's start (handshake messages and goodbyes as "handshake").
    var framesByKindAtStart: [String: Int] = [:]
    var dialsRefusedAtCap = 0
    var resetsInjected = 0
    var rotations = 0
    /// Connections a node is leaving (rotation): not picked again while their grace period runs.
    var retiring: Set<UInt64> = []
    /// A planted fault for the checkers' tests: flip one byte of the n-th chunk sent after the workload starts.
    var corruptChunk: Int?
    var chunksSinceWorkload = 0
    var honestPeersBlamed = 0
    var firstBlame: String?
    var maxDegreeSeen = 0
    var maxCausalBufferSeen = 0
    var spotChecks = 0
    /// The workload's first deliveries over `configuration.slowThreshold` (`LabReport.slow`).
    var slow: [LabReport.SlowDelivery] = []
    var overlayAtStart: OverlayShape?
    var overlayAtEnd: OverlayShape?
    var coverage = LabCoverage()
    /// Records applied on a node before one of their dependencies, and the first.
    var causalViolations = 0
    var firstCausalViolation: String?
    /// The frames the message-sequence diagram shows (nil: none drawn).
    var sequence: SequenceLog?
    /// Kinds of the application messages each node's core sealed in the input being handled, per link, with their
    /// bytes, in order (`NodeCore.sentMessageTap`): `perform` matches them to the sends.
    var sealed: [LinkID: [(kind: String, bytes: [UInt8])]] = [:]
    /// Called with each step of every node's turns as it is carried out (the test that compares the lab's turns with
    /// the node actor's: `Node.observeTurns`).
    var turnObserver: ((Int, TurnPlan.Step) -> Void)?
    /// The drop-record variant dropped its record.
    var droppedRecord = false
    /// The diagram's window, until the workload starts when it starts there.
    var sequenceWindow: SequenceWindow?

    init(_ configuration: LabConfiguration, sequence window: SequenceWindow? = nil) throws {
        precondition(configuration.problem == nil, configuration.problem ?? "")
        self.configuration = configuration
        plan = FaultPlan(configuration)
        rng = SeededGenerator(seed: configuration.seed)
        entropy = LabEntropy.Source(seed: Self.derive(configuration.seed, 0xE17))
        let signatureMemo = configuration.sharedSignatureChecks ? SignatureMemo() : nil
        let twins = plan.twins
        let count = configuration.nodes + twins.count
        ledger = Ledger(nodes: count)
        membership = Array(repeating: nil, count: count)
        for index in 0..<configuration.nodes {
            var keys = SeededGenerator(seed: Self.derive(configuration.seed, UInt64(index) &+ 0x1D))
            let identity = LocalIdentity(
                signing: try IdentityKeyPair(seed: keys.bytes(32)),
                encryption: try EncryptionKeyPair(secret: keys.bytes(32)))
            nodes.append(
                SimNode(
                    index: index, name: "n\(index)", identity: identity,
                    store: try RecordStore.inMemory(signatureMemo: signatureMemo)))
        }
        // A twin runs its original's identity on a copy of its store (copied when the backup is taken).
        for twin in twins {
            let index = nodes.count
            twinOf[index] = twin.node
            nodes.append(
                SimNode(
                    index: index, name: "n\(twin.node)'", identity: nodes[twin.node].identity,
                    store: try RecordStore.inMemory(signatureMemo: signatureMemo)))
        }
        if let window {
            let drawn = window.nodes ?? Array(0..<min(configuration.nodes, LabLimits.sequenceNodesMax))
            sequenceWindow = window
            if let from = window.from { sequence = SequenceLog(window: window, start: from, nodes: drawn) }
        }
        // Late joiners are the last nodes; the creator is node 0.
        lateJoiners = Set((configuration.nodes - plan.lateJoiners)..<configuration.nodes)
        for node in nodes[..<configuration.nodes] where !lateJoiners.contains(node.index) {
            // Processes start within the first 50 ms.
            push(.start(node.index), at: .microseconds(Int64.random(in: 0..<50_000, using: &rng)))
        }
        push(.setupProbe, at: LabLimits.setupProbeInterval)
    }

    /// A seed for a sub-stream: the node keys, a node core's generator, libsodium's bytes.
    static func derive(_ seed: UInt64, _ salt: UInt64) -> UInt64 {
        var generator = SeededGenerator(seed: seed ^ (salt &* 0x9E37_79B9_7F4A_7C15))
        return generator.next()
    }

    func push(_ event: Event, at time: Duration) {
        precondition(time >= now, "events are never scheduled in the past")
        queue.push(event, at: time)
    }

    func fail(_ message: String) {
        failures.append("\(formatSeconds(now)): \(message)")
    }

    // MARK: - Running

    /// Runs until converged after the heal, or a bound.
    func run() {
        LabEntropy.bind(entropy) {
            while phase != .done, let (time, event) = queue.pop() {
                now = time
                eventsProcessed += 1
                handle(event)
                if phase == .setup, now > LabLimits.setupMax {
                    fail("setup did not finish within \(formatDuration(LabLimits.setupMax)): \(setupProblem())")
                    phase = .done
                } else if phase == .settle, let healAt, now > healAt + LabLimits.settleMax {
                    fail(
                        "not converged \(formatDuration(LabLimits.settleMax)) after the heal: "
                            + "\(pendingCopies) record copies missing (\(missingExample()))")
                    phase = .done
                }
                if eventsProcessed >= LabLimits.eventsMax {
                    fail("stopped after \(LabLimits.eventsMax) events")
                    phase = .done
                }
            }
            if phase != .done {
                fail("the event queue ran dry")
                phase = .done
            }
        }
    }

    private func handle(_ event: Event) {
        switch event {
        case .start(let node): start(node)
        case .dialCheck(let node, let incarnation, let generation):
            guard nodes[node].incarnation == incarnation, nodes[node].dialCheckGeneration == generation else { return }
            nodes[node].dialCheckAt = nil
            dialCheck(node)
        case .explore(let node, let incarnation):
            guard nodes[node].incarnation == incarnation, nodes[node].isUp else { return }
            explore(node)
        case .connectArrive(let id): connectArrive(id)
        case .connectEstablished(let id): connectEstablished(id)
        case .dialFailed(let id): dialFailed(id)
        case .deliver(let id, let side): deliver(id, side: side)
        case .notify(let node, let incarnation, let link):
            guard nodes[node].incarnation == incarnation else { return }
            notifyClosed(node, link)
        case .tick(let node, let incarnation, let generation):
            guard nodes[node].incarnation == incarnation, nodes[node].tickGeneration == generation else { return }
            nodes[node].tickAt = nil
            feed(node, .tick)
        case .setupProbe: setupProbe()
        case .operation: operation()
        case .membershipProbe: membershipProbe()
        case .partitionStart(let index): partitionStart(index)
        case .partitionEnd(let index): partitionEnd(index)
        case .crash(let node, let restartAfter): crash(node, restartAfter: restartAfter)
        case .restart(let node): restart(node)
        case .stall(let length): stall(length: length)
        case .twinBackup(let twin): twinBackup(twin)
        case .twinStart(let twin): twinStart(twin)
        case .churnRemove: churnRemove()
        case .heal: heal()
        case .forkProbe: forkProbe()
        }
    }

    // MARK: - Nodes

    private func start(_ index: Int) {
        let node = nodes[index]
        guard node.phase == .waiting else { return }
        node.phase = .up
        node.startedAt = now
        node.core = makeCore(node)
        do {
            let profile = try node.core!.conversations.publishProfile(name: node.name, now: millis(now))
            ledger.add(profile, author: index, kind: .profile, at: now)
            perform(index, node.core!.published([profile], now: now))
        } catch {
            fail("\(node.name) could not publish its profile: \(error)")
        }
        scheduleDialCheck(index, after: LabLimits.firstDialDelay)
        scheduleExplore(index)
    }

    func makeCore(_ node: SimNode) -> NodeCore {
        let seed = Self.derive(configuration.seed, 0xC0DE &+ UInt64(node.index) &* 1_000 &+ UInt64(node.incarnation))
        var configuration = NodeConfiguration()
        // As the node actor drives its core: the driver refreshes the tables after a turn's sends (`RefreshPacing`,
        // in `perform`) unless the run says otherwise, and a turn's ingests are made durable before its sends
        // (`TurnPlan`; the in-memory store's sync is instant).
        configuration.conversationRefreshDelay = self.configuration.refreshDelay
        configuration.ingestDurability = .deferred
        configuration.syncPushInterval = self.configuration.pushInterval
        // The node's own receipts and re-keys (node policy, shipped defaults) only in the chat setting: in the
        // Maelstrom setting the workload writes every record, and the figures (docs/lab.md) are of that workload.
        configuration.receipts.enabled = self.configuration.nodeReceipts
        let core = NodeCore(
            store: node.store, identity: node.identity, networkKey: networkKey, configuration: configuration,
            random: SeededGenerator(seed: seed))
        node.pacing = RefreshPacing()  // a process that starts has refreshed nothing yet
        // Each sealed message's kind, for the frame it travels in (coverage, diagram).
        core.sentMessageTap = { [unowned self] link, kind, bytes in self.sealed[link, default: []].append((kind, bytes)) }
        return core
    }

    // MARK: - Helpers

    /// One-way delay of a chunk or a connection step: the latency plus uniform jitter.
    func oneWay() -> Duration {
        let jitter = nanoseconds(configuration.jitter)
        guard jitter > 0 else { return configuration.latency }
        return configuration.latency + .nanoseconds(Int64.random(in: 0...jitter, using: &rng))
    }

    /// A uniform fraction in [0, 1).
    func unit() -> Double { Double(rng.next() >> 11) / Double(1 << 53) }

    /// A uniform duration in `lower...upper`.
    func uniform(_ lower: Duration, _ upper: Duration) -> Duration {
        .nanoseconds(Int64.random(in: nanoseconds(lower)...max(nanoseconds(lower), nanoseconds(upper)), using: &rng))
    }

    /// A uniform duration in `lower...upper`, in whole milliseconds (fault plans read better in traces).
    func uniformMillis(_ lower: Duration, _ upper: Duration) -> Duration {
        let (low, high) = (nanoseconds(lower) / 1_000_000, nanoseconds(upper) / 1_000_000)
        return .milliseconds(Int64.random(in: low...max(low, high), using: &rng))
    }

    func millis(_ time: Duration) -> Int64 {
        // Creation times are shown, never trusted: a fixed epoch (2024-01-01) plus simulated time.
        1_704_067_200_000 + nanoseconds(time) / 1_000_000
    }
}
