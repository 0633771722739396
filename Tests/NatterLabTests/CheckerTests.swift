// Goal: the checkers catch what they claim to catch; a checker that cannot fail is worthless. Method: complete a
// healthy run, plant a divergence in one node's state behind the lab's back, and expect the report to fail with
// the right checker's message.
import NatterLab
import Testing

@Suite("Checkers")
struct CheckerTests {
    @Test("a healthy run passes before anything is planted")
    func healthyRunPasses() throws {
        let simulation = try LabSimulation(smallConfiguration(seed: 21))
        simulation.run()
        let report = simulation.report()
        #expect(report.failures == [])
        #expect(report.spotChecks > 0)
    }

    @Test("a message acknowledged but never published is caught: digests differ and the record is lost elsewhere")
    func unpublishedRecord() throws {
        let simulation = try LabSimulation(smallConfiguration(seed: 22))
        simulation.run()
        try simulation.plantUnpublishedMessage(on: 2)
        let report = simulation.report()
        #expect(!report.passed)
        #expect(report.failures.contains { $0.hasPrefix("log digests differ") && $0.contains("n2") })
        #expect(report.failures.contains { $0.hasPrefix("conversation digests differ") && $0.contains("n2") })
        #expect(report.failures.contains { $0.contains("acknowledged record copies lost") && $0.hasPrefix("4 ") })
    }

    @Test("a store poisoned with a foreign record is caught by the log digest")
    func poisonedStore() throws {
        let simulation = try LabSimulation(smallConfiguration(seed: 23))
        simulation.run()
        let before = try simulation.logDigest(of: 3)
        try simulation.plantForeignRecord(on: 3)
        #expect(try simulation.logDigest(of: 3) != before)
        let report = simulation.report()
        #expect(report.failures.count == 1)
        #expect(report.failures.first?.hasPrefix("log digests differ: 4 nodes agree") == true)
        #expect(report.failures.first?.contains("{n3:") == true)
    }

    @Test("a run whose group cannot form fails with the reason instead of passing vacuously")
    func setupThatCannotFinish() throws {
        var configuration = smallConfiguration(seed: 24, nodes: 6)
        // One link per node: the nodes pair off, and the creator never hears from most of them.
        configuration.degreeMax = 1
        configuration.degreeTarget = 1
        let report = try Lab.run(configuration)
        #expect(!report.passed)
        #expect(
            report.failures.first?.contains("setup did not finish within 60s: the creator lacks the profiles") == true)
        #expect(report.operationCount == 0 && report.maxDegree == 1)
    }
}

@Suite("Checkers: streams")
struct StreamCheckerTests {
    @Test("a chunk corrupted inside a stream gets an honest peer blamed, and the run fails")
    func corruptedChunk() throws {
        let simulation = try LabSimulation(smallConfiguration(seed: 25))
        simulation.corruptChunk(10)
        simulation.run()
        let report = simulation.report()
        #expect(report.failures.first?.hasPrefix("links failed for something other than a timeout: 1 (") == true)
        #expect(report.failures.first?.contains("channel:") == true)
        // The link closes, the nodes redial, and everything still converges.
        #expect(report.failures.count == 1)
    }
}
