/// How a driver carries out a turn of its core, as pure rules with time as an input: the order of a turn's actions
/// (`steps`) and when the conversation tables are brought up to date (`RefreshPacing`). The node actor (`Node`)
/// and the lab's simulated nodes (`NatterLab`) both drive their cores by them, so the lab runs the policy that ships.
///
/// A turn is what a driver does between two waits: the node actor's handling of every transport event its inbox
/// held, a tick, or a local write; one simulated event in the lab. The core is configured for it: ingests commit
/// without their fsync (`RecordStore.IngestDurability.deferred`), and the conversation tables are refreshed when
/// the driver says (`NodeConfiguration.conversationRefreshDelay` nil).
public enum TurnPlan {
    /// One step of a turn, in the order a driver carries them out.
    public enum Step: Sendable {
        /// Something the core reports: shown (or recorded) first, so a received message shows once committed.
        case event(NodeEvent)
        /// Make the turn's deferred commits durable (the store's fsync). A driver that cannot sends nothing more:
        /// a byte sent could acknowledge a record a power cut would take back (DESIGN §6).
        case makeDurable
        case send(LinkID, [UInt8])
        case close(LinkID)
    }

    /// A turn's actions as steps: every event first, then one `makeDurable`, then the sends and closes in the order
    /// the core gave them. So no byte leaves the node — a credit, a receipt, a relayed record — before what the turn
    /// stored is on disk, and every turn ends with its commits durable.
    ///
    /// A driver that carries out several inputs in a row carries them out as one `Batch`.
    public static func steps(_ actions: [NodeAction]) -> [Step] {
        var batch = Batch()
        return batch.add(actions) + batch.release()
    }

    /// The turns a driver carries out in a row (the node actor's batch of transport events: what arrived while it
    /// was busy) as one: each turn's events are shown at once, and its sends and closes are held until the batch is
    /// released (`release`): one durability sync, then everything held in the core's order. In a 25-member group
    /// the members' receipts arrive together, several links each bringing one; forwarding each as it was stored
    /// cost an fsync per input, and a person's line waited behind them all (issue 18: such a batch took 150 ms
    /// with 25 processes sharing two cores and a disk). What a batch holds is bounded: a driver releases it once
    /// the turns held received more than `RefreshPacing.bulkTurnBytes` (`isFull`), so bulk input is not held back
    /// by the next.
    public struct Batch: Sendable {
        private var held: [Step] = []
        /// Bytes received by the turns whose steps are held.
        private var receivedBytes = 0

        public init() {}

        /// A turn of the batch received `bytes` from the network.
        public mutating func received(_ bytes: Int) { receivedBytes += bytes }

        /// One turn's actions: the steps to carry out now (its events); its sends and closes wait for `release`.
        public mutating func add(_ actions: [NodeAction]) -> [Step] {
            var now = [Step]()
            for action in actions {
                switch action {
                case .event(let event): now.append(.event(event))
                case .send(let link, let bytes): held.append(.send(link, bytes))
                case .close(let link): held.append(.close(link))
                }
            }
            return now
        }

        /// Whether the turns held received enough to be bulk, not chat: the driver releases before the next turn.
        public var isFull: Bool { receivedBytes > RefreshPacing.bulkTurnBytes }

        /// One durability sync, then every held send and close in order; the batch is empty afterwards. At the
        /// batch's end, or inside it (before the node's own writes, or once it `isFull`).
        public mutating func release() -> [Step] {
            defer {
                held = []
                receivedBytes = 0
            }
            return [.makeDurable] + held
        }
    }
}

/// When a driver brings its core's conversation tables up to date after a turn (`NodeCore.refreshPending`), as a
/// pure rule with time as an input. A refresh rewrites a changed conversation's derived rows, so it waits until a
/// turn's sends are handed to the network. What the user is looking at shows at once: a chat turn that stored
/// records of the conversation being viewed refreshes then. Everything else — other conversations, a headless node's,
/// a bulk turn (sync batches of a node catching up) — refreshes at most every `bulkInterval`, and the next tick
/// catches up: a refresh costs about as much per turn as per line (a transaction, the list row, the change log's
/// delta), so a burst of lines nobody is viewing is written a few times a second, not once per line. A line that
/// arrives after a quiet interval still shows at once. A priority delivery (a neighbour's chat, docs/protocol.md
/// §3.7) of the viewed conversation shows at once even after a bulk turn.
public struct RefreshPacing: Sendable {
    /// What a driver's turn was.
    public enum Turn: Sendable, Equatable {
        /// Transport events that carried this many received bytes in all.
        case received(bytes: Int)
        /// A timer: refreshes only what was put off and is now due.
        case tick
        /// The user's own writes (and reads): always refreshed at once, the user sees them next.
        case local
    }

    /// What was stored since the last refresh, as far as its urgency goes (`NodeCore.storedSinceRefresh`).
    public struct Stored: Sendable, Equatable {
        /// Records of the conversation the user is viewing (`NodeCore.view`).
        public var viewed: Bool
        /// Some of those came by a priority delivery.
        public var viewedPriority: Bool

        public init(viewed: Bool = false, viewedPriority: Bool = false) {
            self.viewed = viewed || viewedPriority
            self.viewedPriority = viewedPriority
        }

        /// Nothing the user is looking at.
        public static let background = Stored()
    }

    /// A turn that received more than this many bytes is bulk, not chat: its refresh may wait up to
    /// `bulkInterval`. A chat message is well under it.
    public static let bulkTurnBytes = 64 * 1024
    /// The least time between refreshes for what is not shown at once: the tables lag it by at most this or until
    /// the driver's next tick.
    public static let bulkInterval: Duration = .milliseconds(250)

    /// When the tables were last refreshed (nil: never).
    private var lastRefresh: Duration?

    public init() {}

    /// Whether to refresh now, at the end of `turn`, when a refresh is pending.
    public func refreshesNow(after turn: Turn, stored: Stored, now: Duration) -> Bool {
        switch turn {
        case .local: true
        case .received(let bytes): (stored.viewed && bytes <= Self.bulkTurnBytes) || isDue(stored: stored, now: now)
        case .tick: isDue(stored: stored, now: now)
        }
    }

    /// Whether a refresh put off is due: the interval passed since the last one, or a priority delivery stored
    /// records of the viewed conversation since.
    public func isDue(stored: Stored, now: Duration) -> Bool {
        stored.viewedPriority || lastRefresh.map { now - $0 >= Self.bulkInterval } ?? true
    }

    /// When a put-off refresh falls due, for a driver that schedules a tick for it (the lab and the node actor both
    /// do). Nil when no refresh is pending.
    public func deadline(pending: Bool) -> Duration? {
        guard pending else { return nil }
        return lastRefresh.map { $0 + Self.bulkInterval } ?? .zero
    }

    /// A refresh starts at `now`.
    public mutating func refreshed(at now: Duration) {
        lastRefresh = now
    }
}
