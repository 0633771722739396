/// Runs discovery's dials: takes the `DialRequest`s of a `DiscoveryService` as they come, lets a `DialScheduler`
/// decide which start, runs those concurrently through the owner's `dial` function, and cancels what is in flight
/// when it stops. The requests are read at once, never behind a dial, so a flood of them cannot queue up behind
/// slow connects (issue 19, item 3).
public actor DiscoveryDialer {
    /// Dials a request; true when it connected. Should not outlast `DiscoveryLimits.dialConnectTimeout` much.
    public typealias Dial = @Sendable (DialRequest) async -> Bool

    private let dial: Dial
    private var scheduler = DialScheduler<SourceAddress, DialRequest>()
    private var dials: [UInt64: Task<Void, Never>] = [:]
    private var nextDial: UInt64 = 0
    private var stopped = false
    private let origin = ContinuousClock.now
    private let logSink: (@Sendable (String) -> Void)?
    /// Sources whose dropped requests were logged (once each, `DiscoveryLimits.rejectionsLoggedMax` at most).
    private var logged: Set<SourceAddress> = []

    /// A dialer that dials through `dial`; `log` hears one line the first time a source's requests are dropped.
    public init(dial: @escaping Dial, log: (@Sendable (String) -> Void)? = nil) {
        self.dial = dial
        self.logSink = log
    }

    /// Dials what `requests` asks for, as the scheduler allows, until the stream ends or the calling task is
    /// cancelled; then cancels the dials in flight (`stop`).
    public func run(_ requests: AsyncStream<DialRequest>) async {
        await withTaskCancellationHandler {
            for await request in requests {
                if stopped || Task.isCancelled { break }
                requested(request)
            }
        } onCancel: {
            Task { await self.stop() }
        }
        stop()
    }

    /// Cancels every dial in flight and starts none from now on. Idempotent.
    public func stop() {
        stopped = true
        for task in dials.values { task.cancel() }
        dials = [:]
    }

    /// Dials running now.
    public var inFlight: Int { scheduler.inFlight }

    private func requested(_ request: DialRequest) {
        let source = SourceAddress(request.address)
        let (outcome, start) = scheduler.requested(request, from: source, now: now())
        switch outcome {
        case .rateLimited, .backingOff:
            if logged.count < DiscoveryLimits.rejectionsLoggedMax, logged.insert(source).inserted {
                logSink?("discovery: too many dials asked for \(source) (\(outcome)); dropping the excess (logged once per source)")
            }
        case .started, .queued: break
        }
        begin(start)
    }

    private func begin(_ requests: [DialRequest]) {
        guard !stopped else { return }
        for request in requests {
            let id = nextDial
            nextDial += 1
            dials[id] = Task { [dial] in
                let connected = await dial(request)
                self.finished(id, request, connected: connected)
            }
        }
    }

    private func finished(_ id: UInt64, _ request: DialRequest, connected: Bool) {
        dials[id] = nil
        begin(scheduler.finished(from: SourceAddress(request.address), connected: connected, now: now()))
    }

    private func now() -> Duration { ContinuousClock.now - origin }
}
