// Goal: gossip cannot grow less frugal unseen — a change to flow control or dissemination that sends more frames,
// more redundant copies or slower deliveries fails this test, not only the next time someone runs the 25-node
// benchmark (the priority lane's credit once raised it from 16.9 to 28.6 messages per operation with nothing
// failing). Method: a fixed short scenario of the benchmark's kind (100 ms links, no jitter, a steady workload); the
// lab is deterministic, so its figures are exact, and each must not exceed the one recorded in docs/lab.md
// ("Efficiency budget"), which this test reads: a change that makes them worse changes the recorded figures in the
// same commit, in plain sight.
import Foundation
import NatterLab
import Testing

@Suite("Gossip efficiency")
struct EfficiencyTests {
    /// The budget as docs/lab.md records it: the scenario's command line, and each figure's bound as written.
    struct Budget {
        let scenario: String
        let figures: [String: String]

        /// Reads the table between `<!-- efficiency-budget -->` and `<!-- /efficiency-budget -->`.
        static func read() throws -> Budget {
            let docs = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent().appendingPathComponent("docs/lab.md")
            let text = try String(contentsOf: docs, encoding: .utf8)
            let start = try #require(text.range(of: "<!-- efficiency-budget -->"))
            let end = try #require(text.range(of: "<!-- /efficiency-budget -->"))
            var rows = [String: String]()
            for line in text[start.upperBound..<end.lowerBound].split(separator: "\n") {
                let cells = line.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
                guard cells.count == 2, !cells[0].hasPrefix("-"), cells[0] != "figure" else { continue }
                rows[cells[0]] = cells[1].trimmingCharacters(in: CharacterSet(charactersIn: "`"))
            }
            let scenario = rows.removeValue(forKey: "scenario")
            return Budget(scenario: try #require(scenario, "docs/lab.md names no scenario"), figures: rows)
        }

        /// The bound of `figure` as a number, and its decimals (the measured figure is compared at that precision).
        func bound(_ figure: String) throws -> (value: Double, decimals: Int) {
            let text = try #require(figures[figure], "docs/lab.md records no \(figure)")
            let number = text.hasSuffix("ms") ? String(text.dropLast(2)) : text
            let decimals = number.split(separator: ".").dropFirst().first?.count ?? 0
            return (try #require(Double(number), "\(figure): \(text)"), decimals)
        }
    }

    /// The scenario: 12 nodes, 100 ms links, 60 operations a second for 4 s, seed 7.
    static var scenario: LabConfiguration {
        var configuration = LabConfiguration()
        configuration.seed = 7
        configuration.nodes = 12
        configuration.latency = .milliseconds(100)
        configuration.jitter = .zero
        configuration.rate = 60
        configuration.duration = .seconds(4)
        return configuration
    }

    /// `value` at `decimals`, rounded half up (as the docs write figures).
    static func rounded(_ value: Double, _ decimals: Int) -> Double {
        let scale = pow(10, Double(decimals))
        return (value * scale).rounded(.toNearestOrAwayFromZero) / scale
    }

    @Test("messages per operation, redundant copies and the longest delivery stay within the recorded budget")
    func withinBudget() throws {
        let budget = try Budget.read()
        #expect(budget.scenario == Self.scenario.commandLine, "docs/lab.md records the budget of another scenario")
        let report = try Lab.run(Self.scenario)
        #expect(report.failures == [])
        #expect(report.undelivered == 0)
        let latency = try #require(report.latency)
        let measured: [(String, Double)] = [
            ("messages per operation", report.framesPerOperation),
            ("redundant copies per delivered record", report.redundancy),
            ("max delivery latency", Double(latency.max.components.seconds) * 1_000
                + Double(latency.max.components.attoseconds) / 1e15),
        ]
        for (figure, value) in measured {
            let (bound, decimals) = try budget.bound(figure)
            #expect(
                Self.rounded(value, decimals) <= bound,
                "\(figure): \(value), above the \(bound) recorded in docs/lab.md (record the new figure there if intended)")
        }
        // Credit mostly rides on batches: credit frames alone are a small share of record frames.
        let kinds = Dictionary(uniqueKeysWithValues: report.framesByKind.map { ($0.name, $0.count) })
        let records = (kinds["records"] ?? 0) + (kinds["priority-records"] ?? 0)
        let credit = (kinds["credit"] ?? 0) + (kinds["priority-credit"] ?? 0)
        #expect(credit * 10 < records, "\(credit) credit frames for \(records) record frames")
    }
}
