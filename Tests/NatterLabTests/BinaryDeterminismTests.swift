// Goal: a seed printed by `natter lab` replays in another process, whatever that process's hash seed. Method: run
// the `natter lab run` binary twice and compare its output with itself and with the same run in this process.
import Foundation
import NatterLab
import NatterTestSupport
import Testing

@Suite("Determinism of the natter binary")
struct BinaryDeterminismTests {
    @Test("two runs of the natter binary print the same report")
    func binaryTwice() async throws {
        let natter = try builtExecutable("natter")
        let arguments = [
            "lab", "run", "--seed", "9", "--nodes", "5", "--latency", "20ms", "--jitter", "10ms", "--rate", "15",
            "--duration", "2s", "--random-faults", "--json",
        ]
        let first = try await runProcess(natter, arguments)
        let second = try await runProcess(natter, arguments)
        #expect(first.status == 0)
        #expect(first.stdout.contains("\"passed\":true"))
        #expect(first.stdout == second.stdout)
        // And the process agrees with the library run in this one.
        var configuration = smallConfiguration(seed: 9, duration: .seconds(2))
        configuration.jitter = .milliseconds(10)
        configuration.randomFaults = true
        #expect(try Lab.run(configuration).json == first.stdout)
    }
}
