/// What one lab run found: whether every checker passed, and the metrics. Deterministic: the same configuration
/// gives an equal report (and byte-identical text and JSON).
public struct LabReport: Sendable, Equatable {
    /// Nearest-rank quantiles of a set of durations.
    public struct Quantiles: Sendable, Equatable {
        public let count: Int
        public let p50: Duration
        public let p95: Duration
        public let p99: Duration
        public let max: Duration

        init?(_ values: [Duration]) {
            guard !values.isEmpty else { return nil }
            let sorted = values.sorted()
            func rank(_ q: Double) -> Duration {
                sorted[Swift.max(0, Int((q * Double(sorted.count)).rounded(.up)) - 1)]
            }
            count = sorted.count
            p50 = rank(0.5)
            p95 = rank(0.95)
            p99 = rank(0.99)
            max = sorted.last!
        }
    }

    public struct Count: Sendable, Equatable {
        public let name: String
        public let count: Int
    }

    /// One operation's spread: when it was published and when each live node applied it.
    public struct Spread: Sendable, Equatable {
        public let kind: String
        public let publishedAt: Duration
        /// Sorted times at which the nodes applied it (the author's is the publication).
        public let appliedAt: [Duration]
    }

    public let configuration: LabConfiguration
    /// Every checker failure, in the order found; empty when the run passed.
    public let failures: [String]
    /// The faults as they happened (crashes, partitions, stalls, membership changes), one line each.
    public let faultTrace: [String]
    public var passed: Bool { failures.isEmpty }

    // MARK: Timeline
    /// When the workload started (setup done), the final heal, and the end of the run.
    public let workloadStart: Duration?
    public let healAt: Duration?
    public let endedAt: Duration
    public let events: Int

    // MARK: Convergence
    /// From the final heal until every live node applied every record a live node holds.
    public let convergence: Duration?
    /// Per partition, from its heal until the records published before it reached every node that never crashed.
    public let partitionConvergence: [Duration?]

    // MARK: Work
    /// Operations by kind (messages, reactions, receipts, adds, removes).
    public let operations: [Count]
    public let operationCount: Int
    /// Operations the authoring call refused, by reason.
    public let refused: [Count]
    /// Frames (`send` actions) and their bytes on every link from the workload's start to the end of the run.
    public let frames: Int
    public let bytes: Int
    public let setupFrames: Int
    public let framesPerOperation: Double
    public let bytesPerOperation: Double
    /// Those frames by kind (records, credit, ping, summary, heads, request, done, handshake, …), sorted by name.
    public let framesByKind: [Count]
    /// Records the links delivered, and those that were new to the receiving store.
    public let recordsDelivered: Int
    public let recordsNew: Int
    /// Redundant copies per record a node needed: (delivered − new) / new.
    public let redundancy: Double
    /// Publish → applied, over every operation and every live node other than its author that had started.
    public let latency: Quantiles?
    /// (operation, node) pairs that never arrived.
    public let undelivered: Int
    /// The node that sent the most frames, and its share of all frames.
    public let busiestNode: String
    public let busiestShare: Double

    /// The overlay when the workload started and at the end of the run.
    public let overlayAtStart: OverlayShape?
    public let overlayAtEnd: OverlayShape?

    // MARK: Nodes and bounds
    public let liveNodes: Int
    public let deadNodes: Int
    /// Records whose only holders crashed for good: nobody can deliver them (not counted as lost).
    public let stranded: Int
    /// Records at or beyond the fork of their feed (a twin's, and its original's from the fork on): the fork rule
    /// applies none of them anywhere (not counted as lost).
    public let frozenByForks: Int
    public let maxDegree: Int
    public let maxCausalBuffer: Int
    public let spotChecks: Int
    public let dialsRefusedAtCap: Int
    public let resetsInjected: Int
    /// Links the overlay dropped to keep the graph mixing.
    public let rotations: Int

    /// The first live node's log digest (hex) and the records it holds: equal on every run of the same
    /// configuration, since every random byte of the run comes from the seed.
    public let logDigest: String
    public let recordsHeld: Int

    /// Spread of up to `LabLimits.pictureOperationsMax` operations, for the picture.
    public let spreads: [Spread]
    /// Partitions (absolute start, length) and crashes, for the picture.
    public let partitionSpans: [LabWindow]
    public let crashTimes: [Duration]
    public let nodes: Int

    /// What the run exercised (`LabCoverage`).
    public let coverage: LabCoverage
    /// The configuration that replays this run with every fault named (`FaultPlan.materialized`): the same run.
    public let plan: LabConfiguration
    /// The frames of the message-sequence diagram, when one was asked for.
    public let sequence: SequenceLog?
    /// The first deliveries over `LabConfiguration.slowThreshold`, when one was given.
    public let slow: [SlowDelivery]

    /// A delivery that took longer than the run's `--slow` threshold, and the path its feed's tree took then: the
    /// receiving node, its parent for the feed, that node's parent, … up to the author (or to a node with none).
    public struct SlowDelivery: Sendable, Equatable {
        public let kind: OperationKind
        public let author: Int
        public let receiver: Int
        /// When it was applied, since the run began.
        public let at: Duration
        public let took: Duration
        /// Node indexes from the receiver up the tree; ends at the author when the tree reaches it.
        public let path: [Int]
    }
}
