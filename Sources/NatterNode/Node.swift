public import NatterCrypto
public import NatterModel
public import NatterNetwork
public import NatterStore
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A named peer (`--peer HOST:PORT`): dialled at start and redialled with backoff while not connected.
public struct PeerAddress: Hashable, Sendable, CustomStringConvertible {
    public let host: String
    public let port: Int

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `HOST:PORT` (IPv6 in brackets: `[::1]:7718`).
    public init?(_ text: String) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
            (1...65535).contains(port)
        else { return nil }
        var host = String(text[..<colon])
        if host.hasPrefix("[") && host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { return nil }
        self.init(host: host, port: port)
    }

    public var description: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }
}

/// The running node: one actor that owns the clock, the randomness, the transport and the `NodeCore`, and turns
/// network events and timers into core inputs and core actions into network writes.
public actor Node {
    /// Redial backoff for named peers: starts small, doubles, capped near a second or two on a LAN.
    public static let redialBackoffMin: Duration = .milliseconds(250)
    public static let redialBackoffMax: Duration = .seconds(2)
    /// The longest the timer sleeps: bounds redial latency and keeps session timers honest.
    public static let tickIntervalMax: Duration = .milliseconds(500)

    private let core: NodeCore
    private let transport: TCPTransport
    private let discovery: DiscoveryService?
    /// Links dialled because of a beacon, and the node tag that beacon carried.
    private var discovered: [ConnectionID: NodeTag] = [:]
    private let clock = ContinuousClock()
    private let started: ContinuousClock.Instant
    private var named: [PeerAddress: Redial] = [:]
    private let continuation: AsyncStream<NodeEvent>.Continuation
    /// Everything the node reports, in order (for the line interface, scripts and tests).
    public nonisolated let events: AsyncStream<NodeEvent>
    /// The TCP port the node listens on (another one than asked for when it was taken).
    public nonisolated let port: Int

    /// How long a peer found by discovery is redialled after its link went down: long enough to ride out a
    /// partition or a reboot without waiting 15–30 s for its next beacon, short enough to forget nodes that left.
    public static let discoveredRedialWindow: Duration = .seconds(120)

    private struct Redial {
        var connection: ConnectionID?
        var nextAttempt: ContinuousClock.Instant
        var backoff: Duration
        /// When to stop redialling (peers found by discovery); nil for named peers, redialled for ever.
        var expires: ContinuousClock.Instant? = nil
    }

    /// Opens the transport, listens on `listen`, and prepares to dial `peers` and, unless `discovery` is nil, to
    /// announce itself and dial the nodes it hears on the LAN. Call `run()` to start.
    public init(
        store: RecordStore, identity: LocalIdentity, networkKey: NetworkKey, listen: PeerAddress, peers: [PeerAddress],
        discovery: DiscoveryConfiguration? = DiscoveryConfiguration()
    ) async throws {
        core = NodeCore(store: store, identity: identity, networkKey: networkKey, random: SecureRandomGenerator())
        transport = TCPTransport()
        let bound = try await transport.listen(host: listen.host, port: listen.port)
        port = bound
        // The beacon announces the port the listener already accepts links on.
        self.discovery = discovery.map { DiscoveryService(networkKey: networkKey, tcpPort: bound, configuration: $0) }
        started = clock.now
        (events, continuation) = AsyncStream.makeStream(of: NodeEvent.self, bufferingPolicy: .unbounded)
        for peer in peers {
            named[peer] = Redial(connection: nil, nextAttempt: started, backoff: Self.redialBackoffMin)
        }
    }

    /// The conversation service, for reading and authoring (call `publish` with what authoring returns).
    public var conversations: Conversations { core.conversations }
    public var identity: LocalIdentity { core.identity }
    public var connectedPeers: [AuthorID] { core.connectedPeers.keys.sorted() }

    /// Sends records this node just wrote to every peer and reports the changes.
    public func publish(_ records: [Record]) {
        perform(core.published(records, now: now))
    }

    /// Dials an address once (discovery, `/connect`).
    public func connect(_ address: PeerAddress) async {
        await transport.dial(host: address.host, port: address.port)
    }

    /// Runs until cancelled: network events and timers drive the core.
    public func run() async {
        await withTaskGroup(of: Void.self) { group in
            group.addTask { [transport] in
                for await event in transport.events { await self.handle(event) }
            }
            group.addTask {
                while !Task.isCancelled {
                    let pause = await self.nextPause()
                    try? await Task.sleep(for: pause)
                    await self.tick()
                }
            }
            if let discovery {
                group.addTask { [discovery] in
                    do {
                        try await discovery.run()
                    } catch {
                        await self.report("discovery stopped: \(error)")
                    }
                    // Keep the node running without discovery: named peers still work.
                    while !Task.isCancelled { try? await Task.sleep(for: .seconds(3600)) }
                }
                group.addTask { [discovery] in
                    for await request in discovery.dialRequests { await self.dialDiscovered(request) }
                }
                group.addTask { [discovery] in
                    for await entry in discovery.logs { await self.report("\(entry)") }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Closes every connection (with the channel's goodbye where possible) and ends the event stream.
    public func shutdown() async {
        await discovery?.shutdown()
        await transport.shutdown()
        continuation.finish()
    }

    // MARK: - Discovery

    private func dialDiscovered(_ request: DialRequest) async {
        guard let discovery else { return }
        guard let connection = await transport.dial(host: request.host, port: request.port) else { return }
        discovered[connection] = request.tag
        await discovery.peerConnected(request.tag)
        // Remember the address for a while, so a cut link is redialled with backoff instead of waiting for a beacon.
        let address = PeerAddress(host: request.host, port: request.port)
        if named[address]?.expires != nil || named[address] == nil {
            named[address] = Redial(
                connection: connection, nextAttempt: clock.now, backoff: Self.redialBackoffMin,
                expires: clock.now + Self.discoveredRedialWindow)
        }
    }

    private func report(_ line: String) {
        continuation.yield(.notice(line))
    }

    // MARK: - Driving the core

    private var now: Duration { clock.now - started }

    private func handle(_ event: TCPTransport.Event) {
        if Self.tracing { Self.trace("transport: \(event)") }
        switch event {
        case .opened(let connection, let initiator, _):
            perform(core.handle(.linkOpened(LinkID(connection.raw), initiator: initiator), now: now))
        case .received(let connection, let bytes):
            perform(core.handle(.bytesReceived(LinkID(connection.raw), bytes), now: now))
        case .closed(let connection):
            if let tag = discovered.removeValue(forKey: connection), let discovery {
                Task { await discovery.peerDisconnected(tag) }
            }
            for (address, redial) in named where redial.connection == connection {
                named[address]?.connection = nil
                named[address]?.nextAttempt = clock.now + redial.backoff
            }
            perform(core.handle(.linkClosed(LinkID(connection.raw)), now: now))
        case .dialFailed:
            break
        }
    }

    private func tick() async {
        perform(core.handle(.tick, now: now))
        for (address, redial) in named where redial.connection == nil {
            if let expires = redial.expires, clock.now >= expires { named[address] = nil }
        }
        let due = named.filter { $0.value.connection == nil && clock.now >= $0.value.nextAttempt }.keys
        for address in due.sorted(by: { $0.description < $1.description }) {
            guard var redial = named[address] else { continue }
            redial.backoff = min(redial.backoff * 2, Self.redialBackoffMax)
            redial.nextAttempt = clock.now + redial.backoff
            named[address] = redial
            // The actor may run other work while the dial is in flight; re-read the entry afterwards.
            let connection = await transport.dial(host: address.host, port: address.port)
            guard var after = named[address] else { continue }
            after.connection = connection
            if connection != nil {
                after.backoff = Self.redialBackoffMin
                if after.expires != nil { after.expires = clock.now + Self.discoveredRedialWindow }
            }
            named[address] = after
        }
    }

    private func nextPause() -> Duration {
        guard let deadline = core.nextDeadline() else { return Self.tickIntervalMax }
        return max(.milliseconds(1), min(deadline - now, Self.tickIntervalMax))
    }

    /// `NATTER_TRACE=1` prints every transport event and core action on standard error (diagnosis only).
    private static let tracing = getenv("NATTER_TRACE") != nil

    private static func trace(_ line: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var text = Array("trace: \(now.tv_sec).\(now.tv_nsec / 1_000_000) \(line)\n".utf8)
        _ = write(2, &text, text.count)
    }

    private func perform(_ actions: [NodeAction]) {
        for action in actions {
            if Self.tracing {
                switch action {
                case .send(let link, let bytes): Self.trace("send \(link) \(bytes.count) bytes")
                case .close(let link): Self.trace("close \(link)")
                case .event: break
                }
            }
            switch action {
            case .send(let link, let bytes): transport.send(ConnectionID(raw: link.raw), bytes)
            case .close(let link): transport.close(ConnectionID(raw: link.raw))
            case .event(let event): continuation.yield(event)
            }
        }
    }
}
