/// The wait before a redial: starts at `min`, doubles with every attempt up to `max`, starts over once a dial
/// connects. One per address in `Redials`; the lab's overlay keeps one per simulated node (it dials whichever node
/// it picks, not an address), so both drivers wait the same.
public struct RedialBackoff: Sendable, Equatable {
    public let min: Duration
    public let max: Duration
    /// The wait before the next attempt.
    public private(set) var delay: Duration

    public init(min: Duration, max: Duration) {
        self.min = min
        self.max = max
        delay = min
    }

    /// The shipped node's: from 250 ms to 2 s (`Node.redialBackoffMin`, `Node.redialBackoffMax`).
    public static var shipped: RedialBackoff { RedialBackoff(min: Node.redialBackoffMin, max: Node.redialBackoffMax) }

    /// An attempt starts: the wait after it doubles, up to `max`.
    public mutating func attempted() {
        delay = Swift.min(delay * 2, max)
    }

    /// A dial connected: the next wait is `min` again.
    public mutating func reset() {
        delay = min
    }
}

/// When the node dials its peers again, as a pure rule with time as input (`Node` passes its clock; tests pass
/// theirs): named peers (`--peer`) are redialled for ever, peers found by discovery for `discoveredWindow` after their
/// link went down. Each address waits its `RedialBackoff`. `Connection` names a connection (the transport's id).
struct Redials<Connection: Hashable & Sendable>: Sendable {
    struct Entry: Equatable, Sendable {
        /// The connection to the address, while there is one (a redial waits for it to close).
        var connection: Connection?
        var nextAttempt: Duration
        var backoff: RedialBackoff
        /// When to stop redialling (peers found by discovery); nil for named peers, redialled for ever.
        var expires: Duration?
    }

    /// Each new address's backoff, at its start.
    let backoff: RedialBackoff
    let discoveredWindow: Duration
    private(set) var entries: [PeerAddress: Entry] = [:]

    init(backoff: RedialBackoff, discoveredWindow: Duration) {
        self.backoff = backoff
        self.discoveredWindow = discoveredWindow
    }

    /// A named peer: due at once, then redialled for ever while not connected.
    mutating func addNamed(_ address: PeerAddress, now: Duration) {
        entries[address] = Entry(connection: nil, nextAttempt: now, backoff: backoff)
    }

    /// A peer found by discovery was dialled on `connection`: remembered for `discoveredWindow`, so a cut link is
    /// redialled with backoff instead of waiting for its next beacon. A named peer stays named.
    mutating func addDiscovered(_ address: PeerAddress, connection: Connection, now: Duration) {
        guard entries[address] == nil || entries[address]?.expires != nil else { return }
        entries[address] = Entry(
            connection: connection, nextAttempt: now, backoff: backoff, expires: now + discoveredWindow)
    }

    /// `connection` closed: its address is due again one backoff from now.
    mutating func closed(_ connection: Connection, now: Duration) {
        for (address, entry) in entries where entry.connection == connection {
            entries[address]?.connection = nil
            entries[address]?.nextAttempt = now + entry.backoff.delay
        }
    }

    /// Forgets the discovered peers whose window ended while they were not connected, and returns the addresses due
    /// for a dial (not connected, their next attempt reached), in a stable order.
    mutating func due(now: Duration) -> [PeerAddress] {
        for (address, entry) in entries where entry.connection == nil {
            if let expires = entry.expires, now >= expires { entries[address] = nil }
        }
        return entries.filter { $0.value.connection == nil && now >= $0.value.nextAttempt }.keys
            .sorted { $0.description < $1.description }
    }

    /// A dial of `address` starts now: its backoff doubles (up to the cap) and its next attempt moves that much
    /// later. False when the address was forgotten meanwhile (nothing to dial).
    mutating func attempt(_ address: PeerAddress, now: Duration) -> Bool {
        guard var entry = entries[address] else { return false }
        entry.backoff.attempted()
        entry.nextAttempt = now + entry.backoff.delay
        entries[address] = entry
        return true
    }

    /// The dial of `address` ended: connected on `connection` (the backoff starts over, and a discovered peer's window
    /// is renewed), or not (nil: the next attempt stands).
    mutating func dialled(_ address: PeerAddress, connection: Connection?, now: Duration) {
        guard var entry = entries[address] else { return }
        entry.connection = connection
        if connection != nil {
            entry.backoff.reset()
            if entry.expires != nil { entry.expires = now + discoveredWindow }
        }
        entries[address] = entry
    }
}
