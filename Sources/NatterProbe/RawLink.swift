import Foundation
public import NatterCrypto
public import NatterModel
import NatterSync

#if canImport(Glibc)
// Public: `connect`, `call` and `address` take and give the socket types.
public import Glibc
#endif

/// A natter link spoken by hand over a blocking socket, for the attack tools (`natter debug attack`) and the tests
/// that run them: the handshake and the channel are the library's machines (`LinkHandshake`, `SecureChannel`), but
/// the sync messages are written and read from their byte layouts in docs/protocol.md §3.2, not through the
/// `SyncSession`, so the client does exactly what its caller says — including what an honest node never does.
public final class RawLink {
    /// Why a raw link stopped.
    public enum Failure: Error, CustomStringConvertible {
        case connect(String)
        case handshake(String)
        case closed(String)

        public var description: String {
            switch self {
            case .connect(let reason): "cannot connect: \(reason)"
            case .handshake(let reason): "handshake failed: \(reason)"
            case .closed(let reason): "link closed: \(reason)"
            }
        }
    }

    public let socket: Int32
    public let identity: IdentityKeyPair
    /// The peer's identity, proven by its handshake.
    public private(set) var peer: IdentityPublicKey
    private var channel: SecureChannel
    /// Messages received but not yet taken by `receive`.
    private var inbox: [[UInt8]] = []

    /// Connects to `host`:`port` (from `source` if given, an address of this host) and completes the handshake as a
    /// fresh throwaway identity of `networkKey`'s network. Bounded: each read waits at most `timeout`.
    public init(
        host: String, port: Int, source: String? = nil, networkKey: NetworkKey = .defaultNetwork,
        identity: IdentityKeyPair = .generate(), timeout: Duration = .seconds(10)
    ) throws {
        self.identity = identity
        let socket = try Self.connect(host: host, port: port, source: source)
        self.socket = socket
        var random = SecureRandomGenerator()
        var handshake = LinkHandshake(
            role: .initiator,
            configuration: LinkConfiguration(
                identity: identity, staticKey: NoiseKeyPair.generate(using: &random), networkKey: networkKey),
            ephemeralKey: NoiseKeyPair.generate(using: &random))
        var actions = handshake.start()
        let deadline = ContinuousClock.now + timeout
        while true {
            var established: LinkEstablished?
            for action in actions {
                switch action {
                case .send(let bytes): try Self.write(socket, bytes)
                case .established(let done): established = done
                case .fail(let error):
                    Glibc.close(socket)
                    throw Failure.handshake("\(error)")
                }
            }
            if let established {
                peer = established.peer
                channel = established.channel
                if !established.unreadBytes.isEmpty { try take(channel.receive(established.unreadBytes)) }
                return
            }
            guard ContinuousClock.now < deadline else {
                Glibc.close(socket)
                throw Failure.handshake("no answer within \(timeout)")
            }
            // Nothing yet: wait again. The end of the stream: the handshake machine says why.
            guard let bytes = try Self.read(socket, wait: .milliseconds(100)) else {
                actions = []
                continue
            }
            actions = bytes.isEmpty ? handshake.endOfInput() : handshake.receive(bytes)
        }
    }

    deinit { Glibc.close(socket) }

    /// Sends one application message.
    public func send(_ message: [UInt8]) throws {
        try Self.write(socket, try channel.send(message))
    }

    /// The messages that arrive within `wait` (at least one if any arrives); throws when the peer closed the link.
    public func receive(wait: Duration) throws -> [[UInt8]] {
        if inbox.isEmpty, let bytes = try Self.read(socket, wait: wait) {
            guard !bytes.isEmpty else { throw Failure.closed("the peer closed the connection") }
            try take(channel.receive(bytes))
        }
        defer { inbox = [] }
        return inbox
    }

    /// Reads and discards whatever is waiting, without blocking; throws when the peer closed the link.
    public func drain() throws {
        while let bytes = try Self.read(socket, wait: .zero) {
            guard !bytes.isEmpty else { throw Failure.closed("the peer closed the connection") }
            try take(channel.receive(bytes))
            inbox = []
        }
    }

    private func take(_ events: [SecureChannel.Event]) throws {
        for event in events {
            switch event {
            case .message(let message): inbox.append(message)
            case .goodbye: throw Failure.closed("the peer said goodbye")
            case .failed(let error): throw Failure.closed("\(error)")
            }
        }
    }

    // MARK: - Sync messages, from docs/protocol.md §3.2

    /// SUMMARY: the final part, with no entries (a node holding nothing).
    public static let emptySummary: [UInt8] = [1, 1, 0, 0]
    public static let ping: [UInt8] = [7]

    /// CREDIT of `batches` (1…8).
    public static func credit(_ batches: Int) -> [UInt8] { [4, UInt8(batches >> 8), UInt8(batches & 0xFF)] }

    /// REQUEST of a feed from sequence `from` on.
    public static func request(conversation: ConversationID, author: AuthorID, from: UInt64) -> [UInt8] {
        var out: [UInt8] = [5] + conversation.bytes + author.bytes
        for shift in stride(from: 56, through: 0, by: -8) { out.append(UInt8(from >> UInt64(shift) & 0xFF)) }
        return out
    }

    /// RECORDS carrying `records`, returning `credit` batches.
    public static func records(_ records: [Record], credit: Int = 0) -> [UInt8] {
        var out: [UInt8] = [3, UInt8(credit >> 8), UInt8(credit & 0xFF), UInt8(records.count >> 8),
            UInt8(records.count & 0xFF)]
        for record in records {
            let length = UInt32(record.bytes.count)
            out += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
            out += record.bytes
        }
        return out
    }

    /// The bulk credit a received message returns: CREDIT, or the credit field of RECORDS; 0 for anything else.
    public static func creditReturned(by message: [UInt8]) -> Int {
        switch message.first {
        case 4 where message.count == 3, 3 where message.count >= 5: Int(message[1]) << 8 | Int(message[2])
        default: 0
        }
    }

    // MARK: - Sockets

    /// A connected TCP socket to `host`:`port` (IPv4), bound to `source` first if given.
    public static func connect(host: String, port: Int, source: String? = nil) throws -> Int32 {
        let fd = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure.connect(String(cString: strerror(errno))) }
        var noDelay: Int32 = 1
        _ = setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &noDelay, socklen_t(MemoryLayout<Int32>.size))
        do {
            if let source { try call(Glibc.bind, fd, try address(source, port: 0), "cannot bind \(source)") }
            try call(Glibc.connect, fd, try address(host, port: port), "\(host):\(port)")
        } catch {
            Glibc.close(fd)
            throw error
        }
        return fd
    }

    /// Calls `bind` or `connect` on `fd` with `address`; throws `what` and the system's reason on failure.
    public static func call(
        _ function: (Int32, UnsafePointer<sockaddr>, socklen_t) -> Int32, _ fd: Int32, _ address: sockaddr_in,
        _ what: String
    ) throws {
        var address = address
        let status = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
                function(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
            }
        }
        guard status == 0 else { throw Failure.connect("\(what): \(String(cString: strerror(errno)))") }
    }

    public static func address(_ host: String, port: Int) throws -> sockaddr_in {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        guard inet_pton(AF_INET, host, &address.sin_addr) == 1 else {
            throw Failure.connect("\(host) is not an IPv4 address")
        }
        return address
    }

    /// Writes all of `bytes` (blocking); throws when the connection is gone.
    public static func write(_ fd: Int32, _ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard written > 0 else {
                if written < 0 && errno == EINTR { continue }
                throw Failure.closed("sending: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// Whatever arrives within `wait` (nil: nothing did; empty: the peer closed the connection).
    public static func read(_ fd: Int32, wait: Duration) throws -> [UInt8]? {
        var poller = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
        let milliseconds = Int32(wait.components.seconds * 1000 + wait.components.attoseconds / 1_000_000_000_000_000)
        let ready = poll(&poller, 1, milliseconds)
        guard ready > 0 else {
            if ready < 0 && errno != EINTR { throw Failure.closed("poll: \(String(cString: strerror(errno)))") }
            return nil
        }
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        let count = buffer.withUnsafeMutableBytes { Glibc.recv(fd, $0.baseAddress, $0.count, 0) }
        if count < 0 {
            if errno == EINTR || errno == EAGAIN { return nil }
            if errno == ECONNRESET { return [] }
            throw Failure.closed("reading: \(String(cString: strerror(errno)))")
        }
        return Array(buffer.prefix(count))
    }
}
