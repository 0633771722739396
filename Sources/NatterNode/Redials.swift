import NatterModel

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
/// link went down. Each address waits its `RedialBackoff`, which starts over when a link over a dial of it comes up.
/// An address whose person is linked by another connection is not dialled: when both sides dial, the link dialled
/// by the larger identity is closed as redundant, and redialling it would only lose again, every 250 ms for as long
/// as the other link lasts (a handshake each time). A discovered address whose dial never became a link (the
/// peer refused it: its connection cap, a ban) is not redialled either: its next beacon asks again.
/// `Connection` names a connection (the transport's id).
struct Redials<Connection: Hashable & Sendable>: Sendable {
    struct Entry: Equatable, Sendable {
        /// The connection to the address, while there is one (a redial waits for it to close).
        var connection: Connection?
        var nextAttempt: Duration
        var backoff: RedialBackoff
        /// When to stop redialling (peers found by discovery); nil for named peers, redialled for ever.
        var expires: Duration?
        /// Who answered at the address the last time a dial of it reached its handshake's end (nil before).
        var person: AuthorID?
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

    /// A peer found by discovery was dialled on `connection`: remembered, so that once the dial has become a link
    /// (`linked`), a cut is redialled with backoff instead of waiting for a beacon. An address already known (named,
    /// or discovered before) keeps its kind, backoff and person, and the connection it holds.
    mutating func addDiscovered(_ address: PeerAddress, connection: Connection, now: Duration) {
        if var entry = entries[address] {
            if entry.connection == nil { entry.connection = connection }  // else the one it holds stays its own
            entries[address] = entry
        } else {
            entries[address] = Entry(
                connection: connection, nextAttempt: now, backoff: backoff, expires: now + discoveredWindow)
        }
    }

    /// The handshake on `connection` ended with `person`, as a link or as a redundant one: its address's backoff
    /// starts over, and a discovered peer's window is renewed.
    mutating func linked(_ connection: Connection, person: AuthorID, now: Duration) {
        for (address, var entry) in entries where entry.connection == connection {
            entry.person = person
            entry.backoff.reset()
            if entry.expires != nil { entry.expires = now + discoveredWindow }
            entries[address] = entry
        }
    }

    /// `connection` closed: its address is due again one backoff from now — unless it was found by discovery and
    /// never linked, which its next beacon brings back.
    mutating func closed(_ connection: Connection, now: Duration) {
        for (address, entry) in entries where entry.connection == connection {
            if entry.expires != nil && entry.person == nil {
                entries[address] = nil
                continue
            }
            entries[address]?.connection = nil
            entries[address]?.nextAttempt = now + entry.backoff.delay
        }
    }

    /// Forgets the discovered peers whose window ended while they were not connected, and returns the addresses due
    /// for a dial (not connected, their next attempt reached, their person not linked), in a stable order. While
    /// its person is linked by another connection an address is not due, and a discovered one's window is renewed:
    /// it counts from when the person's last link went down.
    mutating func due(now: Duration, isLinked: (AuthorID) -> Bool) -> [PeerAddress] {
        var due = [PeerAddress]()
        for (address, entry) in entries where entry.connection == nil {
            if let person = entry.person, isLinked(person) {
                if entry.expires != nil { entries[address]?.expires = now + discoveredWindow }
            } else if let expires = entry.expires, now >= expires {
                entries[address] = nil
            } else if now >= entry.nextAttempt {
                due.append(address)
            }
        }
        return due.sorted { $0.description < $1.description }
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

    /// The dial of `address` ended: connected on `connection`, or not (nil: the next attempt stands). A connection
    /// is not yet a link: the backoff starts over only when its handshake ends (`linked`).
    mutating func dialled(_ address: PeerAddress, connection: Connection?) {
        guard var entry = entries[address] else { return }
        entry.connection = connection
        entries[address] = entry
    }
}
