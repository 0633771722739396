/// One fault of an explicit schedule (`--fault`), timed from the start of the workload.
///
/// The count options (`--crash K`, `--stalls N`, …) and `--random-faults` draw their faults; an explicit schedule
/// names each one, so a run can be replayed and shrunk fault by fault (`natter lab shrink`). A random-faults run
/// reports its drawn schedule (`LabReport.faultPlan`), and running that schedule explicitly replays the run
/// exactly: the schedule is drawn from a stream of its own, so the rest of the run draws the same numbers either
/// way.
public enum LabFault: Sendable, Hashable, CustomStringConvertible {
    /// The nodes split in two for `length` from `at`: `apart` on one side, or (nil) a random half drawn then.
    case partition(at: Duration, length: Duration, apart: [Int]?)
    /// Node `node` crashes at `at`; it restarts on its store `restartAfter` later, or (nil) stays down.
    case crash(node: Int, at: Duration, restartAfter: Duration?)
    /// A random established link holds its deliveries, both ways, for `length` from `at`.
    case stall(at: Duration, length: Duration)
    /// A copy of node `node`'s store, taken at `at` as a backup would be, starts as a second node with the same
    /// identity and writes a message after `length` (then stops for good): the author's feeds fork.
    case twin(node: Int, at: Duration, length: Duration)

    /// When the fault strikes, from the start of the workload.
    public var at: Duration {
        switch self {
        case .partition(let at, _, _), .crash(_, let at, _), .stall(let at, _), .twin(_, let at, _): at
        }
    }

    /// When its effect ends, from the start of the workload (a crash for good: never).
    var end: Duration? {
        switch self {
        case .partition(let at, let length, _), .stall(let at, let length), .twin(_, let at, let length): at + length
        case .crash(_, let at, let restartAfter): restartAfter.map { at + $0 }
        }
    }

    /// The nodes the fault names.
    var nodes: [Int] {
        switch self {
        case .partition(_, _, let apart): apart ?? []
        case .crash(let node, _, _), .twin(let node, _, _): [node]
        case .stall: []
        }
    }

    /// `partition@10s+3s`, `partition@10s+3s:n1.n4`, `crash:n3@1.2s`, `crash:n3@1.2s+800ms`, `stall@2s+1500ms`,
    /// `twin:n2@1s+500ms`: what `--fault` takes.
    public var description: String {
        func node(_ index: Int) -> String { "n\(index)" }
        switch self {
        case .partition(let at, let length, let apart):
            return "partition@\(formatDuration(at))+\(formatDuration(length))"
                + (apart.map { ":" + $0.map(node).joined(separator: ".") } ?? "")
        case .crash(let index, let at, let restartAfter):
            return "crash:\(node(index))@\(formatDuration(at))" + (restartAfter.map { "+\(formatDuration($0))" } ?? "")
        case .stall(let at, let length):
            return "stall@\(formatDuration(at))+\(formatDuration(length))"
        case .twin(let index, let at, let length):
            return "twin:\(node(index))@\(formatDuration(at))+\(formatDuration(length))"
        }
    }

    /// Parses what `description` prints.
    public init?(parsing text: String) {
        func node(_ text: Substring) -> Int? {
            guard text.hasPrefix("n"), let index = Int(text.dropFirst()), index >= 0 else { return nil }
            return index
        }
        /// `AT` or `AT+LENGTH`.
        func times(_ text: Substring) -> (Duration, Duration?)? {
            let parts = text.split(separator: "+", omittingEmptySubsequences: false)
            guard (1...2).contains(parts.count), let at = parseDuration(String(parts[0])) else { return nil }
            guard parts.count == 2 else { return (at, nil) }
            guard let length = parseDuration(String(parts[1])) else { return nil }
            return (at, length)
        }
        guard let sign = text.firstIndex(of: "@") else { return nil }
        let head = text[..<sign]
        var tail = text[text.index(after: sign)...]
        let kind = head.split(separator: ":", maxSplits: 1, omittingEmptySubsequences: false)
        switch kind[0] {
        case "partition" where kind.count == 1:
            var apart: [Int]?
            if let colon = tail.firstIndex(of: ":") {
                let names = tail[tail.index(after: colon)...].split(separator: ".")
                let indices = names.compactMap(node)
                guard !indices.isEmpty, indices.count == names.count else { return nil }
                apart = indices
                tail = tail[..<colon]
            }
            guard let (at, length) = times(tail), let length, length > .zero else { return nil }
            self = .partition(at: at, length: length, apart: apart)
        case "crash" where kind.count == 2:
            guard let index = node(kind[1]), let (at, restart) = times(tail) else { return nil }
            self = .crash(node: index, at: at, restartAfter: restart)
        case "stall" where kind.count == 1:
            guard let (at, length) = times(tail), let length, length > .zero else { return nil }
            self = .stall(at: at, length: length)
        case "twin" where kind.count == 2:
            guard let index = node(kind[1]), let (at, length) = times(tail), let length else { return nil }
            self = .twin(node: index, at: at, length: length)
        default:
            return nil
        }
    }
}
