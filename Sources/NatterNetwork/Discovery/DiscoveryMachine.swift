public import NatterCrypto

/// What the discovery driver must do after an input.
public enum DiscoveryAction<Host: Hashable & Sendable>: Equatable, Sendable {
    /// Send these bytes (one sealed beacon) to every broadcast and multicast destination the driver serves.
    case sendBeacon([UInt8])
    /// Dial `host` (a beacon's source address, exactly as received) at `port` (that beacon's TCP port): the node
    /// tagged `tag` is not linked. Never any other address: discovery does not amplify or redirect.
    case dial(host: Host, port: UInt16, tag: NodeTag)
    /// Tell a person.
    case log(DiscoveryLog<Host>)
}

/// What discovery has to say. Rejections are logged once per source and reason, never per datagram.
public enum DiscoveryLog<Host: Hashable & Sendable>: Equatable, Sendable, CustomStringConvertible {
    /// A node not seen before (or forgotten since) announced itself. Logged once per source address and port: a
    /// flood of fresh tags from one address is one line (`DiscoveryLimits.discoveriesLoggedMax` lines at most).
    case discovered(tag: NodeTag, host: Host, port: UInt16)
    /// The first datagram from `source` rejected for `reason`; later ones for the same reason are dropped silently.
    case rejected(source: Host, reason: BeaconError)
    /// `source` sent more beacons than the rate limit allows; the excess is dropped (logged once per source).
    case rateLimited(source: Host)
    /// `DiscoveryLimits.rejectionsLoggedMax` distinct rejections were logged; further ones are not.
    case rejectionLogFull

    public var description: String {
        switch self {
        case .discovered(let tag, let host, let port):
            "discovery: node \(tag) at \(host) announces TCP port \(port)"
        case .rejected(let source, .wrongKeyOrTampered):
            "discovery: ignoring beacons from \(source): another network key (or altered in transit); "
                + "check that both nodes use the same network (logged once per source)"
        case .rejected(let source, let reason):
            "discovery: ignoring datagrams from \(source): \(reason) (logged once per source)"
        case .rateLimited(let source):
            "discovery: too many beacons from \(source), dropping the excess (logged once per source)"
        case .rejectionLogFull:
            "discovery: \(DiscoveryLimits.rejectionsLoggedMax) sources rejected; further rejections are not logged"
        }
    }
}

/// The timing of a node's own beacons. Defaults are `DiscoveryLimits`; tests and the lab may shorten them.
public struct DiscoverySchedule: Sendable, Equatable {
    /// Beacons per burst (at start and on interface change).
    public var burstCount: Int
    /// Gap between burst beacons.
    public var burstInterval: Duration
    /// The periodic gap is drawn uniformly from `periodMin...periodMax` (whole milliseconds) after each beacon.
    public var periodMin: Duration
    public var periodMax: Duration

    public init(
        burstCount: Int = DiscoveryLimits.burstCount, burstInterval: Duration = DiscoveryLimits.burstInterval,
        periodMin: Duration = DiscoveryLimits.periodMin, periodMax: Duration = DiscoveryLimits.periodMax
    ) {
        precondition(burstCount >= 1, "a burst has at least one beacon")
        precondition(burstInterval > .zero && periodMin > .zero && periodMin <= periodMax, "a sane schedule")
        self.burstCount = burstCount
        self.burstInterval = burstInterval
        self.periodMin = periodMin
        self.periodMax = periodMax
    }
}

/// The discovery protocol without sockets, clocks or system randomness: inputs in, `DiscoveryAction`s out.
///
/// It beacons on a schedule (a burst at start and on interface change, then a jittered period), checks incoming
/// datagrams (rate limit per source address, then `Beacon.open`), remembers the nodes it hears in a bounded table,
/// and asks to dial a node's beacon source when that node is not linked. It never answers a datagram: the only
/// traffic it causes is its own beacons and dials to addresses that beaconed.
///
/// `Host` is whatever names a datagram's source address without its port: the NIO driver uses `SocketAddress` with
/// port 0 (so an IPv6 link-local scope survives), tests use strings, the lab its own addresses. Time is a `Duration`
/// since an arbitrary origin; it must not go backwards. `random` draws the jitter and the beacon nonces: production
/// passes `SecureRandomGenerator` (nonces must never repeat under one key), tests and the lab a seeded generator.
public struct DiscoveryMachine<Host: Hashable & Sendable> {
    /// This run's tag, which the node's own beacons carry and which it ignores when they come back.
    public let ownTag: NodeTag
    /// The TCP port the node's beacons announce.
    public let tcpPort: UInt16
    public let schedule: DiscoverySchedule

    private let key: SymmetricKey
    private var random: any RandomNumberGenerator

    private var started = false
    /// Burst beacons still to send, the next one at `nextBeaconAt`.
    private var burstPending = 0
    /// When this node last scheduled an answer to a node it did not know (`DiscoveryLimits.answerIntervalMin`).
    private var lastAnswerAt: Duration?
    private var nextBeaconAt: Duration?

    private var sources: [Host: SourceBucket] = [:]
    private var candidates: [NodeTag: Candidate] = [:]
    private var loggedRejections: Set<RejectionKey> = []
    /// Source addresses and ports whose first new node was logged (`DiscoveryLimits.discoveriesLoggedMax`).
    private var loggedDiscoveries: Set<DiscoveryKey> = []
    private var rejectionLogFull = false
    /// A counter that orders insertions, so that evictions break ties the same way on every run.
    private var serial: UInt64 = 0

    /// A machine for a node whose beacons announce `tcpPort`, sealed under `networkKey`'s beacon subkey.
    public init(
        networkKey: NetworkKey, ownTag: NodeTag, tcpPort: UInt16, schedule: DiscoverySchedule = DiscoverySchedule(),
        random: any RandomNumberGenerator
    ) {
        precondition(tcpPort != 0, "beacons announce a real TCP port")
        self.key = networkKey.beaconKey
        self.ownTag = ownTag
        self.tcpPort = tcpPort
        self.schedule = schedule
        self.random = random
    }

    // MARK: - Inputs

    /// The node is up: send the first beacon of the start burst now.
    public mutating func start(now: Duration) -> [DiscoveryAction<Host>] {
        precondition(!started, "discovery starts once")
        started = true
        burstPending = schedule.burstCount
        let actions = [sendBeacon(now: now)]
        checkInvariants()
        return actions
    }

    /// An interface came, went or changed address: start a new burst now, so new neighbours hear of us at once.
    public mutating func interfacesChanged(now: Duration) -> [DiscoveryAction<Host>] {
        precondition(started, "start discovery first")
        burstPending = schedule.burstCount
        let actions = [sendBeacon(now: now)]
        checkInvariants()
        return actions
    }

    /// Time passed: send the beacon that is due, and forget stale state. Call at `nextDeadline()` (or any time).
    public mutating func tick(now: Duration) -> [DiscoveryAction<Host>] {
        precondition(started, "start discovery first")
        var actions: [DiscoveryAction<Host>] = []
        if let due = nextBeaconAt, now >= due {
            actions.append(sendBeacon(now: now))
        }
        forgetStale(now: now)
        checkInvariants()
        return actions
    }

    /// When `tick` is next needed (the next beacon), or nil before `start`.
    public func nextDeadline() -> Duration? { nextBeaconAt }

    /// A datagram arrived on the discovery port from `source` (its address, port excluded).
    public mutating func beaconReceived(
        _ datagram: some Collection<UInt8>, from source: Host, now: Duration
    ) -> [DiscoveryAction<Host>] {
        precondition(started, "start discovery first")
        defer { checkInvariants() }
        guard takeToken(source: source, now: now) else {
            return logOnce(source: source, reason: .rateLimited, entry: .rateLimited(source: source))
        }
        let beacon: Beacon
        switch Beacon.open(datagram, key: key) {
        case .success(let opened): beacon = opened
        case .failure(let error):
            return logOnce(
                source: source, reason: RejectionReason(error), entry: .rejected(source: source, reason: error))
        }
        if beacon.tag == ownTag { return [] }

        var actions: [DiscoveryAction<Host>] = []
        var candidate: Candidate
        if let known = candidates[beacon.tag] {
            candidate = known
        } else {
            makeRoomForCandidate()
            serial += 1
            candidate = Candidate(host: source, port: beacon.port, lastSeen: now, serial: serial)
            let key = DiscoveryKey(source: source, port: beacon.port)
            if loggedDiscoveries.count < DiscoveryLimits.discoveriesLoggedMax, loggedDiscoveries.insert(key).inserted {
                actions.append(.log(.discovered(tag: beacon.tag, host: source, port: beacon.port)))
            }
            scheduleAnswer(now: now)
        }
        candidate.host = source
        candidate.port = beacon.port
        candidate.lastSeen = now
        if !candidate.isConnected, candidate.lastDial.map({ now - $0 >= DiscoveryLimits.dialIntervalMin }) ?? true {
            candidate.lastDial = now
            actions.append(.dial(host: source, port: beacon.port, tag: beacon.tag))
        }
        candidates[beacon.tag] = candidate
        return actions
    }

    /// The node has a link to the node tagged `tag` (a dial for it succeeded, or a link to the same identity
    /// exists): its beacons no longer cause dials. Unknown tags are ignored.
    public mutating func peerConnected(_ tag: NodeTag) {
        candidates[tag]?.isConnected = true
    }

    /// The link to the node tagged `tag` closed: its next beacon causes a dial again.
    public mutating func peerDisconnected(_ tag: NodeTag) {
        candidates[tag]?.isConnected = false
        candidates[tag]?.lastDial = nil
    }

    /// The nodes currently remembered, for status displays and tests (sorted by tag bytes).
    public var knownTags: [NodeTag] {
        candidates.keys.sorted { $0.bytes.lexicographicallyPrecedes($1.bytes) }
    }

    /// Whether `tag` is remembered as linked.
    public func isConnected(_ tag: NodeTag) -> Bool { candidates[tag]?.isConnected ?? false }

    // MARK: - Own beacons

    private mutating func sendBeacon(now: Duration) -> DiscoveryAction<Host> {
        let nonce = try! AEADNonce(bytes: DiscoveryRandom.bytes(AEADNonce.byteCount, using: &random))
        let bytes = Beacon(tag: ownTag, port: tcpPort).seal(key: key, nonce: nonce)
        if burstPending > 0 { burstPending -= 1 }
        nextBeaconAt = now + (burstPending > 0 ? schedule.burstInterval : jitteredPeriod())
        return .sendBeacon(bytes)
    }

    /// Brings the next beacon forward to a random moment within `answerDelayMax`, at most once per
    /// `answerIntervalMin`: the newcomer hears of this node now, not at its next periodic beacon.
    private mutating func scheduleAnswer(now: Duration) {
        guard lastAnswerAt.map({ now - $0 >= DiscoveryLimits.answerIntervalMin }) ?? true else { return }
        lastAnswerAt = now
        let delay = Duration.milliseconds(
            Int64.random(in: 0...Int64(milliseconds(DiscoveryLimits.answerDelayMax)), using: &random))
        nextBeaconAt = min(nextBeaconAt ?? now + delay, now + delay)
    }

    private mutating func jitteredPeriod() -> Duration {
        let spanMilliseconds = milliseconds(schedule.periodMax - schedule.periodMin)
        let extra = UInt64.random(in: 0...UInt64(spanMilliseconds), using: &random)
        return schedule.periodMin + .milliseconds(Int64(extra))
    }

    // MARK: - Rate limit

    private struct SourceBucket {
        var tokens: Int
        var refilledAt: Duration
        var lastSeen: Duration
        var serial: UInt64
    }

    /// Takes one token from `source`'s bucket, refilling it first; false if it is empty.
    private mutating func takeToken(source: Host, now: Duration) -> Bool {
        let interval = DiscoveryLimits.sourceBeaconRefillInterval
        guard var bucket = sources[source] else {
            if sources.count >= DiscoveryLimits.sourcesTrackedMax { evictIdlestSource() }
            serial += 1
            sources[source] = SourceBucket(
                tokens: DiscoveryLimits.sourceBeaconBurstMax - 1, refilledAt: now, lastSeen: now, serial: serial)
            return true
        }
        let refills = max(0, milliseconds(now - bucket.refilledAt) / milliseconds(interval))
        if refills > 0 {
            bucket.tokens = min(DiscoveryLimits.sourceBeaconBurstMax, bucket.tokens + Int(clamping: refills))
            bucket.refilledAt =
                bucket.tokens == DiscoveryLimits.sourceBeaconBurstMax
                ? now : bucket.refilledAt + interval * Int(clamping: refills)
        }
        bucket.lastSeen = now
        let allowed = bucket.tokens > 0
        if allowed { bucket.tokens -= 1 }
        sources[source] = bucket
        return allowed
    }

    private mutating func evictIdlestSource() {
        let idlest = sources.min { ($0.value.lastSeen, $0.value.serial) < ($1.value.lastSeen, $1.value.serial) }
        if let idlest { sources[idlest.key] = nil }
    }

    // MARK: - Candidates

    private struct Candidate {
        var host: Host
        var port: UInt16
        var lastSeen: Duration
        var serial: UInt64
        var isConnected = false
        var lastDial: Duration?
    }

    /// Evicts the candidate heard from longest ago if the table is full, preferring one that is not linked.
    private mutating func makeRoomForCandidate() {
        guard candidates.count >= DiscoveryLimits.candidatesMax else { return }
        let oldest = candidates.min {
            ($0.value.isConnected ? 1 : 0, $0.value.lastSeen, $0.value.serial)
                < ($1.value.isConnected ? 1 : 0, $1.value.lastSeen, $1.value.serial)
        }
        if let oldest { candidates[oldest.key] = nil }
    }

    private mutating func forgetStale(now: Duration) {
        candidates = candidates.filter { now - $0.value.lastSeen < DiscoveryLimits.candidateLifetime }
        // A bucket that would be full again is the same as no bucket.
        let refillAll = DiscoveryLimits.sourceBeaconRefillInterval * DiscoveryLimits.sourceBeaconBurstMax
        sources = sources.filter { now - $0.value.refilledAt < refillAll }
    }

    // MARK: - Logging once

    private enum RejectionReason: Hashable {
        case wrongSize, notABeacon, unknownVersion, wrongKeyOrTampered, invalidPort, rateLimited

        init(_ error: BeaconError) {
            switch error {
            case .wrongSize: self = .wrongSize
            case .notABeacon: self = .notABeacon
            case .unknownVersion: self = .unknownVersion
            case .wrongKeyOrTampered: self = .wrongKeyOrTampered
            case .invalidPort: self = .invalidPort
            }
        }
    }

    private struct DiscoveryKey: Hashable {
        let source: Host
        let port: UInt16
    }

    private struct RejectionKey: Hashable {
        let source: Host
        let reason: RejectionReason
    }

    private mutating func logOnce(
        source: Host, reason: RejectionReason, entry: DiscoveryLog<Host>
    ) -> [DiscoveryAction<Host>] {
        let key = RejectionKey(source: source, reason: reason)
        guard !loggedRejections.contains(key) else { return [] }
        guard loggedRejections.count < DiscoveryLimits.rejectionsLoggedMax else {
            if rejectionLogFull { return [] }
            rejectionLogFull = true
            return [.log(.rejectionLogFull)]
        }
        loggedRejections.insert(key)
        return [.log(entry)]
    }

    /// `duration` in whole milliseconds, rounded toward zero.
    private func milliseconds(_ duration: Duration) -> Int64 {
        let (seconds, attoseconds) = duration.components
        return seconds * 1000 + attoseconds / 1_000_000_000_000_000
    }

    // MARK: - Invariants

    private func checkInvariants() {
        assert(candidates.count <= DiscoveryLimits.candidatesMax)
        assert(sources.count <= DiscoveryLimits.sourcesTrackedMax)
        assert(loggedRejections.count <= DiscoveryLimits.rejectionsLoggedMax)
        assert(loggedDiscoveries.count <= DiscoveryLimits.discoveriesLoggedMax)
        assert(!started || nextBeaconAt != nil)
        assert(burstPending >= 0 && burstPending < schedule.burstCount)
        assert(candidates[ownTag] == nil, "a node never remembers itself")
    }
}
