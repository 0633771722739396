// Goal: a seed replays a run exactly, so a failing seed can be debugged. Method: the same configuration run twice
// in one process must give equal reports, byte for byte (the log digest in them covers every record id, so every
// random byte of the run is compared too).
import Foundation
import NatterLab
import Testing

@Suite("Determinism")
struct DeterminismTests {
    @Test("the same seed gives an equal report, byte for byte, twice in one process")
    func inProcess() throws {
        var configuration = smallConfiguration(seed: 42)
        configuration.randomFaults = true
        let first = try Lab.run(configuration)
        let second = try Lab.run(configuration)
        #expect(first == second)
        #expect(first.text == second.text)
        #expect(first.json == second.json)
        #expect(first.svg == second.svg)
        // Another seed is another run.
        configuration.seed = 43
        let other = try Lab.run(configuration)
        #expect(other.logDigest != first.logDigest)
    }
}

@Suite("Shared signature checks")
struct SharedSignatureCheckTests {
    @Test("the nodes checking each signature once between them run the same as each checking every one")
    func sameRunEitherWay() throws {
        var configuration = smallConfiguration(seed: 42)
        configuration.randomFaults = true
        let shared = try Lab.run(configuration)
        configuration.sharedSignatureChecks = false
        let separate = try Lab.run(configuration)
        #expect(shared.passed && separate.passed)
        #expect(shared.logDigest == separate.logDigest)
        #expect(shared.events == separate.events, "every input and action happened the same, in the same order")
        #expect(separate.text.replacingOccurrences(of: " --separate-signature-checks", with: "") == shared.text)
        #expect(separate.text.contains("--separate-signature-checks"), "the replay command names the option")
    }
}
