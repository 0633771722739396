public import NIOCore
import NIOPosix
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A TCP connection, named by the transport.
public struct ConnectionID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let raw: UInt64
    public init(raw: UInt64) { self.raw = raw }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.raw < rhs.raw }
    public var description: String { "connection \(raw)" }
}

/// Bounds of the TCP transport, each with its reason.
public enum TCPLimits {
    /// Open connections at once: far above a LAN node's degree, low enough that a flood cannot exhaust descriptors.
    public static let connectionsMax = 256
    /// Connections from one IP address: a few for reconnects and several nodes behind one host.
    public static let connectionsPerAddressMax = 8
    /// Bytes read from a socket at a time (NIO's allocator grows up to this).
    public static let readChunkBytesMax = 64 * 1024
    /// Ports tried after the requested one is taken (a second node on the same host).
    public static let portAttemptsMax = 32
}

/// TCP listening and dialling over SwiftNIO that carries raw bytes: the node's core does all framing, encryption
/// and sync on top. Events arrive on one `AsyncStream`, in order per connection.
public final class TCPTransport: Sendable {
    /// What happened on the network.
    public enum Event: Sendable {
        /// A connection is up; `initiator` when we dialled it. `remote` is "host:port".
        case opened(ConnectionID, initiator: Bool, remote: String)
        case received(ConnectionID, [UInt8])
        case closed(ConnectionID)
        /// A dial failed before any connection existed.
        case dialFailed(host: String, port: Int, reason: String)
    }

    public let events: AsyncStream<Event>
    private let continuation: AsyncStream<Event>.Continuation
    private let group: any EventLoopGroup
    private let state = Mutex<State>(State())

    private struct State {
        var nextID: UInt64 = 1
        var channels: [ConnectionID: any Channel] = [:]
        var perAddress: [String: Int] = [:]
        var listeners: [any Channel] = []
    }

    /// A transport on NIO's shared event loops.
    public convenience init() { self.init(group: MultiThreadedEventLoopGroup.singleton) }

    public init(group: any EventLoopGroup) {
        self.group = group
        (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    }

    /// Listens on `host`:`port`; if the port is taken, tries the next ones. Returns the bound port.
    public func listen(host: String, port: Int) async throws -> Int {
        var lastError: (any Error)?
        for attempt in 0..<TCPLimits.portAttemptsMax {
            let candidate = port == 0 ? 0 : port + attempt
            do {
                let channel = try await ServerBootstrap(group: group)
                    .serverChannelOption(.backlog, value: 64)
                    .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
                    .childChannelOption(.socketOption(.tcp_nodelay), value: 1)
                    .childChannelInitializer { [self] channel in
                        channel.eventLoop.makeCompletedFuture {
                            try self.adopt(channel, initiator: false)
                        }
                    }
                    .bind(host: host, port: candidate).get()
                state.withLock { $0.listeners.append(channel) }
                return channel.localAddress?.port ?? candidate
            } catch {
                lastError = error
                if port == 0 { break }
            }
        }
        throw lastError ?? TransportError.noPort
    }

    /// Dials `host`:`port`; the outcome also arrives as `.opened` or `.dialFailed`. Returns the connection.
    @discardableResult
    public func dial(host: String, port: Int) async -> ConnectionID? {
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(.seconds(3))
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelInitializer { [self] channel in
                    channel.eventLoop.makeCompletedFuture { try self.adopt(channel, initiator: true) }
                }
                .connect(host: host, port: port).get()
            return state.withLock { state in state.channels.first { $0.value === channel }?.key }
        } catch {
            continuation.yield(.dialFailed(host: host, port: port, reason: "\(error)"))
            return nil
        }
    }

    /// Writes bytes to a connection (dropped silently if it has closed: its `.closed` event is on the way).
    public func send(_ connection: ConnectionID, _ bytes: [UInt8]) {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
    }

    /// Closes a connection; its `.closed` event follows.
    public func close(_ connection: ConnectionID) {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        channel.close(promise: nil)
    }

    /// Closes every listener and connection and ends the event stream.
    public func shutdown() async {
        let (listeners, channels) = state.withLock { ($0.listeners, Array($0.channels.values)) }
        for channel in listeners + channels { try? await channel.close().get() }
        continuation.finish()
    }

    /// Registers a new channel (on its event loop) and installs the handler that reports its bytes. The limit per
    /// address applies to inbound connections (what a flood would use); the `.opened` event waits for the channel
    /// to be connected, and `.closed` follows the channel's close, whether or not it ever connected.
    private func adopt(_ channel: any Channel, initiator: Bool) throws {
        let host = initiator ? nil : channel.remoteAddress?.ipAddress
        let id: ConnectionID? = state.withLock { state in
            guard state.channels.count < TCPLimits.connectionsMax else { return nil }
            if let host {
                guard state.perAddress[host, default: 0] < TCPLimits.connectionsPerAddressMax else { return nil }
                state.perAddress[host, default: 0] += 1
            }
            let id = ConnectionID(raw: state.nextID)
            state.nextID += 1
            state.channels[id] = channel
            return id
        }
        guard let id else {
            channel.close(promise: nil)
            throw TransportError.tooManyConnections(host ?? "outbound")
        }
        channel.closeFuture.whenComplete { [self] _ in
            self.forget(id, host: host)
            self.continuation.yield(.closed(id))
        }
        try channel.pipeline.syncOperations.addHandler(
            ConnectionHandler(id: id, initiator: initiator, continuation: continuation))
    }

    private func forget(_ id: ConnectionID, host: String?) {
        state.withLock { state in
            if state.channels.removeValue(forKey: id) != nil, let host { state.perAddress[host, default: 1] -= 1 }
        }
    }
}

/// Why the transport could not do something.
public enum TransportError: Error, CustomStringConvertible {
    case noPort
    case tooManyConnections(String)

    public var description: String {
        switch self {
        case .noPort: "no free TCP port found"
        case .tooManyConnections(let host): "refused a connection from \(host): too many connections"
        }
    }
}

/// Forwards a connection's start and bytes to the transport's event stream (its end is reported from the close
/// future).
private final class ConnectionHandler: ChannelInboundHandler {
    typealias InboundIn = ByteBuffer

    let id: ConnectionID
    let initiator: Bool
    let continuation: AsyncStream<TCPTransport.Event>.Continuation

    init(id: ConnectionID, initiator: Bool, continuation: AsyncStream<TCPTransport.Event>.Continuation) {
        self.id = id
        self.initiator = initiator
        self.continuation = continuation
    }

    func handlerAdded(context: ChannelHandlerContext) {
        if context.channel.isActive { announce(context) }
    }

    func channelActive(context: ChannelHandlerContext) {
        announce(context)
        context.fireChannelActive()
    }

    private var announced = false

    private func announce(_ context: ChannelHandlerContext) {
        guard !announced else { return }
        announced = true
        let remote = context.remoteAddress.map { "\($0.ipAddress ?? "?"):\($0.port ?? 0)" } ?? "?"
        continuation.yield(.opened(id, initiator: initiator, remote: remote))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let bytes = buffer.readBytes(length: buffer.readableBytes), !bytes.isEmpty {
            continuation.yield(.received(id, bytes))
        }
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if getenv("NATTER_TRACE") != nil {
            var text = Array("trace: \(id) error: \(error)\n".utf8)
            _ = write(2, &text, text.count)
        }
        context.close(promise: nil)
    }
}
