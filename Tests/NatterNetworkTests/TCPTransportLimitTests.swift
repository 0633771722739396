// Goal: the transport refuses inbound connections beyond the handshakes it allows in progress and from refused
// addresses, before any event reaches the node; it never queues more than its outbound cap for a peer that does not
// read, and a goodbye to such a peer cannot hold a shutdown. Method: a real `TCPTransport` on 127.0.0.1 and raw
// sockets from distinct loopback source addresses (so the per-address limit does not interfere); events are counted.
import Foundation
import Synchronization
import Testing

@testable import NatterNetwork

#if canImport(Glibc)
import Glibc
#endif

/// Connections the transport reported opened and closed, shared with the task that reads its events.
final class OpenedLog: Sendable {
    let ids = Mutex<[ConnectionID]>([])
    let closed = Mutex<Set<ConnectionID>>([])
    let events = Mutex<[TCPTransport.Event]>([])
}

@Suite("TCP transport limits", .serialized, .timeLimit(.minutes(1)))
struct TCPTransportLimitTests {
    /// Connects from `source` to 127.0.0.1:`port`; returns the socket.
    static func connectFrom(_ source: String, to port: Int) -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var addresses = (sockaddr_in(), sockaddr_in())
        addresses.0.sin_family = sa_family_t(AF_INET)
        addresses.1.sin_family = sa_family_t(AF_INET)
        inet_pton(AF_INET, source, &addresses.0.sin_addr)
        inet_pton(AF_INET, "127.0.0.1", &addresses.1.sin_addr)
        addresses.1.sin_port = in_port_t(UInt16(port).bigEndian)
        let size = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &addresses.0) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, size) }
        }
        _ = withUnsafePointer(to: &addresses.1) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, size) }
        }
        return fd
    }

    /// Whether the other end closed `fd` (it never sends anything here; never waits).
    static func isClosedByPeer(_ fd: Int32) -> Bool {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        guard poll(&poller, 1, 0) > 0 else { return false }
        var byte: UInt8 = 0
        return recv(fd, &byte, 1, Int32(MSG_PEEK)) <= 0
    }

    /// A transport listening on 127.0.0.1, a log of its events, and the task reading them (cancel it at the end).
    static func start() async throws -> (TCPTransport, Int, OpenedLog, Task<Void, Never>) {
        let transport = TCPTransport()
        let port = try await transport.listen(host: "127.0.0.1", port: 0)
        let log = OpenedLog()
        let reader = Task {
            for await event in transport.events {
                switch event {
                case .opened(let id, _, _): log.ids.withLock { $0.append(id) }
                case .closed(let id): _ = log.closed.withLock { $0.insert(id) }
                default: break
                }
                log.events.withLock { $0.append(event) }
            }
        }
        return (transport, port, log, reader)
    }

    /// The first connection opened (waits up to 2 s).
    static func firstOpened(_ log: OpenedLog) async throws -> ConnectionID {
        for _ in 0..<100 where log.ids.withLock({ $0.isEmpty }) { try await Task.sleep(for: .milliseconds(20)) }
        return try #require(log.ids.withLock { $0.first })
    }

    @Test("at most 32 inbound handshakes at once; an established one frees a place; refused addresses get none")
    func handshakesInProgressAndRefusals() async throws {
        let (transport, port, log, reader) = try await Self.start()
        defer { reader.cancel() }
        /// Waits (bounded) until `opened` connections were reported opened and `refused` of `sockets` were closed by
        /// the transport, and returns what it saw. Then every connection has been decided — admitted or refused —
        /// so the counts are final, not counts taken after a sleep.
        func settle(opened: Int, refused: Int, of sockets: [Int32]) async -> (opened: Int, refused: Int) {
            func seen() -> (opened: Int, refused: Int) {
                (log.ids.withLock { $0.count }, sockets.filter(Self.isClosedByPeer).count)
            }
            for _ in 0..<500 where seen().opened < opened || seen().refused < refused {
                try? await Task.sleep(for: .milliseconds(20))
            }
            return seen()
        }
        let limit = TCPLimits.handshakesInProgressMax
        var sockets = (0..<40).map { Self.connectFrom("127.0.0.\(10 + $0)", to: port) }
        let first = await settle(opened: limit, refused: 40 - limit, of: sockets)
        #expect(first.opened == limit && first.refused == 40 - limit, "\(limit) admitted, the rest refused: \(first)")
        transport.markEstablished(log.ids.withLock { $0[0] })
        let freed = Self.connectFrom("127.0.0.60", to: port)
        sockets.append(freed)
        let second = await settle(opened: limit + 1, refused: 0, of: [freed])
        #expect(second.opened == limit + 1 && second.refused == 0, "an established one frees a place: \(second)")

        transport.refuse(["127.0.0.61"])
        let open = log.ids.withLock { $0 }
        for id in open { transport.close(id) }
        // Every place is free once the transport reported each close (it forgets a connection before that event).
        for _ in 0..<500 where !log.closed.withLock({ $0.isSuperset(of: open) }) {
            try await Task.sleep(for: .milliseconds(20))
        }
        #expect(log.closed.withLock { $0.isSuperset(of: open) })
        let refused = Self.connectFrom("127.0.0.61", to: port)
        sockets += [refused, Self.connectFrom("127.0.0.62", to: port)]
        let third = await settle(opened: open.count + 1, refused: 1, of: [refused])
        #expect(third.opened == open.count + 1 && third.refused == 1, "only the address not refused gets through")
        #expect(await transport.dial(host: "127.0.0.61", port: port) == nil, "dials to a refused address fail at once")
        for fd in sockets { close(fd) }
        await transport.shutdown()
    }

    @Test("a peer that does not read: writes stop being writable, then past the cap the connection is dropped")
    func outboundCap() async throws {
        let (transport, port, log, reader) = try await Self.start()
        defer { reader.cancel() }
        let peer = Self.connectFrom("127.0.0.70", to: port)  // never reads
        defer { close(peer) }
        let id = try await Self.firstOpened(log)
        let chunk = [UInt8](repeating: 0x5A, count: 64 * 1024)
        for _ in 0..<(TCPLimits.outboundBytesMax / chunk.count + 64) { transport.send(id, chunk) }
        func saw(_ match: (TCPTransport.Event) -> Bool) async throws -> Bool {
            try await Self.eventually { log.events.withLock { $0.contains(where: match) } }
        }
        #expect(try await saw { if case .writability(id, writable: false) = $0 { true } else { false } })
        #expect(try await saw { if case .dropped(id, .outboundOverflow) = $0 { true } else { false } })
        #expect(try await saw { if case .closed(id) = $0 { true } else { false } })
        await transport.shutdown()
    }

    @Test("a goodbye to a peer that does not read gives up and closes, so it cannot hold a shutdown")
    func goodbyeToAStalledPeer() async throws {
        let (transport, port, log, reader) = try await Self.start()
        defer { reader.cancel() }
        let peer = Self.connectFrom("127.0.0.71", to: port)  // never reads
        defer { close(peer) }
        let id = try await Self.firstOpened(log)
        // More than the socket buffers take: the goodbye queues behind it.
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        for _ in 0..<12 { transport.send(id, chunk) }
        // The peer keeps talking (so no idle timeout ends the wait) but never reads.
        let chatter = Task {
            while !Task.isCancelled {
                _ = send(peer, [0], 1, Int32(MSG_NOSIGNAL))
                try? await Task.sleep(for: .milliseconds(100))
            }
        }
        defer { chatter.cancel() }
        // Returns (before issue 19 it waited for as long as the peer did not read); the suite's time limit bounds it.
        await transport.sendAndClose(id, [1, 2, 3])
        await transport.shutdown()
    }

    /// Whether `condition` holds within 10 s (polled).
    static func eventually(_ condition: () -> Bool) async throws -> Bool {
        for _ in 0..<500 {
            if condition() { return true }
            try await Task.sleep(for: .milliseconds(20))
        }
        return condition()
    }
}
