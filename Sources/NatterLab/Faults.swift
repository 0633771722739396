import NatterModel
import NatterNode
import NatterStore

/// Every fault of a run, drawn before it starts: from the count options (`--crash K`, `--stalls N`, `--partition`),
/// from the seed (`--random-faults`), and named one by one (`--fault`).
///
/// The draw uses a generator of its own, so the rest of the run draws the same numbers whether the faults were
/// drawn or named: a random-faults run and the explicit schedule it reports (`materialized`) are the same run.
struct FaultPlan: Equatable {
    var faults: [LabFault] = []
    var resetRate = 0.0
    var duplicateDials = 0.0
    var churn = false
    var lateJoiners = 0

    /// Draws the plan of `configuration`.
    init(_ configuration: LabConfiguration) {
        var draw = SeededGenerator(seed: Simulation.derive(configuration.seed, 0xFA17))
        func unit() -> Double { Double(draw.next() >> 11) / Double(1 << 53) }
        func millis(_ lower: Duration, _ upper: Duration) -> Duration {
            let (low, high) = (nanoseconds(lower) / 1_000_000, nanoseconds(upper) / 1_000_000)
            return .milliseconds(Int64.random(in: low...max(low, high), using: &draw))
        }
        let duration = configuration.duration
        resetRate = configuration.resetRate
        duplicateDials = configuration.duplicateDials
        churn = configuration.churn
        lateJoiners = configuration.lateJoiners
        var windows = configuration.partitions
        var crashes = configuration.crashes
        var crashRestarts = configuration.crashRestarts
        var stalls = configuration.stalls
        var twins = 0
        if configuration.randomFaults {
            resetRate = unit() * 0.3
            duplicateDials = unit() * 0.3
            // Up to two partitions of at most 3 s each, one after the other, healed before the workload ends.
            windows = []
            var earliest = Duration.zero
            for _ in 0..<Int.random(in: 0...2, using: &draw) {
                let latest = duration * 7 / 10
                guard earliest < latest else { break }
                let at = millis(earliest, latest)
                let longest = min(.seconds(3), duration - at)
                let window = LabWindow(start: at, length: millis(longest / 10, longest))
                windows.append(window)
                earliest = window.start + window.length + .milliseconds(200)
            }
            let nodes = configuration.nodes
            // Membership faults: churn (with a message racing each removal) in one seed out of four, a late joiner in
            // one out of five, a twin (a fork) in one out of five with `randomForks` (drawn either way, so that
            // turning forks on changes nothing else of a seed).
            churn = churn || (nodes >= 4 && unit() < 0.25)
            if lateJoiners == 0, nodes >= 5, unit() < 0.2 { lateJoiners = 1 }
            let initial = nodes - lateJoiners
            crashRestarts = min(Int.random(in: 0...2, using: &draw), initial - 2)
            crashes = initial >= 4 && unit() < 0.2 ? 1 : 0
            stalls = Int.random(in: 0...3, using: &draw)
            let twin = unit() < 0.2
            twins = configuration.randomForks && initial >= 3 && twin ? 1 : 0
        }
        let initial = configuration.nodes - lateJoiners
        for window in windows {
            var order = Array(0..<configuration.nodes).shuffled(using: &draw)
            order.removeLast(configuration.nodes - configuration.nodes / 2)
            faults.append(.partition(at: window.start, length: window.length, apart: order.sorted()))
        }
        var victims = Array(0..<initial).shuffled(using: &draw)
        for count in 0..<(crashes + crashRestarts) where !victims.isEmpty {
            let victim = victims.removeFirst()
            let at = millis(duration / 10, duration * 9 / 10)
            let restartAfter: Duration? = count < crashes ? nil : millis(.milliseconds(500), .seconds(3))
            faults.append(.crash(node: victim, at: at, restartAfter: restartAfter))
        }
        for _ in 0..<stalls {
            faults.append(.stall(at: millis(.zero, duration), length: millis(.milliseconds(500), .seconds(4))))
        }
        for _ in 0..<twins {
            // A backup of an initial member other than the creator, restored as a second node 0.3–1.5 s later.
            let node = Int.random(in: 1..<initial, using: &draw)
            let length = millis(.milliseconds(300), .milliseconds(1_500))
            guard length < duration * 8 / 10 else { continue }
            faults.append(.twin(node: node, at: millis(.zero, duration * 8 / 10 - length), length: length))
        }
        faults += configuration.faults
    }

    /// The explicit configuration that replays `configuration` with this plan: the same run, faults named one by
    /// one (what `natter lab shrink` starts from).
    func materialized(_ configuration: LabConfiguration) -> LabConfiguration {
        var explicit = configuration
        explicit.randomFaults = false
        explicit.randomForks = false
        explicit.partitions = []
        explicit.crashes = 0
        explicit.crashRestarts = 0
        explicit.stalls = 0
        explicit.faults = faults
        explicit.resetRate = resetRate
        explicit.duplicateDials = duplicateDials
        explicit.churn = churn
        explicit.lateJoiners = lateJoiners
        return explicit
    }

    /// The twin faults, in order: each gets a node of its own after the configured ones.
    var twins: [(node: Int, at: Duration, length: Duration)] {
        faults.compactMap { if case .twin(let node, let at, let length) = $0 { (node, at, length) } else { nil } }
    }
}

extension Simulation {
    // MARK: - Scheduling the plan

    /// Schedules every fault of the plan from the workload's start.
    func scheduleFaults(start: Duration) {
        resetRate = plan.resetRate
        duplicateDials = plan.duplicateDials
        if resetRate > 0 || duplicateDials > 0 {
            faultTrace.append(
                "during the workload: \(formatPercent(resetRate)) of chunks reset their link, "
                    + "\(formatPercent(duplicateDials)) of dials duplicated")
        }
        var twin = configuration.nodes
        for (number, fault) in plan.faults.enumerated() {
            switch fault {
            case .partition(let at, let length, _):
                push(.partitionStart(number), at: start + at)
                push(.partitionEnd(number), at: start + at + length)
            case .crash(let node, let at, let restartAfter):
                push(.crash(node, restartAfter: restartAfter), at: start + at)
            case .stall(let at, let length):
                push(.stall(length: length), at: start + at)
            case .twin(_, let at, let length):
                push(.twinBackup(twin), at: start + at)
                push(.twinStart(twin), at: start + at + length)
                twin += 1
            }
        }
    }

    // MARK: - Partitions

    func partitionStart(_ number: Int) {
        guard case .partition(_, let length, let apart) = plan.faults[number] else { return }
        var side = [Int](repeating: 0, count: nodes.count)
        if let apart {
            for index in apart { side[index] = 1 }
        } else {
            for index in Array(0..<configuration.nodes).shuffled(using: &rng).prefix(configuration.nodes / 2) {
                side[index] = 1
            }
        }
        // A twin stands on the side of the node it copies.
        for (twin, original) in twinOf { side[twin] = side[original] }
        coverage.partitions += 1
        if hasSyncInProgress() { coverage.partitionsMidSync += 1 }
        partitionSide = side
        activePartition = number
        partitionSpans.append(LabWindow(start: now, length: length))
        let names = nodes.indices.filter { side[$0] == 1 }.map { nodes[$0].name }
        faultTrace.append(
            "\(formatSeconds(now)) partition for \(formatDuration(length)): {\(names.joined(separator: " "))} apart")
        for id in connections.keys.sorted() {
            guard let connection = connections[id], partitioned(connection.nodes[0], connection.nodes[1]) else {
                continue
            }
            endConnection(connection, notify: [0: .zero, 1: .zero])
        }
    }

    func partitionEnd(_ number: Int) {
        guard let side = partitionSide, activePartition == number else { return }
        partitionSide = nil
        partitionHeals.append(now)
        if hasSyncInProgress() { coverage.healsMidSync += 1 }
        if let last = partitionSpans.indices.last { partitionSpans[last].length = now - partitionSpans[last].start }
        faultTrace.append("\(formatSeconds(now)) partition healed")
        // Discovery: the other side's beacons are heard again, and every node with room dials one of them.
        for index in nodes.indices where nodes[index].isUp && nodes[index].ends.count < configuration.degreeMax {
            let across = dialCandidates(index).filter { side[$0] != side[index] }
            if !across.isEmpty { dial(index, across[Int.random(in: 0..<across.count, using: &rng)]) }
        }
    }

    // MARK: - Stalls

    func stall(length: Duration) {
        guard faultsActive else { return }
        let open = connections.keys.sorted().filter { connections[$0]!.ends == [.open, .open] }
        guard !open.isEmpty else { return }
        let connection = connections[open[Int.random(in: 0..<open.count, using: &rng)]]!
        faultTrace.append(
            "\(formatSeconds(now)) stall \(nodes[connection.nodes[0]].name)–\(nodes[connection.nodes[1]].name) "
                + "for \(formatDuration(length))")
        for side in 0..<2 {
            connection.directions[side].stalledUntil = max(connection.directions[side].stalledUntil, now + length)
        }
    }

    // MARK: - Crashes

    /// The process dies: links and memory are gone, the store stays.
    func crash(_ index: Int, restartAfter: Duration?) {
        let node = nodes[index]
        guard node.isUp, faultsActive else { return }
        faultTrace.append("\(formatSeconds(now)) crash \(node.name)" + (restartAfter == nil ? " for good" : ""))
        crashTimes.append(now)
        noteCrash(index)
        stop(index, for: restartAfter == nil ? .dead : .crashed)
        if let restartAfter { push(.restart(index), at: now + restartAfter) }
    }

    /// Ends node `index`'s process: its core and links go, its store stays.
    func stop(_ index: Int, for phase: SimNode.Phase) {
        let node = nodes[index]
        if let core = node.core {
            node.deliveredBefore += core.recordsDelivered
            node.newBefore += core.recordsNew
            node.messagesByKindBefore.merge(core.messagesSentByKind, uniquingKeysWith: +)
        }
        node.core = nil
        node.phase = phase
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
    }

    func restart(_ index: Int) {
        let node = nodes[index]
        guard node.phase == .crashed else { return }
        faultTrace.append("\(formatSeconds(now)) restart \(node.name)")
        node.phase = .up
        node.backoff.reset()
        node.core = makeCore(node)
        scheduleDialCheck(index, after: .zero)
        scheduleExplore(index)
    }

    // MARK: - Twins (forks)

    /// A backup of the twin's original is taken: a copy of its store as it is now.
    func twinBackup(_ twin: Int) {
        guard let original = twinOf[twin], faultsActive else { return }
        do {
            nodes[twin].store = try nodes[original].store.copy()
            // The copy holds what the original applied: the twin applied it too, as of now.
            for position in 0..<ledger.count where ledger[position].appliedAt[original] != nil {
                ledger.applied(ledger[position].id, by: twin, at: now)
            }
            faultTrace.append("\(formatSeconds(now)) backup of \(nodes[original].name)")
        } catch {
            fail("could not copy \(nodes[original].name)'s store: \(error)")
        }
    }

    /// The backup starts as a second node with the same identity and writes a message at once: if its original
    /// wrote since the backup, the two forked. It runs until the heal, when it is switched off for good.
    func twinStart(_ twin: Int) {
        guard let original = twinOf[twin], faultsActive, let group else { return }
        let node = nodes[twin]
        guard node.phase == .waiting else { return }
        node.phase = .up
        node.startedAt = now
        node.core = makeCore(node)
        faultTrace.append("\(formatSeconds(now)) \(node.name) starts from the backup of \(nodes[original].name)")
        do {
            let record = try node.core!.conversations.send("from the backup of \(nodes[original].name)", in: group,
                now: millis(now))
            ledger.add(record, author: twin, kind: .twin, at: now)
            perform(twin, node.core!.published([record], now: now))
        } catch {
            refused["twin: \(error)", default: 0] += 1
        }
        scheduleDialCheck(twin, after: LabLimits.firstDialDelay)
        scheduleExplore(twin)
    }

    /// Every twin running at the heal is switched off for good.
    func stopTwins() {
        for twin in twinOf.keys.sorted() where nodes[twin].isUp {
            faultTrace.append("\(formatSeconds(now)) \(nodes[twin].name) switched off")
            stop(twin, for: .dead)
        }
    }
}

func formatPercent(_ fraction: Double) -> String {
    formatFixed(fraction * 100, 1) + "%"
}
