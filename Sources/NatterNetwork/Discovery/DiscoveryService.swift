public import NIOCore
import NIOPosix
public import NatterCrypto

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

// MARK: - Values

/// Where a datagram came from: an IP address without its port (an IPv6 link-local scope is kept, so a dial to it
/// leaves by the right interface). The `Host` of the production `DiscoveryMachine`.
public struct SourceAddress: Hashable, Comparable, Sendable, CustomStringConvertible {
    /// The address with port 0 (and, for IPv6, flow label 0).
    public let address: SocketAddress

    /// The source of `address`, port dropped. Only IP addresses reach a UDP socket.
    public init(_ address: SocketAddress) {
        switch address {
        case .v4(let v4):
            var raw = v4.address
            raw.sin_port = 0
            self.address = SocketAddress(raw)
        case .v6(let v6):
            var raw = v6.address
            raw.sin6_port = 0
            raw.sin6_flowinfo = 0
            self.address = SocketAddress(raw)
        case .unixDomainSocket:
            preconditionFailure("a UDP datagram comes from an IP address")
        }
    }

    /// Ordered by their text (for deterministic tie-breaks).
    public static func < (lhs: SourceAddress, rhs: SourceAddress) -> Bool { lhs.description < rhs.description }

    /// The address in text: `192.0.2.7`, `fe80::1%2` (scope as interface index).
    public var description: String {
        let ip = address.ipAddress ?? "?"
        if case .v6(let v6) = address, v6.address.sin6_scope_id != 0 { return "\(ip)%\(v6.address.sin6_scope_id)" }
        return ip
    }
}

/// "Dial this": a beacon's source address at the beacon's TCP port, for the node tagged `tag`.
public struct DialRequest: Hashable, Sendable, CustomStringConvertible {
    /// The address to connect to, ready for a `ClientBootstrap` (IPv6 scope included).
    public let address: SocketAddress
    /// The beaconing node's tag: report it back with `DiscoveryService.peerConnected` once linked.
    public let tag: NodeTag

    /// The host in text (`192.0.2.7`, `fe80::1%2`).
    public var host: String { SourceAddress(address).description }
    /// The TCP port from the beacon.
    public var port: Int { address.port ?? 0 }

    public var description: String { "dial \(host) port \(port) (node \(tag))" }
}

/// How the discovery service is set up. The defaults are production's.
public struct DiscoveryConfiguration: Sendable {
    /// Which destinations beacons go to.
    public enum Reach: Sendable, Equatable {
        /// 255.255.255.255, every IPv4 interface's broadcast address, 127.255.255.255, and the natter IPv6 group on
        /// every multicast-capable interface. Production.
        case lan
        /// 127.255.255.255 only, no IPv6: several nodes on one machine, and tests that must not touch the LAN.
        case loopbackOnly
    }

    /// The UDP port to bind and to beacon to; every node of a LAN must use the same one.
    public var port: Int
    public var reach: Reach
    /// Whether to use IPv6 link-local multicast as well (skipped anyway where unavailable, and with `.loopbackOnly`).
    public var ipv6: Bool
    public var schedule: DiscoverySchedule
    /// The event loops the sockets run on; nil for NIO's shared `MultiThreadedEventLoopGroup.singleton`.
    public var eventLoopGroup: (any EventLoopGroup)?

    public init(
        port: Int = DiscoveryLimits.defaultPort, reach: Reach = .lan, ipv6: Bool = true,
        schedule: DiscoverySchedule = DiscoverySchedule(),
        eventLoopGroup: (any EventLoopGroup)? = nil
    ) {
        precondition((1...65535).contains(port), "a UDP port")
        self.port = port
        self.reach = reach
        self.ipv6 = ipv6
        self.schedule = schedule
        self.eventLoopGroup = eventLoopGroup
    }

    /// The link-local multicast group IPv6 beacons go to: `ff02::6e61:7472` (the last 32 bits are ASCII `natr`).
    /// Unassigned by IANA; a natter-specific group rather than all-nodes (ff02::1), so that network cards of hosts
    /// not running natter filter the frames out.
    public static let ipv6Group = "ff02::6e61:7472"
}

/// What the discovery service reports, one line a person can act on each.
public enum DiscoveryServiceLog: Sendable, CustomStringConvertible {
    /// Bound and beaconing.
    case listening(port: Int, ipv6: Bool)
    /// IPv6 is off for this run (no IPv6 on the host, or the bind failed): IPv4 broadcast carries on alone.
    case ipv6Unavailable(String)
    /// Joining the IPv6 group on an interface failed; beacons do not go out there.
    case joinFailed(interface: String, error: String)
    /// The beacon destinations changed (interfaces came, went or changed address); a burst follows.
    case destinationsChanged([String])
    /// No route to a destination (255.255.255.255 without a default route, an IPv6 group before the interface's
    /// link-local address is usable): skipped until there is one. Logged once until a send there succeeds.
    case destinationUnreachable(String)
    /// Sending to a destination failed; logged once until a send there succeeds.
    case sendFailed(destination: String, error: String)
    /// The socket failed; the service rebinds after `DiscoveryLimits.rebindDelay`.
    case socketFailed(String)
    /// What the protocol had to say.
    case discovery(DiscoveryLog<SourceAddress>)

    public var description: String {
        switch self {
        case .listening(let port, let ipv6):
            "discovery: listening on UDP port \(port) (IPv4 broadcast\(ipv6 ? ", IPv6 multicast" : ""))"
        case .ipv6Unavailable(let reason): "discovery: IPv6 multicast unavailable, using IPv4 only: \(reason)"
        case .joinFailed(let interface, let error):
            "discovery: cannot join \(DiscoveryConfiguration.ipv6Group) on \(interface): \(error)"
        case .destinationsChanged(let destinations):
            "discovery: beaconing to \(destinations.joined(separator: ", "))"
        case .destinationUnreachable(let destination): "discovery: cannot send to \(destination) now, skipping it"
        case .sendFailed(let destination, let error): "discovery: sending to \(destination) failed: \(error)"
        case .socketFailed(let error): "discovery: socket failed (\(error)); rebinding"
        case .discovery(let entry): entry.description
        }
    }
}

/// Discovery could not start.
public enum DiscoveryError: Error, CustomStringConvertible {
    /// The discovery port could not be bound.
    case bindFailed(port: Int, reason: String)

    public var description: String {
        switch self {
        case .bindFailed(let port, let reason):
            "cannot bind the discovery port UDP \(port): \(reason); choose another with the discovery port option"
        }
    }
}

// MARK: - Service

/// Zero-configuration discovery over real sockets: runs a `DiscoveryMachine` on UDP, beacons to every broadcast and
/// multicast destination, and hands out the dials it asks for.
///
/// `run()` binds `0.0.0.0:port` (and `[::]:port`, IPv6 only, joined to `ff02::6e61:7472` on every multicast-capable
/// interface), both with `SO_REUSEADDR` and `SO_REUSEPORT` so that several nodes on one host share the port and
/// each receives every broadcast. These sockets only receive: beacons leave by a sending socket per address family
/// on an ephemeral port, because NIO closes a datagram channel on most send errors, and a firewall's EPERM or a
/// missing route must not cost a node its ears. It runs until `shutdown()` or cancellation, and closes every channel
/// on every path. Read `dialRequests` (and `logs`); report links with `peerConnected`/`peerDisconnected`.
public actor DiscoveryService {
    /// This run's random node tag.
    public nonisolated let tag: NodeTag
    /// The TCP port the beacons announce.
    public nonisolated let tcpPort: Int
    public nonisolated let configuration: DiscoveryConfiguration
    /// Dials the node should attempt: a beacon's source address at its port. Ends when `run()` returns.
    public nonisolated let dialRequests: AsyncStream<DialRequest>
    /// What discovery reports. Ends when `run()` returns.
    public nonisolated let logs: AsyncStream<DiscoveryServiceLog>

    private nonisolated let dialSink: AsyncStream<DialRequest>.Continuation
    private nonisolated let logSink: AsyncStream<DiscoveryServiceLog>.Continuation

    private typealias Datagrams = NIOAsyncChannel<AddressedEnvelope<ByteBuffer>, AddressedEnvelope<ByteBuffer>>

    private var machine: DiscoveryMachine<SourceAddress>
    private let origin = ContinuousClock.now
    private var phase = Phase.idle
    private var stopRequested = false
    private var stopSignal: AsyncStream<Void>.Continuation?

    /// The receiving IPv6 channel, for group membership (it never sends).
    private var v6Channel: (any Channel)?
    /// The sending channels, one per address family, on ephemeral ports. Kept apart from the receiving sockets
    /// because NIO closes a datagram channel on most send errors (ENETUNREACH, EPERM from a firewall …): a failed
    /// send then costs a new sending socket at the next beacon, never the ability to hear neighbours.
    private var senders: [SenderFamily: any Channel] = [:]
    private var v4Destinations: [SocketAddress] = []
    private var v6Destinations: [SocketAddress] = []
    /// Interface index → name, for the interfaces whose IPv6 group membership this socket holds.
    private var joined: [Int: String] = [:]
    private var failedDestinations: Set<SocketAddress> = []
    private var nextPoll: Duration = .zero

    private enum Phase { case idle, running, stopped }
    private enum SenderFamily: Hashable { case v4, v6 }

    /// A service announcing `tcpPort` to nodes of `networkKey`'s network. Nothing happens before `run()`.
    public init(networkKey: NetworkKey, tcpPort: Int, configuration: DiscoveryConfiguration = DiscoveryConfiguration())
    {
        precondition((1...65535).contains(tcpPort), "a TCP port")
        var random = SecureRandomGenerator()
        let tag = NodeTag.random(using: &random)
        self.tag = tag
        self.tcpPort = tcpPort
        self.configuration = configuration
        self.machine = DiscoveryMachine(
            networkKey: networkKey, ownTag: tag, tcpPort: UInt16(tcpPort), schedule: configuration.schedule,
            random: SecureRandomGenerator())
        (dialRequests, dialSink) = AsyncStream.makeStream(
            bufferingPolicy: .bufferingNewest(DiscoveryLimits.dialRequestsBufferedMax))
        (logs, logSink) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(DiscoveryLimits.logsBufferedMax))
    }

    // MARK: - Public operations

    /// Binds, beacons and listens until `shutdown()` or cancellation; then closes the sockets and ends both streams.
    /// Throws `DiscoveryError.bindFailed` if the port cannot be bound at start; later socket failures rebind.
    public func run() async throws {
        precondition(phase == .idle, "a DiscoveryService runs once")
        phase = .running
        defer {
            phase = .stopped
            dialSink.finish()
            logSink.finish()
        }
        var first = true
        while !stopRequested && !Task.isCancelled {
            let v4: Datagrams
            let v6: Datagrams?
            do {
                (v4, v6) = try await bind()
            } catch {
                if first { throw error }
                log(.socketFailed("\(error)"))
                try? await Task.sleep(for: DiscoveryLimits.rebindDelay)
                continue
            }
            var failure = "the socket closed"
            do {
                try await serve(v4: v4, v6: v6, first: first)
            } catch {
                failure = "\(error)"
            }
            first = false
            v6Channel = nil
            joined = [:]
            await closeSenders()
            if stopRequested || Task.isCancelled { break }
            log(.socketFailed(failure))
            try? await Task.sleep(for: DiscoveryLimits.rebindDelay)
        }
    }

    /// Stops `run()`: it closes the sockets and returns. Safe to call at any time, more than once.
    public func shutdown() {
        stopRequested = true
        stopSignal?.finish()
    }

    /// The node has a link to the node tagged `tag`: its beacons stop causing dials.
    public func peerConnected(_ tag: NodeTag) { machine.peerConnected(tag) }

    /// The link to the node tagged `tag` closed: its next beacon causes a dial.
    public func peerDisconnected(_ tag: NodeTag) { machine.peerDisconnected(tag) }

    // MARK: - Sockets

    /// Binds the IPv6 socket (optional) and then the IPv4 one; never leaves a bound channel unowned.
    private func bind() async throws -> (Datagrams, Datagrams?) {
        var v6: Datagrams?
        if configuration.ipv6 && configuration.reach == .lan {
            do {
                v6 = try await bindSocket(host: "::", ipv6: true)
            } catch {
                log(.ipv6Unavailable("\(error)"))
            }
        }
        do {
            return (try await bindSocket(host: "0.0.0.0", ipv6: false), v6)
        } catch {
            if let v6 { try? await v6.executeThenClose { _, _ in } }
            throw DiscoveryError.bindFailed(port: configuration.port, reason: "\(error)")
        }
    }

    private func bindSocket(host: String, ipv6: Bool) async throws -> Datagrams {
        let reusePort = ChannelOptions.Types.SocketOption(
            level: .socket, name: NIOBSDSocket.Option(rawValue: CInt(SO_REUSEPORT)))
        var bootstrap = DatagramBootstrap(group: configuration.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton)
            .channelOption(.socketOption(.so_reuseaddr), value: 1)
            .channelOption(reusePort, value: 1)
        if ipv6 {
            bootstrap = bootstrap.channelOption(
                ChannelOptions.Types.SocketOption(level: .ipv6, name: .ipv6_v6only), value: 1)
        }
        return try await bootstrap.bind(host: host, port: configuration.port) { channel in
            channel.eventLoop.makeCompletedFuture {
                try Datagrams(wrappingChannelSynchronously: channel)
            }
        }
    }

    /// Owns both channels until a child task ends (stop, cancellation or a socket error), then closes them.
    private func serve(v4: Datagrams, v6: Datagrams?, first: Bool) async throws {
        try await v4.executeThenClose { inbound4, _ in
            if let v6 {
                try await v6.executeThenClose { inbound6, _ in
                    try await self.serve(inbound4: inbound4, inbound6: inbound6, v6: v6.channel, first: first)
                }
            } else {
                try await self.serve(inbound4: inbound4, inbound6: nil, v6: nil, first: first)
            }
        }
    }

    private func serve(
        inbound4: NIOAsyncChannelInboundStream<AddressedEnvelope<ByteBuffer>>,
        inbound6: NIOAsyncChannelInboundStream<AddressedEnvelope<ByteBuffer>>?,
        v6: (any Channel)?, first: Bool
    ) async throws {
        let (stop, stopContinuation) = AsyncStream.makeStream(of: Void.self)
        stopSignal = stopContinuation
        defer { stopSignal = nil }
        if stopRequested { return }
        v6Channel = v6
        log(.listening(port: configuration.port, ipv6: v6 != nil))
        let now = self.now()
        _ = await refreshInterfaces()
        nextPoll = now + DiscoveryLimits.interfacePollInterval
        await perform(first ? machine.start(now: now) : machine.interfacesChanged(now: now))

        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask {
                for try await envelope in inbound4 { await self.received(envelope) }
            }
            if let inbound6 {
                group.addTask {
                    for try await envelope in inbound6 { await self.received(envelope) }
                }
            }
            group.addTask {
                while !Task.isCancelled {
                    try await Task.sleep(until: await self.wakeUpTime(), clock: .continuous)
                    await self.timerFired()
                }
            }
            group.addTask {
                for await _ in stop {}
            }
            // Whichever ends first (stop, a closed socket, an error) ends them all.
            defer { group.cancelAll() }
            try await group.next()
        }
    }

    // MARK: - Events

    private func received(_ envelope: AddressedEnvelope<ByteBuffer>) async {
        guard envelope.remoteAddress.protocol == .inet || envelope.remoteAddress.protocol == .inet6 else { return }
        let actions = machine.beaconReceived(
            envelope.data.readableBytesView, from: SourceAddress(envelope.remoteAddress), now: now())
        await perform(actions)
    }

    private func wakeUpTime() -> ContinuousClock.Instant {
        origin + min(machine.nextDeadline() ?? nextPoll, nextPoll)
    }

    private func timerFired() async {
        let now = self.now()
        if now >= nextPoll {
            nextPoll = now + DiscoveryLimits.interfacePollInterval
            if await refreshInterfaces() {
                await perform(machine.interfacesChanged(now: now))
            }
        }
        await perform(machine.tick(now: self.now()))
    }

    private func perform(_ actions: [DiscoveryAction<SourceAddress>]) async {
        for action in actions {
            switch action {
            case .sendBeacon(let bytes): await sendEverywhere(bytes)
            case .dial(let host, let port, let tag):
                var address = host.address
                address.port = Int(port)
                dialSink.yield(DialRequest(address: address, tag: tag))
            case .log(let entry): log(.discovery(entry))
            }
        }
    }

    private func sendEverywhere(_ bytes: [UInt8]) async {
        let targets = v4Destinations.map { ($0, SenderFamily.v4) } + v6Destinations.map { ($0, SenderFamily.v6) }
        for (destination, family) in targets {
            // Ask the kernel for a route first (connect() on a throwaway socket sends nothing): a destination without
            // one (255.255.255.255 with no default route, an interface going down) is skipped quietly.
            if let reason = Self.unroutable(destination) {
                if failedDestinations.insert(destination).inserted {
                    log(.destinationUnreachable("\(Self.text(destination)) (\(reason))"))
                }
                continue
            }
            do {
                let channel = try await sender(family)
                let envelope = AddressedEnvelope(remoteAddress: destination, data: ByteBuffer(bytes: bytes))
                try await channel.writeAndFlush(envelope).get()
                failedDestinations.remove(destination)
            } catch {
                if failedDestinations.insert(destination).inserted {
                    log(.sendFailed(destination: Self.text(destination), error: "\(error)"))
                }
            }
        }
    }

    /// The sending channel for `family`, opened now if there is none or the last one closed (after a send error).
    private func sender(_ family: SenderFamily) async throws -> any Channel {
        if let channel = senders[family], channel.isActive { return channel }
        if let stale = senders.removeValue(forKey: family) { try? await stale.close() }
        var bootstrap = DatagramBootstrap(group: configuration.eventLoopGroup ?? MultiThreadedEventLoopGroup.singleton)
        if family == .v4 { bootstrap = bootstrap.channelOption(.socketOption(.so_broadcast), value: 1) }
        let channel = try await bootstrap.bind(host: family == .v4 ? "0.0.0.0" : "::", port: 0).get()
        senders[family] = channel
        return channel
    }

    private func closeSenders() async {
        for channel in senders.values { try? await channel.close() }
        senders = [:]
    }

    /// Re-reads the interfaces; recomputes destinations and joins the IPv6 group where new. True if anything changed.
    private func refreshInterfaces() async -> Bool {
        let port = configuration.port
        let limitedBroadcast = try! SocketAddress(ipAddress: "255.255.255.255", port: port)
        let loopbackBroadcast = try! SocketAddress(ipAddress: "127.255.255.255", port: port)
        guard configuration.reach == .lan else {
            let changed = v4Destinations != [loopbackBroadcast]
            v4Destinations = [loopbackBroadcast]
            if changed { log(.destinationsChanged(v4Destinations.map(Self.text))) }
            return changed
        }
        let devices = (try? System.enumerateDevices()) ?? []
        var v4: [SocketAddress] = [limitedBroadcast]
        for device in devices {
            if var broadcast = Self.broadcastAddress(of: device) {
                broadcast.port = port
                if !v4.contains(broadcast) { v4.append(broadcast) }
            }
        }
        if !v4.contains(loopbackBroadcast) { v4.append(loopbackBroadcast) }

        var v6: [SocketAddress] = []
        if let channel = v6Channel as? any MulticastChannel {
            var present: [Int: NIONetworkDevice] = [:]
            for device in devices where device.multicastSupported {
                if case .v6 = device.address, present[device.interfaceIndex] == nil {
                    present[device.interfaceIndex] = device
                }
            }
            joined = joined.filter { present[$0.key] != nil }  // gone interfaces took their membership along
            let group = try! SocketAddress(ipAddress: DiscoveryConfiguration.ipv6Group, port: port)
            for (index, device) in present.sorted(by: { $0.key < $1.key }) where joined[index] == nil {
                do {
                    try await channel.joinGroup(group, device: device).get()
                    joined[index] = device.name
                } catch {
                    log(.joinFailed(interface: device.name, error: "\(error)"))
                }
            }
            for index in joined.keys.sorted() {
                if case .v6(let groupV6) = group {
                    var raw = groupV6.address
                    raw.sin6_scope_id = UInt32(index)
                    v6.append(SocketAddress(raw))
                }
            }
        }
        let changed = v4 != v4Destinations || v6 != v6Destinations
        v4Destinations = v4
        v6Destinations = v6
        failedDestinations.formIntersection(v4 + v6)
        if changed {
            log(.destinationsChanged(v4.map(Self.text) + v6.map { "\(Self.text($0)) (\(joined[scope($0)] ?? "?"))" }))
        }
        return changed
    }

    // MARK: - Helpers

    private func now() -> Duration { ContinuousClock.now - origin }

    private nonisolated func log(_ entry: DiscoveryServiceLog) { logSink.yield(entry) }

    private func scope(_ address: SocketAddress) -> Int {
        if case .v6(let v6) = address { return Int(v6.address.sin6_scope_id) }
        return 0
    }

    private static func text(_ address: SocketAddress) -> String {
        "\(SourceAddress(address)):\(address.port ?? 0)"
    }

    /// The IPv4 broadcast address of `device`'s subnet: the one the interface reports, or else address | ~netmask
    /// (an address added without `brd` reports none, or its own address). None for /31 and /32 and non-IPv4.
    static func broadcastAddress(of device: NIONetworkDevice) -> SocketAddress? {
        guard case .v4(let address) = device.address, case .v4(let mask) = device.netmask else { return nil }
        let host = UInt32(bigEndian: address.address.sin_addr.s_addr)
        let netmask = UInt32(bigEndian: mask.address.sin_addr.s_addr)
        guard netmask.nonzeroBitCount <= 30 else { return nil }
        if case .v4(let reported) = device.broadcastAddress, reported.address.sin_addr.s_addr != 0,
            reported.address.sin_addr.s_addr != address.address.sin_addr.s_addr
        {
            return device.broadcastAddress
        }
        var raw = address.address
        raw.sin_addr.s_addr = (host | ~netmask).bigEndian
        return SocketAddress(raw)
    }

    /// Nil if the kernel has a route for a datagram to `destination`, else why not: connect() on a throwaway UDP
    /// socket (with SO_BROADCAST, which broadcast destinations need) looks the route up and sends nothing.
    static func unroutable(_ destination: SocketAddress) -> String? {
        #if os(Linux)
        let datagram = CInt(SOCK_DGRAM.rawValue)
        #else
        let datagram = SOCK_DGRAM
        #endif
        let fd = socket(destination.protocol.rawValue, datagram, 0)
        guard fd >= 0 else { return String(cString: strerror(errno)) }
        defer { close(fd) }
        var one: CInt = 1
        _ = setsockopt(fd, SOL_SOCKET, SO_BROADCAST, &one, socklen_t(MemoryLayout<CInt>.size))
        let status = destination.withSockAddr { pointer, size in connect(fd, pointer, socklen_t(size)) }
        return status == 0 ? nil : String(cString: strerror(errno))
    }
}
