import ArgumentParser
import Foundation
import NatterLab

/// `natter lab replay FILE`: drives a node core against a trace recorded by `natter run --trace` (docs/lab.md).
struct LabReplayCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "replay",
        abstract: "Replay a node's core against the trace it recorded (natter run --trace) and print its digests.",
        discussion: """
            Needs the node's data directory (--data, read only: its identity, its network key, and the records the \
            trace names by reference); stop the node first. Prints `replay: N entries …`, then `log <hex>` and \
            `conversation <id> <hex>` lines as /digest does. Exit status 1 when the replay leaves the trace's path \
            or does not reach the digests the node recorded as it stopped.
            """)

    @Argument(help: ArgumentHelp("The trace file.", valueName: "FILE"))
    var file: String

    @OptionGroup var data: DataOption

    /// A trace file read whole at most (twice the largest bound anyone would set).
    static let fileBytesMax = 4 << 30

    func run() throws {
        let report: TraceReplayReport
        do {
            guard let size = try FileManager.default.attributesOfItem(atPath: file)[.size] as? Int,
                size <= Self.fileBytesMax
            else { throw ValidationError("\(file) is larger than \(Self.fileBytesMax >> 20) MiB") }
            guard let bytes = FileManager.default.contents(atPath: file) else {
                throw ValidationError("cannot read \(file)")
            }
            let (identity, store) = try data.dataDirectory.open()
            let networkKey = try data.dataDirectory.directory.readNetworkKey()
            report = try TraceReplay.run(Array(bytes), identity: identity, networkKey: networkKey, held: store)
        } catch {
            throw fail(error)
        }
        report.lines.forEach { print($0) }
        guard report.reproduced else { throw ExitCode.failure }
    }
}
