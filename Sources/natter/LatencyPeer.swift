import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// `natter bench --send-latency` across two processes, each pinned to its own CPU: the way two machines on a LAN
/// see it. In one process on a two-core machine the sender's table refresh (which follows every send) and the
/// receiver's turn compete for the same cores, and the scheduler parks the receiver's woken thread behind the
/// refresh; on two machines they never meet. The receiving node runs in a child process (`bench --latency-peer`)
/// that reports each record it applied and each store sync on standard output, stamped with `CLOCK_MONOTONIC`
/// (one clock for every process on the machine).
enum LatencyPeer {
    /// Nanoseconds on the machine-wide monotonic clock.
    static func monotonicNanos() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return Int64(time.tv_sec) * 1_000_000_000 + Int64(time.tv_nsec)
    }

    /// Pins every thread of process `pid` (and the threads they start) to `cpu`, with util-linux's `taskset`.
    static func pin(pid: Int32, cpu: Int) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
        process.arguments = ["-a", "-p", "-c", "\(cpu)", "\(pid)"]
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { throw BenchError("taskset could not pin process \(pid)") }
    }

    /// An identifier from its 64 hex digits.
    private static func identifier<T: Identifier32>(_ hex: String) -> T? {
        guard let bytes = Hex.decode(hex), bytes.count == 32 else { return nil }
        return T(bytes: bytes)
    }

    // MARK: - The child: the receiving node

    /// Runs the receiving node in `directory` until standard input closes: prints `author HEX` and `port N`, then
    /// `applied HEX NANOS` per applied record and `synced NANOS` per store sync.
    static func runReceiver(in directory: String) async throws {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let identity = LocalIdentity.generate()
        let store = try RecordStore.open(directory: directory)
        try store.bind(to: identity.author, directory: directory)
        _ = try Conversations(store: store, identity: identity).publishProfile(
            name: "Receiver", now: Int64(Date().timeIntervalSince1970 * 1_000))
        let node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [], discovery: nil,
            quotas: NetworkBench.benchQuotas)
        await node.observeEvents { event, _ in
            guard case .applied(let ids) = event else { return }
            let at = monotonicNanos()
            for id in ids { line("applied \(id.hex) \(at)") }
        }
        await node.observeSyncs { _ in line("synced \(monotonicNanos())") }
        line("author \(identity.author.hex)")
        line("port \(node.port)")
        let running = Task { await node.run() }
        // The parent closes our standard input when it is done (or dies): then shut down.
        await Task.detached { while readLine() != nil {} }.value
        await node.shutdown()
        running.cancel()
    }

    /// One line on standard output, written at once (the parent times what it reads).
    private static func line(_ text: String) {
        var bytes = Array((text + "\n").utf8)
        _ = write(1, &bytes, bytes.count)
    }

    // MARK: - The parent: the sending node

    /// What the child reported, as the parent's reading thread parsed it.
    private final class Reports: Sendable {
        struct State {
            var author: AuthorID?
            var port: Int?
            var applied: [RecordID: Int64] = [:]
            var syncs: [Int64] = []
            var ended = false
        }
        let state = Mutex(State())
    }

    /// Sends `messages` one at a time from a node in this process to the child's, `pause` apart.
    static func sendLatency(messages: Int, pause: Duration, in directory: String) async throws
        -> NetworkBench.LatencyResult
    {
        let cores = ProcessInfo.processInfo.activeProcessorCount
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = Process()
        let arguments = ["bench", "--latency-peer", "--peer-directory", directory + "/receiver"]
        if cores >= 2 {
            try pin(pid: getpid(), cpu: 0)
            child.executableURL = URL(fileURLWithPath: "/usr/bin/taskset")
            child.arguments = ["-c", "1", executable] + arguments
        } else {
            child.executableURL = URL(fileURLWithPath: executable)
            child.arguments = arguments
        }
        let input = Pipe()
        let output = Pipe()
        child.standardInput = input
        child.standardOutput = output
        try child.run()
        defer {
            try? input.fileHandleForWriting.close()
            let deadline = Date().addingTimeInterval(10)
            while child.isRunning && Date() < deadline { usleep(10_000) }
            if child.isRunning { kill(child.processIdentifier, SIGKILL) }
        }
        let reports = Reports()
        let reader = Thread {
            let handle = output.fileHandleForReading
            var pending = ""
            while true {
                let data = handle.availableData
                if data.isEmpty { break }
                pending += String(decoding: data, as: UTF8.self)
                while let newline = pending.firstIndex(of: "\n") {
                    let fields = pending[..<newline].split(separator: " ").map(String.init)
                    pending = String(pending[pending.index(after: newline)...])
                    reports.state.withLock { state in
                        switch (fields.first, fields.count) {
                        case ("author", 2): state.author = identifier(fields[1])
                        case ("port", 2): state.port = Int(fields[1])
                        case ("applied", 3):
                            if let id: RecordID = identifier(fields[1]), let at = Int64(fields[2]) { state.applied[id] = at }
                        case ("synced", 2): if let at = Int64(fields[1]) { state.syncs.append(at) }
                        default: break
                        }
                    }
                }
            }
            reports.state.withLock { $0.ended = true }
        }
        reader.start()

        /// Waits (bounded) until `ready` finds what it needs in the reports.
        func report<T>(_ what: String, _ ready: (inout Reports.State) -> T?) async throws -> T {
            let start = ContinuousClock.now
            while true {
                if let value = reports.state.withLock({ ready(&$0) }) { return value }
                guard !reports.state.withLock({ $0.ended }) else { throw BenchError("the receiver exited: \(what)") }
                guard ContinuousClock.now - start < NetworkBench.waitLimit else { throw BenchError("no \(what)") }
                try await Task.sleep(for: .microseconds(100))
            }
        }
        let receiverAuthor = try await report("author") { $0.author }
        let port = try await report("port") { $0.port }

        try FileManager.default.createDirectory(atPath: directory + "/sender", withIntermediateDirectories: true)
        let identity = LocalIdentity.generate()
        let store = try RecordStore.open(directory: directory + "/sender")
        try store.bind(to: identity.author, directory: directory + "/sender")
        let service = Conversations(store: store, identity: identity)
        _ = try service.publishProfile(name: "Sender", now: nowMillis())
        let node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [PeerAddress(host: "127.0.0.1", port: port)],
            discovery: nil, quotas: NetworkBench.benchQuotas)
        let running = Task { await node.run() }
        defer { running.cancel() }
        do {
            let nodeService = await node.conversations
            let profileWait = ContinuousClock.now
            while try nodeService.profile(of: receiverAuthor) == nil {
                guard ContinuousClock.now - profileWait < NetworkBench.waitLimit else {
                    throw BenchError("the nodes never linked")
                }
                try await Task.sleep(for: .milliseconds(10))
            }
            let group = try nodeService.createGroup(
                title: "bench", members: [receiverAuthor], now: nowMillis())
            let founding = try store.appliedRecords(of: group).filter { $0.header.author == identity.author }
            await node.publish(founding)
            for record in founding { _ = try await report("founding record") { $0.applied[record.id] } }

            var millis = [Double]()
            var durableMillis = [Double]()
            var appendMillis = [Double]()
            for number in 0..<messages {
                let start = monotonicNanos()
                let record = try nodeService.send("latency probe \(number)", in: group, now: nowMillis())
                appendMillis.append(Double(monotonicNanos() - start) / 1e6)
                await node.publish([record])
                let arrival = try await report("probe \(number)") { $0.applied[record.id] }
                millis.append(Double(arrival - start) / 1e6)
                let synced = try await report("sync of probe \(number)") { state in state.syncs.first { $0 >= arrival } }
                durableMillis.append(Double(synced - start) / 1e6)
                reports.state.withLock { $0.syncs.removeAll { $0 < arrival } }
                try await Task.sleep(for: pause)
            }
            await node.shutdown()
            return NetworkBench.LatencyResult(millis: millis, durableMillis: durableMillis, appendMillis: appendMillis)
        } catch {
            await node.shutdown()
            throw error
        }
    }
}
