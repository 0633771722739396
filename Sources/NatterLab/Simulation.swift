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
        case partitionStart(Int)
        case partitionEnd(Int)
        case crash(Int, restartAfter: Duration?)
        case restart(Int)
        case stall
        case churnRemove
        case heal
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
    /// The side of each node while a partition is on (nil: no partition).
    var partitionSide: [Int]?
    var activePartition: Int?
    var faultsActive = false
    var faultTrace: [String] = []
    /// The faults as configured or drawn (random faults fill these in at the workload's start).
    var plannedPartitions: [LabWindow] = []
    var resetRate = 0.0
    var duplicateDials = 0.0

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
    /// Members the creator removed and has not added back.
    var removed: Set<Int> = []
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
    var overlayAtStart: OverlayShape?
    var overlayAtEnd: OverlayShape?

    init(_ configuration: LabConfiguration) throws {
        precondition(configuration.problem == nil, configuration.problem ?? "")
        self.configuration = configuration
        rng = SeededGenerator(seed: configuration.seed)
        entropy = LabEntropy.Source(seed: Self.derive(configuration.seed, 0xE17))
        ledger = Ledger(nodes: configuration.nodes)
        membership = Array(repeating: nil, count: configuration.nodes)
        for index in 0..<configuration.nodes {
            var keys = SeededGenerator(seed: Self.derive(configuration.seed, UInt64(index) &+ 0x1D))
            let identity = LocalIdentity(
                signing: try IdentityKeyPair(seed: keys.bytes(32)),
                encryption: try EncryptionKeyPair(secret: keys.bytes(32)))
            nodes.append(
                SimNode(index: index, name: "n\(index)", identity: identity, store: try RecordStore.inMemory()))
        }
        // Late joiners are the last nodes; the creator is node 0.
        lateJoiners = Set((configuration.nodes - configuration.lateJoiners)..<configuration.nodes)
        for node in nodes where !lateJoiners.contains(node.index) {
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
        case .stall: stall()
        case .churnRemove: churnRemove()
        case .heal: heal()
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
            ledger.add(profile.ref, author: index, kind: .profile, at: now)
            perform(index, node.core!.published([profile], now: now))
        } catch {
            fail("\(node.name) could not publish its profile: \(error)")
        }
        scheduleDialCheck(index, after: LabLimits.firstDialDelay)
        scheduleExplore(index)
    }

    private func makeCore(_ node: SimNode) -> NodeCore {
        let seed = Self.derive(configuration.seed, 0xC0DE &+ UInt64(node.index) &* 1_000 &+ UInt64(node.incarnation))
        var configuration = NodeConfiguration()
        configuration.conversationRefreshDelay = LabLimits.conversationRefreshDelay
        configuration.syncPushInterval = self.configuration.pushInterval
        // The node's own receipts and re-keys (node policy) are off in the lab for now: its workloads write the
        // receipts they measure, and its figures (docs/lab.md) are of that workload. Sharing the shipped policy is
        // issue 20's next step.
        configuration.receipts.enabled = false
        return NodeCore(
            store: node.store, identity: node.identity, networkKey: networkKey, configuration: configuration,
            random: SeededGenerator(seed: seed))
    }

    /// The process dies: links and memory are gone, the store stays.
    private func crash(_ index: Int, restartAfter: Duration?) {
        let node = nodes[index]
        guard node.isUp, faultsActive else { return }
        faultTrace.append("\(formatSeconds(now)) crash \(node.name)" + (restartAfter == nil ? " for good" : ""))
        crashTimes.append(now)
        if let core = node.core {
            node.deliveredBefore += core.recordsDelivered
            node.newBefore += core.recordsNew
            node.messagesByKindBefore.merge(core.messagesSentByKind, uniquingKeysWith: +)
        }
        node.core = nil
        node.phase = restartAfter == nil ? .dead : .crashed
        node.everCrashed = true
        node.incarnation += 1
        node.tickAt = nil
        node.dialCheckAt = nil
        for link in node.ends.keys.sorted() {
            guard let connection = connections[Connection.connection(of: link)] else { continue }
            let side = Connection.side(of: link)
            connection.ends[side] = .gone
            // The peer's kernel sees the connection end one way later.
            endConnection(connection, notify: [1 - side: oneWay()])
        }
        node.ends = [:]
        if let restartAfter { push(.restart(index), at: now + restartAfter) }
    }

    func restart(_ index: Int) {
        let node = nodes[index]
        guard node.phase == .crashed else { return }
        faultTrace.append("\(formatSeconds(now)) restart \(node.name)")
        node.phase = .up
        node.failures = 0
        node.core = makeCore(node)
        scheduleDialCheck(index, after: .zero)
        scheduleExplore(index)
    }

    // MARK: - Feeding the cores

    /// Hands one input to a node's core and carries out its actions.
    func feed(_ index: Int, _ input: NodeInput) {
        guard let core = nodes[index].core else { return }
        perform(index, core.handle(input, now: now))
    }

    /// Carries out a core's actions, then checks its bounds and schedules its next tick.
    func perform(_ index: Int, _ actions: [NodeAction]) {
        let node = nodes[index]
        for action in actions {
            switch action {
            case .send(let link, let bytes):
                node.framesSent += 1
                if phase == .setup {
                    framesSetup += 1
                } else {
                    framesMeasured += 1
                    bytesMeasured += bytes.count
                    node.bytesSent += bytes.count
                }
                send(index, link, bytes)
            case .close(let link):
                close(index, link)
            case .event(let event):
                observe(index, event)
            }
        }
        guard let core = node.core else { return }
        let peers = core.connectedPeers.count
        maxDegreeSeen = max(maxDegreeSeen, peers)
        if peers > configuration.degreeMax {
            fail("\(node.name) has \(peers) established peers, above the cap of \(configuration.degreeMax)")
        }
        let buffered = core.causalBufferCount
        maxCausalBufferSeen = max(maxCausalBufferSeen, buffered)
        if buffered > core.configuration.causalBufferRecordsMax {
            fail(
                "\(node.name) buffers \(buffered) records, above its bound \(core.configuration.causalBufferRecordsMax)"
            )
        }
        scheduleTick(index)
    }

    private func scheduleTick(_ index: Int) {
        let node = nodes[index]
        guard let deadline = node.core?.nextDeadline() else { return }
        let at = max(deadline, now)
        if let scheduled = node.tickAt, scheduled <= at { return }
        if at == now {
            node.ticksAtSameInstant += 1
            precondition(node.ticksAtSameInstant < 1_000, "\(node.name) asks for a tick at the same instant forever")
        } else {
            node.ticksAtSameInstant = 0
        }
        node.tickAt = at
        node.tickGeneration += 1
        push(.tick(index, incarnation: node.incarnation, generation: node.tickGeneration), at: at)
    }

    private func observe(_ index: Int, _ event: NodeEvent) {
        switch event {
        case .peerUp:
            nodes[index].failures = 0
        case .applied(let refs):
            for ref in refs { noteApplied(ref, by: index) }
        case .linkFailed(let link, let reason):
            // Timeouts are the network's doing; anything else means a core judged an honest peer faulty (a stream
            // the lab corrupted, or a core bug).
            if reason != "handshake timed out", !reason.hasPrefix("sync: nothing heard") {
                honestPeersBlamed += 1
                firstBlame = firstBlame ?? "\(formatSeconds(now)) \(nodes[index].name) \(link): \(reason)"
            }
        case .peerDown, .caughtUp, .syncProgress, .conversation, .profile, .notice, .misbehaved, .file, .typing:
            break
        }
    }

    private func noteApplied(_ ref: RecordRef, by index: Int) {
        let node = nodes[index]
        node.appliedEvents += 1
        if node.appliedEvents % LabLimits.spotCheckEvery == 0 { spotCheck(ref, on: index) }
        guard let position = ledger.applied(ref.id, by: index, at: now) else { return }
        if phase == .settle, ledger[position].mustReach, node.isUp {
            pendingCopies -= 1
            if pendingCopies == 0 { converged() }
        }
    }

    /// The store's guarantee, checked now and then: an applied record's feed predecessor and dependencies are
    /// applied too.
    private func spotCheck(_ ref: RecordRef, on index: Int) {
        let id = ref.id
        let store = nodes[index].store
        spotChecks += 1
        do {
            guard let record = try store.record(ref) else {
                fail("\(nodes[index].name) reported \(id) applied but does not hold it")
                return
            }
            let feeds = try store.feeds(of: record.header.conversation)
            func applied(_ author: AuthorID) -> UInt64 { feeds.first { $0.author == author }?.applied ?? 0 }
            if applied(record.header.author) < record.header.sequence {
                fail("\(nodes[index].name) reported \(id) applied beyond its feed's applied prefix")
            }
            for dependency in record.header.dependencies where applied(dependency.author) < dependency.sequence {
                fail(
                    "\(nodes[index].name) applied \(id) before its dependency "
                        + "\(dependency.author)#\(dependency.sequence)"
                )
            }
        } catch {
            fail("\(nodes[index].name): store read failed: \(error)")
        }
    }

    // MARK: - Setup

    private func setupProbe() {
        guard phase == .setup else { return }
        let creator = nodes[0]
        let initial = nodes.filter { !lateJoiners.contains($0.index) }
        if group == nil, let core = creator.core {
            let others = initial.dropFirst().map(\.author)
            let holdsAll = others.allSatisfy { (try? core.conversations.profile(of: $0)) != nil }
            if holdsAll {
                do {
                    let id = try core.conversations.createGroup(title: "lab", members: others, now: millis(now))
                    let records = try creator.store.appliedRecords(of: id)
                    group = id
                    for record in records {
                        createPosition = ledger.add(record.ref, author: 0, kind: .create, at: now)
                    }
                    for node in initial { membership[node.index] = createPosition }
                    perform(0, core.published(records, now: now))
                } catch {
                    fail("the creator could not found the group: \(error)")
                    phase = .done
                    return
                }
            }
        }
        let formed = initial.allSatisfy { node in
            (node.core?.connectedPeers.count ?? 0) >= min(configuration.degreeTarget, initial.count - 1)
        }
        if let createPosition, initial.allSatisfy({ ledger[createPosition].appliedAt[$0.index] != nil }),
            formed || now >= LabLimits.overlayFormationMax
        {
            beginWorkload()
        } else {
            push(.setupProbe, at: now + LabLimits.setupProbeInterval)
        }
    }

    private func setupProblem() -> String {
        guard let createPosition else {
            let core = nodes[0].core
            let missing = nodes.dropFirst().filter { node in
                !lateJoiners.contains(node.index) && (try? core?.conversations.profile(of: node.author)) == nil
            }
            return "the creator lacks the profiles of \(missing.map(\.name).joined(separator: " "))"
        }
        let missing = nodes.filter {
            !lateJoiners.contains($0.index) && ledger[createPosition].appliedAt[$0.index] == nil
        }
        return "the group has not reached \(missing.map(\.name).joined(separator: " "))"
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
