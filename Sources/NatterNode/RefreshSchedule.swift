/// When the conversation tables are brought up to date after records were stored (decision 0006): at once, after a
/// delay the core's tick keeps, or when the driver says (`NodeConfiguration.conversationRefreshDelay`).
struct RefreshSchedule {
    /// `.zero`: within the input that stored records; a duration: that long after the first record stored, on the
    /// tick; nil: the driver calls for it (`NodeCore.refreshPending`).
    let delay: Duration?
    /// When the tables are next brought up to date (nil: nothing stored since the last refresh).
    private var due: Duration?
    /// Whether a priority delivery (docs/protocol.md §3.7) stored records since the last refresh: a driver that lets
    /// bulk turns' refreshes wait refreshes at once for these, so a neighbour's chat is not shown late.
    private(set) var priorityStoredSinceRefresh = false

    init(delay: Duration?) {
        self.delay = delay
    }

    /// Whether records were stored since the tables were last brought up to date.
    var isPending: Bool { due != nil }

    /// The tick's deadline for the refresh, when the core refreshes on its own (the delay is not nil).
    var deadline: Duration? { delay == nil ? nil : due }

    /// Records were stored at `now`; true when the refresh is to happen at once (a zero delay).
    mutating func stored(now: Duration) -> Bool {
        if due == nil { due = now + (delay ?? .zero) }
        return delay == .zero
    }

    /// Records from a priority delivery were stored.
    mutating func priorityStored() { priorityStoredSinceRefresh = true }

    /// Whether the tick at `now` brings the tables up to date.
    func isDue(now: Duration) -> Bool { deadline.map { now >= $0 } ?? false }

    /// Starts a refresh: false when nothing is pending.
    mutating func begin() -> Bool {
        guard due != nil else { return false }
        due = nil
        priorityStoredSinceRefresh = false
        return true
    }
}
