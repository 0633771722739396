/// Which of discovery's dial requests to start, and when: pure, time as an argument, sources and requests opaque.
///
/// A beacon costs its sender nothing and every fresh tag asks for a dial, so dials are the resource a beacon flood
/// spends (issue 19, item 3). The scheduler bounds it per source address — a token bucket
/// (`DiscoveryLimits.dialsPerSourceBurst`, one more each `dialsPerSourceRefillInterval`), one dial in flight per
/// source, and after a dial that did not connect no dial to that source for a backoff that doubles
/// (`dialFailureBackoffMin` … `dialFailureBackoffMax`) — and runs dials concurrently under a small cap
/// (`dialsInFlightMax`). A request that finds the cap (or its source's one dial) taken waits in a queue holding at most
/// one request per source, started first come first served as dials end; one its source may not make now is dropped
/// (the next beacon asks again). So forged beacons from a few addresses hold at most a few dials, none for long, and
/// an honest neighbour's dial starts at once or after the first dial to end.
public struct DialScheduler<Source: Hashable & Comparable & Sendable, Request: Sendable>: Sendable {
    /// What became of a request.
    public enum Outcome: Equatable, Sendable {
        case started
        /// Waiting for a dial to end (the cap, or its source's dial in flight).
        case queued
        /// Its source may not dial now: out of tokens.
        case rateLimited
        /// Its source's last dial failed; it may dial again after the backoff.
        case backingOff
    }

    private struct SourceState: Sendable {
        var tokens: Int
        var refilledAt: Duration
        var inFlight = 0
        var failures = 0
        var blockedUntil: Duration?
        var lastUsed: Duration
    }

    private var sources: [Source: SourceState] = [:]
    /// Requests waiting for a dial to end, oldest first, at most one per source.
    private var queue: [(source: Source, request: Request)] = []
    /// Dials started and not yet finished.
    public private(set) var inFlight = 0

    public init() {}

    /// A dial was requested at `now`; returns what became of it and the dials to start now (it, or none).
    public mutating func requested(_ request: Request, from source: Source, now: Duration)
        -> (outcome: Outcome, start: [Request])
    {
        defer { checkInvariants() }
        var state = refilled(source, now: now)
        state.lastUsed = now
        if let until = state.blockedUntil, now < until {
            sources[source] = state
            return (.backingOff, [])
        }
        guard state.tokens > 0 else {
            sources[source] = state
            return (.rateLimited, [])
        }
        if state.inFlight < DiscoveryLimits.dialsInFlightPerSourceMax && inFlight < DiscoveryLimits.dialsInFlightMax {
            state.tokens -= 1
            state.inFlight += 1
            inFlight += 1
            sources[source] = state
            return (.started, [request])
        }
        sources[source] = state
        // One waiting request per source: the newest replaces the one before (same source, same beacon address).
        queue.removeAll { $0.source == source }
        if queue.count >= DiscoveryLimits.dialsQueuedMax { queue.removeFirst() }
        queue.append((source, request))
        return (.queued, [])
    }

    /// A dial this scheduler started from `source` ended at `now`, connected or not; returns the dials to start now.
    public mutating func finished(from source: Source, connected: Bool, now: Duration) -> [Request] {
        precondition(inFlight > 0 && (sources[source]?.inFlight ?? 0) > 0, "finished a dial that was not started")
        inFlight -= 1
        var state = sources[source]!
        state.inFlight -= 1
        state.lastUsed = now
        if connected {
            state.failures = 0
            state.blockedUntil = nil
        } else {
            state.failures += 1
            state.blockedUntil = now + backoff(afterFailures: state.failures)
        }
        sources[source] = state
        let started = startQueued(now: now)
        forgetIdleSources()
        checkInvariants()
        return started
    }

    /// Requests waiting for a dial to end.
    public var queued: Int { queue.count }

    // MARK: - Private

    /// Starts waiting requests, oldest first, while the cap allows; drops those whose source may not dial now.
    private mutating func startQueued(now: Duration) -> [Request] {
        var started = [Request]()
        var index = 0
        while index < queue.count, inFlight < DiscoveryLimits.dialsInFlightMax {
            let (source, request) = queue[index]
            var state = refilled(source, now: now)
            if let until = state.blockedUntil, now < until {
                queue.remove(at: index)
                continue
            }
            guard state.inFlight < DiscoveryLimits.dialsInFlightPerSourceMax else {
                index += 1
                continue
            }
            queue.remove(at: index)
            guard state.tokens > 0 else { continue }
            state.tokens -= 1
            state.inFlight += 1
            inFlight += 1
            sources[source] = state
            started.append(request)
        }
        return started
    }

    /// `source`'s state with the tokens earned since its last refill (a new source starts with a full bucket).
    private mutating func refilled(_ source: Source, now: Duration) -> SourceState {
        guard var state = sources[source] else {
            if sources.count >= DiscoveryLimits.dialSourcesTrackedMax { forgetIdleSources(all: true) }
            return SourceState(tokens: DiscoveryLimits.dialsPerSourceBurst, refilledAt: now, lastUsed: now)
        }
        let interval = DiscoveryLimits.dialsPerSourceRefillInterval
        let earned = Int((now - state.refilledAt) / interval)
        if earned > 0 {
            state.tokens = min(DiscoveryLimits.dialsPerSourceBurst, state.tokens + earned)
            state.refilledAt = state.tokens == DiscoveryLimits.dialsPerSourceBurst ? now : state.refilledAt + interval * earned
        }
        return state
    }

    private func backoff(afterFailures failures: Int) -> Duration {
        var delay = DiscoveryLimits.dialFailureBackoffMin
        for _ in 1..<max(1, failures) where delay < DiscoveryLimits.dialFailureBackoffMax { delay = delay * 2 }
        return min(delay, DiscoveryLimits.dialFailureBackoffMax)
    }

    /// Forgets sources with nothing in flight or queued once the table is full (`all`), or only those with nothing
    /// to remember (a full bucket, no failure): forgetting only forgives, and spoofed sources cannot grow the table.
    private mutating func forgetIdleSources(all: Bool = false) {
        guard all || sources.count > DiscoveryLimits.dialSourcesTrackedMax / 2 else { return }
        let waiting = Set(queue.map(\.source))
        let idle = sources.filter { $0.value.inFlight == 0 && !waiting.contains($0.key) }
        if all {
            // The least recently used half of the idle ones.
            let ordered = idle.sorted { ($0.value.lastUsed, $0.key) < ($1.value.lastUsed, $1.key) }
            for (source, _) in ordered.prefix(max(1, ordered.count / 2)) { sources[source] = nil }
        } else {
            for (source, state) in idle where state.failures == 0 && state.tokens == DiscoveryLimits.dialsPerSourceBurst {
                sources[source] = nil
            }
        }
    }

    private func checkInvariants() {
        assert(inFlight >= 0 && inFlight <= DiscoveryLimits.dialsInFlightMax, "dials in flight within the cap")
        assert(sources.values.reduce(0) { $0 + $1.inFlight } == inFlight, "per-source dials add up")
        assert(queue.count <= DiscoveryLimits.dialsQueuedMax && Set(queue.map(\.source)).count == queue.count)
        assert(sources.count <= DiscoveryLimits.dialSourcesTrackedMax, "sources tracked within the bound")
    }
}
