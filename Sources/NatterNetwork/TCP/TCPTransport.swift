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
    /// the node's handshake timeout (5 s), this bounds how many can wait at once. When it is full, a new connection
    /// evicts a stale one (`HandshakeSlots`).
    public static let handshakesInProgressMax = 32
    /// Handshake slots one address may hold: 4, a host starting a few nodes at once. A hostile address cannot take
    /// the table alone; with several addresses it still only ever holds the stalest places, which the next honest
    /// connection takes.
    public static let handshakesPerAddressMax = 4
    /// A handshake in progress this long (silent ones first) may be evicted for a new connection when every slot is
    /// taken: 1 s. An honest initiator's message 1 leaves as soon as it is connected and a LAN handshake takes a few
    /// milliseconds, so a second is stale even on a busy node; younger ones are never evicted, so a burst of new
    /// connections cannot push an honest handshake out.
    public static let handshakeSilenceEvictable: Duration = .seconds(1)
    /// Bytes handed to a connection and not yet written to its socket, at most: 16 MiB. A session queues at most its
    /// credit window (2 MiB of records, 512 KiB on the priority lane) plus summaries and heads before the peer must
    /// read, and pauses while the socket is not writable (`writeBufferHighWater`); a peer that does not read while
    /// it returns credit (the greedy attack of issue 19) would make the node buffer without end. Past this the
    /// connection is closed and the peer scored.
    public static let outboundBytesMax = 16 << 20
    /// A connection is reported not writable above this many bytes waiting in NIO's write buffer (1 MiB), and
    /// writable again below `writeBufferLowWater` (256 KiB): the node stops pumping sync batches meanwhile. Above
    /// a sync batch (256 KiB), so a link that keeps up is never paused; far below `outboundBytesMax`.
    public static let writeBufferHighWater = 1 << 20
    public static let writeBufferLowWater = 256 << 10
    /// How long a goodbye may wait to be written before the connection is closed anyway: 1 s. A peer that does not
    /// read must not hold a node's shutdown.
    public static let goodbyeWriteTimeout: TimeAmount = .seconds(1)
    /// A dial's connect timeout unless the caller gives one: 3 s (named peers, possibly on other subnets).
    public static let connectTimeout: TimeAmount = .seconds(3)
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
        /// The connection's socket stopped (false) or started again (true) accepting writes without queueing
        /// (`TCPLimits.writeBufferHighWater`): the owner should stop producing bulk data for it meanwhile.
        case writability(ConnectionID, writable: Bool)
        /// The transport closed the connection for what its peer did (its `.closed` follows).
        case dropped(ConnectionID, Drop)
    }

    /// Why the transport closed a connection on its own.
    public enum Drop: Sendable, Equatable, CustomStringConvertible {
        /// Evicted from a full table of handshakes in progress, silent (or stalled mid-handshake) for this long.
        case stalledHandshake(silent: Bool, after: Duration)
        /// The peer did not read: this many bytes were waiting to be written (`TCPLimits.outboundBytesMax`).
        case outboundOverflow(bytes: Int)

        public var description: String {
            switch self {
            case .stalledHandshake(let silent, let after):
                "evicted from a full handshake table after \(after) \(silent ? "without a byte" : "without finishing")"
            case .outboundOverflow(let bytes):
                "the peer does not read: \(bytes) bytes waited to be written, above the \(TCPLimits.outboundBytesMax)-byte cap"
            }
        }
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
        var handshaking = HandshakeSlots<ConnectionID>()
        /// Addresses refused for inbound connections and dials (banned by the node).
        var refused: Set<String> = []
        /// Per connection, bytes handed to `send` and not yet written to the socket.
        var outbound: [ConnectionID: Int] = [:]
        /// After `shutdown`: no new connection, no dial.
        var isShutDown = false
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
                    .childChannelOption(.writeBufferWaterMark, value: Self.waterMark)
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

    /// Dials `host`:`port`, waiting at most `connectTimeout` for the connection; the outcome also arrives as
    /// `.opened` or `.dialFailed`. Returns the connection. After `shutdown` it fails at once, and `shutdown` ends a
    /// connect in progress.
    @discardableResult
    public func dial(host: String, port: Int, connectTimeout: TimeAmount = TCPLimits.connectTimeout) async
        -> ConnectionID?
    {
        let refusal: TransportError? = state.withLock {
            $0.isShutDown ? .shutDown : $0.refused.contains(host) ? .refused(host) : nil
        }
        if let refusal {
            emit(.dialFailed(host: host, port: port, reason: "\(refusal)"))
            return nil
        }
        do {
            let channel = try await ClientBootstrap(group: group)
                .connectTimeout(connectTimeout)
                .channelOption(.socketOption(.tcp_nodelay), value: 1)
                .channelOption(.writeBufferWaterMark, value: Self.waterMark)
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

    private static let waterMark = ChannelOptions.Types.WriteBufferWaterMark(
        low: TCPLimits.writeBufferLowWater, high: TCPLimits.writeBufferHighWater)

    /// Writes bytes to a connection (dropped silently if it has closed: its `.closed` event is on the way). When
    /// more than `TCPLimits.outboundBytesMax` would wait to be written, the connection is closed instead
    /// (`.dropped(…, .outboundOverflow)`): its peer does not read.
    public func send(_ connection: ConnectionID, _ bytes: [UInt8]) {
        let admitted: (channel: any Channel, overflow: Int?)? = state.withLock { state in
            guard let channel = state.channels[connection], let pending = state.outbound[connection] else { return nil }
            let total = pending + bytes.count
            guard total <= TCPLimits.outboundBytesMax else {
                state.outbound[connection] = nil  // reported once; nothing more is written
                return (channel, total)
            }
            state.outbound[connection] = total
            return (channel, nil)
        }
        guard let (channel, overflow) = admitted else { return }
        if let overflow {
            emit(.dropped(connection, .outboundOverflow(bytes: overflow)))
            channel.close(promise: nil)
            return
        }
        let written = channel.eventLoop.makePromise(of: Void.self)
        written.futureResult.whenComplete { [self] _ in
            state.withLock { state in
                if let pending = state.outbound[connection] { state.outbound[connection] = pending - bytes.count }
            }
        }
        channel.writeAndFlush(channel.allocator.buffer(bytes: bytes), promise: written)
    }

    /// Whether at least half the handshake slots are taken (`HandshakeSlots.isUnderLoad`): the node scores a
    /// handshake that times out then.
    public var handshakesUnderLoad: Bool { state.withLock { $0.handshaking.isUnderLoad } }

    /// Replaces the set of refused addresses (as the remote address prints, without port): inbound connections
    /// from them are closed before any event, dials to them fail at once. Existing connections are not touched.
    public func refuse(_ hosts: Set<String>) {
        state.withLock { $0.refused = hosts }
    }

    /// The connection's handshake finished: it no longer counts against `TCPLimits.handshakesInProgressMax`.
    public func markEstablished(_ connection: ConnectionID) {
        state.withLock { $0.handshaking.remove(connection) }
    }

    /// Writes bytes, waits until they are handed to the socket (at most `TCPLimits.goodbyeWriteTimeout`: a peer
    /// that does not read cannot hold this up), then closes (a goodbye before a graceful close).
    public func sendAndClose(_ connection: ConnectionID, _ bytes: [UInt8]) async {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        let giveUp = channel.eventLoop.scheduleTask(in: TCPLimits.goodbyeWriteTimeout) { channel.close(promise: nil) }
        // A failed write (the connection closed, or closed by the timeout) leaves only the close to do.
        try? await channel.writeAndFlush(channel.allocator.buffer(bytes: bytes)).get()
        giveUp.cancel()
        // Closing a connection that already closed fails harmlessly.
        try? await channel.close().get()
    }

    /// Closes a connection; its `.closed` event follows.
    public func close(_ connection: ConnectionID) {
        guard let channel = state.withLock({ $0.channels[connection] }) else { return }
        channel.close(promise: nil)
    }

    /// Closes every listener and connection (dials in progress included) and ends the event stream; dials fail at
    /// once from now on.
    public func shutdown() async {
        let (listeners, channels) = state.withLock { state in
            state.isShutDown = true
            return (state.listeners, Array(state.channels.values))
        }
        // A channel that closed meanwhile fails its close harmlessly.
        for channel in listeners + channels { try? await channel.close().get() }
        continuation.finish()
    }

    /// Registers a new channel (on its event loop) and installs the handlers that idle it out, rate-limit it and
    /// report its bytes. The limits per address, on handshakes in progress and the refused addresses apply to
    /// inbound connections (what a flood would use); the `.opened` event waits for the channel to be connected, and
    /// `.closed` follows the channel's close, whether or not it ever connected.
    private func adopt(_ channel: any Channel, initiator: Bool) throws {
        let host = initiator ? nil : channel.remoteAddress?.ipAddress
        let now = Self.now()
        typealias Evicted = (id: ConnectionID, channel: (any Channel)?, drop: Drop)
        let admitted: Result<(ConnectionID, Evicted?), TransportError> = state.withLock { state in
            guard !state.isShutDown else { return .failure(.shutDown) }
            guard state.channels.count < TCPLimits.connectionsMax else { return .failure(.tooManyConnections("any")) }
            let id = ConnectionID(raw: state.nextID)
            var evicted: Evicted?
            if let host {
                guard !state.refused.contains(host) else { return .failure(.refused(host)) }
                guard state.perAddress[host, default: 0] < TCPLimits.connectionsPerAddressMax else {
                    return .failure(.tooManyConnections(host))
                }
                switch state.handshaking.admit(id, host: host, now: now) {
                case .admitted(let stale):
                    if let stale {
                        evicted = (
                            stale.connection, state.channels[stale.connection],
                            .stalledHandshake(silent: stale.silent, after: stale.stalledFor)
                        )
                    }
                case .tableFull: return .failure(.tooManyHandshakes(host))
                case .addressFull: return .failure(.tooManyHandshakesFrom(host))
                }
                state.perAddress[host, default: 0] += 1
            }
            state.nextID += 1
            state.channels[id] = channel
            state.outbound[id] = 0
            return .success((id, evicted))
        }
        let id: ConnectionID
        switch admitted {
        case .success(let (admittedID, evicted)):
            id = admittedID
            if let evicted {
                emit(.dropped(evicted.id, evicted.drop))
                evicted.channel?.close(promise: nil)
            }
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
            ConnectionHandler(
                id: id, initiator: initiator, emit: emit,
                spoke: { [self] in state.withLock { $0.handshaking.spoke(id) } }))
    }

    private func forget(_ id: ConnectionID, host: String?) {
        state.withLock { state in
            state.handshaking.remove(id)
            state.outbound[id] = nil
            if state.channels.removeValue(forKey: id) != nil, let host { state.perAddress[host, default: 1] -= 1 }
        }
    }

    /// Monotonic time for the handshake table (the transport is an adapter: it may read a clock).
    private static func now() -> Duration { .nanoseconds(Int64(NIODeadline.now().uptimeNanoseconds)) }
}

/// Why the transport could not do something.
public enum TransportError: Error, CustomStringConvertible {
    case noPort
    case tooManyConnections(String)
    case tooManyHandshakes(String)
    case tooManyHandshakesFrom(String)
    /// The address is banned (the node's penalties): no connection from it or to it until the ban ends.
    case refused(String)
    /// The transport was shut down.
    case shutDown

    public var description: String {
        switch self {
        case .noPort: "no free TCP port found"
        case .tooManyConnections(let host): "refused a connection from \(host): too many connections"
        case .tooManyHandshakes(let host):
            "refused a connection from \(host): \(TCPLimits.handshakesInProgressMax) handshakes already in progress, none stale"
        case .tooManyHandshakesFrom(let host):
            "refused a connection from \(host): it has \(TCPLimits.handshakesPerAddressMax) handshakes in progress already"
        case .refused(let host): "\(host) is banned for misbehaving; it is refused until the ban ends"
        case .shutDown: "the transport is shut down"
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
    /// Called once, at the connection's first bytes (its handshake slot is no longer silent).
    private var spoke: (@Sendable () -> Void)?
    private var limiter: InboundRateLimiter
    /// A read the rate limit postponed is scheduled (only one at a time).
    private var readScheduled = false

    init(
        id: ConnectionID, initiator: Bool, emit: @escaping @Sendable (TCPTransport.Event) -> Void,
        spoke: @escaping @Sendable () -> Void
    ) {
        self.id = id
        self.initiator = initiator
        self.emit = emit
        self.spoke = spoke
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
            if let spoke {
                spoke()
                self.spoke = nil
            }
            limiter.received(bytes, now: Self.now())
            emit(.received(id, bytes))
        }
    }

    func channelWritabilityChanged(context: ChannelHandlerContext) {
        emit(.writability(id, writable: context.channel.isWritable))
        context.fireChannelWritabilityChanged()
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
