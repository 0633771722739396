import ArgumentParser
import Foundation
import NatterLab

/// `natter lab`: the convergence lab (docs/lab.md). Many real node cores in one process over a simulated network
/// with faults; deterministic, so a seed replays a run exactly.
struct LabCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "lab",
        abstract: "Simulate many nodes over a faulty network and check that they converge.",
        discussion: "Everything runs on a virtual clock from one seed: the same command prints the same report.",
        subcommands: [
            LabRunCommand.self, LabSweepCommand.self, LabShrinkCommand.self, LabTradeOffCommand.self,
            LabReplayCommand.self,
        ])
}

/// The network and workload options `run` and `sweep` share.
struct LabOptions: ParsableArguments {
    @Option(help: "Nodes in the simulation (2–256).")
    var nodes: Int?

    @Option(help: ArgumentHelp("One-way link latency.", valueName: "DURATION"), transform: durationArgument)
    var latency: Duration?

    @Option(
        help: ArgumentHelp("Extra one-way delay per chunk, uniform in 0...jitter.", valueName: "DURATION"),
        transform: durationArgument)
    var jitter: Duration?

    @Option(
        help: ArgumentHelp("Operations per second over all nodes (100 or 100/s).", valueName: "RATE"),
        transform: rateArgument)
    var rate: Double?

    @Option(
        help: ArgumentHelp("Length of the workload; faults heal at its end.", valueName: "DURATION"),
        transform: durationArgument)
    var duration: Duration?

    @Option(name: .customLong("late"), help: "Nodes that join during the workload (the creator adds them).")
    var lateJoiners: Int = 0

    @Flag(help: "Group churn: the creator removes a random member every few seconds and adds it back.")
    var churn = false

    @Flag(
        inversion: .prefixedNo,
        help: "With random faults: a twin (a restored backup of a member) forks its feeds in one seed out of five.")
    var forks = true

    @Flag(
        help: "The chat setting: each node writes its receipts as the shipped node does; the workload writes none.")
    var nodeReceipts = false

    @Flag(
        help: ArgumentHelp(
            "Each node checks every record's signature itself, as a real one does (default: the simulated nodes "
                + "check each record once between them; the same outcomes, less CPU)."))
    var separateSignatureChecks = false

    @Option(help: "Most links per node.")
    var degreeMax: Int?

    @Option(help: "Links a node dials towards.")
    var degreeTarget: Int?

    @Option(
        help: ArgumentHelp(
            "Least time between two record batches on a link under load (the nodes' push interval).",
            valueName: "DURATION"),
        transform: durationArgument)
    var pushInterval: Duration?

    @Option(
        help: ArgumentHelp(
            "List the workload's first deliveries slower than this, each with the path its feed's tree took.",
            valueName: "DURATION"),
        transform: durationArgument)
    var slow: Duration?

    @Option(
        help: ArgumentHelp(
            "Refresh the conversation tables this long after records arrive, instead of after each turn as the node "
                + "does (faster sweeps; not what ships).",
            valueName: "DURATION"),
        transform: durationArgument)
    var refreshDelay: Duration?

    func apply(to configuration: inout LabConfiguration) {
        if let nodes { configuration.nodes = nodes }
        if let latency { configuration.latency = latency }
        if let jitter { configuration.jitter = jitter }
        if let rate { configuration.rate = rate }
        if let duration { configuration.duration = duration }
        configuration.lateJoiners = lateJoiners
        configuration.churn = churn
        configuration.randomForks = forks
        configuration.nodeReceipts = nodeReceipts
        configuration.sharedSignatureChecks = !separateSignatureChecks
        if let degreeMax { configuration.degreeMax = degreeMax }
        if let degreeTarget { configuration.degreeTarget = degreeTarget }
        if let pushInterval { configuration.pushInterval = pushInterval }
        if let slow { configuration.slowThreshold = slow }
        configuration.refreshDelay = refreshDelay
    }
}

private func durationArgument(_ text: String) throws -> Duration {
    guard let duration = parseDuration(text) else {
        throw ValidationError("'\(text)' is not a duration: write 100ms, 2s or 1.5s")
    }
    return duration
}

private func rateArgument(_ text: String) throws -> Double {
    guard let rate = parseRate(text), rate > 0 else {
        throw ValidationError("'\(text)' is not a rate: write 100 or 100/s")
    }
    return rate
}

private func faultArgument(_ text: String) throws -> LabFault {
    guard let fault = LabFault(parsing: text) else {
        throw ValidationError(
            "'\(text)' is not a fault: write partition@10s+3s[:n1.n4], crash:n3@1.2s[+800ms], stall@2s+1500ms "
                + "or twin:n2@1s+500ms")
    }
    return fault
}

private func variantArgument(_ text: String) throws -> LabVariant {
    guard let variant = LabVariant(rawValue: text) else {
        throw ValidationError(
            "'\(text)' is not a variant: write " + LabVariant.allCases.map(\.rawValue).joined(separator: ", "))
    }
    return variant
}

private func windowArgument(_ text: String) throws -> LabWindow {
    guard let window = LabWindow(parsing: text) else {
        throw ValidationError("'\(text)' is not a partition: write START:LENGTH, e.g. 10s:3s")
    }
    return window
}

/// The seed and the faults of one run: what `run` and `shrink` share.
struct LabRunOptions: ParsableArguments {
    @OptionGroup var options: LabOptions

    @Option(help: "The seed every decision of the run comes from.")
    var seed: UInt64 = 1

    @Option(
        help: ArgumentHelp(
            "Split the nodes in two random halves from START for LENGTH after the workload starts (repeatable).",
            valueName: "START:LENGTH"),
        transform: windowArgument)
    var partition: [LabWindow] = []

    @Option(help: "Nodes that crash at a random moment of the workload and stay down.")
    var crash: Int = 0

    @Option(help: "Nodes that crash at a random moment and restart 0.5–3 s later on the same store.")
    var crashRestart: Int = 0

    @Option(help: "Probability that a chunk sent during the workload resets its link instead of arriving (0–1).")
    var resetRate: Double = 0

    @Option(help: "Random link stalls (deliveries held 0.5–4 s) during the workload.")
    var stalls: Int = 0

    @Option(help: "Probability that a dial is duplicated, or answered by a dial back (0–1).")
    var duplicateDials: Double = 0

    @Flag(help: "Draw the faults from the seed, as `natter lab sweep` does.")
    var randomFaults = false

    @Option(
        help: ArgumentHelp(
            "One fault, timed from the workload's start: partition@10s+3s[:n1.n4], crash:n3@1.2s[+800ms] (restart "
                + "after), stall@2s+1500ms, twin:n2@1s+500ms (a backup of n2 runs as a second node; repeatable).",
            valueName: "FAULT"),
        transform: faultArgument)
    var fault: [LabFault] = []

    @Option(
        help: ArgumentHelp(
            "A deliberately broken n1, to prove a checker fires: drop-record, early-apply or accept-removed.",
            valueName: "NAME"),
        transform: variantArgument)
    var variant: LabVariant?

    func configuration() throws -> LabConfiguration {
        var configuration = LabConfiguration()
        options.apply(to: &configuration)
        configuration.seed = seed
        configuration.partitions = partition
        configuration.crashes = crash
        configuration.crashRestarts = crashRestart
        configuration.resetRate = resetRate
        configuration.stalls = stalls
        configuration.duplicateDials = duplicateDials
        configuration.randomFaults = randomFaults
        configuration.faults = fault
        configuration.variant = variant
        if let problem = configuration.problem { throw ValidationError(problem) }
        return configuration
    }
}

/// `natter lab run`: one simulation, its checks and its metrics.
struct LabRunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run",
        abstract: "Run one simulation and print its report (exit status 1 when a check fails).")

    @OptionGroup var runOptions: LabRunOptions

    @Flag(help: "Print the report as one JSON object.")
    var json = false

    @Option(help: ArgumentHelp("Write a picture of dissemination over time to FILE.", valueName: "FILE"))
    var svg: String?

    @Option(
        help: ArgumentHelp(
            "Write a message-sequence diagram to FILE: who sent what to whom, when (SVG).", valueName: "FILE"))
    var msc: String?

    @Option(
        help: ArgumentHelp(
            "Where the diagram starts, in simulated time since the run began (default: the workload's start).",
            valueName: "DURATION"),
        transform: durationArgument)
    var mscFrom: Duration?

    @Option(
        help: ArgumentHelp("How much simulated time the diagram shows (default 1s).", valueName: "DURATION"),
        transform: durationArgument)
    var mscLength: Duration = .seconds(1)

    @Option(
        help: ArgumentHelp(
            "The nodes the diagram draws, in order (default: the first 12): n0,n3,n5.", valueName: "NODES"))
    var mscNodes: String?

    func run() throws {
        let configuration = try runOptions.configuration()
        var window: SequenceWindow?
        if msc != nil {
            var nodes: [Int]?
            if let mscNodes {
                nodes = try mscNodes.split(separator: ",").map { name in
                    guard name.hasPrefix("n"), let index = Int(name.dropFirst()), index >= 0 else {
                        throw ValidationError("'\(name)' is not a node: write n0,n3,n5")
                    }
                    return index
                }
            }
            window = SequenceWindow(from: mscFrom, length: mscLength, nodes: nodes)
        }
        let report: LabReport
        do {
            report = try Lab.run(configuration, sequence: window)
        } catch {
            throw fail(error)
        }
        print(json ? report.json : report.text, terminator: "")
        do {
            if let svg { try Data(report.svg.utf8).write(to: URL(fileURLWithPath: svg)) }
            if let msc, let sequence = report.sequence {
                let title = "Messages: " + configuration.commandLine.replacingOccurrences(of: "natter lab run ", with: "")
                try Data(sequence.svg(title: title).utf8).write(to: URL(fileURLWithPath: msc))
            }
        } catch {
            throw fail(error)
        }
        if !report.passed { throw ExitCode.failure }
    }
}

/// `natter lab shrink`: a failing run reduced to a smaller one that fails the same way, and its replay command.
struct LabShrinkCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "shrink",
        abstract: "Reduce a failing run's faults and workload to a smaller run that fails the same way.",
        discussion: """
            Takes the options of `natter lab run` (a failing sweep line's replay command, with `shrink` for `run`). \
            Names the faults one by one, then drops faults, halves the duration and the rate, takes nodes away, \
            keeping each change that still fails with the same checker. Prints each run tried, then the replay \
            command of the smallest failing run found. Exit status 1 when the given run does not fail.
            """)

    @OptionGroup var runOptions: LabRunOptions

    @Option(help: "Runs the shrink may spend at most.")
    var runs: Int = 150

    func run() throws {
        var shrink = LabShrink(try runOptions.configuration())
        shrink.runsMax = max(1, runs)
        let result: LabShrinkResult
        do {
            result = try shrink.run { configuration, report, kept in
                let verdict = report.passed ? "passes" : "fails: \(report.failures.first ?? "")"
                let line = "\(kept ? "kept " : "tried") \(configuration.commandLine) → \(verdict)"
                FileHandle.standardOutput.write(Data((line + "\n").utf8))
            }
        } catch {
            throw fail(error)
        }
        print(
            "minimal (\(result.runs) runs, fails on \(result.signature)): \(result.report.failures.first ?? "")")
        print("replay: \(result.minimal.commandLine)")
    }
}

/// `natter lab tradeoff`: one run per push interval; a table and a picture of messages against latency.
struct LabTradeOffCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "tradeoff",
        abstract: "Run one setting at several push intervals; print a table and draw messages against latency.",
        discussion: """
            Takes the options of `natter lab run` (--push-interval is replaced by each of --push-intervals). \
            Prints one Markdown row per interval as it is measured; --svg draws messages per operation across and \
            the median, p95 and maximum delivery latency up, with the targets dashed.
            """)

    @OptionGroup var runOptions: LabRunOptions

    @Option(help: ArgumentHelp("The push intervals to run, in order: 20ms,40ms,80ms.", valueName: "DURATIONS"))
    var pushIntervals: String = "10ms,20ms,40ms,60ms,80ms,100ms"

    @Option(help: ArgumentHelp("Write the trade-off picture to FILE.", valueName: "FILE"))
    var svg: String?

    func run() throws {
        let intervals = try pushIntervals.split(separator: ",").map { try durationArgument(String($0)) }
        guard !intervals.isEmpty else { throw ValidationError("--push-intervals names no interval") }
        var tradeOff = LabTradeOff(try runOptions.configuration())
        print(tradeOff.configuration.commandLine + " --push-interval …")
        LabTradeOff.tableHeader.forEach { print($0) }
        do {
            try tradeOff.run(intervals: intervals) { print(LabTradeOff.row($0)) }
        } catch {
            throw fail(error)
        }
        if let svg {
            do {
                try Data(tradeOff.svg().utf8).write(to: URL(fileURLWithPath: svg))
            } catch {
                throw fail(error)
            }
        }
        if tradeOff.points.contains(where: { !$0.report.passed }) { throw ExitCode.failure }
    }
}

/// `natter lab sweep`: many seeds with random faults; one line per failing seed, then `N passed, N failed`.
struct LabSweepCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "sweep",
        abstract: "Run many seeds with random faults; print each failing seed's replay command and a summary.",
        discussion: """
            Defaults: 8 nodes, 20ms latency with 20ms jitter, 20 ops/s for 4s. Faults per seed: link resets on \
            0–30 % of chunks, duplicate dials, stalls, up to two partitions, up to two crash-restarts and sometimes \
            a crash for good. Exit status 1 when a seed fails.
            """)

    @OptionGroup var options: LabOptions

    @Option(help: "Seeds to run.")
    var seeds: Int = 100

    @Option(help: "The first seed (the sweep runs first-seed, first-seed + 1, …).")
    var firstSeed: UInt64 = 1

    @Flag(help: "Print one line per seed, passed or not.")
    var verbose = false

    func validate() throws {
        guard seeds >= 1 else { throw ValidationError("--seeds must be at least 1") }
    }

    func run() throws {
        var base = LabConfiguration()
        base.nodes = 8
        base.latency = .milliseconds(20)
        base.jitter = .milliseconds(20)
        base.rate = 20
        base.duration = .seconds(4)
        options.apply(to: &base)
        let sweep = LabSweep(base: base, firstSeed: firstSeed, seeds: seeds)
        if let problem = sweep.configuration(seed: firstSeed).problem { throw ValidationError(problem) }
        let result: LabSweepResult
        do {
            result = try sweep.run { report in
                let summary = LabSweepResult.Summary(report)
                // Written at once (not through print's buffer), so a long sweep shows failures as they come.
                if !summary.passed || verbose { FileHandle.standardOutput.write(Data((summary.text + "\n").utf8)) }
            }
        } catch {
            throw fail(error)
        }
        for line in result.summaryLines { print(line) }
        if result.failed > 0 { throw ExitCode.failure }
    }
}
