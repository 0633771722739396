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
    /// Inbound connections whose handshake has not finished, at once: 32. A LAN node completes a handshake in
    /// milliseconds, so dozens pending means a flood of half-open or silent connections; each is still closed by
    /// the node's handshake timeout (5 s), this bounds how many can wait at once.
    public static let handshakesInProgressMax = 32
    /// A connection on which nothing arrives for this long is closed: 30 s. Established links exchange heartbeats
    /// every 2 s (the sync session closes one silent for 6 s), handshakes time out after 5 s: this is the transport's
    /// own backstop, so a connection the node forgot cannot hold a descriptor for ever.
    public static let idleTimeout: TimeAmount = .seconds(30)
    /// Inbound bytes per second per connection: 32 MiB. Above what the node can ingest (≈ 17k records/s, ≈ 13 MB/s
    /// of records on two cores), so it never slows honest catch-up; it caps the decryption and parsing one peer can
    /// make this node do.
    public static let inboundBytesPerSecond = 32 << 20
    /// Inbound bytes a connection may send at once before the byte rate applies: 8 MiB (a few sync windows).
    public static let inboundBurstBytes = 8 << 20
    /// Inbound frames per second per connection: 50,000. An honest peer sends about one frame per record pushed
    /// live (≈ 17k/s at full ingest speed) and 65,519-byte frames during catch-up; tiny frames cost per-frame work
    /// (AEAD setup, parsing) that the byte rate alone would let a peer multiply 30-fold (18-byte frames).
    public static let inboundFramesPerSecond = 50_000
    /// Inbound frames at once before the frame rate applies: 10,000.
    public static let inboundBurstFrames = 10_000
}

/// TCP listening and dialling over SwiftNIO that carries raw bytes: the node's core does all framing, encryption
/// and sync on top. Events arrive in order per connection, on one `AsyncStream` or, if the owner gives one, through
/// a function called on the connection's event loop (no task hop between the socket and the owner).
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
    /// Where events go: the stream's continuation, or the owner's function.
    private let emit: @Sendable (Event) -> Void
    private let group: any EventLoopGroup
    private let state = Mutex<State>(State())

    private struct State {
        var nextID: UInt64 = 1
        var channels: [ConnectionID: any Channel] = [:]
        var perAddress: [String: Int] = [:]
        var listeners: [any Channel] = []
        /// Inbound connections still in their handshake (`markEstablished` removes them).
        var handshaking: Set<ConnectionID> = []
        /// Addresses refused for inbound connections and dials (banned by the node).
        var refused: Set<String> = []
    }

    /// A transport on NIO's shared event loops.
    public convenience init() { self.init(group: MultiThreadedEventLoopGroup.singleton) }

    /// A transport on `group`'s event loops. With `onEvent`, events are handed to it on the connection's event loop
    /// (it must not block) and `events` stays empty; otherwise they go to `events`.
    public init(group: any EventLoopGroup, onEvent: (@Sendable (Event) -> Void)? = nil) {
        self.group = group
        let (events, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
        (self.events, self.continuation) = (events, continuation)
        emit = onEvent ?? { continuation.yield($0) }
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
        if state.withLock({ $0.refused.contains(host) }) {
            emit(.dialFailed(host: host, port: port, reason: "\(TransportError.refused(host))"))
            return nil
        }
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
            emit(.dialFailed(host: host, port: port, reason: "\(error)"))
            return nil
        }
    }

    /// Writes bytes to a connection (dropped silently if it has closed: its `.closed` event is on the way).
    public func send(_ connection: ConnectionID, _ bytes: [UInt8]) {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: nil)
    }

    /// Replaces the set of refused addresses (as the remote address prints, without port): inbound connections
    /// from them are closed before any event, dials to them fail at once. Existing connections are not touched.
    public func refuse(_ hosts: Set<String>) {
        state.withLock { $0.refused = hosts }
    }

    /// The connection's handshake finished: it no longer counts against `TCPLimits.handshakesInProgressMax`.
    public func markEstablished(_ connection: ConnectionID) {
        _ = state.withLock { $0.handshaking.remove(connection) }
    }

    /// Writes bytes, waits until they are handed to the socket, then closes (a goodbye before a graceful close).
    public func sendAndClose(_ connection: ConnectionID, _ bytes: [UInt8]) async {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        try? await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
        try? await channel.close().get()
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

    /// Registers a new channel (on its event loop) and installs the handlers that idle it out, rate-limit it and
    /// report its bytes. The limits per address, on handshakes in progress and the refused addresses apply to
    /// inbound connections (what a flood would use); the `.opened` event waits for the channel to be connected, and
    /// `.closed` follows the channel's close, whether or not it ever connected.
    private func adopt(_ channel: any Channel, initiator: Bool) throws {
        let host = initiator ? nil : channel.remoteAddress?.ipAddress
        let admitted: Result<ConnectionID, TransportError> = state.withLock { state in
            guard state.channels.count < TCPLimits.connectionsMax else { return .failure(.tooManyConnections("any")) }
            if let host {
                guard !state.refused.contains(host) else { return .failure(.refused(host)) }
                guard state.perAddress[host, default: 0] < TCPLimits.connectionsPerAddressMax else {
                    return .failure(.tooManyConnections(host))
                }
                guard state.handshaking.count < TCPLimits.handshakesInProgressMax else {
                    return .failure(.tooManyHandshakes(host))
                }
                state.perAddress[host, default: 0] += 1
            }
            let id = ConnectionID(raw: state.nextID)
            state.nextID += 1
            state.channels[id] = channel
            if host != nil { state.handshaking.insert(id) }
            return .success(id)
        }
        let id: ConnectionID
        switch admitted {
        case .success(let admittedID): id = admittedID
        case .failure(let error):
            channel.close(promise: nil)
            throw error
        }
        channel.closeFuture.whenComplete { [self] _ in
            self.forget(id, host: host)
            self.emit(.closed(id))
        }
        try channel.pipeline.syncOperations.addHandlers(
            IdleStateHandler(readTimeout: TCPLimits.idleTimeout),
            ConnectionHandler(id: id, initiator: initiator, emit: emit))
    }

    private func forget(_ id: ConnectionID, host: String?) {
        state.withLock { state in
            state.handshaking.remove(id)
            if state.channels.removeValue(forKey: id) != nil, let host { state.perAddress[host, default: 1] -= 1 }
        }
    }
}

/// Why the transport could not do something.
public enum TransportError: Error, CustomStringConvertible {
    case noPort
    case tooManyConnections(String)
    case tooManyHandshakes(String)
    /// The address is banned (the node's penalties): no connection from it or to it until the ban ends.
    case refused(String)

    public var description: String {
        switch self {
        case .noPort: "no free TCP port found"
        case .tooManyConnections(let host): "refused a connection from \(host): too many connections"
        case .tooManyHandshakes(let host):
            "refused a connection from \(host): \(TCPLimits.handshakesInProgressMax) handshakes already in progress"
        case .refused(let host): "\(host) is banned for misbehaving; it is refused until the ban ends"
        }
    }
}

/// Forwards a connection's start and bytes to the transport's event stream (its end is reported from the close
/// future), pauses reading while the connection is over its inbound rate, and closes it when it has been idle.
private final class ConnectionHandler: ChannelDuplexHandler {
    typealias InboundIn = ByteBuffer
    typealias OutboundIn = ByteBuffer
    typealias OutboundOut = ByteBuffer

    let id: ConnectionID
    let initiator: Bool
    let emit: @Sendable (TCPTransport.Event) -> Void
    private var limiter: InboundRateLimiter
    /// A read the rate limit postponed is scheduled (only one at a time).
    private var readScheduled = false

    init(id: ConnectionID, initiator: Bool, emit: @escaping @Sendable (TCPTransport.Event) -> Void) {
        self.id = id
        self.initiator = initiator
        self.emit = emit
        limiter = InboundRateLimiter(now: Self.now())
    }

    /// Monotonic time for the rate limiter (the transport is an adapter: it may read a clock).
    private static func now() -> Duration { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }

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
        emit(.opened(id, initiator: initiator, remote: remote))
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        var buffer = unwrapInboundIn(data)
        if let bytes = buffer.readBytes(length: buffer.readableBytes), !bytes.isEmpty {
            limiter.received(bytes, now: Self.now())
            emit(.received(id, bytes))
        }
    }

    /// Reads only within the inbound budget: otherwise the read waits (TCP's window then slows the sender).
    func read(context: ChannelHandlerContext) {
        guard let pause = limiter.pause(now: Self.now()) else {
            context.read()
            return
        }
        guard !readScheduled else { return }
        readScheduled = true
        let nanoseconds = pause.components.seconds * 1_000_000_000 + pause.components.attoseconds / 1_000_000_000
        let loop = context.eventLoop.assumeIsolated()
        loop.scheduleTask(in: .nanoseconds(nanoseconds)) { [self] in
            readScheduled = false
            read(context: context)
        }
    }

    func userInboundEventTriggered(context: ChannelHandlerContext, event: Any) {
        if let idle = event as? IdleStateHandler.IdleStateEvent, idle == .read {
            context.close(promise: nil)
            return
        }
        context.fireUserInboundEventTriggered(event)
    }

    func errorCaught(context: ChannelHandlerContext, error: any Error) {
        if getenv("NATTER_TRACE") != nil {
            var text = Array("trace: \(id) error: \(error)\n".utf8)
            _ = Glibc.write(2, &text, text.count)
        }
        context.close(promise: nil)
    }
}
