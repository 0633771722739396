// Goal: a REROUTE that crossed a PRUNE is not lost (docs/protocol.md §3.3 step 6, "REROUTE"). In the Maelstrom
// setting at seed 16, n18's parent for n10's feed was n13 (2 hops from n10); a new link's race made n20 the parent
// for a moment, n13 lost its own link to n10 and sent REROUTE, which n18 heard while n20 was the parent, so it
// ignored it; n13 then brought the next record first, became the parent again, and n18 got n10's records over 4
// hops for the rest of the run beside three 2-hop paths (a 560 ms maximum). A REROUTE from a link that is not the
// parent now counts if that link becomes the parent within the race. Method: that run, cut to 5 s (the same first
// seconds); its maximum is 553 ms without the rule. The lab is deterministic: this is an exact check, not a timing.
import NatterLab
import Testing

@Suite("Trees: a REROUTE heard from a link that becomes the parent")
struct RerouteMemoryTests {
    @Test("the Maelstrom setting at seed 16 keeps every delivery under 500 ms")
    func seed16() throws {
        var configuration = LabConfiguration()
        configuration.seed = 16
        configuration.nodes = 25
        configuration.latency = .milliseconds(100)
        configuration.jitter = .zero
        configuration.rate = 100
        configuration.duration = .seconds(5)
        let report = try Lab.run(configuration)
        #expect(report.failures == [])
        let latency = try #require(report.latency)
        #expect(latency.max < .milliseconds(500), "the longest delivery took \(latency.max)")
    }
}
