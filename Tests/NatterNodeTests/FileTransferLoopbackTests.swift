// Goal: on real loopback TCP, a 16 MiB file reaches a member intact although its link is cut twice mid-transfer.
// Method: two Node actors (real transport, Noise, sync, SQLite in memory); the member dials the sender through a
// TCP proxy that forwards bytes and closes both connections when the sender has sent 4 MiB and 10 MiB of the
// transfer, so both cuts fall mid-file whatever the machine's speed; the member redials by itself.
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import Synchronization
import NatterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy to `target` that cuts every connection (shutdown of both sockets) each time the bytes it
/// forwarded from the target since `arm` cross the next threshold.
final class CuttingProxy: Sendable {
    let port: Int
    private let listener: Int32
    private let target: Int
    private struct State {
        var armed = false
        var forwarded = 0
        var thresholds: [Int] = []
        var cuts = 0
        var sockets: Set<Int32> = []
        var stopped = false
    }
    private let state = Mutex(State())

    init(target: Int) throws {
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(listener, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard bound == 0, Glibc.listen(listener, 8) == 0 else { throw ProxyError.setup(errno) }
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        self.listener = listener
        let thread = Thread { [self] in acceptLoop() }
        thread.start()
    }

    enum ProxyError: Error { case setup(Int32) }

    /// Starts counting target-to-client bytes; cuts at each threshold (cumulative bytes).
    func arm(cutsAt thresholds: [Int]) {
        state.withLock {
            $0.armed = true
            $0.forwarded = 0
            $0.thresholds = thresholds
        }
    }

    var cuts: Int { state.withLock { $0.cuts } }

    func stop() {
        let sockets = state.withLock { state -> Set<Int32> in
            state.stopped = true
            return state.sockets
        }
        for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
        shutdown(listener, Int32(SHUT_RDWR))
        close(listener)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            let upstream = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_addr.s_addr = inet_addr("127.0.0.1")
            address.sin_port = UInt16(target).bigEndian
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    connect(upstream, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
            let stopped = state.withLock { state -> Bool in
                if !state.stopped { state.sockets.formUnion([client, upstream]) }
                return state.stopped
            }
            guard connected == 0, !stopped else {
                close(client)
                close(upstream)
                continue
            }
            let remaining = Mutex(2)
            for (from, to, counted) in [(client, upstream, false), (upstream, client, true)] {
                Thread { [self] in
                    pump(from: from, to: to, counted: counted)
                    shutdown(from, Int32(SHUT_RDWR))
                    shutdown(to, Int32(SHUT_RDWR))
                    if remaining.withLock({ count -> Int in
                        count -= 1
                        return count
                    }) == 0 {
                        state.withLock { $0.sockets.subtract([client, upstream]) }
                        close(client)
                        close(upstream)
                    }
                }.start()
            }
        }
    }

    private func pump(from: Int32, to: Int32, counted: Bool) {
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(from, $0.baseAddress, $0.count) }
            if count < 0 && errno == EINTR { continue }
            guard count > 0 else { return }
            var offset = 0
            while offset < count {
                let written = buffer[offset..<count].withUnsafeBytes { send(to, $0.baseAddress, $0.count, 0) }
                if written < 0 && errno == EINTR { continue }
                guard written > 0 else { return }
                offset += written
            }
            guard counted else { continue }
            let cutNow = state.withLock { state -> Set<Int32>? in
                guard state.armed else { return nil }
                state.forwarded += count
                guard let next = state.thresholds.first, state.forwarded >= next else { return nil }
                state.thresholds.removeFirst()
                state.cuts += 1
                return state.sockets
            }
            if let sockets = cutNow {
                for fd in sockets { shutdown(fd, Int32(SHUT_RDWR)) }
                return
            }
        }
    }
}

/// Collects a node's events for polling from the test.
final class EventLog: Sendable {
    private let events = Mutex<[NodeEvent]>([])

    func watch(_ node: Node) -> Task<Void, Never> {
        Task { [self] in
            for await event in node.events { events.withLock { $0.append(event) } }
        }
    }

    var all: [NodeEvent] { events.withLock { $0 } }

    /// Waits (polling, bounded) until `condition` holds over the events so far.
    func wait(
        _ what: String, seconds: Double = 60, until condition: @escaping @Sendable ([NodeEvent]) -> Bool
    ) async throws {
        try await waitFor(what, deadline: seconds, interval: .milliseconds(20)) { condition(all) }
    }
}

@Suite("File transfer on loopback TCP", .serialized)
struct FileTransferLoopbackTests {
    @Test("a 16 MiB file arrives intact although the link is cut twice mid-transfer", .timeLimit(.minutes(3)))
    func sixteenMebibytesThroughTwoCuts() async throws {
        let alice = try await LoopbackNodes.node(seed: 71, name: "Alice", peers: [])
        let proxy = try CuttingProxy(target: alice.port)
        let bob = try await LoopbackNodes.node(
            seed: 72, name: "Bob", peers: [PeerAddress(host: "127.0.0.1", port: proxy.port)])
        let aliceEvents = EventLog()
        let bobEvents = EventLog()
        let tasks = [
            aliceEvents.watch(alice), bobEvents.watch(bob), Task { await alice.run() }, Task { await bob.run() },
        ]
        defer {
            for task in tasks { task.cancel() }
            proxy.stop()
        }
        let bobID = await bob.identity.author
        try await aliceEvents.wait("the first link") { $0.contains { if case .caughtUp = $0 { true } else { false } } }
        try await bobEvents.wait("Bob caught up") { $0.contains { if case .caughtUp = $0 { true } else { false } } }

        let chat = try await alice.author(.createGroup(title: "Files", members: [bobID])).conversation
        var random = SeededGenerator(seed: 73)
        let data = random.bytes(Int(FileLimits.sendBytesDefault))
        let message = try await alice.sendFile(data, name: "sixteen.bin", in: chat)
        try await waitFor("the file message at Bob", deadline: 60, interval: .milliseconds(10)) {
            try await bob.read { try $0.fileStatus(of: message, in: chat) } != nil
        }
        let peerDownsBefore = bobEvents.all.filter { if case .peerDown = $0 { true } else { false } }.count

        proxy.arm(cutsAt: [4 << 20, 10 << 20])
        try await bob.fetchFile(message, in: chat)
        try await bobEvents.wait("the file at Bob", seconds: 150) { $0.contains(.file(.completed(message))) }

        // Both cuts happened, and each fell before the file was complete.
        #expect(proxy.cuts == 2)
        let events = bobEvents.all
        let completedAt = try #require(events.firstIndex(of: .file(.completed(message))))
        let downs = events.indices.filter { if case .peerDown = events[$0] { true } else { false } }
        #expect(downs.count - peerDownsBefore >= 2)
        #expect(downs.filter { $0 < completedAt }.count - peerDownsBefore >= 2, "both cuts came before completion")
        let progress = events.compactMap { if case .file(.progress(message, let bytes, _)) = $0 { bytes } else { nil } }
        #expect(progress.last == UInt64(data.count))
        #expect(progress == progress.sorted(), "progress never goes backwards")

        let directory = NSTemporaryDirectory() + "natter-loopback-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await bob.saveFile(message, in: chat, to: directory + "/sixteen.bin", overwrite: false)
        let saved = try #require(FileManager.default.contents(atPath: directory + "/sixteen.bin"))
        #expect(saved.count == data.count)
        #expect(Blake2b.hash([UInt8](saved), outputBytes: 32) == Blake2b.hash(data, outputBytes: 32))
        await alice.shutdown()
        await bob.shutdown()
    }
}
