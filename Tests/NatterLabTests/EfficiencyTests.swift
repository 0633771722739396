// Goal: gossip stays frugal — a change to flow control or dissemination that multiplies frames fails a test, not
// only the next time someone runs the 25-node benchmark (the priority lane's credit once raised it from 16.9 to
// 28.6 messages per operation unnoticed). Method: a smaller version of the benchmark's setting (100 ms links, no
// jitter, a steady workload), deterministic, with bounds on frame kinds that hold with a wide margin today.
import NatterLab
import Testing

@Suite("Gossip efficiency")
struct EfficiencyTests {
    static func report() throws -> LabReport {
        var configuration = LabConfiguration()
        configuration.seed = 7
        configuration.nodes = 12
        configuration.latency = .milliseconds(100)
        configuration.jitter = .zero
        configuration.rate = 60
        configuration.duration = .seconds(5)
        return try Lab.run(configuration)
    }

    @Test("credit mostly rides on batches: credit frames are a small share of record frames on both lanes")
    func creditRides() throws {
        let report = try Self.report()
        #expect(report.failures == [])
        let kinds = Dictionary(uniqueKeysWithValues: report.framesByKind.map { ($0.name, $0.count) })
        let records = (kinds["records"] ?? 0) + (kinds["priority-records"] ?? 0)
        let credit = (kinds["credit"] ?? 0) + (kinds["priority-credit"] ?? 0)
        #expect(records > 1_000, "the workload ran")
        #expect(credit * 10 < records, "\(credit) credit frames for \(records) record frames")
        // Each operation reaches 11 other nodes; a tree with few copies sends about that many frames (10.5 on
        // 2026-11-26; 17.1 with a priority credit frame per live push).
        #expect(report.framesPerOperation < 14, "\(report.framesPerOperation) frames per operation")
        // Diameter 2 to 3 hops of 100 ms plus the 40 ms push interval each (344.6 ms; 453.8 ms when a third record
        // in a round trip waited for credit).
        let latency = try #require(report.latency)
        #expect(latency.max < .milliseconds(420), "longest delivery \(latency.max)")
        #expect(report.redundancy < 1, "\(report.redundancy) redundant copies per delivered record")
        #expect(report.undelivered == 0)
    }
}
