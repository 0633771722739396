import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterBench
import NatterStore

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
        let workload = BenchWorkload.make(records: records, authors: authors)
        let sample = workload.records[min(authors, workload.records.count - 1)]
        let verify = MachineBench.verifyRate(sample, count: verifications)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let verifyAll = MachineBench.verifyRateOnAllCores(sample, count: verifications, cores: cores)
        let decode = MachineBench.rate(count: workload.records.count) {
            for record in workload.records { _ = try? Record.decodeVerified(record.bytes) }
        }
        let insert = try MachineBench.insertRate(workload.records, batch: batch)
        let ingest = try MachineBench.ingestRate(workload.records, batch: batch)
        var catchUpRate: Double?
        if catchUp {
            let result = try await MachineBench.withScratchDirectory { directory in
                try await NetworkBench.catchUp(records: workload.records, in: directory)
            }
            guard result.recordsHeld == records, result.recordsApplied == records else {
                throw ValidationError(
                    "catch-up ended holding \(result.recordsHeld) and applying \(result.recordsApplied) of \(records)")
            }
            catchUpRate = Double(records) / max(result.seconds, 1e-9)
        }
        var results: [(String, Int, Double, String)] = [
            ("ed25519_verify", verifications, verify, "one core, \(sample.bytes.count)-byte records"),
            (
                "verify_all_cores", verifications, verifyAll,
                "\(cores) cores in parallel, best of \(MachineBench.ceilingTrials) runs"
            ),
            ("decode_verify", workload.records.count, decode, "decode + canonical check + signature, one core"),
            (
                "sqlite_insert", workload.records.count, insert,
                "record rows, \(batch) per transaction, synchronous=FULL"
            ),
            (
                "full_ingest", workload.records.count, ingest,
                "RecordStore.ingest, \(batch) per batch, \(authors) authors"
            ),
        ]
        if let catchUpRate {
            results.append(
                (
                    "catch_up", records, catchUpRate,
                    "fresh node pulls over loopback TCP + Noise + sync, link up → caught up"
                ))
        }
        if json {
            let fields = results.map { "\"\($0.0)_per_second\": \(Int($0.1))" }.joined(separator: ", ")
            print(
                "{\(fields), \"records\": \(records), \"authors\": \(authors), \"cores\": \(ProcessInfo.processInfo.activeProcessorCount)}"
            )
            return
        }
        print(
            "natter bench: \(records) records, \(authors) authors, \(ProcessInfo.processInfo.activeProcessorCount) cores"
        )
        for (name, count, rate, note) in results {
            print(
                name.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + "\(count)".leftPadded(9) + " ops " + "\(Int(rate))".leftPadded(9) + " /s   " + note)
        }
        let limit = min(verifyAll, insert)
        print(
            "full ingest reaches \(Int((ingest / limit * 100).rounded()))% of the lower physical limit "
                + "(min of verify on all cores and insert)")
        if let catchUpRate {
            print("catch-up reaches \(Int((catchUpRate / limit * 100).rounded()))% of the lower physical limit")
        }
    }

    private func runSendLatency() async throws {
        let result = try await MachineBench.withScratchDirectory { directory in
            inProcess
                ? try await NetworkBench.sendLatency(messages: probes, pause: .milliseconds(pauseMs), in: directory)
                : try await LatencyPeer.sendLatency(messages: probes, pause: .milliseconds(pauseMs), in: directory)
        }
        func quantiles(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(
                format: "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms", sorted[sorted.count / 2],
                sorted[sorted.count * 9 / 10], sorted[min(sorted.count - 1, sorted.count * 99 / 100)], sorted.last!)
        }
        if json {
            let sorted = result.millis.sorted()
            let durable = result.durableMillis.sorted()
            let append = result.appendMillis.sorted()
            print(
                String(
                    format: "{\"messages\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"durable_p50_ms\": %.3f, "
                        + "\"durable_p99_ms\": %.3f, \"append_p50_ms\": %.3f}",
                    probes, sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)],
                    durable[durable.count / 2], durable[min(durable.count - 1, durable.count * 99 / 100)],
                    append[append.count / 2]))
            return
        }
        print(
            "natter bench --send-latency: \(probes) messages one at a time (\(pauseMs) ms apart), two nodes over "
                + "loopback TCP, "
                + (inProcess ? "in one process" : "in two processes pinned to CPUs 0 and 1 (as on two machines)"))
        print("send → stored on the other node   " + quantiles(result.millis))
        print("send → durable on the other node  " + quantiles(result.durableMillis))
        print("of which appendOwn (fsync) alone  " + quantiles(result.appendMillis))
    }

    private func runThroughput() async throws {
        let result = try await MachineBench.withScratchDirectory { directory in
            try await ThroughputBench.run(messages: messages, size: size, in: directory) { line in
                FileHandle.standardError.write(Data("… \(line)\n".utf8))
            }
        }
        let tenths = result.tenths.map { String(Int($0.rounded())) }.joined(separator: " ")
        let flatness = (result.tenths.last ?? 0) / max(result.tenths.first ?? 1, 1e-9)
        let ofVerify = result.overall / max(result.verifyRate, 1e-9)
        if json {
            print(
                "{\"messages\": \(result.messages), \"size\": \(result.size), \"arrived\": \(result.arrived), "
                    + "\"tenths_per_second\": [\(result.tenths.map { String(Int($0.rounded())) }.joined(separator: ", "))], "
                    + "\"overall_per_second\": \(Int(result.overall)), \"verify_per_second\": \(Int(result.verifyRate)), "
                    + "\"insert_per_second\": \(Int(result.insertRate)), \"sender_held\": \(result.senderHeld), "
                    + "\"receiver_held\": \(result.receiverHeld)}")
            return
        }
        print(
            "natter bench --throughput: \(result.messages) messages of \(result.size) bytes, two natter run processes "
                + "(--json) on loopback")
        print("arrived                 \(result.arrived) of \(result.messages)")
        print("per tenth (messages/s)  \(tenths)")
        print(String(format: "last tenth / first      %.2f", flatness))
        print("overall                 \(Int(result.overall)) messages/s")
        print("one core verifies       \(Int(result.verifyRate)) signatures/s   (overall is \(Int((ofVerify * 100).rounded()))% of it)")
        print("SQLite inserts          \(Int(result.insertRate)) rows/s")
        print("chat records held after stopping: sender \(result.senderHeld), receiver \(result.receiverHeld)")
    }

    private func runQueries() throws {
        let result = try MachineBench.withScratchDirectory {
            try QueryBench(conversations: conversations, messages: messages).run(in: $0)
        }
        func quantiles(_ values: [Double]) -> String {
            String(
                format: "p50 %.2f ms  p90 %.2f ms  max %.2f ms", values[values.count / 2],
                values[values.count * 9 / 10], values.last!)
        }
        print(
            "natter bench --queries: \(messages) messages in \(conversations) conversations "
                + String(format: "(populated in %.1f s)", result.populateSeconds))
        print("list conversations   " + quantiles(result.listMillis))
        print("open (last 50)       " + quantiles(result.openMillis))
        print("filter the list      " + quantiles(result.filterMillis))
    }

    private func runCommits() throws {
        let rows = try GroupCommitBench(sizes: [3, 25, 64, 256], rounds: 5).run()
        print("natter bench --commits: medians of 5 rounds; apply = a member ingests the commit and updates its tables")
        print("members  commit   bytes (cap \(Limits.recordBytesMax))   seal+store ms   apply ms")
        for row in rows {
            print(
                "\(row.members)".leftPadded(7) + "  " + row.operation.padding(toLength: 7, withPad: " ", startingAt: 0)
                    + "\(row.bytes)".leftPadded(8) + String(format: "%25.2f %10.2f", row.sealMillis, row.applyMillis))
        }
    }

    private func runSearch() throws {
        let result = try MachineBench.withScratchDirectory {
            try SearchBench(conversations: conversations, messages: messages, rounds: rounds).run(in: $0)
        }
        if json {
            let cases = result.cases.map { item in
                "{\"case\": \"\(item.name.replacingOccurrences(of: "\"", with: "\\\""))\", \"hits\": \(item.hits), "
                    + String(
                        format: "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}",
                        item.millis[item.millis.count / 2],
                        item.millis[item.millis.count * 99 / 100], item.millis.last!)
            }
            print(
                "{\"messages\": \(messages), \"conversations\": \(conversations), \"rounds\": \(rounds), "
                    + String(format: "\"populate_s\": %.1f, ", result.populateSeconds)
                    + "\"cases\": [\(cases.joined(separator: ", "))]}")
            return
        }
        print(
            "natter bench --search: \(messages) messages in \(conversations) conversations, \(rounds) rounds each "
                + String(format: "(populated in %.1f s)", result.populateSeconds))
        for item in result.cases {
            print(
                item.name.padding(toLength: 46, withPad: " ", startingAt: 0) + "\(item.hits)".leftPadded(3) + " hits  "
                    + String(
                        format: "p50 %.2f ms  p99 %.2f ms  max %.2f ms", item.millis[item.millis.count / 2],
                        item.millis[item.millis.count * 99 / 100], item.millis.last!))
        }
    }
}

extension String {
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
