import Foundation
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

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The `natter` executable built beside this test bundle.
func natterBinary() throws -> URL {
    let candidates = [
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("natter"),
        Bundle.main.bundleURL.deletingLastPathComponent().appendingPathComponent("natter"),
        Bundle.main.bundleURL.appendingPathComponent("natter"),
    ]
    guard let found = candidates.first(where: { FileManager.default.isExecutableFile(atPath: $0.path) }) else {
        throw TestFailure("natter binary not found next to the test bundle: \(candidates.map(\.path))")
    }
    return found
}

/// Runs `binary` to completion (bounded: 120 s) and returns status and standard output.
func run(_ binary: URL, _ arguments: [String]) throws -> (status: Int32, stdout: String) {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    try process.run()
    // Read while it runs, so a full pipe cannot block the child.
    let data = out.fileHandleForReading.readDataToEndOfFile()
    let deadline = Date().addingTimeInterval(120)
    while process.isRunning && Date() < deadline { usleep(10_000) }
    if process.isRunning {
        process.terminate()
        throw TestFailure("\(binary.lastPathComponent) \(arguments) did not finish within 120 s")
    }
    return (process.terminationStatus, String(decoding: data, as: UTF8.self))
}
