/// The inbound connections whose handshake has not finished, and the rule that admits a new one: pure, time as an
/// argument (a monotonic clock's reading), connections named by the transport.
///
/// A node completes an honest handshake in milliseconds, and an honest initiator speaks first, at once. So when
/// every slot is taken, a new connection evicts the oldest connection that has been silent for at least
/// `TCPLimits.handshakeSilenceEvictable` (or, if none is silent, the oldest in progress for that long); only when none
/// is that old is the new one refused. One address holds at most `TCPLimits.handshakesPerAddressMax` slots. A peer
/// that keeps silent connections open therefore cannot keep an honest node out: each honest connection takes the
/// place of the stalest hostile one (docs/protocol.md §2.9).
public struct HandshakeSlots<Connection: Hashable & Comparable & Sendable>: Sendable {
    /// What becomes of a new inbound connection.
    public enum Admission: Equatable, Sendable {
        /// It takes a slot; `evicting` must be closed to make room (it has been silent, or stalled, for `stalledFor`).
        case admitted(evicting: (connection: Connection, silent: Bool, stalledFor: Duration)?)
        /// Every slot is held by a handshake younger than the eviction age.
        case tableFull
        /// Its address holds `TCPLimits.handshakesPerAddressMax` slots already.
        case addressFull

        public static func == (lhs: Admission, rhs: Admission) -> Bool {
            switch (lhs, rhs) {
            case (.admitted(let a), .admitted(let b)):
                a?.connection == b?.connection && a?.silent == b?.silent && a?.stalledFor == b?.stalledFor
            case (.tableFull, .tableFull), (.addressFull, .addressFull): true
            default: false
            }
        }
    }

    private struct Slot: Sendable {
        let host: String
        let openedAt: Duration
        var silent = true
    }

    private var slots: [Connection: Slot] = [:]
    private var perAddress: [String: Int] = [:]
    public let capacity: Int
    public let perAddressMax: Int
    public let evictableAfter: Duration

    public init(
        capacity: Int = TCPLimits.handshakesInProgressMax, perAddressMax: Int = TCPLimits.handshakesPerAddressMax,
        evictableAfter: Duration = TCPLimits.handshakeSilenceEvictable
    ) {
        precondition(capacity > 0 && perAddressMax > 0 && evictableAfter >= .zero)
        self.capacity = capacity
        self.perAddressMax = perAddressMax
        self.evictableAfter = evictableAfter
    }

    /// Handshakes in progress.
    public var count: Int { slots.count }

    /// Whether at least half the slots are taken: a handshake that times out then is scored (`Node`), since it
    /// holds a place an honest peer may need.
    public var isUnderLoad: Bool { 2 * slots.count >= capacity }

    /// Admits `connection` from `host` at `now` if there is room or a stale handshake to evict (which it forgets:
    /// the caller closes it).
    public mutating func admit(_ connection: Connection, host: String, now: Duration) -> Admission {
        precondition(slots[connection] == nil, "a connection is admitted once")
        guard perAddress[host, default: 0] < perAddressMax else { return .addressFull }
        var evicted: (connection: Connection, silent: Bool, stalledFor: Duration)?
        if slots.count >= capacity {
            // Silent ones first, oldest first; ties by connection, so the choice is deterministic.
            let stale = slots.filter { now - $0.value.openedAt >= evictableAfter }.min {
                ($0.value.silent ? 0 : 1, $0.value.openedAt, $0.key) < ($1.value.silent ? 0 : 1, $1.value.openedAt, $1.key)
            }
            guard let stale else { return .tableFull }
            remove(stale.key)
            evicted = (stale.key, stale.value.silent, now - stale.value.openedAt)
        }
        slots[connection] = Slot(host: host, openedAt: now)
        perAddress[host, default: 0] += 1
        checkInvariants()
        return .admitted(evicting: evicted)
    }

    /// The connection's first bytes arrived: it is no longer silent.
    public mutating func spoke(_ connection: Connection) {
        slots[connection]?.silent = false
    }

    /// The connection's handshake finished, or it closed: its slot is free.
    public mutating func remove(_ connection: Connection) {
        guard let slot = slots.removeValue(forKey: connection) else { return }
        perAddress[slot.host, default: 1] -= 1
        if perAddress[slot.host] == 0 { perAddress[slot.host] = nil }
        checkInvariants()
    }

    /// Whether `connection` holds a slot.
    public func contains(_ connection: Connection) -> Bool { slots[connection] != nil }

    private func checkInvariants() {
        assert(slots.count <= capacity, "handshake slots over their capacity")
        assert(perAddress.values.reduce(0, +) == slots.count, "per-address counts add up to the slots")
        assert(perAddress.values.allSatisfy { (1...perAddressMax).contains($0) })
    }
}
