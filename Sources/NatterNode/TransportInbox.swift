import NatterNetwork
import Synchronization

/// The transport's events waiting for the node actor. While the actor is busy (ingesting a batch, say), events pile
/// up here and the next turn takes them all at once, with each connection's bytes joined into one input (`join`):
/// a node that fell behind catches up in fewer, larger store transactions (group commit), and a quiet link's single
/// message still goes through on its own at once.
///
/// A turn is queued on the node's own thread (`start`), not through a task: a task's wake-up waits for a thread of
/// Swift's shared cooperative pool, so a process whose pool is busy (a front end rendering, other nodes, tests)
/// would hold every received message back, however idle the node (issue 18, "busy is not dead").
final class TransportInbox: Sendable {
    /// Bytes of one connection joined into one input at most: a few sync windows (8 batches of 256 KiB each), so a
    /// peer that floods the link cannot make one input unboundedly large.
    static let joinedBytesMax = 4 << 20

    private struct State {
        var events: [TCPTransport.Event] = []
        /// When bytes last arrived on each open connection since the last `takeArrivals`, handled or not.
        var arrivals: [ConnectionID: ContinuousClock.Instant] = [:]
        /// Queues a turn that takes the events on the node's thread (`start`); nil until the node runs.
        var queueTurn: (@Sendable () -> Void)?
        /// Whether a turn is queued and has not taken the events yet: one is enough for any number of them.
        var turnQueued = false
        var finished = false
        var finishWaiters: [CheckedContinuation<Void, Never>] = []

        /// `queueTurn` when events wait, the node runs and no turn is queued yet (marking one queued).
        mutating func queueTurnIfNeeded() -> (@Sendable () -> Void)? {
            guard !events.isEmpty, !turnQueued, !finished, let queueTurn else { return nil }
            turnQueued = true
            return queueTurn
        }
    }

    private let state = Mutex(State())

    func put(_ event: TCPTransport.Event) {
        let arrived = ContinuousClock.now
        let queueTurn = state.withLock { state -> (@Sendable () -> Void)? in
            state.events.append(event)
            switch event {
            case .received(let connection, _): state.arrivals[connection] = arrived
            case .closed(let connection): state.arrivals[connection] = nil
            default: break
            }
            return state.queueTurnIfNeeded()
        }
        queueTurn?()
    }

    /// From now on each event queues a turn with `queueTurn` (which must run `take` on the node's thread); events
    /// that waited for the node to run queue one now.
    func start(_ queueTurn: @escaping @Sendable () -> Void) {
        let queue = state.withLock { state -> (@Sendable () -> Void)? in
            state.queueTurn = queueTurn
            return state.queueTurnIfNeeded()
        }
        queue?()
    }

    /// Every waiting event, joined: the queued turn's input. Events put from now on queue the next turn.
    func take() -> [TCPTransport.Event] {
        Self.join(
            state.withLock { state in
                state.turnQueued = false
                defer { state.events = [] }
                return state.events
            })
    }

    /// When bytes last arrived on each connection that received any since the last call, including bytes still
    /// waiting here or taken by a turn that has not run yet. A link's liveness counts these (`NodeCore.heard`): a
    /// node too busy to handle what its peer sent must not declare that peer dead for the silence it only imagines.
    /// Taken, not copied: each tick tells the core only of connections heard since the one before.
    func takeArrivals() -> [ConnectionID: ContinuousClock.Instant] {
        state.withLock { state in
            defer { state.arrivals = [:] }
            return state.arrivals
        }
    }

    /// Bytes received per connection waiting for a turn (tests that make a batch pile up: `Node.holdTurns`).
    func bytesWaiting() -> [ConnectionID: Int] {
        state.withLock { state in
            var waiting = [ConnectionID: Int]()
            for case .received(let connection, let bytes) in state.events {
                waiting[connection, default: 0] += bytes.count
            }
            return waiting
        }
    }

    /// The transport has finished (or the node stops): no more turns are queued, and `untilFinished` returns.
    func finish() {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.finished = true
            state.queueTurn = nil
            defer { state.finishWaiters = [] }
            return state.finishWaiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once `finish` was called.
    func untilFinished() async {
        await withCheckedContinuation { continuation in
            let finished = state.withLock { state -> Bool in
                if !state.finished { state.finishWaiters.append(continuation) }
                return state.finished
            }
            if finished { continuation.resume() }
        }
    }

    /// Joins each connection's `.received` into as few inputs as it can: bytes join the connection's earlier input
    /// of the batch unless one of its other events (open, close, writability, drop) lies between, whatever other
    /// connections brought in between (the byte stream of each connection is the same, in fewer pieces; connections
    /// keep no order between them). A group's receipts reach a member as a frame or two on each of several links,
    /// interleaved: joined, each link's are one ingest instead of one each (issue 18).
    static func join(_ events: [TCPTransport.Event]) -> [TCPTransport.Event] {
        var out = [TCPTransport.Event]()
        out.reserveCapacity(events.count)
        /// Where each connection's input still open to more bytes sits in `out`.
        var joining = [ConnectionID: Int]()
        for event in events {
            switch event {
            case .received(let connection, let bytes):
                if let index = joining[connection], case .received(_, var joined) = out[index],
                    joined.count + bytes.count <= joinedBytesMax
                {
                    out[index] = .received(connection, [])  // `joined` is then the only reference: no copy
                    joined += bytes
                    out[index] = .received(connection, joined)
                } else {
                    joining[connection] = out.count
                    out.append(event)
                }
            case .opened(let connection, _, _), .closed(let connection), .writability(let connection, _),
                .dropped(let connection, _):
                joining[connection] = nil
                out.append(event)
            case .dialFailed:
                out.append(event)
            }
        }
        return out
    }
}
