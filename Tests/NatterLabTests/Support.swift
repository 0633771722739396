import NatterLab

/// A small, fast configuration for tests: few nodes, short LAN-like links, a light workload.
func smallConfiguration(seed: UInt64, nodes: Int = 5, duration: Duration = .seconds(3)) -> LabConfiguration {
    var configuration = LabConfiguration()
    configuration.seed = seed
    configuration.nodes = nodes
    configuration.latency = .milliseconds(20)
    configuration.jitter = .milliseconds(20)
    configuration.rate = 15
    configuration.duration = duration
    return configuration
}
