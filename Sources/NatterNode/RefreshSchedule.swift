/// When the conversation tables are brought up to date after records were stored (decision 0006): at once, after a
/// delay the core's tick keeps, or when the driver says (`NodeConfiguration.conversationRefreshDelay`).
struct RefreshSchedule {
    /// `.zero`: within the input that stored records; a duration: that long after the first record stored, on the
    /// tick; nil: the driver calls for it (`NodeCore.refreshPending`).
    let delay: Duration?
    /// When the tables are next brought up to date (nil: nothing stored since the last refresh).
    private var due: Duration?
    /// Whether records of the conversation being viewed were stored since the last refresh, and whether a priority
    /// delivery (docs/protocol.md §3.7) brought some: a driver shows those at once (`RefreshPacing`).
    private(set) var storedSinceRefresh = RefreshPacing.Stored.background

    init(delay: Duration?) {
        self.delay = delay
    }

    /// Whether records were stored since the tables were last brought up to date.
    var isPending: Bool { due != nil }

    /// The tick's deadline for the refresh, when the core refreshes on its own (the delay is not nil).
    var deadline: Duration? { delay == nil ? nil : due }

    /// Records were stored at `now` (some of the viewed conversation: `viewed`; by a priority delivery:
    /// `priority`); true when the refresh is to happen at once (a zero delay).
    mutating func stored(now: Duration, viewed: Bool = false, priority: Bool = false) -> Bool {
        if due == nil { due = now + (delay ?? .zero) }
        if viewed {
            storedSinceRefresh = RefreshPacing.Stored(
                viewed: true, viewedPriority: storedSinceRefresh.viewedPriority || priority)
        }
        return delay == .zero
    }

    /// Whether the tick at `now` brings the tables up to date.
    func isDue(now: Duration) -> Bool { deadline.map { now >= $0 } ?? false }

    /// Starts a refresh: false when nothing is pending.
    mutating func begin() -> Bool {
        guard due != nil else { return false }
        due = nil
        storedSinceRefresh = .background
        return true
    }
}
