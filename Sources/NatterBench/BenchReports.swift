import Foundation
import NatterModel

// What `natter bench` prints for each benchmark: lines for a person, or one JSON object for a script.

/// The machine's limits beside natter's own ingest, measured in one run (`natter bench` without a mode).
public struct MachineLimitsReport: Sendable {
    /// The catch-up run ended short of what it was given (a bug, not a figure).
    public struct CatchUpShortfall: Error, CustomStringConvertible {
        public let description: String
    }

    let records: Int
    let authors: Int
    let cores: Int
    let verifyAll: Double
    let insert: Double
    let ingest: Double
    let catchUpRate: Double?
    /// Name, operations, rate per second, note.
    let results: [(String, Int, Double, String)]

    /// Measures verification (one core, all cores), decoding, inserts and ingest of `records` records by `authors`
    /// authors, `batch` per transaction, and with `catchUp` a fresh node pulling them over loopback.
    public static func measure(
        records: Int, verifications: Int, authors: Int, batch: Int, catchUp: Bool
    ) async throws -> MachineLimitsReport {
        let workload = BenchWorkload.make(records: records, authors: authors)
        let sample = workload.records[min(authors, workload.records.count - 1)]
        let verify = MachineBench.verifyRate(sample, count: verifications)
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let verifyAll = MachineBench.verifyRateOnAllCores(sample, count: verifications, cores: cores)
        let decode = MachineBench.rate(count: workload.records.count) {
            // `try?`: a record that fails to decode costs the same to time; the workload's records all decode.
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
                throw CatchUpShortfall(
                    description:
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
        return MachineLimitsReport(
            records: records, authors: authors, cores: cores, verifyAll: verifyAll, insert: insert, ingest: ingest,
            catchUpRate: catchUpRate, results: results)
    }

    /// The report: a table with the ratios to the lower physical limit, or one JSON object.
    public func lines(json: Bool) -> [String] {
        if json {
            let fields = results.map { "\"\($0.0)_per_second\": \(Int($0.1))" }.joined(separator: ", ")
            return [
                "{\(fields), \"records\": \(records), \"authors\": \(authors), \"cores\": \(cores)}"
            ]
        }
        var out = ["natter bench: \(records) records, \(authors) authors, \(cores) cores"]
        for (name, count, rate, note) in results {
            out.append(
                name.padding(toLength: 16, withPad: " ", startingAt: 0)
                    + "\(count)".leftPadded(9) + " ops " + "\(Int(rate))".leftPadded(9) + " /s   " + note)
        }
        let limit = min(verifyAll, insert)
        out.append(
            "full ingest reaches \(Int((ingest / limit * 100).rounded()))% of the lower physical limit "
                + "(min of verify on all cores and insert)")
        if let catchUpRate {
            out.append("catch-up reaches \(Int((catchUpRate / limit * 100).rounded()))% of the lower physical limit")
        }
        return out
    }
}

extension NetworkBench.LatencyResult {
    /// The report of `natter bench --send-latency` over `messages` messages `pauseMs` apart (`inProcess`: both nodes
    /// in one process).
    public func lines(messages: Int, pauseMs: Int, inProcess: Bool, json: Bool) -> [String] {
        if json {
            let sorted = millis.sorted()
            let durable = durableMillis.sorted()
            let append = appendMillis.sorted()
            return [
                String(
                    format: "{\"messages\": %d, \"p50_ms\": %.3f, \"p99_ms\": %.3f, \"durable_p50_ms\": %.3f, "
                        + "\"durable_p99_ms\": %.3f, \"append_p50_ms\": %.3f}",
                    messages, sorted[sorted.count / 2], sorted[min(sorted.count - 1, sorted.count * 99 / 100)],
                    durable[durable.count / 2], durable[min(durable.count - 1, durable.count * 99 / 100)],
                    append[append.count / 2])
            ]
        }
        func quantiles(_ values: [Double]) -> String {
            let sorted = values.sorted()
            return String(
                format: "p50 %.2f ms  p90 %.2f ms  p99 %.2f ms  max %.2f ms", sorted[sorted.count / 2],
                sorted[sorted.count * 9 / 10], sorted[min(sorted.count - 1, sorted.count * 99 / 100)], sorted.last!)
        }
        return [
            "natter bench --send-latency: \(messages) messages one at a time (\(pauseMs) ms apart), two nodes over "
                + "loopback TCP, "
                + (inProcess ? "in one process" : "in two processes pinned to CPUs 0 and 1 (as on two machines)"),
            "send → stored on the other node   " + quantiles(millis),
            "send → durable on the other node  " + quantiles(durableMillis),
            "of which appendOwn (fsync) alone  " + quantiles(appendMillis),
        ]
    }
}

extension ThroughputBench.Result {
    /// The report of `natter bench --throughput`.
    public func lines(json: Bool) -> [String] {
        let tenths = self.tenths.map { String(Int($0.rounded())) }.joined(separator: " ")
        let flatness = (self.tenths.last ?? 0) / max(self.tenths.first ?? 1, 1e-9)
        let ofVerify = overall / max(verifyRate, 1e-9)
        if json {
            return [
                "{\"messages\": \(messages), \"size\": \(size), \"arrived\": \(arrived), "
                    + "\"tenths_per_second\": [\(self.tenths.map { String(Int($0.rounded())) }.joined(separator: ", "))], "
                    + "\"overall_per_second\": \(Int(overall)), \"verify_per_second\": \(Int(verifyRate)), "
                    + "\"insert_per_second\": \(Int(insertRate)), \"sender_held\": \(senderHeld), "
                    + "\"receiver_held\": \(receiverHeld)}"
            ]
        }
        return [
            "natter bench --throughput: \(messages) messages of \(size) bytes, two natter run processes "
                + "(--json) on loopback",
            "the receiver runs with \(ThroughputBench.receiverQuotaArguments.joined(separator: " ")) (the default "
                + "ingest quotas would pace the run at 500 messages/s)",
            "arrived                 \(arrived) of \(messages)",
            "per tenth (messages/s)  \(tenths)",
            String(format: "last tenth / first      %.2f", flatness),
            "overall                 \(Int(overall)) messages/s",
            "one core verifies       \(Int(verifyRate)) signatures/s   (overall is \(Int((ofVerify * 100).rounded()))% of it)",
            "SQLite inserts          \(Int(insertRate)) rows/s",
            "chat records held after stopping: sender \(senderHeld), receiver \(receiverHeld)",
        ]
    }
}

extension QueryBench.Result {
    /// The report of `natter bench --queries` over `messages` messages in `conversations` conversations.
    public func lines(messages: Int, conversations: Int) -> [String] {
        func quantiles(_ values: [Double]) -> String {
            String(
                format: "p50 %.2f ms  p90 %.2f ms  max %.2f ms", values[values.count / 2],
                values[values.count * 9 / 10], values.last!)
        }
        return [
            "natter bench --queries: \(messages) messages in \(conversations) conversations "
                + String(format: "(populated in %.1f s)", populateSeconds),
            "list conversations   " + quantiles(listMillis),
            "open (last 50)       " + quantiles(openMillis),
            "filter the list      " + quantiles(filterMillis),
        ]
    }
}

extension GroupCommitBench {
    /// The report of `natter bench --commits` from its `rows`.
    public static func lines(_ rows: [Row]) -> [String] {
        [
            "natter bench --commits: medians of 5 rounds; apply = a member ingests the commit and updates its tables",
            "members  commit   bytes (cap \(Limits.recordBytesMax))   seal+store ms   apply ms",
        ]
            + rows.map { row in
                "\(row.members)".leftPadded(7) + "  " + row.operation.padding(toLength: 7, withPad: " ", startingAt: 0)
                    + "\(row.bytes)".leftPadded(8) + String(format: "%25.2f %10.2f", row.sealMillis, row.applyMillis)
            }
    }
}

extension SearchBench.Result {
    /// The report of `natter bench --search` over `messages` messages in `conversations` conversations, `rounds`
    /// rounds of each search.
    public func lines(messages: Int, conversations: Int, rounds: Int, json: Bool) -> [String] {
        if json {
            let cases = self.cases.map { item in
                "{\"case\": \"\(item.name.replacingOccurrences(of: "\"", with: "\\\""))\", \"hits\": \(item.hits), "
                    + String(
                        format: "\"p50_ms\": %.3f, \"p99_ms\": %.3f, \"max_ms\": %.3f}",
                        item.millis[item.millis.count / 2],
                        item.millis[item.millis.count * 99 / 100], item.millis.last!)
            }
            return [
                "{\"messages\": \(messages), \"conversations\": \(conversations), \"rounds\": \(rounds), "
                    + String(format: "\"populate_s\": %.1f, ", populateSeconds)
                    + "\"cases\": [\(cases.joined(separator: ", "))]}"
            ]
        }
        return [
            "natter bench --search: \(messages) messages in \(conversations) conversations, \(rounds) rounds each "
                + String(format: "(populated in %.1f s)", populateSeconds)
        ]
            + cases.map { item in
                item.name.padding(toLength: 46, withPad: " ", startingAt: 0) + "\(item.hits)".leftPadded(3) + " hits  "
                    + String(
                        format: "p50 %.2f ms  p99 %.2f ms  max %.2f ms", item.millis[item.millis.count / 2],
                        item.millis[item.millis.count * 99 / 100], item.millis.last!)
            }
    }
}

extension String {
    /// The string right-aligned in `width` columns.
    func leftPadded(_ width: Int) -> String { String(repeating: " ", count: max(0, width - count)) + self }
}
