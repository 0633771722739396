// Goal: show on real sockets that nodes of one network on one host find each other (how soon is printed: a benchmark
// figure, not a gate), that a node of another network is seen by neither and is logged once, and that shutdown
// closes the sockets. Method: three `DiscoveryService`s bound to one random UDP port with `SO_REUSEPORT`, beaconing
// to 127.255.255.255 only (nothing leaves loopback), each bounded in time and always shut down; their dial requests
// and logs are recorded, and a probe socket on the same port sees the beacons and sends barrier beacons, so that
// what did not happen is checked once the beacons in question are known to have been handled (`BeaconProbe`).
import Foundation
import NatterCrypto
import Testing

@testable import NatterNetwork

#if canImport(Glibc)
import Glibc
#endif

@Suite("Discovery service on loopback", .serialized, .timeLimit(.minutes(3)))
struct DiscoveryServiceTests {
    /// A port per test run, away from the default so that a node running on this host is not disturbed.
    static func randomPort() -> Int { Int.random(in: 20_000..<60_000) }

    @Test("two nodes of one network find each other; a third of another network is ignored and logged once")
    func twoFindEachOtherThirdIgnored() async throws {
        let port = Self.randomPort()
        let shared = NetworkKey.generate()
        let other = NetworkKey.generate()
        let configuration = DiscoveryConfiguration(port: port, reach: .loopbackOnly)
        let probe = try BeaconProbe(port: port, networks: [shared, other])
        defer { probe.finish() }
        let a = DiscoveryService(networkKey: shared, tcpPort: 41001, configuration: configuration)
        let b = DiscoveryService(networkKey: shared, tcpPort: 41002, configuration: configuration)
        let c = DiscoveryService(networkKey: other, tcpPort: 41003, configuration: configuration)
        let nodes = [a, b, c]
        let recorder = DiscoveryRecorder()
        let started = ContinuousClock.now
        let (sharedBarrier, otherBarrier) = (NodeTag.barrier(0xB1), NodeTag.barrier(0xB2))

        try await RunningDiscovery(nodes, recorder: recorder).whileRunning {
            let aFoundB = try await recorder.waitFor(seconds: 20) {
                $0[a.tag, default: []].contains { $0.tag == b.tag }
            }
            let bFoundA = try await recorder.waitFor(seconds: 20) {
                $0[b.tag, default: []].contains { $0.tag == a.tag }
            }
            // First contact is a benchmark figure (docs/performance.md), printed, not asserted.
            print("discovery on loopback: A found B after \(aFoundB - started), B found A after \(bFoundA - started)")
            // Every node's start burst was sent; then a barrier beacon per network: once A and B (and C) dial theirs,
            // they have handled every beacon of the bursts, so what they did not do by then they never do.
            try await probe.waitFor("the start bursts") { tags in
                nodes.allSatisfy { node in tags.filter { $0 == node.tag }.count >= DiscoveryLimits.burstCount }
            }
            probe.sendBarrier(sharedBarrier, network: shared, announcing: 41998)
            probe.sendBarrier(otherBarrier, network: other, announcing: 41999)
            for (node, barrier) in [(a, sharedBarrier), (b, sharedBarrier), (c, otherBarrier)] {
                _ = try await recorder.waitFor(seconds: 20) { $0[node.tag, default: []].contains { $0.tag == barrier } }
            }
        }

        let dials = await recorder.dials.mapValues { $0.filter { ![sharedBarrier, otherBarrier].contains($0.tag) } }
        let logs = await recorder.logs
        // Each of A and B dialed the other, at 127.0.0.1 with the other's TCP port, and never more often than the
        // other beaconed (a beacon causes at most one dial). How many exactly depends on how far a loaded machine
        // stretches the 400 ms burst past `dialIntervalMin` (CI saw the three burst beacons 7 s apart), so the
        // one-dial-per-burst rule itself is asserted with a manual clock (DiscoveryMachineTests), not here.
        for (me, other) in [(a, b), (b, a)] {
            let mine = dials[me.tag, default: []]
            let beaconsOfOther = probe.count(of: other.tag)
            #expect(mine.count >= 1 && mine.count <= beaconsOfOther, "\(mine.count) dials, \(beaconsOfOther) beacons")
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
        probe.finish()
        #expect(Self.canBindExclusively(port: port))
    }

    @Test("a late node is found by its own burst; a linked node is not dialed, and is dialed again once unlinked")
    func lateJoinerAndRelink() async throws {
        let port = Self.randomPort()
        let shared = NetworkKey.generate()
        // A short period (1–1.5 s) so that periodic beacons show up within the test.
        let schedule = DiscoverySchedule(periodMin: .seconds(1), periodMax: .milliseconds(1500))
        let configuration = DiscoveryConfiguration(port: port, reach: .loopbackOnly, schedule: schedule)
        let probe = try BeaconProbe(port: port, networks: [shared])
        defer { probe.finish() }
        let a = DiscoveryService(networkKey: shared, tcpPort: 42001, configuration: configuration)
        let b = DiscoveryService(networkKey: shared, tcpPort: 42002, configuration: configuration)
        let barrier = NodeTag.barrier(0xB3)
        let recorder = DiscoveryRecorder()
        func dialsOfB() async -> Int { await recorder.dials[a.tag, default: []].filter { $0.tag == b.tag }.count }
        try await RunningDiscovery([a], recorder: recorder).whileRunning {
            // A is alone through its burst; then B starts, and its burst makes A dial B at once.
            try await probe.waitFor("A's start burst") { $0.filter { $0 == a.tag }.count >= DiscoveryLimits.burstCount }
            try await RunningDiscovery([b], recorder: recorder).whileRunning {
                let started = ContinuousClock.now
                _ = try await recorder.waitFor(seconds: 20) { $0[a.tag, default: []].contains { $0.tag == b.tag } }
                print("discovery on loopback: A dialled the late node after \(ContinuousClock.now - started)")
                // Linked: B's periodic beacons (every 1–1.5 s) cause no dial. Two of them sent after A learnt of the
                // link and after B's start burst (whose beacons come within `dialIntervalMin` of the first dial, so
                // they would not cause one anyway), then a barrier beacon: once A dials the barrier, it has handled
                // both.
                await a.peerConnected(b.tag)
                try await probe.waitFor("B's start burst") { $0.filter { $0 == b.tag }.count >= DiscoveryLimits.burstCount }
                let beaconsOfB = probe.count(of: b.tag)
                try await probe.waitFor("two periodic beacons of B") {
                    $0.filter { $0 == b.tag }.count >= beaconsOfB + 2
                }
                probe.sendBarrier(barrier, network: shared, announcing: 42999)
                _ = try await recorder.waitFor(seconds: 20) { $0[a.tag, default: []].contains { $0.tag == barrier } }
                #expect(await dialsOfB() == 1)
                // Unlinked: B's next beacon causes a dial.
                await a.peerDisconnected(b.tag)
                _ = try await recorder.waitFor(seconds: 20) {
                    $0[a.tag, default: []].filter { $0.tag == b.tag }.count == 2
                }
            }
        }
        let dialsOfA = await recorder.dials[a.tag, default: []].filter { $0.tag != barrier }
        #expect(dialsOfA.allSatisfy { $0.port == 42002 && $0.host == "127.0.0.1" })
        let linesOfA = await recorder.logs[a.tag, default: []].map(\.description)
        #expect(linesOfA.contains { $0.hasPrefix("discovery: listening on UDP port \(port)") })
        #expect(linesOfA.filter { $0.contains("announces TCP port 42002") }.count == 1, "discovered once")
        probe.finish()
        #expect(Self.canBindExclusively(port: port))
    }

    @Test("binding a port held without SO_REUSEPORT fails at start with bindFailed, and the streams end")
    func bindFailure() async throws {
        let port = Self.randomPort()
        let fd = socket(AF_INET, CInt(SOCK_DGRAM.rawValue), 0)
        defer { close(fd) }
        let bound = bindToAnyAddress(fd, port: port)
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
        return bindToAnyAddress(fd, port: port) == 0
    }
}

/// Binds the UDP socket `fd` to `0.0.0.0:port`; returns what `bind` returns (0: bound).
func bindToAnyAddress(_ fd: Int32, port: Int) -> Int32 {
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_port = in_port_t(UInt16(port).bigEndian)
    address.sin_addr.s_addr = INADDR_ANY
    return withUnsafePointer(to: &address) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            bind(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
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
        var what = "condition"
        var description: String { "\(what) not met within \(seconds) s" }
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
        // run() returns and its streams end, and so the recording tasks: all within 30 s (a bound on a busy machine,
        // not a timing target), or the test fails without waiting for ever on tasks that would not end.
        let deadline = ContinuousClock.now + .seconds(30)
        while await done.value < services.count * 3, ContinuousClock.now < deadline {
            try await Task.sleep(for: .milliseconds(10))
        }
        #expect(await done.value == services.count * 3, "services shut down within 30 s")
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

/// A plain UDP socket on the discovery port beside the services under test (SO_REUSEPORT: the kernel hands every
/// broadcast to each socket bound to the port, in one pass), so a test sees which beacons were sent — and when it
/// has seen one, the services' sockets hold it too. It also sends beacons of its own: a service handles its socket's
/// datagrams in order, so once it dials a beacon sent after others arrived, it has handled those others. That is how
/// these tests assert that something did *not* happen (no dial, no second log line): after it is known to have been
/// handled, not after a sleep.
final class BeaconProbe {
    private let fd: Int32
    let port: Int
    /// Tags of the beacons received so far, in order, per key that opened them.
    private var received: [NodeTag] = []
    private let keys: [SymmetricKey]

    /// Binds `0.0.0.0:port` beside the services; beacons that open under one of `networks` are recorded.
    init(port: Int, networks: [NetworkKey]) throws {
        self.port = port
        keys = networks.map(\.beaconKey)
        fd = socket(AF_INET, CInt(SOCK_DGRAM.rawValue), 0)
        var one: CInt = 1
        let size = socklen_t(MemoryLayout<CInt>.size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, size)
        setsockopt(fd, SOL_SOCKET, SO_REUSEPORT, &one, size)
        setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, size)
        let bound = bindToAnyAddress(fd, port: port)
        guard bound == 0 else {
            close(fd)
            throw DiscoveryError.bindFailed(port: port, reason: "probe: errno \(errno)")
        }
    }

    /// Reads every datagram waiting (never blocks); returns the tags of all beacons received so far.
    func drain() -> [NodeTag] {
        var buffer = [UInt8](repeating: 0, count: 2048)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else { break }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            guard count > 0 else { break }
            for key in keys {
                if case .success(let beacon) = Beacon.open(buffer[..<count], key: key) {
                    received.append(beacon.tag)
                    break
                }
            }
        }
        return received
    }

    /// How many beacons tagged `tag` were received so far.
    func count(of tag: NodeTag) -> Int { drain().filter { $0 == tag }.count }

    /// Waits (polling, bounded) until `condition` holds over the tags received so far.
    func waitFor(seconds: Int = 20, _ what: String, _ condition: ([NodeTag]) -> Bool) async throws {
        let deadline = ContinuousClock.now + .seconds(seconds)
        while ContinuousClock.now < deadline {
            if condition(drain()) { return }
            try await Task.sleep(for: .milliseconds(10))
        }
        if condition(drain()) { return }
        throw DiscoveryRecorder.TimedOut(seconds: seconds, what: what)
    }

    /// Broadcasts a beacon of a node that does not exist, tagged `tag`, under `network`'s key, to the services
    /// (127.255.255.255): every one of that network dials it once it has handled what arrived before.
    func sendBarrier(_ tag: NodeTag, network: NetworkKey, announcing tcpPort: UInt16) {
        let bytes = Beacon(tag: tag, port: tcpPort).seal(key: network.beaconKey, nonce: .random())
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.255.255.255", &address.sin_addr)
        _ = bytes.withUnsafeBytes { raw in
            withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                    sendto(fd, raw.baseAddress, raw.count, 0, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
                }
            }
        }
    }

    func finish() { close(fd) }
}

extension NodeTag {
    /// A tag no service has (a barrier's), distinct per `byte`.
    static func barrier(_ byte: UInt8) -> NodeTag { NodeTag(bytes: [UInt8](repeating: byte, count: byteCount)) }
}
