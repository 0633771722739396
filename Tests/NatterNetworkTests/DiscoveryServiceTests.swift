// Goal: show on real sockets that nodes of one network on one host find each other within about a second, that a
// node of another network is seen by neither and is logged once, and that shutdown closes the sockets. Method: three
// `DiscoveryService`s bound to one random UDP port with `SO_REUSEPORT`, beaconing to 127.255.255.255 only (nothing
// leaves loopback), each bounded in time and always shut down; their dial requests and logs are recorded.
import Foundation
import NatterCrypto
import Testing

@testable import NatterNetwork

#if canImport(Glibc)
import Glibc
#endif

@Suite("Discovery service on loopback", .serialized, .timeLimit(.minutes(1)))
struct DiscoveryServiceTests {
    /// A port per test run, away from the default so that a node running on this host is not disturbed.
    static func randomPort() -> Int { Int.random(in: 20_000..<60_000) }

    @Test("two nodes of one network find each other within a second; a third of another network is ignored")
    func twoFindEachOtherThirdIgnored() async throws {
        let port = Self.randomPort()
        let shared = NetworkKey.generate()
        let configuration = DiscoveryConfiguration(port: port, reach: .loopbackOnly)
        let a = DiscoveryService(networkKey: shared, tcpPort: 41001, configuration: configuration)
        let b = DiscoveryService(networkKey: shared, tcpPort: 41002, configuration: configuration)
        let c = DiscoveryService(networkKey: NetworkKey.generate(), tcpPort: 41003, configuration: configuration)
        let nodes = [a, b, c]
        let recorder = DiscoveryRecorder()
        let started = ContinuousClock.now

        try await RunningDiscovery(nodes, recorder: recorder).whileRunning {
            let aFoundB = try await recorder.waitFor(seconds: 10) {
                $0[a.tag, default: []].contains { $0.tag == b.tag }
            }
            let bFoundA = try await recorder.waitFor(seconds: 10) {
                $0[b.tag, default: []].contains { $0.tag == a.tag }
            }
            let elapsed = ContinuousClock.now - started
            print("discovery on loopback: A found B after \(aFoundB - started), B found A after \(bFoundA - started)")
            // First contact is a benchmark figure (docs/performance.md), not a timed assertion: on a loaded
            // 2-core machine the whole suite runs beside this test. Only a gross bound is checked.
            #expect(elapsed < .seconds(10), "first contact took \(elapsed)")
            // Let the bursts (400 ms) finish and a little more, so that late copies would be seen.
            try await Task.sleep(for: .milliseconds(800))
        }

        let dials = await recorder.dials
        let logs = await recorder.logs
        // Each of A and B dialed the other, at 127.0.0.1 with the other's TCP port: at most once per second per
        // node (the burst lasts 400 ms; a loaded machine may stretch it past one second, hence at most 2), never
        // once per beacon.
        for (me, other) in [(a, b), (b, a)] {
            let mine = dials[me.tag, default: []]
            #expect((1...2).contains(mine.count), "\(mine)")
            #expect(mine.first?.host == "127.0.0.1")
            #expect(mine.first?.port == other.tcpPort)
            #expect(mine.first?.tag == other.tag)
        }
        // Nobody dialed C, C dialed nobody, and nobody dialed itself.
        #expect(dials.values.joined().allSatisfy { $0.tag != c.tag })
        #expect(dials[c.tag, default: []].isEmpty)
        for node in nodes { #expect(dials[node.tag, default: []].allSatisfy { $0.tag != node.tag }) }
        // C's three beacons (all from 127.0.0.1) are one log line at A and one at B; C logs A and B's once in all.
        for node in nodes {
            let rejections = logs[node.tag, default: []].filter {
                if case .discovery(.rejected(_, .wrongKeyOrTampered)) = $0 { true } else { false }
            }
            #expect(rejections.count == 1, "\(node.tag): \(rejections)")
            if case .discovery(.rejected(let source, _)) = rejections.first {
                #expect(source.description == "127.0.0.1")
            }
        }
        // Shut down: the port is free again (nothing holds it, with or without SO_REUSEPORT).
        #expect(Self.canBindExclusively(port: port))
    }

    @Test("a late node is found by its own burst; a linked node is not dialed, and is dialed again once unlinked")
    func lateJoinerAndRelink() async throws {
        let port = Self.randomPort()
        let shared = NetworkKey.generate()
        // A short period (1–1.5 s) so that periodic beacons show up within the test.
        let schedule = DiscoverySchedule(periodMin: .seconds(1), periodMax: .milliseconds(1500))
        let configuration = DiscoveryConfiguration(port: port, reach: .loopbackOnly, schedule: schedule)
        let a = DiscoveryService(networkKey: shared, tcpPort: 42001, configuration: configuration)
        let b = DiscoveryService(networkKey: shared, tcpPort: 42002, configuration: configuration)
        let recorder = DiscoveryRecorder()
        func dialsOfB() async -> Int { await recorder.dials[a.tag, default: []].filter { $0.tag == b.tag }.count }
        try await RunningDiscovery([a], recorder: recorder).whileRunning {
            // A is alone through its burst; then B starts, and its burst makes A dial B at once.
            try await Task.sleep(for: .milliseconds(600))
            try await RunningDiscovery([b], recorder: recorder).whileRunning {
                let started = ContinuousClock.now
                _ = try await recorder.waitFor(seconds: 10) { $0[a.tag, default: []].contains { $0.tag == b.tag } }
                #expect(
                    ContinuousClock.now - started < .seconds(10),
                    "about one beacon; a gross bound, the figure itself is a benchmark")
                // Linked: B's periodic beacons (every 1–1.5 s) cause no dial.
                await a.peerConnected(b.tag)
                try await Task.sleep(for: .milliseconds(2600))
                #expect(await dialsOfB() == 1)
                // Unlinked: B's next beacon causes a dial.
                await a.peerDisconnected(b.tag)
                _ = try await recorder.waitFor(seconds: 10) {
                    $0[a.tag, default: []].filter { $0.tag == b.tag }.count == 2
                }
            }
        }
        #expect(await recorder.dials[a.tag, default: []].allSatisfy { $0.port == 42002 && $0.host == "127.0.0.1" })
        let linesOfA = await recorder.logs[a.tag, default: []].map(\.description)
        #expect(linesOfA.contains { $0.hasPrefix("discovery: listening on UDP port \(port)") })
        #expect(linesOfA.filter { $0.contains("announces TCP port 42002") }.count == 1, "discovered once")
        #expect(Self.canBindExclusively(port: port))
    }

    @Test("binding a port held without SO_REUSEPORT fails at start with bindFailed, and the streams end")
    func bindFailure() async throws {
        let port = Self.randomPort()
        let fd = socket(AF_INET, CInt(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        let bound = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        try #require(bound == 0)
        let service = DiscoveryService(
            networkKey: .generate(), tcpPort: 43001,
            configuration: DiscoveryConfiguration(port: port, reach: .loopbackOnly))
        await #expect(throws: DiscoveryError.self) { try await service.run() }
        for await _ in service.dialRequests {}
        var lines: [String] = []
        for await entry in service.logs { lines.append("\(entry)") }
        #expect(lines.isEmpty, "\(lines)")
    }

    /// Whether a socket without SO_REUSEADDR/SO_REUSEPORT can bind 0.0.0.0:`port`, i.e. no one holds it.
    static func canBindExclusively(port: Int) -> Bool {
        let fd = socket(AF_INET, CInt(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = INADDR_ANY
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        } == 0
    }
}

// MARK: - Support

/// Every dial request and log line of the services it records, by the service's tag.
actor DiscoveryRecorder {
    var dials: [NodeTag: [DialRequest]] = [:]
    var logs: [NodeTag: [DiscoveryServiceLog]] = [:]

    func record(_ dial: DialRequest, at node: NodeTag) { dials[node, default: []].append(dial) }
    func record(_ entry: DiscoveryServiceLog, at node: NodeTag) { logs[node, default: []].append(entry) }

    struct TimedOut: Error, CustomStringConvertible {
        let seconds: Int
        var description: String { "condition not met within \(seconds) s" }
    }

    /// Polls `condition` on the dials so far every 10 ms until it holds (returns when) or `seconds` pass (throws).
    func waitFor(
        seconds: Int, _ condition: ([NodeTag: [DialRequest]]) -> Bool
    ) async throws -> ContinuousClock.Instant {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition(dials) { return ContinuousClock.now }
            try await Task.sleep(for: .milliseconds(10))
        }
        throw TimedOut(seconds: seconds)
    }
}

/// Runs services for the length of a closure and always shuts them down, waiting (bounded) for `run()` to return.
struct RunningDiscovery {
    let services: [DiscoveryService]
    let recorder: DiscoveryRecorder

    init(_ services: [DiscoveryService], recorder: DiscoveryRecorder) {
        self.services = services
        self.recorder = recorder
    }

    func whileRunning(_ body: () async throws -> Void) async throws {
        let done = DiscoveryCounter()
        var runs: [Task<Void, any Error>] = []
        for service in services {
            let recorder = recorder
            runs.append(
                Task {
                    defer { Task { await done.increment() } }
                    try await service.run()
                })
            Task {
                for await dial in service.dialRequests { await recorder.record(dial, at: service.tag) }
                await done.increment()
            }
            Task {
                for await entry in service.logs { await recorder.record(entry, at: service.tag) }
                await done.increment()
            }
        }
        var failure: (any Error)?
        do { try await body() } catch { failure = error }
        for service in services { await service.shutdown() }
        // run() returns and its streams end, and so the recording tasks: all within 10 s, or the test fails (without
        // waiting for ever on tasks that would not end).
        let deadline = ContinuousClock.now + .seconds(10)
        while await done.value < services.count * 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await done.value == services.count * 3, "services shut down within 10 s")
        if let failure { throw failure }
        for run in runs {
            if case .failure(let error) = await run.result { throw error }
        }
    }
}

actor DiscoveryCounter {
    private(set) var value = 0
    func increment() { value += 1 }
}
