// Goal: the transport refuses inbound connections beyond the handshakes it allows in progress and from refused
// addresses, before any event reaches the node. Method: a real `TCPTransport` on 127.0.0.1 and raw sockets from
// distinct loopback source addresses (so the per-address limit does not interfere); opened events are counted.
import Foundation
import Synchronization
import Testing

@testable import NatterNetwork

#if canImport(Glibc)
import Glibc
#endif

/// Connections the transport reported opened, shared with the task that reads its events.
final class OpenedLog: Sendable {
    let ids = Mutex<[ConnectionID]>([])
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

    @Test("at most 32 inbound handshakes at once; an established one frees a place; refused addresses get none")
    func handshakesInProgressAndRefusals() async throws {
        let transport = TCPTransport()
        let port = try await transport.listen(host: "127.0.0.1", port: 0)
        let log = OpenedLog()
        let reader = Task {
            for await event in transport.events {
                if case .opened(let id, _, _) = event { log.ids.withLock { $0.append(id) } }
            }
        }
        defer { reader.cancel() }
        func waitOpened(_ count: Int) async -> Int {
            for _ in 0..<100 where log.ids.withLock({ $0.count }) < count {
                try? await Task.sleep(for: .milliseconds(20))
            }
            try? await Task.sleep(for: .milliseconds(200))  // and no more than that arrive
            return log.ids.withLock { $0.count }
        }
        var sockets = (0..<40).map { Self.connectFrom("127.0.0.\(10 + $0)", to: port) }
        #expect(await waitOpened(TCPLimits.handshakesInProgressMax) == TCPLimits.handshakesInProgressMax)
        transport.markEstablished(log.ids.withLock { $0[0] })
        sockets.append(Self.connectFrom("127.0.0.60", to: port))
        #expect(await waitOpened(TCPLimits.handshakesInProgressMax + 1) == TCPLimits.handshakesInProgressMax + 1)

        transport.refuse(["127.0.0.61"])
        let before = log.ids.withLock { $0.count }
        for id in log.ids.withLock({ $0 }) { transport.close(id) }
        try await Task.sleep(for: .milliseconds(200))
        sockets.append(Self.connectFrom("127.0.0.61", to: port))
        sockets.append(Self.connectFrom("127.0.0.62", to: port))
        #expect(await waitOpened(before + 1) == before + 1, "only the address not refused gets through")
        #expect(await transport.dial(host: "127.0.0.61", port: port) == nil, "dials to a refused address fail at once")
        for fd in sockets { close(fd) }
        await transport.shutdown()
    }
}
