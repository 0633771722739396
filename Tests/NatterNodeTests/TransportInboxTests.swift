// Goal: what piled up in the transport inbox while the node was busy is handed over with each connection's bytes
// joined into as few inputs as its own events allow (`TransportInbox.join`): across other connections' events, never
// across the connection's own open, close, writability or drop, never past `joinedBytesMax`, each connection's bytes
// in their order. Method: the pure function on hand-made event lists.
import NatterNetwork
import Testing

@testable import NatterNode

@Suite("Transport inbox")
struct TransportInboxTests {
    /// An event as text: `r<connection>:<bytes>` for received bytes, else its kind and connection.
    static func text(_ event: TCPTransport.Event) -> String {
        switch event {
        case .opened(let connection, _, _): "o\(connection.raw)"
        case .received(let connection, let bytes): "r\(connection.raw):" + bytes.map(String.init).joined(separator: ",")
        case .closed(let connection): "c\(connection.raw)"
        case .writability(let connection, let writable): "w\(connection.raw)\(writable ? "+" : "-")"
        case .dropped(let connection, _): "x\(connection.raw)"
        case .dialFailed(let host, _, _): "f\(host)"
        }
    }

    static func joined(_ events: [TCPTransport.Event]) -> [String] { TransportInbox.join(events).map(text) }

    static let (a, b) = (ConnectionID(raw: 1), ConnectionID(raw: 2))

    @Test("a connection's bytes join across other connections' events, in their order, at its first place")
    func joinsAcrossOthers() {
        let events: [TCPTransport.Event] = [
            .received(Self.a, [1]), .received(Self.b, [10]), .received(Self.a, [2]),
            .opened(ConnectionID(raw: 3), initiator: true, remote: "h:1"), .received(Self.b, [11]),
            .received(Self.a, [3]),
        ]
        #expect(Self.joined(events) == ["r1:1,2,3", "r2:10,11", "o3"])
    }

    @Test("a connection's own open, close, writability or drop is never crossed")
    func ownEventsSeparate() {
        let events: [TCPTransport.Event] = [
            .received(Self.a, [1]), .writability(Self.a, writable: false), .received(Self.a, [2]),
            .received(Self.b, [10]), .dialFailed(host: "h", port: 1, reason: "refused"), .received(Self.a, [3]),
            .dropped(Self.b, .outboundOverflow(bytes: 1)), .received(Self.b, [11]), .closed(Self.a),
            .received(Self.a, [4]),
        ]
        #expect(
            Self.joined(events) == ["r1:1", "w1-", "r1:2,3", "r2:10", "fh", "x2", "r2:11", "c1", "r1:4"])
    }

    @Test("joined bytes stay within joinedBytesMax")
    func boundedJoin() {
        let half = [UInt8](repeating: 7, count: TransportInbox.joinedBytesMax / 2)
        let events: [TCPTransport.Event] = [
            .received(Self.a, half), .received(Self.b, [1]), .received(Self.a, half), .received(Self.a, [9]),
        ]
        let sizes = TransportInbox.join(events).map { event -> Int in
            if case .received(_, let bytes) = event { bytes.count } else { -1 }
        }
        #expect(sizes == [TransportInbox.joinedBytesMax, 1, 1])
    }
}
