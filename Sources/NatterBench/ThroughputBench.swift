import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// The live-path throughput benchmark (`natter bench --throughput`): two real `natter run` processes on loopback,
/// the sender driven as a script drives it — plain lines on its standard input, `--json`, no send-rate limit — and
/// the receiver rendering its `--json` events as the REPL does; the benchmark times each message's `message` event
/// as it reads it from the receiver. A live path whose cost does not grow with history keeps the last tenth's rate
/// near the first's. The machine's limits (one core's signature checks, SQLite inserts) are measured in the same
/// run, after the processes stopped, so the figures can be read as ratios.
public enum ThroughputBench {
    public struct Result: Sendable {
        public let messages: Int
        public let size: Int
        /// Messages whose `message` event the receiver printed.
        public let arrived: Int
        /// Messages per second arriving over each tenth of the run.
        public let tenths: [Double]
        /// Messages per second from the first arrival to the last.
        public let overall: Double
        /// Records of the chat each side holds after both stopped (the founding commit, the messages, receipts).
        public let senderHeld: Int
        public let receiverHeld: Int
        /// One core's Ed25519 checks per second and SQLite record inserts per second, measured after the run.
        public let verifyRate: Double
        public let insertRate: Double
    }

    /// The receiver's ingest quotas, raised: their defaults (500 records a second per author, bursts of 5,000) defend
    /// a node against a flooding peer and would pace any run past a few thousand messages at 500 a second, which
    /// would measure the quota, not the live path. The report says so.
    public static let receiverQuotaArguments = [
        "--author-record-rate", "1000000", "--peer-record-rate", "1000000",
    ]

    /// The longest the benchmark waits for the messages: a minute, plus 5 ms a message (200 a second at worst).
    static func patience(messages: Int) -> Duration { .seconds(60) + .milliseconds(5 * messages) }

    public static func run(
        messages: Int, size: Int, in directory: String, progress: @Sendable (String) -> Void
    ) async throws -> Result {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        signal(SIGPIPE, SIG_IGN)  // a child that died makes a write fail, not this process
        for (name, folder) in [("Alice", "alice"), ("Bob", "bob")] {
            let status = try runToEnd(executable, ["init", "--data", "\(directory)/\(folder)", "--name", name])
            guard status == 0 else { throw BenchError("natter init for \(name) failed (status \(status))") }
        }
        let arrivals = Arrivals()
        let receiver = try Child(
            executable,
            ["run", "--data", "\(directory)/bob", "--no-discovery", "--listen", "127.0.0.1:0", "--json", "--send-rate",
             "0"] + receiverQuotaArguments, errors: "\(directory)/bob.err", onLine: arrivals.read)
        defer { receiver.stop() }
        let port = try await arrivals.waitForPort(within: .seconds(30))
        let sender = try Child(
            executable,
            ["run", "--data", "\(directory)/alice", "--no-discovery", "--listen", "127.0.0.1:0", "--peer",
             "127.0.0.1:\(port)", "--json", "--send-rate", "0"], errors: "\(directory)/alice.err", onLine: nil)
        defer { sender.stop() }
        progress("two nodes started; sending \(messages) messages of \(size) bytes")
        sender.write("/wait peer Bob 60\n/wait known Bob 60\n/open Bob\n")
        let filler = String(repeating: "x", count: max(0, size - 12))
        var chunk = ""
        for index in 0..<messages {
            chunk += String("m\(index) \(filler)".prefix(max(size, 1))) + "\n"
            if chunk.utf8.count >= 64 * 1024 || index == messages - 1 {
                sender.write(chunk)
                chunk = ""
            }
        }
        let times = try await arrivals.wait(for: messages, within: patience(messages: messages), progress: progress)
        sender.closeInput()  // end of input: the sender's REPL settles its lines, the node stops
        receiver.closeInput()
        try await sender.waitForExit(within: .seconds(60))
        try await receiver.waitForExit(within: .seconds(60))
        let held = try [directory + "/alice", directory + "/bob"].map(chatRecords)
        let sample = BenchWorkload.make(records: 1_000, authors: 2).records
        return Result(
            messages: messages, size: size, arrived: times.count, tenths: tenths(times),
            overall: Double(times.count - 1) / max(seconds(times.last! - times.first!), 1e-9),
            senderHeld: held[0], receiverHeld: held[1],
            verifyRate: MachineBench.verifyRate(sample[1], count: 20_000),
            insertRate: try MachineBench.insertRate(sample, batch: 500))
    }

    /// Rates over each tenth of the arrivals.
    static func tenths(_ times: [ContinuousClock.Instant]) -> [Double] {
        guard times.count >= 20 else { return [] }
        let step = times.count / 10
        return (0..<10).map { tenth in
            let from = times[tenth * step]
            let to = times[min(times.count - 1, (tenth + 1) * step)]
            return Double(step) / max(seconds(to - from), 1e-9)
        }
    }

    static func seconds(_ duration: Duration) -> Double {
        Double(duration.components.seconds) + Double(duration.components.attoseconds) * 1e-18
    }

    /// The records of the largest conversation of a stopped node's store (the benchmark's chat).
    private static func chatRecords(_ directory: String) throws -> Int {
        let store = try RecordStore.open(directory: directory)
        var held = [ConversationID: Int]()
        for feed in try store.feeds() where feed.conversation != .profileFeed(of: feed.author) {
            held[feed.conversation, default: 0] += Int(feed.stored)
        }
        return held.values.max() ?? 0
    }

    /// Runs a command to its end; its status.
    private static func runToEnd(_ executable: String, _ arguments: [String]) throws -> Int32 {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        return process.terminationStatus
    }

    /// The receiver's events as they are read: its port, then the arrival time of every message from the sender.
    final class Arrivals: Sendable {
        private struct State {
            var port: Int?
            var times: [ContinuousClock.Instant] = []
        }

        private let state = Mutex(State())

        /// One line of the receiver's standard output. Only `started` and others' new messages matter; a cheap
        /// look at the fixed key order (`"type"` first) instead of decoding each of 100,000 objects.
        func read(_ line: Substring) {
            if line.hasPrefix("{\"type\":\"message\",\"change\":\"new\""), line.contains("\"own\":false") {
                let now = ContinuousClock.now
                state.withLock { $0.times.append(now) }
            } else if line.hasPrefix("{\"type\":\"started\""), let range = line.range(of: "\"port\":") {
                let port = Int(line[range.upperBound...].prefix { $0.isNumber })
                state.withLock { $0.port = port }
            }
        }

        func waitForPort(within limit: Duration) async throws -> Int {
            let deadline = ContinuousClock.now + limit
            while ContinuousClock.now < deadline {
                if let port = state.withLock({ $0.port }) { return port }
                try await Task.sleep(for: .milliseconds(20))
            }
            throw BenchError("the receiver did not start within \(limit)")
        }

        func wait(for count: Int, within limit: Duration, progress: @Sendable (String) -> Void) async throws
            -> [ContinuousClock.Instant]
        {
            let deadline = ContinuousClock.now + limit
            var reported = 0
            while ContinuousClock.now < deadline {
                let times = state.withLock { $0.times }
                if times.count >= count { return times }
                if times.count >= reported + count / 10 && times.count > 0 {
                    reported = times.count
                    progress("\(times.count) of \(count) arrived")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
            let arrived = state.withLock { $0.times.count }
            throw BenchError("only \(arrived) of \(count) messages arrived within \(limit)")
        }
    }

    /// A child `natter` process: standard input a pipe, standard output read line by line on a thread of its own
    /// (or discarded), standard error to a file. Stopped by PID: SIGTERM, then SIGKILL.
    final class Child: Sendable {
        private let process: Process
        private let input: FileHandle

        init(
            _ executable: String, _ arguments: [String], errors: String,
            onLine: (@Sendable (Substring) -> Void)?
        ) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: executable)
            process.arguments = arguments
            let input = Pipe()
            process.standardInput = input
            guard FileManager.default.createFile(atPath: errors, contents: nil),
                let errorFile = FileHandle(forWritingAtPath: errors)
            else { throw BenchError("cannot create \(errors)") }
            process.standardError = errorFile
            let output = Pipe()
            process.standardOutput = onLine == nil ? FileHandle.nullDevice : output
            try process.run()
            self.process = process
            self.input = input.fileHandleForWriting
            if let onLine {
                let reading = output.fileHandleForReading
                Thread.detachNewThread {
                    var pending = Data()
                    while true {
                        let data = reading.availableData
                        if data.isEmpty { break }
                        pending.append(data)
                        guard let last = pending.lastIndex(of: UInt8(ascii: "\n")) else { continue }
                        let text = String(decoding: pending[pending.startIndex...last], as: UTF8.self)
                        for line in text.split(separator: "\n") { onLine(line) }
                        pending = Data(pending[(last + 1)...])
                    }
                }
            }
        }

        func write(_ text: String) {
            input.write(Data(text.utf8))
        }

        func closeInput() {
            do {
                try input.close()
            } catch {
                // Already closed: the child reads end of input either way.
            }
        }

        func waitForExit(within limit: Duration) async throws {
            let deadline = ContinuousClock.now + limit
            while process.isRunning {
                guard ContinuousClock.now < deadline else {
                    stop()
                    throw BenchError("natter \(process.arguments?.first ?? "") did not stop within \(limit)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }

        /// SIGTERM (graceful), then SIGKILL if it is still there a few seconds later.
        func stop() {
            guard process.isRunning else { return }
            kill(process.processIdentifier, SIGTERM)
            let deadline = Date().addingTimeInterval(5)
            while process.isRunning && Date() < deadline { usleep(20_000) }
            if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        }
    }
}
