import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore

#if canImport(Glibc)
import Glibc
#endif

/// `natter bench --send-latency` across two processes, each pinned to its own CPU: the way two machines on a LAN
/// see it. In one process on a two-core machine the sender's table refresh (which follows every send) and the
/// receiver's turn compete for the same cores, and the scheduler parks the receiver's woken thread behind the
/// refresh; on two machines they never meet. The receiving node runs in a child process (`bench --latency-peer`)
/// that reports each record it applied and each store sync on standard output, stamped with
/// `NetworkBench.monotonicNanos` (one clock for every process on the machine); the probe loop is
/// `NetworkBench.probe`, as in one process.
public enum LatencyPeer {
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
    public static func runReceiver(in directory: String) async throws {
        let (identity, store) = try NetworkBench.openStore(directory)
        _ = try Conversations(store: store, identity: identity).publishProfile(name: "Receiver", now: WallClock.nowMillis())
        let node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [], discovery: nil,
            quotas: NetworkBench.benchQuotas)
        await node.observeEvents { event, _ in
            guard case .applied(let refs) = event else { return }
            let at = NetworkBench.monotonicNanos()
            for ref in refs { line("applied \(ref.id.hex) \(at)") }
        }
        await node.observeSyncs { _ in line("synced \(NetworkBench.monotonicNanos())") }
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

    /// Sends `messages` one at a time from a node in this process to the child's, `pause` apart.
    public static func sendLatency(messages: Int, pause: Duration, in directory: String) async throws
        -> NetworkBench.LatencyResult
    {
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        let child = Process()
        let arguments = ["bench", "--latency-peer", "--peer-directory", directory + "/receiver"]
        if ProcessInfo.processInfo.activeProcessorCount >= 2 {
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
        let reports = NetworkBench.LatencyReports()
        Thread { read(output.fileHandleForReading, into: reports) }.start()
        let receiver = try await reports.wait("the receiver's identity") { $0.author }
        let port = try await reports.wait("the receiver's port") { $0.port }

        let (identity, store) = try NetworkBench.openStore(directory + "/sender")
        _ = try Conversations(store: store, identity: identity).publishProfile(name: "Sender", now: WallClock.nowMillis())
        let node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [PeerAddress(host: "127.0.0.1", port: port)],
            discovery: nil, quotas: NetworkBench.benchQuotas)
        return try await NetworkBench.running([node]) {
            try await NetworkBench.probe(from: node, to: receiver, reports: reports, messages: messages, pause: pause)
        }
    }

    /// Parses the child's report lines into `reports` until its standard output ends.
    private static func read(_ handle: FileHandle, into reports: NetworkBench.LatencyReports) {
        var pending = ""
        while case let data = handle.availableData, !data.isEmpty {
            pending += String(decoding: data, as: UTF8.self)
            while let newline = pending.firstIndex(of: "\n") {
                let fields = pending[..<newline].split(separator: " ").map(String.init)
                pending = String(pending[pending.index(after: newline)...])
                switch (fields.first, fields.count) {
                case ("author", 2): reports.state.withLock { $0.author = identifier(fields[1]) }
                case ("port", 2): reports.state.withLock { $0.port = Int(fields[1]) }
                case ("applied", 3):
                    if let id: RecordID = identifier(fields[1]), let at = Int64(fields[2]) {
                        reports.applied([id], at: at)
                    }
                case ("synced", 2): if let at = Int64(fields[1]) { reports.synced(at: at) }
                default: break
                }
            }
        }
        reports.state.withLock { $0.ended = true }
    }
}
