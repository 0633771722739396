// Goal: the convergence toolkit is trustworthy. Each checker fires on a node broken in the way it watches for (a
// checker that cannot fail is worthless); a shrink turns a seeded failure into a smaller run that fails the same way
// and replays; a random-faults seed and its faults named one by one are the same run; the message-sequence diagram
// is bounded and deterministic; coverage counts what a run did. Method: short seeded runs of the lab, each
// compared with the same run of correct nodes where that matters.
import NatterLab
import Testing

@Suite("Convergence toolkit")
struct ToolkitTests {
    /// Jittery links and a brisk workload: records often arrive before a dependency that took another path.
    static func jittery(seed: UInt64) -> LabConfiguration {
        var configuration = smallConfiguration(seed: seed, nodes: 8, duration: .seconds(3))
        configuration.latency = .milliseconds(10)
        configuration.jitter = .milliseconds(60)
        configuration.rate = 40
        return configuration
    }

    @Test("drop-record: a node that loses a record it applied fails the no-loss checker")
    func dropRecordFires() throws {
        var configuration = smallConfiguration(seed: 3, nodes: 6)
        #expect(try Lab.run(configuration).failures == [])
        configuration.variant = .dropRecord
        let report = try Lab.run(configuration)
        #expect(report.failures.contains { $0.contains("acknowledged record copies lost") && $0.contains("on n1") })
        #expect(report.faultTrace.contains { $0.contains("variant: n1 drops message") })
    }

    @Test("early-apply: a node that applies records before their dependencies fails the causal-order checker")
    func earlyApplyFires() throws {
        // A seed where n1 receives a record ahead of a dependency that took another path (not every seed does).
        var configuration = Self.jittery(seed: 2)
        #expect(try Lab.run(configuration).failures == [])
        configuration.variant = .earlyApply
        let report = try Lab.run(configuration)
        #expect(report.failures.contains { $0.hasPrefix("records applied before a dependency: ") && $0.contains("n1 applied") })
    }

    @Test("accept-removed: a node that accepts a removed member's messages fails the conversation-digest checker")
    func acceptRemovedFires() throws {
        // A seed where the raced message of a removed member reaches n1 after the removal (not every seed's does).
        var configuration = smallConfiguration(seed: 1, nodes: 6, duration: .seconds(4))
        configuration.churn = true
        let correct = try Lab.run(configuration)
        #expect(correct.failures == [])
        #expect(correct.coverage.racedRemovals > 0, "a removal was raced by its member's message")
        configuration.variant = .acceptRemoved
        let report = try Lab.run(configuration)
        #expect(report.failures.contains { $0.hasPrefix("conversation digests differ") && $0.contains("{n1:") })
    }

    @Test("a removal stranded on a creator that crashed for good locks nobody out, and the checker expects none")
    func strandedRemoval() throws {
        // Seed 788 of the sweep, shrunk: the creator, cut off from everyone, removes n3 and dies for good before the
        // removal leaves it. For the network the removal never happened: n3 stays a member everywhere.
        var configuration = smallConfiguration(seed: 788, nodes: 4, duration: .seconds(4))
        configuration.jitter = .zero
        configuration.rate = 1
        configuration.churn = true
        configuration.faults = try ["partition@746ms+2339ms:n0", "crash:n0@1674ms"].map {
            try #require(LabFault(parsing: $0))
        }
        let report = try Lab.run(configuration)
        #expect(report.faultTrace.contains { $0.contains("remove n3") })
        #expect(report.stranded == 1)
        #expect(report.failures == [])
    }

    @Test("an add stranded on a creator that crashed for good leaves the member removed, as the network saw it")
    func strandedReadd() throws {
        // Seed 2741 of the sweep, shrunk: n1 is removed (the removal spreads), added back 14 ms before the creator
        // dies for good, so the add never leaves it. n1 stays removed everywhere, and must be locked out.
        var configuration = smallConfiguration(seed: 2741, nodes: 3, duration: .seconds(4))
        configuration.jitter = .zero
        configuration.rate = 20
        configuration.lateJoiners = 1
        configuration.churn = true
        configuration.faults = [try #require(LabFault(parsing: "crash:n0@3314ms"))]
        let report = try Lab.run(configuration)
        #expect(report.faultTrace.contains { $0.contains("remove n1") })
        #expect(report.faultTrace.contains { $0.contains("add n1") })
        #expect(report.stranded > 0)
        #expect(report.failures == [])
    }

    /// A shrunk seed of the `--forks` sweep: the sweep's network, 20 operations a second, its faults named.
    static func shrunkFork(
        seed: UInt64, nodes: Int, duration: Duration, resetRate: Double, duplicateDials: Double, churn: Bool = false,
        faults: [String]
    ) throws -> LabReport {
        var configuration = smallConfiguration(seed: seed, nodes: nodes, duration: duration)
        configuration.churn = churn
        configuration.rate = 20
        configuration.resetRate = resetRate
        configuration.duplicateDials = duplicateDials
        configuration.faults = try faults.map { try #require(LabFault(parsing: $0)) }
        return try Lab.run(configuration)
    }

    @Test("a fork whose twin branch stayed home is forgotten, and the original's records depend on its own branch")
    func twinBranchStayedHome() throws {
        // Seed 191 of the `--forks` sweep, shrunk: the twin's record came first into the ledger at the fork's
        // sequence, its branch reached no live node, and the checker then took it for the original's next record's
        // predecessor (12 records "applied before a dependency").
        let report = try Self.shrunkFork(
            seed: 191, nodes: 8, duration: .seconds(2), resetRate: 0.2704157518926197,
            duplicateDials: 0.25877133238184274, faults: ["twin:n1@634ms+569ms"])
        #expect(report.stranded == 1, "the twin's record")
        #expect(report.coverage.forks == 0)
        #expect(report.failures == [])
    }

    @Test("a fork whose original branch died with its node is forgotten: the twin's branch is the feed")
    func originalBranchDied() throws {
        // Seed 581 of the `--forks` sweep, shrunk: n1 forks, its twin's branch spreads, n1 dies for good before its
        // own branch leaves it. No live node holds a fork, and the checker waited for one (never converged). The crash
        // was at 2,210 ms until new links raced the trees (2026-11-29), which let the branch leave by then; at 2,280 ms
        // it still fails with the old checker (checked: "not converged 90s after the heal").
        let report = try Self.shrunkFork(
            seed: 581, nodes: 3, duration: .seconds(4), resetRate: 0.17866493856782464,
            duplicateDials: 0.08548793866769995, faults: ["crash:n1@2280ms", "twin:n1@667ms+1036ms"])
        #expect(report.stranded > 0, "the original's branch")
        #expect(report.coverage.forks == 0)
        #expect(report.failures == [])
    }

    @Test("records a fork cuts in the turn that applied them are not reported applied")
    func forkCutsWithinATurn() throws {
        // Seed 788 of the sweep with twins, shrunk: in one turn a node applied records of the twin's original, then
        // its causal buffer gave up evidence of the fork, which cut them; the turn's applied event still named them,
        // and the spot check found a record "applied beyond its feed's applied prefix". The twin started at 1,833 ms
        // until new links raced the trees (2026-11-29), which moved the turns; at 1,760 ms the run fails without the
        // fix (checked) and passes with it.
        let report = try Self.shrunkFork(
            seed: 788, nodes: 8, duration: .seconds(4), resetRate: 0.046940717143882,
            duplicateDials: 0.14804154240800074, churn: true,
            faults: ["partition@746ms+2339ms:n0.n5.n6.n7", "twin:n5@1760ms+330ms"])
        #expect(report.coverage.forks == 1)
        #expect(report.failures == [])
    }

    @Test("a random-faults seed and its faults named one by one are the same run")
    func explicitReplay() throws {
        var configuration = smallConfiguration(seed: 2, nodes: 6, duration: .seconds(3))
        configuration.randomFaults = true
        let drawn = try Lab.run(configuration)
        #expect(!drawn.plan.faults.isEmpty && !drawn.plan.randomFaults)
        let named = try Lab.run(drawn.plan)
        #expect(named.logDigest == drawn.logDigest)
        #expect(named.faultTrace == drawn.faultTrace)
        #expect(named.text.split(separator: "\n").dropFirst(2) == drawn.text.split(separator: "\n").dropFirst(2))
        // The explicit command line reads back as the same configuration.
        let parsed = drawn.plan.faults.map { LabFault(parsing: $0.description) }
        #expect(parsed == drawn.plan.faults.map(Optional.init))
    }

    @Test("shrink turns a seeded failure of a broken node into a smaller failing run that replays")
    func shrinkEarlyApply() throws {
        // The first of 40 seeds whose random faults let the broken node apply early: which seed does depends on
        // every timing rule of the node, and is not what this test is about (seed 2 until a REROUTE heard from a
        // link not the parent counted, seed 24 since: a record stored ahead of its dependencies is rare).
        func broken(_ seed: UInt64) -> LabConfiguration {
            var configuration = Self.jittery(seed: seed)
            configuration.randomFaults = true
            configuration.variant = .earlyApply
            return configuration
        }
        let seed = try #require(
            try (UInt64(1)...40).first { LabShrink.signatures(of: try Lab.run(broken($0))).contains("causal order") })
        let configuration = broken(seed)
        var shrink = LabShrink(configuration)
        shrink.runsMax = 25
        let result = try shrink.run()
        #expect(result.signature == "causal order")
        let minimal = result.minimal
        #expect(!minimal.randomFaults)
        #expect(minimal.nodes <= configuration.nodes && minimal.duration <= configuration.duration)
        #expect(minimal.nodes < configuration.nodes || minimal.duration < configuration.duration)
        // Its replay command names a run that fails the same way.
        let replay = try Lab.run(minimal)
        #expect(LabShrink.signatures(of: replay).contains("causal order"))
        #expect(replay.configuration.commandLine == minimal.commandLine)
        #expect(minimal.commandLine.contains("--variant early-apply"))
    }

    @Test("--slow lists the first slow deliveries with the tree path up to their author, and changes nothing")
    func slowDeliveries() throws {
        var configuration = smallConfiguration(seed: 3)
        let plain = try Lab.run(configuration)
        configuration.slowThreshold = .zero
        let listed = try Lab.run(configuration)
        #expect(plain.slow.isEmpty)
        #expect(listed.logDigest == plain.logDigest && listed.frames == plain.frames)
        #expect(listed.slow.count == LabLimits.slowDeliveriesMax)
        for delivery in listed.slow {
            #expect(delivery.took > .zero && delivery.receiver != delivery.author)
            // From the receiver up its parents to the author, no node twice.
            #expect(delivery.path.first == delivery.receiver && delivery.path.last == delivery.author)
            #expect(Set(delivery.path).count == delivery.path.count)
        }
        #expect(listed.text.contains("slow: "))
    }

    @Test("a passing run has nothing to shrink")
    func shrinkRefusesPassingRun() {
        #expect(throws: LabError.self) { try LabShrink(smallConfiguration(seed: 3)).run() }
    }

    @Test("the message-sequence diagram shows the frames of its window between its nodes, bounded, and the same twice")
    func sequenceDiagram() throws {
        let configuration = smallConfiguration(seed: 4, nodes: 5)
        let window = SequenceWindow(length: .milliseconds(500), nodes: [0, 2, 3])
        let first = try Lab.run(configuration, sequence: window)
        let second = try Lab.run(configuration, sequence: window)
        let log = try #require(first.sequence)
        #expect(log == second.sequence)
        #expect(!log.frames.isEmpty && log.frames.count <= LabLimits.sequenceFramesMax)
        #expect(log.frames.allSatisfy { [0, 2, 3].contains($0.from) && [0, 2, 3].contains($0.to) })
        #expect(log.frames.allSatisfy { $0.sentAt >= log.start && $0.sentAt < log.start + window.length })
        #expect(log.frames.allSatisfy { $0.arrivesAt > $0.sentAt })
        #expect(Set(log.frames.map(\.kind)).isSubset(of: ["records", "priority-records", "prune", "credit",
            "priority-credit", "request", "reroute", "leaving", "ping", "summary", "heads", "done", "handshake"]))
        let svg = log.svg(title: "test")
        #expect(svg == second.sequence?.svg(title: "test"))
        #expect(svg.hasPrefix("<svg") && svg.count < 2_000_000)
        // Drawing the diagram does not change the run.
        #expect(first.logDigest == (try Lab.run(configuration)).logDigest)
    }
}

@Suite("Push-interval trade-off")
struct TradeOffTests {
    @Test("one run per interval, a row and a point each, the same picture twice")
    func tradeOff() throws {
        var configuration = smallConfiguration(seed: 2, nodes: 5, duration: .seconds(2))
        configuration.latency = .milliseconds(50)
        configuration.jitter = .zero
        configuration.rate = 40
        var first = LabTradeOff(configuration)
        try first.run(intervals: [.milliseconds(10), .milliseconds(80)])
        var second = LabTradeOff(configuration)
        try second.run(intervals: [.milliseconds(10), .milliseconds(80)])
        #expect(first.points.map(\.report.passed) == [true, true])
        #expect(first.points.map(\.report.configuration.pushInterval) == [.milliseconds(10), .milliseconds(80)])
        #expect(first.points.map { LabTradeOff.row($0) } == second.points.map { LabTradeOff.row($0) })
        let svg = first.svg()
        #expect(svg == second.svg())
        #expect(svg.components(separatedBy: "<circle").count - 1 == 2)
        // Each interval's run is the run with that --push-interval.
        var direct = configuration
        direct.pushInterval = .milliseconds(80)
        #expect(try Lab.run(direct).logDigest == first.points[1].report.logDigest)
    }
}
