import NatterNetwork
import Synchronization

/// The transport's events waiting for the node actor. While the actor is busy (ingesting a batch, say), events pile
/// up here and the next turn takes them all at once, with a connection's consecutive bytes joined into one input:
/// a node that fell behind catches up in fewer, larger store transactions (group commit), and a quiet link's single
/// message still goes through on its own at once.
final class TransportInbox: Sendable {
    /// Bytes of one connection joined into one input at most: a few sync windows (8 batches of 256 KiB each), so a
    /// peer that floods the link cannot make one input unboundedly large.
    static let joinedBytesMax = 4 << 20

    private struct State {
        var events: [TCPTransport.Event] = []
        /// When bytes last arrived on each open connection since the last `takeArrivals`, handled or not.
        var arrivals: [ConnectionID: ContinuousClock.Instant] = [:]
        var waiter: CheckedContinuation<[TCPTransport.Event]?, Never>?
        var finished = false
    }

    private let state = Mutex(State())

    func put(_ event: TCPTransport.Event) {
        let arrived = ContinuousClock.now
        let waiter = state.withLock { state -> CheckedContinuation<[TCPTransport.Event]?, Never>? in
            state.events.append(event)
            switch event {
            case .received(let connection, _): state.arrivals[connection] = arrived
            case .closed(let connection): state.arrivals[connection] = nil
            default: break
            }
            guard let waiter = state.waiter else { return nil }
            state.waiter = nil
            return waiter
        }
        waiter?.resume(returning: takeAll())
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

    func finish() {
        let waiter = state.withLock { state -> CheckedContinuation<[TCPTransport.Event]?, Never>? in
            state.finished = true
            defer { state.waiter = nil }
            return state.waiter
        }
        waiter?.resume(returning: nil)
    }

    /// Every waiting event, joined; nil once the transport has finished and nothing is left. Runs on the caller's
    /// executor (the node actor's), so `put` resumes the caller there without a hop through the shared pool.
    nonisolated(nonsending) func next() async -> [TCPTransport.Event]? {
        await withCheckedContinuation { continuation in
            let ready: [TCPTransport.Event]?? = state.withLock { state in
                if !state.events.isEmpty {
                    defer { state.events = [] }
                    return .some(state.events)
                }
                if state.finished { return .some(nil) }
                state.waiter = continuation
                return .none
            }
            if let ready { continuation.resume(returning: ready.map(Self.join)) }
        }
    }

    private func takeAll() -> [TCPTransport.Event] {
        Self.join(state.withLock { state in
            defer { state.events = [] }
            return state.events
        })
    }

    /// Joins runs of `.received` on the same connection (the byte stream is the same, in fewer pieces).
    static func join(_ events: [TCPTransport.Event]) -> [TCPTransport.Event] {
        var out = [TCPTransport.Event]()
        out.reserveCapacity(events.count)
        var pending: (connection: ConnectionID, bytes: [UInt8])?
        for event in events {
            if case .received(let connection, let bytes) = event {
                if var joining = pending, joining.connection == connection,
                    joining.bytes.count + bytes.count <= joinedBytesMax
                {
                    pending = nil  // `joining` is now the only reference: the append below does not copy
                    joining.bytes += bytes
                    pending = joining
                    continue
                }
                if let pending { out.append(.received(pending.connection, pending.bytes)) }
                pending = (connection, bytes)
                continue
            }
            if let joined = pending { out.append(.received(joined.connection, joined.bytes)) }
            pending = nil
            out.append(event)
        }
        if let pending { out.append(.received(pending.connection, pending.bytes)) }
        return out
    }
}
