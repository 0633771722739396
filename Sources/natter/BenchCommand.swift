import ArgumentParser
import Foundation
import NatterBench
import NatterModel

/// `natter bench`: the machine's physical limits beside natter's own ingest rate, measured in the same run, so
/// later work can be judged against them (docs/performance.md).
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure Ed25519 verification, SQLite inserts and full record ingest on this machine.")

    @Option(help: "Records for the insert and ingest measurements.")
    var records: Int = 100_000

    @Option(help: "Signature verifications to time.")
    var verifications: Int = 20_000

    @Option(help: "Authors writing into the benchmark conversation (each record depends on all of them).")
    var authors: Int = 8

    @Option(help: "Records per ingest transaction.")
    var batch: Int = 500

    @Flag(help: "Print one JSON object instead of the table.")
    var json = false

    @Flag(help: "Benchmark the conversation queries instead: list and open with --messages across --conversations.")
    var queries = false

    @Flag(help: "Benchmark group commits instead: create, add, remove and re-key at 3, 25, 64 and 256 members.")
    var commits = false

    @Flag(help: "Benchmark full-text search instead: the --queries store, then searches (newest 50 hits each).")
    var search = false

    @Option(help: "Conversations for --queries and --search.")
    var conversations: Int = 100

    @Option(help: "Messages in all for --queries and --search.")
    var messages: Int = 100_000

    @Option(help: "Timed rounds of each search for --search.")
    var rounds: Int = 200

    @Flag(help: "Also time a fresh node pulling --records records from another node over loopback TCP.")
    var catchUp = false

    @Flag(help: "Benchmark send → stored on another node over loopback instead, one message at a time.")
    var sendLatency = false

    @Option(help: "Messages for --send-latency.")
    var probes: Int = 1_000

    @Option(help: "Milliseconds between one message's arrival and the next send, for --send-latency.")
    var pauseMs: Int = 20

    @Flag(
        help: """
            Run --send-latency's two nodes in this one process instead of two processes pinned to their own CPUs \
            (co-located: each node's work after a send competes with the other's).
            """)
    var inProcess = false

    @Flag(
        help: """
            Benchmark the live path instead: two natter run processes on loopback, --messages lines of --size bytes \
            written to the sender's standard input as a script would, timed as the receiver prints them (--json).
            """)
    var throughput = false

    @Option(help: "Bytes per message for --throughput.")
    var size: Int = 100

    @Flag(help: .hidden)
    var latencyPeer = false

    @Option(help: .hidden)
    var peerDirectory: String?

    func validate() throws {
        guard records >= 1, verifications >= 1, rounds >= 1, conversations >= 1, messages >= conversations,
            (1...Limits.dependenciesMax).contains(authors), batch >= 1, probes >= 1, pauseMs >= 0
        else {
            throw ValidationError(
                "counts must be positive, --messages at least --conversations, and --authors at most "
                    + "\(Limits.dependenciesMax)")
        }
    }

    func run() async throws {
        if queries {
            try runQueries()
            return
        }
        if search {
            try runSearch()
            return
        }
        if commits {
            try runCommits()
            return
        }
        if latencyPeer, let peerDirectory {
            try await LatencyPeer.runReceiver(in: peerDirectory)
            return
        }
        if sendLatency {
            try await runSendLatency()
            return
        }
        if throughput {
            try await runThroughput()
            return
        }
        let report: MachineLimitsReport
        do {
            report = try await MachineLimitsReport.measure(
                records: records, verifications: verifications, authors: authors, batch: batch, catchUp: catchUp)
        } catch let shortfall as MachineLimitsReport.CatchUpShortfall {
            throw ValidationError(shortfall.description)
        }
        report.lines(json: json).forEach { print($0) }
    }

    private func runSendLatency() async throws {
        let result = try await MachineBench.withScratchDirectory { directory in
            inProcess
                ? try await NetworkBench.sendLatency(messages: probes, pause: .milliseconds(pauseMs), in: directory)
                : try await LatencyPeer.sendLatency(messages: probes, pause: .milliseconds(pauseMs), in: directory)
        }
        result.lines(messages: probes, pauseMs: pauseMs, inProcess: inProcess, json: json).forEach { print($0) }
    }

    private func runThroughput() async throws {
        let result = try await MachineBench.withScratchDirectory { directory in
            try await ThroughputBench.run(messages: messages, size: size, in: directory) { line in
                FileHandle.standardError.write(Data("… \(line)\n".utf8))
            }
        }
        result.lines(json: json).forEach { print($0) }
    }

    private func runQueries() throws {
        let result = try MachineBench.withScratchDirectory {
            try QueryBench(conversations: conversations, messages: messages).run(in: $0)
        }
        result.lines(messages: messages, conversations: conversations).forEach { print($0) }
    }

    private func runCommits() throws {
        GroupCommitBench.lines(try GroupCommitBench(sizes: [3, 25, 64, 256], rounds: 5).run()).forEach { print($0) }
    }

    private func runSearch() throws {
        let result = try MachineBench.withScratchDirectory {
            try SearchBench(conversations: conversations, messages: messages, rounds: rounds).run(in: $0)
        }
        result.lines(messages: messages, conversations: conversations, rounds: rounds, json: json).forEach { print($0) }
    }
}
