import Foundation

/// Many seeds, each with faults drawn from it: loss as link resets (0–30 % of chunks), duplicate dials and
/// reconnects, reordering across links (jitter), stalls, partitions, crash-restarts and now and then a crash for
/// good. A failing seed prints the command that replays it.
public struct LabSweep: Sendable {
    /// What every seed shares (its seed and `randomFaults` are set per run).
    public var base: LabConfiguration
    public var firstSeed: UInt64
    public var seeds: Int

    public init(base: LabConfiguration, firstSeed: UInt64 = 1, seeds: Int) {
        self.base = base
        self.firstSeed = firstSeed
        self.seeds = seeds
    }

    /// The configuration of one seed of the sweep.
    public func configuration(seed: UInt64) -> LabConfiguration {
        var configuration = base
        configuration.seed = seed
        configuration.randomFaults = true
        return configuration
    }

    /// Runs every seed in order; `each` sees every report as it completes.
    public func run(_ each: (LabReport) -> Void = { _ in }) throws(LabError) -> LabSweepResult {
        var summaries = [LabSweepResult.Summary]()
        for offset in 0..<seeds {
            let report = try Lab.run(configuration(seed: firstSeed &+ UInt64(offset)))
            each(report)
            summaries.append(LabSweepResult.Summary(report))
        }
        return LabSweepResult(summaries: summaries)
    }
}

/// The outcome of a sweep: one summary per seed, and the lines `natter lab sweep` prints.
public struct LabSweepResult: Sendable, Equatable {
    public struct Summary: Sendable, Equatable {
        public let seed: UInt64
        public let passed: Bool
        public let line: String?
        public let convergence: Duration?
        public let framesPerOperation: Double
        public let latencyP99: Duration?
        public let coverage: LabCoverage
    }

    public let summaries: [Summary]

    init(summaries: [Summary]) {
        self.summaries = summaries
    }

    public var passed: Int { summaries.filter(\.passed).count }
    public var failed: Int { summaries.count - passed }

    /// Statistics across seeds, then `N passed, N failed` alone on the last line.
    public var summaryLines: [String] {
        var lines = [String]()
        // What the seeds exercised: each counter's total, and in how many seeds it was not zero.
        let counts = summaries.map(\.coverage.counts)
        if let names = counts.first?.map(\.name) {
            let totals = names.indices.map { index in
                let values = counts.map { $0[index].count }
                return "\(names[index]) \(values.reduce(0, +)) (\(values.filter { $0 > 0 }.count) seeds)"
            }
            lines.append("coverage across \(summaries.count) seeds: " + totals.joined(separator: ", "))
        }
        let convergence = summaries.compactMap(\.convergence)
        if let quantiles = LabReport.Quantiles(convergence) {
            lines.append(
                "convergence after heal across \(quantiles.count) seeds: p50 \(formatSeconds(quantiles.p50)) "
                    + "p95 \(formatSeconds(quantiles.p95)) p99 \(formatSeconds(quantiles.p99)) "
                    + "max \(formatSeconds(quantiles.max))")
        }
        lines.append("\(passed) passed, \(failed) failed")
        return lines
    }
}

extension LabSweepResult.Summary {
    /// The seed's line: its failure with trace and replay command, or `ok` with its convergence time.
    public var text: String {
        line
            ?? "ok seed \(seed): convergence \(convergence.map(formatSeconds) ?? "-"), "
            + String(format: "%.1f messages per operation", framesPerOperation)
    }

    public init(_ report: LabReport) {
        seed = report.configuration.seed
        passed = report.passed
        convergence = report.convergence
        framesPerOperation = report.framesPerOperation
        latencyP99 = report.latency?.p99
        coverage = report.coverage
        line =
            report.passed
            ? nil
            : "FAIL seed \(report.configuration.seed): \(report.failures.first ?? "?")"
                + (report.failures.count > 1 ? " (+\(report.failures.count - 1) more)" : "")
                + " | trace: \(report.faultTrace.isEmpty ? "no faults" : report.faultTrace.joined(separator: "; "))"
                + " | replay: \(report.configuration.commandLine)"
    }
}
