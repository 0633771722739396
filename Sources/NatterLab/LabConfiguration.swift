import Foundation
internal import NatterSync

/// Every bound and default of the lab, each with its reason.
public enum LabLimits {
    /// Links a node keeps at most (DESIGN §5's degree cap): 6. No node becomes a hub whose crash cuts the rest
    /// apart. The cap bounds the diameter from below: at cap 4 the lab's 25-node overlays had a diameter of 6–7
    /// hops, so at 100 ms per hop no dissemination could deliver everything within 600 ms (the Maelstrom
    /// setting); at 6 (target 5) they have 3–4 hops, and each node's share of the forwarding stays near 1/N.
    public static let degreeMax = 6

    /// Slow deliveries a report lists at most (`LabConfiguration.slowThreshold`): 20, the first ones.
    public static let slowDeliveriesMax = 20

    /// How long a node that starts listens before its first dials: 200 ms, one interval of discovery's start burst
    /// (`DiscoveryLimits.burstInterval`). It then picks its first peers at random among every node it heard, instead
    /// of dialling the first few to answer: when many nodes start together, dialling at once links the earliest
    /// starters to each other up to the cap (a clique joined to the rest by a few links, 5 hops across 25 nodes),
    /// while waiting gives a random graph (3 hops; docs/lab.md).
    public static let firstDialDelay: Duration = .milliseconds(200)

    /// Links a node dials towards: 5, one below the cap, so every node keeps room to accept a newcomer (a late
    /// joiner, a node that lost its links, the other side of a healed partition).
    public static let degreeTarget = 5

    /// A dial across a partition fails after 1 s: the SYN gets no answer. (Real TCP waits much longer; natter's
    /// dialler will give up early on a LAN, and the lab assumes it does.)
    public static let connectTimeout: Duration = .seconds(1)

    /// Mean interval at which a node below the cap dials one more random peer: 5 s. It fills the slot between the
    /// target and the cap slowly, so the graph keeps mixing without constant churn.
    public static let exploreInterval: Duration = .seconds(5)

    /// A node at the cap drops a random link at one exploration in 12 (every minute on average). Without it, a
    /// group of nodes whose links all point at each other, all at the cap, would stay cut off from the rest for
    /// good (the lab's overlay has no other way to notice). Rare, because a dropped link loses the pushes queued
    /// on it and the new link costs a handshake and a summary round: each rotation adds latency to the records in
    /// flight (every 15 s on average raised the 25-node maximum latency from about 1 s to 1.6 s).
    public static let rotationOdds = 12

    /// Longest the setup waits for every initial node to reach the degree target before the workload starts
    /// anyway: 10 s. The figures describe a formed overlay, not its first second.
    public static let overlayFormationMax: Duration = .seconds(10)

    /// How often the lab checks, during setup, whether the group's creator holds every profile: every 50 ms.
    public static let setupProbeInterval: Duration = .milliseconds(50)

    /// Longest setup (profiles reach the creator, the group reaches every node): 60 s simulated. On a healthy
    /// network it takes well under a second; beyond this the run fails with what was missing.
    public static let setupMax: Duration = .seconds(60)

    /// Longest the lab waits after the heal for convergence: 90 s simulated, three anti-entropy rounds (30 s
    /// each), so whatever live push missed gets two full rounds of repair.
    public static let settleMax: Duration = .seconds(90)

    /// Nodes per run: 2 to 256, what one group holds (`groupMembersMax`): the workload is a group of every node.
    /// 256 in-memory stores of a 20 s run fit in well under 2 GiB.
    public static let nodesRange = 2...256

    /// Workload operations per run: 1,000,000. The ledger keeps one latency slot per operation and node.
    public static let operationsMax = 1_000_000

    /// Events one run may process: 500 million, so a livelock ends as a failure instead of hanging the machine.
    public static let eventsMax = 500_000_000

    /// Every this many applied records per node, the lab checks that the record's dependencies are applied in that
    /// node's store (a spot check of the store's guarantee; checking every record would double the run time).
    public static let spotCheckEvery = 16

    /// Latest messages a reaction may target: 32 (recent chat, as people react).
    public static let reactionCandidates = 32

    /// Operations drawn in the dissemination picture at most: 200 (beyond that the lines are a solid block).
    public static let pictureOperationsMax = 200

    /// Frames a message-sequence diagram keeps at most: 3,000 (about a second of 8 busy nodes; beyond that the
    /// arrows are a solid block and the file grows past a megabyte). The rest of its window is counted, not drawn.
    public static let sequenceFramesMax = 3_000

    /// Nodes a message-sequence diagram draws unless told which: the first 12 (one lifeline each, 110 px apart).
    public static let sequenceNodesMax = 12
}

/// A window of simulated time, counted from the start of the workload.
public struct LabWindow: Sendable, Equatable, CustomStringConvertible {
    public var start: Duration
    public var length: Duration

    public init(start: Duration, length: Duration) {
        self.start = start
        self.length = length
    }

    /// Parses `START:LENGTH`, e.g. `10s:3s`.
    public init?(parsing text: String) {
        let parts = text.split(separator: ":", omittingEmptySubsequences: false)
        guard parts.count == 2, let start = parseDuration(String(parts[0])),
            let length = parseDuration(String(parts[1])), length > .zero
        else { return nil }
        self.init(start: start, length: length)
    }

    public var description: String { "\(formatDuration(start)):\(formatDuration(length))" }
}

/// What one lab run simulates: the network, the workload and the faults. Every field replays from `seed`.
public struct LabConfiguration: Sendable, Equatable {
    public var nodes = 25
    /// One-way delay of every link.
    public var latency: Duration = .milliseconds(100)
    /// Extra one-way delay, uniform in 0...jitter per chunk (per-direction order is kept).
    public var jitter: Duration = .zero
    /// Workload operations per simulated second, over all nodes.
    public var rate: Double = 100
    /// Length of the workload; every fault heals at its end.
    public var duration: Duration = .seconds(20)
    public var seed: UInt64 = 1

    // MARK: Faults (during the workload)

    /// Partitions: the nodes split in two random halves for each window.
    public var partitions: [LabWindow] = []
    /// Nodes that crash at a random moment of the workload and stay down.
    public var crashes = 0
    /// Nodes that crash at a random moment and restart after 0.5–3 s on the same store.
    public var crashRestarts = 0
    /// Probability that a chunk sent during the workload resets its link instead of arriving (loss, as TCP sees it).
    public var resetRate = 0.0
    /// Random stalls: a link holds its deliveries for 0.5–4 s.
    public var stalls = 0
    /// Probability that a dial is duplicated: a second connection to the same peer, or the peer dialling back.
    public var duplicateDials = 0.0
    /// Nodes that start during the first half of the workload; the creator adds them to the group.
    public var lateJoiners = 0
    /// Group churn: the creator removes a random member every few seconds and adds it back a little later.
    public var churn = false
    /// Draw the faults above from the seed instead (what `natter lab sweep` runs), churn and a late joiner too.
    public var randomFaults = false
    /// With `randomFaults`: in one seed out of five a twin (a restored backup of a member) forks its feeds
    /// (docs/lab.md, "Forks"). Off (`--no-forks`), the seed's other faults are the same.
    public var randomForks = true
    /// Faults named one by one (`--fault`), on top of the ones above: what `natter lab shrink` reduces.
    public var faults: [LabFault] = []
    /// A deliberately broken node, to prove that a checker fires (`LabVariant`); nil: every node is natter as it
    /// ships. Never set by a sweep.
    public var variant: LabVariant?

    // MARK: Overlay and workload

    public var degreeMax = LabLimits.degreeMax
    public var degreeTarget = LabLimits.degreeTarget
    /// The cores' `NodeConfiguration.syncPushInterval` (least time between two RECORDS on a link under load).
    public var pushInterval = NatterSync.Limits.syncPushInterval
    /// Shares of the workload that are reactions and read receipts; the rest are messages.
    public var reactionShare = 0.1
    public var receiptShare = 0.1
    /// The chat setting: every node writes its receipts as the shipped node does (its core's own receipt timing,
    /// `ReceiptConfiguration` at the shipped defaults), and the workload writes none (its receipt share becomes
    /// messages). Off: the Maelstrom setting, where the nodes write nothing on their own.
    public var nodeReceipts = false
    /// How the nodes bring their conversation tables up to date. Nil (the default): as the shipped node does, after
    /// each turn's sends, bulk turns at most every 250 ms (`RefreshPacing`, the rule `Node` follows). A duration:
    /// the core refreshes on its own tick that long after records arrive (`NodeConfiguration`'s
    /// `conversationRefreshDelay`), so a burst of deliveries shares one refresh: not what ships, but a sweep runs
    /// faster (a refresh rewrites the group's derived rows, O(history), and nothing the lab checks reads them), and
    /// receipts (reviewed at each refresh) come later. The lab used 1 s before it ran the shipped policy.
    public var refreshDelay: Duration?
    /// The simulated nodes' stores check each record's signature once between them (`SignatureMemo`): a record's
    /// validity depends on its bytes alone, which its id names, so every outcome is the same and only the CPU the run
    /// spends differs (25 nodes check each record once instead of 25 times). Off (`--separate-signature-checks`):
    /// each node checks every record it stores, as a real one does, for measuring a node's own cost.
    public var sharedSignatureChecks = true
    /// With a threshold (`--slow D`), the report lists the first `LabLimits.slowDeliveriesMax` deliveries of the
    /// workload that took longer, each with the path its feed's tree took to that node then (`LabReport.slow`).
    /// Read only: the run is the same with or without it.
    public var slowThreshold: Duration?

    public init() {}

    /// Why this configuration cannot run, in words a person can act on; nil when it can.
    public var problem: String? {
        if !LabLimits.nodesRange.contains(nodes) {
            return "--nodes must be within \(LabLimits.nodesRange.lowerBound)...\(LabLimits.nodesRange.upperBound)"
        }
        if lateJoiners >= nodes - 1 { return "--late must leave at least two nodes at the start" }
        if crashes + crashRestarts >= nodes { return "--crash and --crash-restart must leave a node up" }
        if latency < .zero || jitter < .zero { return "latency and jitter must not be negative" }
        if latency + jitter == .zero { return "latency plus jitter must be positive (time must pass on a link)" }
        if !(rate > 0 && rate.isFinite) { return "--rate must be positive" }
        if duration <= .zero { return "--duration must be positive" }
        if pushInterval < .zero { return "--push-interval must not be negative" }
        if let refreshDelay, refreshDelay < .zero { return "--refresh-delay must not be negative" }
        if let slowThreshold, slowThreshold < .zero { return "--slow must not be negative" }
        let operations = rate * seconds(duration)
        if operations > Double(LabLimits.operationsMax) {
            return "rate × duration must stay within \(LabLimits.operationsMax) operations"
        }
        if !(0...1).contains(resetRate) || !(0...1).contains(duplicateDials) {
            return "rates must be within 0...1"
        }
        if !(1...degreeMax).contains(degreeTarget) || degreeMax < 1 {
            return "the degree target must be within 1...degree cap"
        }
        if reactionShare < 0 || receiptShare < 0 || reactionShare + receiptShare > 1 {
            return "reaction and receipt shares must be within 0...1 together"
        }
        for window in partitions where window.start + window.length > duration {
            return "partition \(window) must heal within the workload (--duration \(formatDuration(duration)))"
        }
        if let problem = faultProblem { return problem }
        var windows = partitions
        for case .partition(let at, let length, _) in faults { windows.append(LabWindow(start: at, length: length)) }
        let ordered = windows.sorted { $0.start < $1.start }
        for (first, second) in zip(ordered, ordered.dropFirst()) where first.start + first.length > second.start {
            return "partitions \(first) and \(second) overlap"
        }
        return nil
    }

    /// The `natter lab run` command line that replays this configuration.
    public var commandLine: String {
        var words = [
            "natter lab run", "--seed \(seed)", "--nodes \(nodes)", "--latency \(formatDuration(latency))",
            "--jitter \(formatDuration(jitter))", "--rate \(formatNumber(rate))",
            "--duration \(formatDuration(duration))",
        ]
        for window in partitions { words.append("--partition \(window)") }
        if crashes > 0 { words.append("--crash \(crashes)") }
        if crashRestarts > 0 { words.append("--crash-restart \(crashRestarts)") }
        if resetRate > 0 { words.append("--reset-rate \(formatNumber(resetRate))") }
        if stalls > 0 { words.append("--stalls \(stalls)") }
        if duplicateDials > 0 { words.append("--duplicate-dials \(formatNumber(duplicateDials))") }
        if lateJoiners > 0 { words.append("--late \(lateJoiners)") }
        if churn { words.append("--churn") }
        if randomFaults { words.append("--random-faults") }
        if randomFaults && !randomForks { words.append("--no-forks") }
        if nodeReceipts { words.append("--node-receipts") }
        if let refreshDelay { words.append("--refresh-delay \(formatDuration(refreshDelay))") }
        if !sharedSignatureChecks { words.append("--separate-signature-checks") }
        for fault in faults { words.append("--fault \(fault)") }
        if let variant { words.append("--variant \(variant.rawValue)") }
        if degreeMax != LabLimits.degreeMax { words.append("--degree-max \(degreeMax)") }
        if degreeTarget != LabLimits.degreeTarget { words.append("--degree-target \(degreeTarget)") }
        if pushInterval != NatterSync.Limits.syncPushInterval {
            words.append("--push-interval \(formatDuration(pushInterval))")
        }
        if let slowThreshold { words.append("--slow \(formatDuration(slowThreshold))") }
        return words.joined(separator: " ")
    }
}

extension LabConfiguration {
    /// Why the explicit faults cannot run, or nil.
    var faultProblem: String? {
        for fault in faults {
            if let node = fault.nodes.first(where: { !(0..<nodes).contains($0) }) {
                return "--fault \(fault) names n\(node), but the run has \(nodes) nodes"
            }
            switch fault {
            case .partition(let at, let length, let apart):
                if at + length > duration { return "--fault \(fault) must heal within the workload" }
                if let apart, apart.count >= nodes { return "--fault \(fault) leaves no node on the other side" }
            case .crash(let node, let at, _):
                // A restart due after the workload happens at the heal, as every crashed node's does.
                if at >= duration { return "--fault \(fault) must happen within the workload" }
                if node >= nodes - lateJoiners { return "--fault \(fault): a late joiner cannot crash" }
            case .stall(let at, _):
                if at >= duration { return "--fault \(fault) must start within the workload" }
            case .twin(let node, let at, let length):
                if at + length >= duration { return "--fault \(fault) must start its twin within the workload" }
                if node == 0 || node >= nodes - lateJoiners { return "--fault \(fault): only an initial member other than n0" }
            }
        }
        return nil
    }
}

// MARK: - Units

/// Parses `250ms`, `20s`, `1.5s`, `2m`, or a bare number of seconds.
public func parseDuration(_ text: String) -> Duration? {
    let units: [(String, Double)] = [("ms", 1e-3), ("us", 1e-6), ("s", 1), ("m", 60)]
    for (suffix, scale) in units where text.hasSuffix(suffix) {
        guard let value = Double(text.dropLast(suffix.count)), value >= 0, value.isFinite else { return nil }
        return .nanoseconds(Int64((value * scale * 1e9).rounded()))
    }
    guard let value = Double(text), value >= 0, value.isFinite else { return nil }
    return .nanoseconds(Int64((value * 1e9).rounded()))
}

/// Parses an operation rate: `100`, `100/s`, `6000/m`.
public func parseRate(_ text: String) -> Double? {
    if text.hasSuffix("/s") { return Double(text.dropLast(2)) }
    if text.hasSuffix("/m") { return Double(text.dropLast(2)).map { $0 / 60 } }
    return Double(text)
}

/// `1.5s`, `250ms`, `0ms`: the shortest exact form (to the microsecond), as the options accept it.
public func formatDuration(_ duration: Duration) -> String {
    let micros = nanoseconds(duration) / 1_000
    if micros % 1_000_000 == 0 { return "\(micros / 1_000_000)s" }
    if micros % 1_000 == 0 { return "\(micros / 1_000)ms" }
    return "\(micros)us"
}

/// Milliseconds with one decimal, for reports: `412.3ms`.
func formatMillis(_ duration: Duration) -> String {
    String(format: "%.1fms", Double(nanoseconds(duration)) / 1e6)
}

/// Seconds with three decimals, for reports: `1.234s`.
func formatSeconds(_ duration: Duration) -> String {
    String(format: "%.3fs", Double(nanoseconds(duration)) / 1e9)
}

/// A number without a needless fraction: `100`, `0.25`.
func formatNumber(_ value: Double) -> String {
    if value == value.rounded(), abs(value) < 1e15 { return String(Int64(value)) }
    return "\(value)"  // the shortest text that reads back as the same number: a replay command is exact
}

func nanoseconds(_ duration: Duration) -> Int64 {
    let (seconds, attoseconds) = duration.components
    return seconds * 1_000_000_000 + attoseconds / 1_000_000_000
}

func seconds(_ duration: Duration) -> Double { Double(nanoseconds(duration)) / 1e9 }
