import NIOCore
import NIOPosix
public import NatterCrypto
public import NatterModel
public import NatterNetwork
public import NatterStore
public import ServiceLifecycle
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
/// network events and timers into core inputs and core actions into network writes. A `Service`: in a
/// `ServiceGroup`, a graceful shutdown (SIGINT, SIGTERM) ends `run()` after every link got its goodbye.
public actor Node: Service {
    /// Redial backoff for named peers: starts small, doubles, capped near a second or two on a LAN.
    public static let redialBackoffMin: Duration = .milliseconds(250)
    public static let redialBackoffMax: Duration = .seconds(2)
    /// The longest the timer sleeps: bounds redial latency and keeps session timers honest.
    public static let tickIntervalMax: Duration = .milliseconds(500)

    /// The thread this actor's jobs run on, its own while it runs (`NodeThreads`); its timer fires there too.
    private nonisolated let thread: NodeThreads.Lease
    /// The thread as an executor (kept: the unowned reference below must outlive it).
    private nonisolated let executor: any SerialExecutor
    /// Transport events waiting for the actor (`TransportInbox`), put there by the transport on its event loop: a
    /// received message wakes the actor directly, not a task that would then hop to it. (The connections stay on
    /// NIO's own loops: with them on the actor's loop, reads would wait for every store transaction, and the send
    /// latency measured no better.)
    private nonisolated let inbox = TransportInbox()
    /// Intents submitted by front ends, waiting for the actor (`submit`): group commit.
    private nonisolated let writes = WriteQueue()
    public nonisolated var unownedExecutor: UnownedSerialExecutor { executor.asUnownedSerialExecutor() }

    private let core: NodeCore
    /// What the core is given and decides, recorded for `natter lab replay` (nil: not tracing; TraceRecorder.swift).
    private let trace: TraceRecorder?
    private let transport: TCPTransport
    private let discovery: DiscoveryService?
    /// Links dialled because of a beacon, and the node tag that beacon carried.
    private var discovered: [ConnectionID: NodeTag] = [:]
    /// The connections closed last (at most `recentlyClosedMax`), with whom each reached: a dial's continuation and
    /// its connection's events reach the actor in either order, so a redial learns of its connection only after its
    /// handshake ended, or after it closed (`noteDialled`).
    private var recentlyClosed: [(connection: ConnectionID, person: AuthorID?)] = []
    private static let recentlyClosedMax = 64
    private let clock = ContinuousClock()
    /// When the conversation tables are refreshed after a turn (what the user is not viewing at most every
    /// `RefreshPacing.bulkInterval`; the tick catches up): the rule the lab's nodes follow too.
    private var pacing = RefreshPacing()
    private let started: ContinuousClock.Instant
    /// Named peers and peers found by discovery, redialled with backoff while not connected.
    private var redials = Redials<ConnectionID>(backoff: .shipped, discoveredWindow: Node.discoveredRedialWindow)
    /// Scores misbehaving peers and bans repeat offenders (enforced here and by the transport).
    private var penalties = PeerPenalties()
    /// The remote address of each open connection (what a ban refuses), and its peer once the handshake is done.
    private var remoteHosts: [ConnectionID: String] = [:]
    private var linkedPeers: [ConnectionID: AuthorID] = [:]
    /// When the earliest ban in force ends (what is refused must be refreshed then).
    private var banEndsAt: Duration?
    private var isShutDown = false
    /// People the user blocked (`/block`): their links are refused like a ban's, for as long as they stay blocked.
    private var blocked = Set<AuthorID>()
    /// The timer armed on the node's thread and when it fires (`armTimer`): re-armed when the core gains an earlier
    /// deadline (a RECORDS push after the push interval, a typing frame due), so timers fire on time rather than up
    /// to `tickIntervalMax` late. Nil while a tick runs and when the node is not running.
    private var timer: (scheduled: Scheduled<Void>, until: Duration)?
    /// Whether `run` drives the node: the timer re-arms only then.
    private var timerRunning = false
    private let continuation: AsyncStream<NodeEvent>.Continuation
    /// Everything the node reports, in order (for the line interface, scripts and tests).
    public nonisolated let events: AsyncStream<NodeEvent>
    /// The TCP port the node listens on (another one than asked for when it was taken).
    public nonisolated let port: Int

    /// How long a peer found by discovery is redialled after its link went down: long enough to ride out a
    /// partition or a reboot without waiting 15–30 s for its next beacon, short enough to forget nodes that left.
    public static let discoveredRedialWindow: Duration = .seconds(120)

    /// Opens the transport, listens on `listen`, and prepares to dial `peers` and, unless `discovery` is nil, to
    /// announce itself and dial the nodes it hears on the LAN. Call `run()` to start.
    ///
    /// The conversation tables are brought up to date first (records applied before a crash). `receipts`: when the
    /// node writes delivered and read receipts and due re-keys (node policy).
    public init(
        store: RecordStore, identity: LocalIdentity, networkKey: NetworkKey, listen: PeerAddress, peers: [PeerAddress],
        discovery: DiscoveryConfiguration? = DiscoveryConfiguration(), quotas: QuotaConfiguration = QuotaConfiguration(),
        receipts: ReceiptConfiguration = ReceiptConfiguration(), trace: TraceOptions? = nil
    ) async throws {
        thread = NodeThreads.shared.take()
        executor = thread.loop.executor
        var configuration = NodeConfiguration()
        configuration.quotas = quotas
        configuration.receipts = receipts
        configuration.clockOriginMillis = Self.wallClockMillis()
        configuration.conversationRefreshDelay = nil  // `refreshPending` after each turn: sends leave first
        configuration.ingestDurability = .deferred  // `perform` syncs before a turn's sends
        var recorder = try trace.map(TraceRecorder.init)
        core = NodeCore(
            store: store, identity: identity, networkKey: networkKey, configuration: configuration,
            random: recorder?.generator() ?? SecureRandomGenerator())
        try core.conversations.refreshChanged()
        // Why the node runs without the trace asked for (its header does not fit the bound), said once it runs.
        var traceRefused: String?
        do {
            try recorder?.start(node: identity.author, configuration: configuration, store: store)
        } catch {
            traceRefused = "trace: \(error)"
            recorder = nil
        }
        if let recorder {
            core.writer = { [conversations = core.conversations, author = identity.author] intents, nowMillis in
                let results = conversations.author(intents, now: nowMillis)
                recorder.wrote(results, node: author)
                return results
            }
        }
        self.trace = recorder
        transport = TCPTransport(group: MultiThreadedEventLoopGroup.singleton, onEvent: { [inbox] in inbox.put($0) })
        let bound = try await transport.listen(host: listen.host, port: listen.port)
        port = bound
        // The beacon announces the port the listener already accepts links on.
        self.discovery = discovery.map { DiscoveryService(networkKey: networkKey, tcpPort: bound, configuration: $0) }
        started = clock.now
        (events, continuation) = AsyncStream.makeStream(of: NodeEvent.self, bufferingPolicy: .unbounded)
        if let traceRefused { continuation.yield(.notice(traceRefused)) }
        for peer in peers { redials.addNamed(peer, now: .zero) }
    }

    /// Runs `body` with what front ends may read of the store, on the node's actor (after bringing the tables up to
    /// date if a refresh is pending, so nothing read is behind what the events said).
    public func read<T: Sendable>(_ body: @Sendable (NodeQueries) throws -> T) throws -> T {
        refresh()
        return try body(NodeQueries(conversations: core.conversations))
    }
    public var identity: LocalIdentity { core.identity }
    public var connectedPeers: [AuthorID] { core.connectedPeers.keys.sorted() }
    /// Records the core was delivered and stored (new), and relay-only conversations it evicted, since it started.
    public var ingestCounts: (delivered: Int, new: Int, evicted: Int) {
        (core.recordsDelivered, core.recordsNew, core.conversationsEvicted)
    }

    // MARK: - Writing: the node owns every write

    /// Queues a person's intents for the node to carry out, in the order submitted, and returns at once: the ticket
    /// answers with what each wrote (or why it was refused) once it is durable. Intents submitted while the node is
    /// busy — a script's lines arriving faster than one fsync — are appended together, one transaction and one
    /// fsync for their content (group commit); none is reported written, or sent, before its commit.
    public nonisolated func submit(_ intents: [ConversationIntent]) -> WriteTicket {
        let ticket = WriteTicket()
        if Self.tracing { Self.trace("submit \(intents.count)") }
        switch writes.put(intents, ticket) {
        case nil:
            ticket.resolve(intents.map { _ in .failure(NodeError.busy) })
        case true?:
            // Queued on the node's own thread, not through a task: a task first waits for a thread of Swift's shared
            // cooperative pool, which a busy front end holds (rendering events), and a person's line waited behind it
            // while the node took turn after turn of received records (issue 18: up to 217 ms with 25 members).
            thread.loop.execute {
                // The loop is this actor's executor: the closure runs isolated to it.
                self.assumeIsolated { node in node.drainWrites() }
            }
        case false?:
            break  // a drain is scheduled and will take these too
        }
        return ticket
    }

    /// Carries out one intent and answers with what it wrote: `submit` and a wait.
    @discardableResult
    public nonisolated func author(_ intent: ConversationIntent) async throws -> Authored {
        try await submit([intent]).results()[0].get()
    }

    /// Carries out everything submitted so far, in one turn.
    private func drainWrites() {
        let pending = writes.takeAll()
        guard !pending.isEmpty else { return }
        guard !isShutDown else {
            for (intents, ticket) in pending { ticket.resolve(intents.map { _ in .failure(NodeError.stopped) }) }
            return
        }
        let intents = pending.flatMap(\.intents)
        if Self.tracing { Self.trace("drain \(intents.count)") }
        let (results, actions) = traced(.author(markRead: intents.map(Self.marksRead))) {
            core.author(intents, now: $0)
        }
        if Self.tracing { Self.trace("authored") }
        perform(actions)
        refresh()
        var offset = 0
        for (intents, ticket) in pending {
            ticket.resolve(Array(results[offset..<(offset + intents.count)]))
            offset += intents.count
        }
    }

    /// The conversation this node's user is viewing (nil: none): receipts there say "read" (node policy, SPEC F8).
    public func view(_ conversation: ConversationID?) {
        perform(traced(.view(conversation)) { core.view(conversation, now: $0) })
    }

    /// Stores records written elsewhere — the flood tool's throwaway identities (`natter debug flood`) — as if they
    /// had arrived, and pushes them to every peer. Not for chat: a person's writes go through `submit`.
    public func inject(_ records: [Record]) throws {
        _ = try core.store.ingest(records.map(\.bytes), receivedAtMillis: Self.wallClockMillis())
        published(records)
    }

    /// Runs `body` with the store itself, on the actor (tests that inspect what a flood left; never a front end's).
    func inspectStore<T: Sendable>(_ body: @Sendable (RecordStore) throws -> T) rethrows -> T {
        try body(core.store)
    }

    /// Holds the actor's thread until `release` answers true, asking every 2 ms (tests that make transport events
    /// pile up into one batch: the transport's channels keep receiving on their own threads, decision 0015).
    func holdTurns(until release: () -> Bool) {
        while !release() { usleep(2_000) }
    }

    /// Bytes received per link waiting for the node's next turn (tests, with `holdTurns`).
    nonisolated func bytesWaiting() -> [Int] { Array(inbox.bytesWaiting().values) }

    /// Whether received records wait for their fsync, the writer's `synchronous` pragma (2: FULL) and how many syncs
    /// made deferred commits durable so far: what the durability tests check (DESIGN §6).
    public func durability() throws -> (deferredCommits: Bool, synchronousMode: Int, syncs: Int) {
        (core.store.hasDeferredCommits, try core.store.synchronousMode(), core.store.deferredSyncs)
    }

    /// Silences a conversation's notices until a time (ms since 1970), or for ever (nil): a local setting.
    public func mute(_ conversation: ConversationID, until: Int64?) throws {
        try core.conversations.mute(conversation, until: until)
    }

    public func unmute(_ conversation: ConversationID) throws { try core.conversations.unmute(conversation) }

    /// Hides a conversation from the list until something new arrives: a local setting.
    public func archive(_ conversation: ConversationID) throws { try core.conversations.archive(conversation) }

    // MARK: - Files (SPEC F13)

    /// Largest file `sendFile` accepts: `FileLimits.sendBytesDefault` (16 MiB) unless set, at most
    /// `FileLimits.fileBytesMax`.
    public private(set) var fileSizeCap: UInt64 = FileLimits.sendBytesDefault

    /// Sets the send cap (clamped to what the protocol can describe).
    public func setFileSizeCap(_ bytes: UInt64) {
        fileSizeCap = min(bytes, FileLimits.fileBytesMax)
    }

    /// Sends the file at `path` to `conversation` (name defaults to the path's last component) and pushes the
    /// message to every peer. Members fetch the content on demand.
    @discardableResult
    public func sendFile(
        atPath path: String, name: String? = nil, mediaType: String = FileLimits.defaultMediaType,
        in conversation: ConversationID, replyTo: RecordID? = nil
    ) throws -> RecordID {
        let record = try core.conversations.sendFile(
            atPath: path, name: name, mediaType: mediaType, in: conversation, replyTo: replyTo, sizeCap: fileSizeCap,
            now: Self.wallClockMillis())
        published([record])
        return record.id
    }

    /// Sends `bytes` as a file named `name`.
    @discardableResult
    public func sendFile(
        _ bytes: [UInt8], name: String, mediaType: String = FileLimits.defaultMediaType,
        in conversation: ConversationID, replyTo: RecordID? = nil
    ) throws -> RecordID {
        let record = try core.conversations.sendFile(
            bytes, name: name, mediaType: mediaType, in: conversation, replyTo: replyTo, sizeCap: fileSizeCap,
            now: Self.wallClockMillis())
        published([record])
        return record.id
    }

    /// Starts fetching a file message's content from the peers (resumes where it stopped). Watch `events` for
    /// `.file(.progress …)` and `.file(.completed(message))`.
    public func fetchFile(_ message: RecordID, in conversation: ConversationID) throws {
        perform(
            try traced(.fetchFile(message, in: conversation)) { try core.fetchFile(message, in: conversation, now: $0) }
        )
    }

    /// Stops fetching a file (what is stored stays).
    public func cancelFetch(_ message: RecordID) {
        perform(traced(.cancelFetch(message)) { core.cancelFetch(message, now: $0) })
    }

    /// Bytes held and total of a file being fetched (nil when not being fetched).
    public func fetchProgress(of message: RecordID) -> (bytes: UInt64, total: UInt64)? {
        core.fetchProgress(of: message)
    }

    /// Writes a complete file message to exactly `path`: never overwrites unless `overwrite`, checks the file's hash
    /// before it appears (temporary file in the same directory, fsync, rename). Throws `FileError.incomplete` while
    /// chunks are missing (call `fetchFile` and wait for `.file(.completed)`).
    public func saveFile(_ message: RecordID, in conversation: ConversationID, to path: String, overwrite: Bool)
        throws
    {
        try core.conversations.saveFile(message, in: conversation, to: path, overwrite: overwrite)
    }

    /// Drops the stored chunks of a file message (it can be fetched again while a peer holds it).
    @discardableResult
    public func dropFile(_ message: RecordID, in conversation: ConversationID) throws -> Int {
        try core.conversations.dropFile(message, in: conversation)
    }

    /// Pushes records this node wrote (a file message) to every peer and reports the changes.
    private func published(_ records: [Record]) {
        let node = core.identity.author
        perform(
            traced(.published(records.map { TraceRecorder.traced($0, node: node) })) {
                core.published(records, now: $0)
            })
        refresh()
    }

    private static func wallClockMillis() -> Int64 {
        var time = timespec()
        clock_gettime(CLOCK_REALTIME, &time)
        return Int64(time.tv_sec) * 1_000 + Int64(time.tv_nsec) / 1_000_000
    }
    /// Brings the conversation tables (list, history, search index) up to date if a refresh is pending.
    public func refreshConversationTables() {
        refresh()
    }

    /// A keystroke in a non-command line for `conversation` (SPEC F12): typing frames go out as the core decides.
    public func userTyping(in conversation: ConversationID) {
        perform(traced(.typing(conversation)) { core.userTyping(in: conversation, now: $0) })
    }

    /// The line was sent or cleared, or the user left the conversation: typing ends there.
    public func userStoppedTyping(in conversation: ConversationID) {
        perform(traced(.stoppedTyping(conversation)) { core.userStoppedTyping(in: conversation, now: $0) })
    }

    /// The people typing in `conversation` now.
    public func typingPeople(in conversation: ConversationID) -> [AuthorID] { core.typingPeople(in: conversation) }

    /// Dials an address once (discovery, `/connect`).
    public func connect(_ address: PeerAddress) async {
        await transport.dial(host: address.host, port: address.port)
    }

    /// Why own writes wait (nil: they do not): OwnHeadsGuard.swift.
    public var ownHeadsDoubt: OwnHeadsDoubt? { core.store.ownHeadsDoubt }

    /// Lets own writes continue although the own feeds may be behind other nodes' (the REPL's `/force-write`).
    /// Returns the doubt lifted (nil: nothing waited).
    public func forceWrite() throws -> OwnHeadsDoubt? {
        let (lifted, actions) = try traced(.forceWrite) { try core.forceWrite(now: $0) }
        perform(actions)
        return lifted
    }

    /// Runs until cancelled or, in a `ServiceGroup`, until a graceful shutdown; then shuts down (`shutdown()`).
    public func run() async {
        if let doubt = core.store.ownHeadsDoubt {
            report(
                "sending waits: \(doubt.explanation); it resumes once a peer that knows this identity has synced "
                    + "with this node (/force-write to write anyway)")
        }
        perform(traced(.review) { core.reviewConversations(now: $0) })
        await cancelWhenGracefulShutdown { await self.drive() }
        await shutdown()
    }

    /// One turn of the transport's events: all that waited (`TransportInbox`).
    private func takeTransportEvents() {
        handle(inbox.take())
    }

    /// Network events and timers drive the core, until cancelled.
    private func drive() async {
        timerRunning = true
        armTimer()
        defer {
            timerRunning = false
            timer?.scheduled.cancel()
            timer = nil
        }
        await withTaskGroup(of: Void.self) { group in
            // Events queue in the inbox while the actor works; each turn, queued on the node's thread, takes all of
            // them (`TransportInbox`). The node runs until the inbox finishes (the node stops) or this is cancelled.
            inbox.start { [thread] in
                thread.loop.execute {
                    // The loop is this actor's executor: the closure runs isolated to it.
                    self.assumeIsolated { node in node.takeTransportEvents() }
                }
            }
            group.addTask { [inbox] in
                await withTaskCancellationHandler {
                    await inbox.untilFinished()
                } onCancel: {
                    inbox.finish()
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
                    // Concurrent, rate-limited per source, cancelled when the node stops (`DiscoveryDialer`).
                    let dialer = DiscoveryDialer(
                        dial: { await self.dialDiscovered($0) }, log: { line in Task { await self.report(line) } })
                    await dialer.run(discovery.dialRequests)
                }
                group.addTask { [discovery] in
                    for await entry in discovery.logs { await self.report("\(entry)") }
                }
            }
            await group.next()
            group.cancelAll()
        }
    }

    /// Stops discovery, sends the authenticated goodbye on every established link and waits until it is written
    /// (so peers tell this stop from a crash), closes every connection and ends the event stream. Every record the
    /// node acknowledged is already durable (the store commits with `synchronous=FULL` before anything is sent).
    /// Idempotent.
    public func shutdown() async {
        guard !isShutDown else { return }
        drainWrites()
        perform(traced(.writePending) { core.writePending(now: $0) })  // receipts scheduled go out with the goodbyes, not never
        isShutDown = true
        await discovery?.shutdown()
        do {
            try core.store.syncDeferred()
        } catch {
            report("store: cannot make received records durable as the node stops (\(error))")
        }
        for action in traced(.closeAll, { _ in core.closeAllLinks() }) {
            switch action {
            case .send(let link, let goodbye): await transport.sendAndClose(ConnectionID(raw: link.raw), goodbye)
            case .close(let link): transport.close(ConnectionID(raw: link.raw))
            case .event(let event): continuation.yield(event)
            }
        }
        await transport.shutdown()
        drainWrites()  // answered with `NodeError.stopped`
        finishTrace()
        inbox.finish()
        continuation.finish()
        thread.end()
    }

    // MARK: - Discovery

    /// Dials a node heard by discovery, with a LAN-sized connect timeout; whether it connected.
    private func dialDiscovered(_ request: DialRequest) async -> Bool {
        guard let discovery, !isShutDown else { return false }
        // A banned address's beacons are dropped: it is not dialled until its ban ends.
        guard !penalties.isBanned(.address(Self.unscoped(request.host)), now: now) else { return false }
        let timeout = TimeAmount.nanoseconds(Int64(DiscoveryLimits.dialConnectTimeout / .nanoseconds(1)))
        guard let connection = await transport.dial(host: request.host, port: request.port, connectTimeout: timeout)
        else { return false }
        // Remember the address for a while, so a cut link is redialled with backoff instead of waiting for a beacon.
        redials.addDiscovered(PeerAddress(host: request.host, port: request.port), connection: connection, now: now)
        let closed = noteDialled(connection)
        // The tag goes with the connection; if it closed before this ran (its `.closed` found no tag), with the
        // person's other link, if any — else the tag is not linked and its next beacon dials again.
        guard let tagged = closed.map({ otherUntaggedLink(of: $0.person) }) ?? connection else { return true }
        discovered[tagged] = request.tag
        await discovery.peerConnected(request.tag)
        return true
    }

    /// An open link to `person` that carries no discovery tag, if any.
    private func otherUntaggedLink(of person: AuthorID?) -> ConnectionID? {
        person.flatMap { person in linkedPeers.first { $0.value == person && discovered[$0.key] == nil }?.key }
    }

    private func report(_ line: String) {
        continuation.yield(.notice(line))
    }

    // MARK: - Driving the core

    private var now: Duration { clock.now - started }

    private func handle(_ events: [TCPTransport.Event]) {
        var received = 0
        // A person's line waiting goes first (nothing when none waits); after it, the inputs of one batch are one turn
        // (`TurnPlan.Batch`): events shown as they come, sends held for one fsync at the batch's end.
        drainWrites()
        batch = TurnPlan.Batch()
        for event in events {
            if case .received(_, let bytes) = event {
                received += bytes.count
                batch?.received(bytes.count)
            }
            handle(event)
            if writes.hasPending {
                // A person's line waiting goes out now, after what the batch holds, not after the rest of the batch.
                outsideBatch { drainWrites() }
            } else if batch?.isFull == true {
                // Bulk input goes on at once; a neighbour's chat in the viewed conversation shows then.
                outsideBatch { if core.storedSinceRefresh.viewedPriority { refresh() } }
            }
        }
        // The batch ends durable; a store that cannot sync has closed every link (`syncStore`).
        endBatch()
        // A refresh of what is not shown at once waits for the interval (the tick catches it up).
        refresh(after: .received(bytes: received))
    }

    /// Runs `body` outside the batch in progress, if any: what the batch held goes out first (after its sync), then
    /// what `body` does is carried out at once; a new batch takes the inputs after it.
    private func outsideBatch(_ body: () -> Void) {
        guard batch != nil else { return body() }
        endBatch()
        body()
        batch = TurnPlan.Batch()
    }

    /// Releases the batch in progress, if any (its sync, then what it held), and ends it.
    private func endBatch() {
        guard var held = batch else { return }
        batch = nil
        carryOut(held.release())
    }

    /// Refreshes the conversation tables if `RefreshPacing` says so after `turn`.
    private func refresh(after turn: RefreshPacing.Turn) {
        if pacing.refreshesNow(after: turn, stored: core.storedSinceRefresh, now: now) { refresh() }
    }

    private func refresh() {
        guard core.isRefreshPending else { return }
        let started = clock.now
        pacing.refreshed(at: started - self.started)
        if Self.tracing { Self.trace("refresh") }
        perform(traced(.refresh) { core.refreshPending(now: $0) })
        if Self.tracing { Self.trace("refreshed in \(clock.now - started)") }
    }

    private func handle(_ event: TCPTransport.Event) {
        if Self.tracing {
            // Received bytes by their count: printing them would cost more than handling them.
            if case .received(let connection, let bytes) = event {
                Self.trace("transport: received \(bytes.count) bytes on \(connection)")
            } else {
                Self.trace("transport: \(event)")
            }
        }
        switch event {
        case .opened(let connection, let initiator, let remote):
            remoteHosts[connection] = Self.unscoped(Self.host(of: remote))
            let input = NodeInput.linkOpened(LinkID(connection.raw), initiator: initiator)
            perform(traced(.linkOpened(connection.raw, initiator: initiator)) { core.handle(input, now: $0) })
        case .received(let connection, let bytes):
            perform(
                traced(.received(connection.raw, bytes)) {
                    core.handle(.bytesReceived(LinkID(connection.raw), bytes), now: $0)
                })
        case .closed(let connection):
            remoteHosts[connection] = nil
            let person = linkedPeers.removeValue(forKey: connection)
            recentlyClosed.append((connection, person))
            if recentlyClosed.count > Self.recentlyClosedMax { recentlyClosed.removeFirst() }
            if let tag = discovered.removeValue(forKey: connection) {
                // The person may still be linked by another connection (both sides dialled and this one lost, or
                // a redial replaced it): the tag stays linked with that one, or its next beacon would dial again.
                if let other = otherUntaggedLink(of: person) {
                    discovered[other] = tag
                } else if let discovery {
                    Task { await discovery.peerDisconnected(tag) }
                }
            }
            redials.closed(connection, now: now)
            perform(traced(.linkClosed(connection.raw)) { core.handle(.linkClosed(LinkID(connection.raw)), now: $0) })
        case .dialFailed:
            break
        case .writability(let connection, let writable):
            let input = NodeInput.linkWritable(LinkID(connection.raw), writable)
            perform(traced(.writable(connection.raw, writable)) { core.handle(input, now: $0) })
        case .dropped(let connection, let drop):
            // The transport closed it for what the peer did; scored like the core's misbehaviour.
            let link = LinkID(connection.raw)
            let kind: Misbehaviour.Kind = if case .stalledHandshake = drop { .stalledHandshake } else { .notReading }
            continuation.yield(.linkFailed(link, "transport: \(drop)"))
            penalise(link, Misbehaviour(kind, "\(drop)"))
            continuation.yield(.misbehaved(link, Misbehaviour(kind, "\(drop)")))
        }
    }

    /// Arms the timer for the core's next deadline (at most `tickIntervalMax` away), replacing the one armed. When
    /// records wait only for the next turn (a long sync window) it fires at once, after the events already queued
    /// on the node's thread: they run first, then the tick ingests the next part. The timer fires on the node's own
    /// thread and enters the actor there, never through a task: a task's wake-up waits for a thread of Swift's shared cooperative pool, and a
    /// process whose pool is held for seconds by other work (a front end, other nodes, a test suite) would then send
    /// no heartbeats, and its peers would take a busy node for a dead one (issue 18, `BusyNotDeadTests`).
    private func armTimer() {
        timer?.scheduled.cancel()
        timer = nil
        guard timerRunning else { return }
        let pause = core.hasIngestDue(now: now) ? .zero : nextPause()
        let scheduled = thread.loop.scheduleTask(in: TimeAmount(pause)) { [self] in
            // The loop is this actor's executor: the closure runs isolated to it.
            assumeIsolated { node in node.timerFired() }
        }
        timer = (scheduled, now + pause)
    }

    private func timerFired() {
        timer = nil
        guard timerRunning else { return }
        // A person's line waiting goes before the tick's own writes (receipts on their grid: a commit and an fsync);
        // nothing when none waits.
        drainWrites()
        tick()
        armTimer()
    }

    private func tick() {
        // Bytes that arrived while the actor was busy prove their links alive, although not handled yet: handling
        // them here could put a link's later frames before earlier ones (a turn may hold those already).
        for (connection, arrived) in inbox.takeArrivals() {
            traced(.heard(connection.raw), at: arrived - started) { core.heard(LinkID(connection.raw), at: $0) }
        }
        perform(traced(.tick) { core.handle(.tick, now: $0) })
        refresh(after: .tick)
        if let end = banEndsAt, end <= now { enforceBans() }
        let linkedPeers = linkedPeers  // asked only of addresses otherwise due
        let due = redials.due(now: now) { person in linkedPeers.values.contains(person) }
            .filter { !penalties.isBanned(.address(Self.unscoped($0.host)), now: now) }
        for address in due where redials.attempt(address, now: now) {
            // The actor runs other work while the dial is in flight; `dialled` takes the entry as it is then.
            Task {
                let connection = await transport.dial(host: address.host, port: address.port)
                redials.dialled(address, connection: connection)
                if let connection { noteDialled(connection) }
            }
        }
    }

    /// Tells `redials` what its dial's `connection` did before the dial's continuation ran: its handshake ended
    /// (`linkedPeers`), or it closed already (`recentlyClosed`). Without it, a named peer's entry kept a closed
    /// connection (never redialled), or never learned whom it reached (and dialled them again while linked).
    /// Returns the connection's close when it closed already, with whom it reached.
    @discardableResult
    private func noteDialled(_ connection: ConnectionID) -> (connection: ConnectionID, person: AuthorID?)? {
        if let person = linkedPeers[connection] {
            redials.linked(connection, person: person, now: now)
            return nil
        }
        guard let closed = recentlyClosed.last(where: { $0.connection == connection }) else { return nil }
        if let person = closed.person { redials.linked(connection, person: person, now: now) }
        redials.closed(connection, now: now)
        return closed
    }

    private func nextPause() -> Duration {
        let putOffRefresh = pacing.deadline(pending: core.isRefreshPending)
        let deadlines = [core.nextDeadline(), banEndsAt, putOffRefresh].compactMap { $0 }
        guard let deadline = deadlines.min() else { return Self.tickIntervalMax }
        return max(.milliseconds(1), min(deadline - now, Self.tickIntervalMax))
    }

    // MARK: - Tracing (TraceRecorder.swift)

    /// Runs one call of the core at `time` (default: now), as an entry of the trace when one is recorded: what the
    /// core draws from its generator and what it writes meanwhile join the entry.
    @discardableResult
    private func traced<T>(
        _ call: @autoclosure () -> TraceCall, at time: Duration? = nil, _ body: (Duration) throws -> T
    ) rethrows -> T {
        let time = time ?? now
        guard let trace else { return try body(time) }
        trace.begin(call(), at: time)
        defer { if let line = trace.end(now: time) { report(line) } }
        return try body(time)
    }

    private static func marksRead(_ intent: ConversationIntent) -> Bool {
        if case .markRead = intent { return true }
        return false
    }

    /// The node stops: the trace ends with the digests it reached (what a replay must reach), and is closed.
    private func finishTrace() {
        guard let trace else { return }
        refresh()
        do {
            if let line = trace.note(.digests(try core.digests()), at: now) { report(line) }
        } catch {
            report("trace: cannot compute the digests to end the trace with (\(error))")
        }
        if let line = trace.finish() { report(line) }
    }

    // MARK: - Penalties

    /// Scores a misbehaving link against its address and, once known, its identity; logs each ban once.
    private func penalise(_ link: LinkID, _ misbehaviour: Misbehaviour) {
        let connection = ConnectionID(raw: link.raw)
        var offenders = [Offender]()
        if let host = remoteHosts[connection] { offenders.append(.address(host)) }
        if let peer = linkedPeers[connection] { offenders.append(.peer(peer)) }
        let verdicts = penalties.offended(offenders, misbehaviour, now: now)
        // Enforced before it is reported: whoever reads the notice finds the ban in force.
        if !verdicts.isEmpty { enforceBans() }
        for verdict in verdicts { report("\(verdict)") }
    }

    /// Refuses links with `people` from now on and closes the ones open (the REPL's `/block`). Their records still
    /// arrive through other peers (the log relays everything); the REPL hides them.
    public func setBlocked(_ people: Set<AuthorID>) {
        blocked = people
        enforceBans()
        for (peer, link) in core.connectedPeers where people.contains(peer) {
            transport.close(ConnectionID(raw: link.raw))
        }
    }

    /// Hands the current bans to the transport (addresses) and the core (identities); forgets the forgiven.
    private func enforceBans() {
        penalties.forgetForgiven(now: now)
        var hosts = Set<String>()
        var peers = Set<AuthorID>()
        for offender in penalties.banned(now: now) {
            switch offender {
            case .address(let host): hosts.insert(host)
            case .peer(let peer): peers.insert(peer)
            }
        }
        transport.refuse(hosts)
        let refused = peers.union(blocked)
        traced(.refused(refused.sorted())) { _ in core.refusedPeers = refused }
        banEndsAt = penalties.nextDeadline(now: now)
    }

    /// An address without its IPv6 zone (`fe80::1%eth0` → `fe80::1`): bans name addresses the way the transport
    /// reports a connection's remote end, whatever interface a beacon or a dial named.
    private static func unscoped(_ host: String) -> String {
        host.firstIndex(of: "%").map { String(host[..<$0]) } ?? host
    }

    /// The host part of "host:port" (IPv6 hosts hold colons; the port follows the last one).
    private static func host(of remote: String) -> String {
        guard let colon = remote.lastIndex(of: ":") else { return remote }
        return String(remote[..<colon])
    }

    /// `NATTER_TRACE=1` prints every transport event and core action on standard error (diagnosis only).
    private static let tracing = getenv("NATTER_TRACE") != nil

    private static func trace(_ line: String) {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        let micros = String(now.tv_nsec / 1_000)
        let fraction = String(repeating: "0", count: 6 - micros.count) + micros
        var text = Array("trace: \(now.tv_sec).\(fraction) \(line)\n".utf8)
        _ = write(2, &text, text.count)
    }

    /// Called on the actor with each event as the core emits it, and when (a benchmark's clock: the moment a record
    /// was committed, not the moment another task got round to reading the event stream). Must not block.
    private var eventObserver: (@Sendable (NodeEvent, ContinuousClock.Instant) -> Void)?

    /// Sets the observer that sees every event as it is emitted (`eventObserver`); nil removes it.
    public func observeEvents(_ observer: (@Sendable (NodeEvent, ContinuousClock.Instant) -> Void)?) {
        eventObserver = observer
    }

    /// Carries out a turn's actions: its events first (a received message shows as soon as it is committed), then
    /// the turn's ingests are made durable (`syncDeferred`: the core commits them unsynced), then its sends and
    /// closes in order. So no byte leaves this node — a credit, a receipt, a relayed record — while a record it
    /// stored could still be taken back by a power cut (DESIGN §6), and every turn ends with its commits on disk — or,
    /// within a batch of transport events (`batch`), the events go at once and the rest when the batch is released.
    private func perform(_ actions: [NodeAction]) {
        if let timer, let deadline = core.nextDeadline(), deadline < timer.until { armTimer() }
        if let steps = batch?.add(actions) {
            carryOut(steps)
        } else {
            carryOut(TurnPlan.steps(actions))
        }
    }

    /// Carries out a turn's steps in order; after a durability sync the store refused, nothing more.
    private func carryOut(_ steps: [TurnPlan.Step]) {
        for step in steps {
            turnObserver?(step)
            switch step {
            case .event(let event):
                if Self.tracing { Self.trace("event \(String(describing: event).prefix(60))") }
                show(event)
            case .makeDurable:
                guard syncStore() else { return }
            case .send(let link, let bytes):
                if Self.tracing { Self.trace("send \(link) \(bytes.count) bytes") }
                transport.send(ConnectionID(raw: link.raw), bytes)
            case .close(let link):
                if Self.tracing { Self.trace("close \(link)") }
                transport.close(ConnectionID(raw: link.raw))
            }
        }
    }

    /// An event of a turn: scored (misbehaviour), noted (a peer's link) and reported.
    private func show(_ event: NodeEvent) {
        switch event {
        case .misbehaved(let link, let misbehaviour):
            // A handshake timeout is scored only while the handshake slots are under load (it held a place).
            if misbehaviour.kind != .stalledHandshake || transport.handshakesUnderLoad { penalise(link, misbehaviour) }
            continuation.yield(.misbehaved(link, misbehaviour))
        default:
            switch event {
            case .peerUp(let peer, let link):
                linkedPeers[ConnectionID(raw: link.raw)] = peer
                transport.markEstablished(ConnectionID(raw: link.raw))
                redials.linked(ConnectionID(raw: link.raw), person: peer, now: now)
            case .redundantLink(let peer, let link):
                // Closing: noted until then, so its redial entry and discovery tag know whom it reached.
                linkedPeers[ConnectionID(raw: link.raw)] = peer
                redials.linked(ConnectionID(raw: link.raw), person: peer, now: now)
            default: break
            }
            eventObserver?(event, clock.now)
            continuation.yield(event)
        }
    }

    /// Set while the actor carries out a batch of transport events (`handle(_: [TCPTransport.Event])`): each input's
    /// sends and closes are held for the batch's one sync (`TurnPlan.Batch`).
    private var batch: TurnPlan.Batch?

    /// Called on the actor with each step of every turn as it is carried out (tests that compare the node's turns
    /// with the lab's). Must not block.
    private var turnObserver: (@Sendable (TurnPlan.Step) -> Void)?

    /// Sets the observer of every turn's steps (`turnObserver`); nil removes it.
    public func observeTurns(_ observer: (@Sendable (TurnPlan.Step) -> Void)?) {
        turnObserver = observer
    }

    /// Makes the store's deferred commits durable; false (after closing every link and saying why) when the disk
    /// refuses: sending then could acknowledge records a power cut would take back.
    private func syncStore() -> Bool {
        guard core.store.hasDeferredCommits else { return true }
        do {
            try core.store.syncDeferred()
            syncObserver?(clock.now)
            return true
        } catch {
            report("store: cannot make received records durable (\(error)); closing every link")
            for action in traced(.closeAll, { _ in core.closeAllLinks() }) {
                switch action {
                case .send: break
                case .close(let link): transport.close(ConnectionID(raw: link.raw))
                case .event(let event): continuation.yield(event)
                }
            }
            return false
        }
    }

    /// Called on the actor when the store's deferred commits reached the disk, and when (benchmarks: a received
    /// record is durable from then on). Must not block.
    private var syncObserver: (@Sendable (ContinuousClock.Instant) -> Void)?

    /// Sets the observer of deferred commits becoming durable (`syncObserver`); nil removes it.
    public func observeSyncs(_ observer: (@Sendable (ContinuousClock.Instant) -> Void)?) {
        syncObserver = observer
    }
}
