public import NatterStore
import Synchronization

/// The answer to intents handed to `Node.submit`: what each wrote, or why it was refused, once they are durable.
public final class WriteTicket: Sendable {
    private struct State {
        var results: [Result<Authored, any Error>]?
        var waiters: [CheckedContinuation<[Result<Authored, any Error>], Never>] = []
    }

    private let state = Mutex(State())

    init() {}

    /// What each intent wrote (in order), once its transaction committed; waits until then.
    public func results() async -> [Result<Authored, any Error>] {
        await withCheckedContinuation { continuation in
            let ready = state.withLock { state -> [Result<Authored, any Error>]? in
                if let results = state.results { return results }
                state.waiters.append(continuation)
                return nil
            }
            if let ready { continuation.resume(returning: ready) }
        }
    }

    func resolve(_ results: [Result<Authored, any Error>]) {
        let waiters = state.withLock { state in
            state.results = results
            defer { state.waiters = [] }
            return state.waiters
        }
        for waiter in waiters { waiter.resume(returning: results) }
    }
}

/// Intents waiting for the node actor, in the order they were submitted. Whatever piles up while the actor is busy
/// (an fsync, a refresh) is carried out in one turn, its content intents in one transaction: when lines arrive
/// faster than one fsync, several share it (group commit).
final class WriteQueue: Sendable {
    /// Intents queued at most; a front end that submits more waits for the answers of earlier ones (its tickets)
    /// before the queue takes them, so it cannot grow without bound: `submit` refuses past it.
    static let intentsMax = 4_096

    private struct State {
        var pending: [(intents: [ConversationIntent], ticket: WriteTicket)] = []
        var count = 0
        /// Whether a drain is scheduled on the actor.
        var scheduled = false
    }

    private let state = Mutex(State())

    /// Queues intents; true when the caller must schedule a drain (none is scheduled yet). Nil when the queue is
    /// full.
    func put(_ intents: [ConversationIntent], _ ticket: WriteTicket) -> Bool? {
        state.withLock { state in
            guard state.count + intents.count <= Self.intentsMax || state.pending.isEmpty else { return nil }
            state.pending.append((intents, ticket))
            state.count += intents.count
            defer { state.scheduled = true }
            return !state.scheduled
        }
    }

    /// Whether intents wait for a drain.
    var hasPending: Bool { state.withLock { !$0.pending.isEmpty } }

    /// Everything queued, in order; the next `put` schedules a new drain.
    func takeAll() -> [(intents: [ConversationIntent], ticket: WriteTicket)] {
        state.withLock { state in
            defer {
                state.pending = []
                state.count = 0
                state.scheduled = false
            }
            return state.pending
        }
    }
}
