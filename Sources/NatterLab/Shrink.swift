/// Reduces a failing run to a smaller one that still fails the same way (`natter lab shrink`): fewer faults, a
/// shorter and lighter workload, fewer nodes. The result is a configuration whose `commandLine` replays it.
///
/// The faults are first named one by one (`FaultPlan.materialized`: for a random-faults seed, the same run), then
/// each change is tried in turn — drop a fault, stop resets or duplicate dials, stop churn or late joins, halve the
/// duration or the rate, drop jitter, take nodes away — and kept when the run still fails with the same checker
/// (`LabShrink.signature`). Passes repeat until none helps or `runsMax` runs are spent. Greedy, so minimal in the
/// sense that no single step of these shrinks it further, not the smallest failing run there is.
public struct LabShrink: Sendable {
    public let original: LabConfiguration
    /// Runs the shrink may spend, the first included.
    public var runsMax = 150

    public init(_ original: LabConfiguration) {
        self.original = original
    }

    /// The checker a failure comes from, as a word: what a smaller run must fail too.
    public static func signature(of failure: String) -> String {
        // Failures found during the run carry their simulated time: "12.345s: ...".
        var text = Substring(failure)
        if let colon = text.firstIndex(of: ":"), text[..<colon].hasSuffix("s"),
            Double(text[..<text.index(before: colon)]) != nil
        {
            text = text[text.index(after: colon)...].drop { $0 == " " }
        }
        let categories: [(String, String)] = [
            ("not converged", "convergence"), ("log digests differ", "log digests"),
            ("conversation digests differ", "conversation digests"), ("acknowledged record copies lost", "lost records"),
            ("records applied before a dependency", "causal order"), ("before its dependency", "causal order"),
            ("beyond its feed's applied prefix", "causal order"), ("for something other than a timeout", "blamed peer"),
            ("above the cap", "degree cap"), ("above its bound", "causal buffer"), ("setup did not finish", "setup"),
            ("should be a member", "membership"), ("not locked out", "membership"),
            ("reported", "causal order"),
        ]
        for (needle, category) in categories where text.contains(needle) { return category }
        return String(text.prefix(40))
    }

    /// The checkers `report` failed, as signatures.
    public static func signatures(of report: LabReport) -> Set<String> {
        Set(report.failures.map(signature(of:)))
    }

    /// Shrinks: `each` sees every run as it completes, with whether it was kept. Throws when the original passes.
    public func run(_ each: (LabConfiguration, LabReport, Bool) -> Void = { _, _, _ in }) throws(LabError)
        -> LabShrinkResult
    {
        var runs = 0
        func attempt(_ configuration: LabConfiguration) throws(LabError) -> LabReport {
            runs += 1
            return try Lab.run(configuration)
        }
        let first = try attempt(original)
        each(original, first, true)
        guard let signature = first.failures.first.map(Self.signature(of:)) else {
            throw .invalidConfiguration("the run passes: there is nothing to shrink")
        }
        var best = original
        var bestReport = first
        func keeps(_ candidate: LabConfiguration) throws(LabError) -> Bool {
            guard candidate != best, candidate.problem == nil, runs < runsMax else { return false }
            let report = try attempt(candidate)
            let kept = Self.signatures(of: report).contains(signature)
            each(candidate, report, kept)
            if kept {
                best = candidate
                bestReport = report
            }
            return kept
        }
        // Name the faults one by one; a random-faults seed replays the same run that way.
        _ = try keeps(first.plan)
        var progress = true
        while progress, runs < runsMax {
            progress = false
            for candidate in Self.steps(from: best) where runs < runsMax {
                if try keeps(candidate) {
                    progress = true
                    break
                }
            }
        }
        return LabShrinkResult(
            original: original, minimal: best, signature: signature, runs: runs, report: bestReport)
    }

    /// The smaller configurations to try next, most effective first.
    static func steps(from configuration: LabConfiguration) -> [LabConfiguration] {
        var steps = [LabConfiguration]()
        func with(_ change: (inout LabConfiguration) -> Void) {
            var candidate = configuration
            change(&candidate)
            steps.append(candidate.fitted())
        }
        if configuration.nodes > 2 {
            with { $0.nodes = max(2, $0.nodes / 2) }
            with { $0.nodes -= 1 }
        }
        if configuration.duration > .milliseconds(500) {
            with { $0.duration = max(.milliseconds(500), $0.duration / 2) }
        }
        for index in configuration.faults.indices.reversed() { with { $0.faults.remove(at: index) } }
        if configuration.resetRate > 0 { with { $0.resetRate = 0 } }
        if configuration.duplicateDials > 0 { with { $0.duplicateDials = 0 } }
        if configuration.churn { with { $0.churn = false } }
        if configuration.lateJoiners > 0 { with { $0.lateJoiners = 0 } }
        if configuration.stalls > 0 { with { $0.stalls = 0 } }
        if configuration.crashes + configuration.crashRestarts > 0 {
            with {
                $0.crashes = 0
                $0.crashRestarts = 0
            }
        }
        if !configuration.partitions.isEmpty { with { $0.partitions = [] } }
        if configuration.rate > 1 { with { $0.rate = max(1, ($0.rate / 2).rounded()) } }
        if configuration.jitter > .zero { with { $0.jitter = .zero } }
        return steps
    }
}

extension LabConfiguration {
    /// This configuration with what no longer fits left out: faults beyond the duration or naming nodes beyond the
    /// count, partitions' sides clipped to the nodes, late joiners and crashes within what the nodes allow.
    func fitted() -> LabConfiguration {
        var fitted = self
        fitted.lateJoiners = min(lateJoiners, max(0, nodes - 2))
        fitted.crashes = min(crashes, max(0, nodes - 1))
        fitted.crashRestarts = min(crashRestarts, max(0, nodes - 1 - fitted.crashes))
        fitted.partitions = partitions.filter { $0.start + $0.length <= duration }
        fitted.faults = faults.compactMap { fault -> LabFault? in
            switch fault {
            case .partition(let at, let length, let apart):
                let clipped = apart?.filter { $0 < nodes }
                if let clipped, clipped.isEmpty || clipped.count >= nodes { return nil }
                return .partition(at: at, length: length, apart: clipped)
            default:
                return fault
            }
        }
        var probe = fitted
        probe.faults = []
        fitted.faults = fitted.faults.filter { fault in
            probe.faults = [fault]
            return probe.faultProblem == nil
        }
        return fitted
    }
}

/// What a shrink found.
public struct LabShrinkResult: Sendable {
    public let original: LabConfiguration
    /// The smallest failing configuration found; `minimal.commandLine` replays it.
    public let minimal: LabConfiguration
    /// The checker both fail (`LabShrink.signature`).
    public let signature: String
    public let runs: Int
    /// The minimal configuration's report.
    public let report: LabReport
}
