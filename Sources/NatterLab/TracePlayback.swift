import NatterModel
import NatterStore

/// The draws and writes of the trace entry being replayed, handed to the core as it asks for them. What the core
/// asks beyond the entry, or leaves of it, is where the replay leaves the node's path (`check`).
final class TracePlayback {
    private var draws: [UInt64]
    private var drawn = 0
    /// Values the core drew beyond the entry's: given from a fixed seed, so the replay stays deterministic.
    private var overdrawn = 0
    private var fallback = SeededGenerator(seed: 0x0DD)
    private var writes: [[TraceWrite]] = []
    private var written = 0
    private var unexpectedWrites = 0
    private var problem: String?

    init(draws: [UInt64]) { self.draws = draws }

    /// The entry about to be replayed.
    func begin(_ entry: TraceEntry) {
        draws = entry.draws
        drawn = 0
        overdrawn = 0
        writes = entry.writes
        written = 0
        unexpectedWrites = 0
        problem = nil
    }

    /// The core's generator asks for a value.
    func next() -> UInt64 {
        guard drawn < draws.count else {
            overdrawn += 1
            return fallback.next()
        }
        defer { drawn += 1 }
        return draws[drawn]
    }

    /// The core authors `count` intents: answered with the entry's next write, its records stored by `store`.
    func write(_ count: Int, _ store: (TraceRecord) throws -> Record) -> [Result<Authored, any Error>] {
        let refused = TraceReplayRefusal()
        guard written < writes.count else {
            unexpectedWrites += 1
            return Array(repeating: .failure(refused), count: count)
        }
        let results = writes[written]
        written += 1
        guard results.count == count else {
            problem = problem ?? "the core wrote \(count) intents at once where the node wrote \(results.count)"
            return Array(repeating: .failure(refused), count: count)
        }
        return results.map { result in
            guard case .wrote(let conversation, let records) = result else { return .failure(refused) }
            do {
                return .success(Authored(conversation: conversation, records: try records.map(store)))
            } catch {
                problem = problem ?? "a record the node wrote cannot be stored here: \(error)"
                return .failure(error)
            }
        }
    }

    /// What the core did differently from the node during `what` (nil: nothing).
    func check(after what: String) -> String? {
        var found = [String]()
        if overdrawn > 0 { found.append("the core drew \(overdrawn) more random values than the node") }
        if drawn < draws.count { found.append("the core drew \(drawn) of the node's \(draws.count) random values") }
        if unexpectedWrites > 0 { found.append("the core wrote \(unexpectedWrites) times where the node did not") }
        if written < writes.count {
            found.append("the node wrote \(writes.count - written) times where the core did not")
        }
        if let problem { found.append(problem) }
        return found.isEmpty ? nil : "\(what): " + found.joined(separator: "; ")
    }
}

/// The answer to an intent the node's core was refused (or that the replay could not give).
struct TraceReplayRefusal: Error, CustomStringConvertible {
    var description: String { "refused (as recorded)" }
}

/// The core's generator in a replay: the node's draws, from the trace.
struct PlaybackGenerator: RandomNumberGenerator {
    let playback: TracePlayback

    mutating func next() -> UInt64 { playback.next() }
}
