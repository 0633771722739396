// Goal: on real loopback sockets, a client that sends garbage is banned after its second attempt (logged once),
// its next connection is refused — it never reaches the node — while others are not, and an honest node still links
// with the victim. (The ban's timing — 10 s, doubling, forgiven — is `PeerPenaltiesTests`', with time as input.)
// Method: two in-process `Node`s on 127.0.0.1 (in-memory stores, no discovery) and a raw TCP client bound to
// 127.0.0.2, so that the ban on its address cannot touch the honest node; every wait is bounded.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Synchronization
import NatterTestSupport
import Testing

@testable import NatterNode

#if canImport(Glibc)
import Glibc
#endif

/// A plain TCP client from a chosen loopback source address.
struct RawClient {
    let fd: Int32

    /// Connects from `source` to 127.0.0.1:`port`.
    init(from source: String, to port: Int) throws {
        fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw ProcessFailure("socket failed") }
        var local = sockaddr_in()
        local.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &local.sin_addr)
        var remote = sockaddr_in()
        remote.sin_family = sa_family_t(AF_INET)
        remote.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, "127.0.0.1", &remote.sin_addr)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafePointer(to: &local) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) }
        }
        let connected = withUnsafePointer(to: &remote) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) }
        }
        guard bound == 0, connected == 0 else {
            close(fd)
            throw ProcessFailure("cannot connect from \(source) to port \(port): errno \(errno)")
        }
    }

    /// Sends `bytes` (failures ignored: the server may have closed already; never SIGPIPE).
    func send(_ bytes: [UInt8]) {
        _ = bytes.withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
    }

    /// Whether the server closed the connection within `seconds` (reads and discards anything it sends). Polls
    /// without blocking and sleeps between polls, so the nodes under test keep their threads.
    func closedByPeer(within seconds: Double) async -> Bool {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if isClosed() { return true }
            try? await Task.sleep(for: .milliseconds(10))
        }
        return isClosed()  // once more: a starved test task may wake up only after the deadline
    }

    /// Whether the server has closed the connection, looking only at what has already arrived (never waits).
    func isClosed() -> Bool {
        var buffer = [UInt8](repeating: 0, count: 4096)
        while true {
            var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 0) > 0 else { return false }
            let count = buffer.withUnsafeMutableBytes { recv(fd, $0.baseAddress, $0.count, 0) }
            if count <= 0 { return true }
        }
    }

    func finish() { close(fd) }
}

/// A `Node` running in this process, with what it reported.
final class RunningNode: Sendable {
    let node: Node
    let log = EventLog()
    private let tasks: [Task<Void, Never>]

    init(seed: UInt8, peers: [PeerAddress] = []) async throws {
        let identity = LocalIdentity(
            signing: try IdentityKeyPair(seed: [UInt8](repeating: seed, count: 32)),
            encryption: try EncryptionKeyPair(secret: [UInt8](repeating: seed &+ 1, count: 32)))
        node = try await Node(
            store: try RecordStore.inMemory(), identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: peers, discovery: nil)
        let node = node
        let log = log
        tasks = [Task { await node.run() }, log.watch(node)]
    }

    var notices: [String] {
        log.all.compactMap { if case .notice(let line) = $0 { line } else { nil } }
    }

    /// Why each failed link failed, in order.
    var linkFailures: [String] {
        log.all.compactMap { if case .linkFailed(_, let reason) = $0 { reason } else { nil } }
    }

    func stop() async {
        for task in tasks { task.cancel() }
        await node.shutdown()
    }
}

@Suite("Bans on loopback", .serialized, .timeLimit(.minutes(2)))
struct BanTests {
    @Test("a garbage-sending client is banned after two attempts, logged once, refused; an honest node still links")
    func misbehavingClientIsBanned() async throws {
        let victim = try await RunningNode(seed: 41)
        let port = victim.node.port
        // A handshake frame announcing 65,535 bytes: `frameTooLarge`, a failed handshake (2 points each).
        let garbage: [UInt8] = [0xFF, 0xFF] + [UInt8](repeating: 0xAB, count: 60)
        for attempt in 1...2 {
            let client = try RawClient(from: "127.0.0.2", to: port)
            client.send(garbage)
            // Generous bounds: the whole suite runs in parallel on two cores, with other tests' processes.
            #expect(await client.closedByPeer(within: 10), "attempt \(attempt): the victim closes a malformed link")
            client.finish()
        }
        let banned = try await eventually(seconds: 10) {
            victim.notices.contains { $0.hasPrefix("banned 127.0.0.2 for 10 s") }
        }
        #expect(banned, "\(victim.notices)")

        // Refused: a banned address's connection never reaches the node — its garbage is never read, so no link
        // fails for it — while another address's connection does: it is held until the handshake timeout (5 s)
        // closes it, reported as a failed link. No wall-clock bound: the control's report comes after the refused
        // connection closed, and the node reports a link's failure before it closes it, so once the control's
        // report is in the log, a report of the refused connection would be too.
        let failuresBefore = victim.linkFailures
        let refused = try RawClient(from: "127.0.0.2", to: port)
        refused.send(garbage)
        #expect(await refused.closedByPeer(within: 30))
        refused.finish()
        let control = try RawClient(from: "127.0.0.3", to: port)
        let timedOut = try await eventually(seconds: 30) {
            victim.linkFailures.dropFirst(failuresBefore.count).contains("handshake timed out")
        }
        #expect(timedOut, "the other address's connection reached the node: \(victim.linkFailures)")
        #expect(await control.closedByPeer(within: 30))
        control.finish()
        #expect(
            victim.linkFailures.dropFirst(failuresBefore.count).elementsEqual(["handshake timed out"]),
            "only the banned address is refused: \(victim.linkFailures)")

        // An honest node on 127.0.0.1 links and syncs with the victim.
        let honest = try await RunningNode(seed: 42, peers: [PeerAddress(host: "127.0.0.1", port: port)])
        // Not timing targets: generous for a loaded machine running the whole suite.
        let linked = try await eventually(seconds: 30) {
            await victim.node.connectedPeers.contains(honest.node.identity.author)
        }
        #expect(linked)
        let caughtUp = try await eventually(seconds: 30) {
            victim.log.all.contains { if case .caughtUp = $0 { true } else { false } }
        }
        #expect(caughtUp)
        #expect(victim.notices.filter { $0.hasPrefix("banned") }.count == 1, "\(victim.notices)")
        await honest.stop()
        await victim.stop()
    }
}
