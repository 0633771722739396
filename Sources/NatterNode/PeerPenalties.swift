public import NatterModel

/// Who is penalised: the source address of a connection (all that is known before the handshake reveals an
/// identity), and once the handshake has proven it, the peer's identity as well.
public enum Offender: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// An IP address as the transport reports it (no port: a redial comes from another port).
    case address(String)
    case peer(AuthorID)

    public var description: String {
        switch self {
        case .address(let host): host
        case .peer(let author): "peer \(author.publicKey.fingerprint)"
        }
    }
}

/// What a peer did that an honest natter node never does. Timeouts, cuts, closes and version mismatches are not
/// misbehaviour (the network, a crash or an old node): they are never penalised.
public struct Misbehaviour: Equatable, Sendable, CustomStringConvertible {
    public enum Kind: Equatable, Sendable, CustomStringConvertible {
        /// Handshake message 1 did not decrypt: a node of another network (misconfigured) or a scanner.
        case wrongNetworkKey
        /// The handshake broke its rules after the network key was proven (bad identity binding, weak key, a frame
        /// too large, a malformed or replayed message).
        case failedHandshake
        /// A transport frame failed authentication or broke the framing of the secure channel.
        case malformedFrame
        /// A well-framed message broke the sync protocol, or carried a record with a bad signature.
        case protocolViolation
        /// An inbound connection held a handshake slot without finishing (silent, or stalled mid-way) while the slots
        /// were under load: evicted for a newer connection, or timed out. A slowloris's mark; an honest node on a bad
        /// network may do it once, so it costs 1 point.
        case stalledHandshake
        /// The peer did not read what the node sent it, while asking for more (`TCPLimits.outboundBytesMax`).
        case notReading

        public var description: String {
            switch self {
            case .wrongNetworkKey: "wrong network key"
            case .failedHandshake: "failed handshake"
            case .malformedFrame: "malformed frame"
            case .protocolViolation: "protocol violation"
            case .stalledHandshake: "stalled handshake"
            case .notReading: "not reading"
            }
        }
    }

    public let kind: Kind
    /// The error as the link machine named it (one line).
    public let detail: String

    public init(_ kind: Kind, _ detail: String) {
        self.kind = kind
        self.detail = detail
    }

    public var description: String { "\(kind): \(detail)" }
}

/// The numbers of `PeerPenalties`, each with its reason.
public struct PenaltyConfiguration: Sendable, Equatable {
    /// Points that start a ban: 4. Two malformed links in a row, or four with another network key: an honest
    /// peer on TCP never produces either (TCP does not corrupt bytes), so this is a faulty or hostile node.
    public var banThresholdPoints = 4
    /// Points for one link of another network: 1. A misconfigured neighbour redials with backoff; a few attempts
    /// are tolerated, then it is kept out so it costs no more handshakes (and log lines).
    public var wrongNetworkKeyPoints = 1
    /// Points for a stalled handshake while the handshake slots are under load: 1 (a slowloris holding slots from one
    /// address is banned after its fourth).
    public var stalledHandshakePoints = 1
    /// Points for every other misbehaviour: 2 (a second offence within the decay bans).
    public var misbehaviourPoints = 2
    /// One point is forgiven per this much time without offence: 60 s. A peer that failed once an hour ago starts
    /// clean, a flood does not.
    public var pointDecayInterval: Duration = .seconds(60)
    /// The first ban lasts 10 s: long enough to stop a reconnect loop, short enough that a peer fixed by a restart
    /// (or an address reused by an honest node) is back quickly.
    public var banDurationMin: Duration = .seconds(10)
    /// Each further ban doubles, up to 10 minutes: a persistent offender costs a handshake per ban at most.
    public var banDurationMax: Duration = .seconds(600)
    /// Bans are remembered (for doubling) this long after the last offence: 1 hour, then the next ban starts at
    /// `banDurationMin` again.
    public var banMemory: Duration = .seconds(3600)
    /// Offenders tracked at once: 1024. When full, the least guilty (fewest points, offended longest ago, not
    /// banned) is forgotten; TCP source addresses cannot be spoofed cheaply, so this bounds memory, not safety.
    public var offendersTrackedMax = 1024

    public init() {}
}

/// Scores peers that misbehave and bans repeated offenders for a growing time. Pure and deterministic: no clock
/// inside (every call takes `now`), dictionaries iterated in sorted order; the node drives it and enforces the bans
/// (refusing connections from and dials to banned addresses, links of banned identities, and their beacons).
///
/// An offence adds points to each offender; points decay by one per `pointDecayInterval`. When an offender reaches
/// `banThresholdPoints` it is banned for `banDurationMin`, doubling with each ban remembered (`banMemory`), capped at
/// `banDurationMax`, and its points start again from zero. A ban is reported once, when it starts.
public struct PeerPenalties: Sendable {
    /// What the node must act on: a ban began (log it once; refuse the offender until `until`).
    public enum Verdict: Equatable, Sendable, CustomStringConvertible {
        case banned(Offender, duration: Duration, until: Duration, after: Misbehaviour)

        public var description: String {
            switch self {
            case .banned(let offender, let duration, _, let after):
                "banned \(offender) for \(duration.components.seconds) s after repeated misbehaviour (last: \(after))"
            }
        }
    }

    private struct Entry: Equatable {
        var points: Int
        /// When `points` was last decayed (advanced in whole decay intervals).
        var decayedAt: Duration
        var lastOffence: Duration
        /// Bans so far (reset after `banMemory` without offence).
        var bans: Int
        var bannedUntil: Duration?
    }

    public let configuration: PenaltyConfiguration
    private var entries: [Offender: Entry] = [:]

    public init(configuration: PenaltyConfiguration = PenaltyConfiguration()) {
        precondition(configuration.banThresholdPoints > 0 && configuration.offendersTrackedMax > 0)
        precondition(
            configuration.banDurationMin > .zero && configuration.banDurationMin <= configuration.banDurationMax)
        precondition(configuration.pointDecayInterval > .zero)
        self.configuration = configuration
    }

    /// Offenders currently tracked (bounded by `offendersTrackedMax`).
    public var trackedCount: Int { entries.count }

    /// Scores one misbehaviour against every offender given (the address, and the identity once known). Offenders
    /// already banned are not scored again. Returns the bans that begin now.
    public mutating func offended(_ offenders: [Offender], _ misbehaviour: Misbehaviour, now: Duration) -> [Verdict] {
        let points =
            switch misbehaviour.kind {
            case .wrongNetworkKey: configuration.wrongNetworkKeyPoints
            case .stalledHandshake: configuration.stalledHandshakePoints
            default: configuration.misbehaviourPoints
            }
        var verdicts = [Verdict]()
        for offender in Set(offenders).sorted() {
            var entry = entries[offender].map { decayed($0, now: now) }
            if entry == nil {
                makeRoom(now: now)
                entry = Entry(points: 0, decayedAt: now, lastOffence: now, bans: 0, bannedUntil: nil)
            }
            guard var entry else { continue }
            if let until = entry.bannedUntil, until > now { continue }
            entry.bannedUntil = nil
            if entry.bans > 0 && now - entry.lastOffence >= configuration.banMemory { entry.bans = 0 }
            if entry.points == 0 { entry.decayedAt = now }
            entry.points += points
            entry.lastOffence = now
            if entry.points >= configuration.banThresholdPoints {
                entry.bans += 1
                let duration = banDuration(afterBans: entry.bans)
                entry.bannedUntil = now + duration
                entry.points = 0
                verdicts.append(.banned(offender, duration: duration, until: now + duration, after: misbehaviour))
            }
            entries[offender] = entry
        }
        checkInvariants()
        return verdicts
    }

    /// Whether `offender` is banned at `now`.
    public func isBanned(_ offender: Offender, now: Duration) -> Bool {
        guard let until = entries[offender]?.bannedUntil else { return false }
        return until > now
    }

    /// Every offender banned at `now`, in order.
    public func banned(now: Duration) -> [Offender] {
        entries.keys.sorted().filter { isBanned($0, now: now) }
    }

    /// Points an offender holds at `now` (after decay).
    public func points(of offender: Offender, now: Duration) -> Int {
        entries[offender].map { decayed($0, now: now).points } ?? 0
    }

    /// When the earliest ban ends (the node refreshes what it refuses then).
    public func nextDeadline(now: Duration) -> Duration? {
        entries.values.compactMap(\.bannedUntil).filter { $0 > now }.min()
    }

    /// Forgets offenders with nothing left against them (no points, no ban, no remembered ban).
    public mutating func forgetForgiven(now: Duration) {
        for offender in entries.keys.sorted() {
            let entry = decayed(entries[offender]!, now: now)
            let banOver = entry.bannedUntil.map { $0 <= now } ?? true
            let bansForgotten = entry.bans == 0 || now - entry.lastOffence >= configuration.banMemory
            if entry.points == 0 && banOver && bansForgotten { entries[offender] = nil }
        }
        checkInvariants()
    }

    // MARK: - Private

    private func banDuration(afterBans bans: Int) -> Duration {
        var duration = configuration.banDurationMin
        for _ in 1..<max(bans, 1) {
            duration = duration * 2
            if duration >= configuration.banDurationMax { return configuration.banDurationMax }
        }
        return min(duration, configuration.banDurationMax)
    }

    /// `entry` with one point taken off per whole decay interval since it was last decayed.
    private func decayed(_ entry: Entry, now: Duration) -> Entry {
        guard entry.points > 0, now > entry.decayedAt else { return entry }
        let steps = Int((now - entry.decayedAt) / configuration.pointDecayInterval)
        guard steps > 0 else { return entry }
        var result = entry
        result.points = max(0, entry.points - steps)
        result.decayedAt = entry.decayedAt + configuration.pointDecayInterval * steps
        return result
    }

    /// Makes room for one more offender: forgets the forgiven first, then the least guilty not banned, then the
    /// ban that ends first.
    private mutating func makeRoom(now: Duration) {
        guard entries.count >= configuration.offendersTrackedMax else { return }
        forgetForgiven(now: now)
        guard entries.count >= configuration.offendersTrackedMax else { return }
        let candidates = entries.keys.sorted().map { ($0, decayed(entries[$0]!, now: now)) }
        let free = candidates.filter { !($0.1.bannedUntil.map { $0 > now } ?? false) }
        let victim =
            free.min { ($0.1.points, $0.1.lastOffence) < ($1.1.points, $1.1.lastOffence) }
            ?? candidates.min { ($0.1.bannedUntil ?? now) < ($1.1.bannedUntil ?? now) }
        if let victim { entries[victim.0] = nil }
    }

    private func checkInvariants() {
        assert(entries.count <= configuration.offendersTrackedMax, "offender table over its bound")
        assert(entries.values.allSatisfy { $0.points >= 0 && $0.points < configuration.banThresholdPoints })
    }
}
