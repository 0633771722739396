public import NatterCrypto
public import NatterModel
public import NatterStore
import NatterSync

/// The node's deterministic core: the store, the conversation service, and one handshake / secure channel / sync
/// session per link. Inputs in, actions out; no sockets, clocks, tasks or system randomness inside (time arrives
/// as `now`, randomness through the injected generator). The production actor and the lab both drive this class.
///
/// It coordinates components that each own their state: the links (`LinkTable`), when deliveries are ingested
/// (`IngestScheduler`, with the ingest quotas), the dissemination trees (`Dissemination`), the relay quota
/// (`RelayGuard`), the conversation-table refresh (`RefreshSchedule`), file transfer (`FileTransfer`) and typing
/// indicators (`TypingRelay`). Not thread-safe: one driver calls it at a time.
public final class NodeCore {
    public let store: RecordStore
    public let identity: LocalIdentity
    public let conversations: Conversations
    public let configuration: NodeConfiguration
    private let linkConfiguration: LinkConfiguration
    private var random: any RandomNumberGenerator
    private var links = LinkTable()
    private var scheduler: IngestScheduler
    private var trees = Dissemination()
    private var relay: RelayGuard
    private var refreshes: RefreshSchedule
    private var files: FileTransfer
    private var typing: TypingRelay
    /// Receipts and due re-keys: what this node writes on its own, and when (and which conversation is viewed).
    private var automatic: AutomaticWrites
    /// Records waiting for a predecessor in their feed, charged to the peers that delivered them (CausalBuffer.swift).
    private var causalBuffer: CausalBuffer
    /// This node's newest own records, which the sessions push without reading them back (`RecentOwnRecords`).
    private let recentOwnRecords = RecentOwnRecords()
    /// Identities whose links are closed as soon as their handshake completes, before any sync (banned peers; set
    /// by the driver).
    public var refusedPeers: Set<AuthorID> = []
    /// Never forking the own feeds: when writing waits for a peer that knows this identity (OwnHeadsGuard.swift).
    private var ownHeads: OwnHeadsGuard
    /// Writes `author`'s intents at a wall-clock time (nil: `conversations.author`): a trace recorder wraps it to note
    /// what was written, a trace replay answers with the records the trace holds (NodeTrace.swift).
    public var writer: ((_ intents: [ConversationIntent], _ nowMillis: Int64) -> [Result<Authored, any Error>])?

    public init(
        store: RecordStore, identity: LocalIdentity, networkKey: NetworkKey,
        configuration: NodeConfiguration = NodeConfiguration(), random: any RandomNumberGenerator
    ) {
        self.store = store
        self.identity = identity
        self.configuration = configuration
        conversations = Conversations(store: store, identity: identity)
        scheduler = IngestScheduler(configuration: configuration.quotas)
        relay = RelayGuard(
            store: store, member: identity.author, configuration: configuration.quotas,
            nowMillis: configuration.clockOriginMillis)
        refreshes = RefreshSchedule(delay: configuration.conversationRefreshDelay)
        files = FileTransfer(store: store, conversations: conversations)
        typing = TypingRelay(identity: identity, conversations: conversations)
        automatic = AutomaticWrites(
            configuration: configuration.receipts, clockOriginMillis: configuration.clockOriginMillis)
        causalBuffer = CausalBuffer(limits: configuration.causalBuffer)
        ownHeads = OwnHeadsGuard(store: store, me: identity.author)
        // A fresh Noise static key per run: it is bound to the identity by a signature in every handshake.
        var generator = random
        let staticKey = NoiseKeyPair.generate(using: &generator)
        self.random = generator
        linkConfiguration = LinkConfiguration(
            identity: identity.signing, staticKey: staticKey, networkKey: networkKey,
            rekeyIntervalFrames: configuration.rekeyIntervalFrames)
    }

    // MARK: - Reading

    /// Peers with an established link, and the link.
    public var connectedPeers: [AuthorID: LinkID] { links.connectedPeers }

    /// Authors whose live records go on the priority lane of every link (docs/protocol.md §3.7): this node and the
    /// peers of its established links. Chat between neighbours thus passes a flood queued on a link; records of
    /// authors further away stay bulk (a flood slows multi-hop chat, not chat with a neighbour's author).
    private var priorityAuthors: Set<AuthorID> { neighbourSets.priority }

    /// The peers of the established links (`neighbours`) and `priorityAuthors`, made again only when the link
    /// table's `establishedGeneration` moved: they were built from every link at each ingest, each store and each
    /// check ahead (3 % of a lab run's samples), while most inputs change no link.
    private var neighbourSets: (neighbours: Set<AuthorID>, priority: Set<AuthorID>) {
        if let cached = neighbourSetsCache, cached.generation == links.establishedGeneration {
            return (cached.neighbours, cached.priority)
        }
        let neighbours = Set(links.connectedPeers.keys)
        let priority = neighbours.union([identity.author])
        neighbourSetsCache = (links.establishedGeneration, neighbours, priority)
        return (neighbours, priority)
    }
    private var neighbourSetsCache: (generation: UInt64, neighbours: Set<AuthorID>, priority: Set<AuthorID>)?

    /// Records currently held in the causal buffer (bounded by `configuration.causalBuffer`).
    public var causalBufferCount: Int { causalBuffer.count }

    /// Records the sessions delivered to this core since it started, and those among them that were new to the
    /// store (stored at once or later from the causal buffer): the difference is redundant copies (the lab's
    /// gossip-efficiency figures).
    public private(set) var recordsDelivered = 0
    public private(set) var recordsNew = 0
    /// Application messages this core sent, by kind (`SyncFrameKind.name(of:)`: records, credit, ping, …), since
    /// it started. Handshake messages and goodbyes are not counted here.
    public var messagesSentByKind: [String: Int] { links.messagesSentByKind }
    /// Told the link, the kind and the sealed bytes of every application message as it is sealed (nil: nobody
    /// listens). For the lab, which tells each frame's kind by it; a node leaves it nil.
    public var sentMessageTap: ((LinkID, String, [UInt8]) -> Void)? {
        get { links.sentMessageTap }
        set { links.sentMessageTap = newValue }
    }
    /// Relay-only conversations evicted since the core started.
    public var conversationsEvicted: Int { relay.conversationsEvicted }
    /// Conversations evicted again while their eviction was remembered: nothing of them is taken any more.
    var evictedAgain: Set<ConversationID> { relay.evictedAgainConversations }

    /// When `.tick` next has work (session timers, handshake timeouts, held deliveries, refreshes, files, typing).
    public func nextDeadline() -> Duration? {
        [
            links.nextDeadline(handshakeTimeout: configuration.handshakeTimeout), files.nextDeadline,
            refreshes.deadline, typing.nextDeadline, scheduler.nextDeadline, relay.nextCheck, automatic.nextDeadline,
            causalBuffer.nextExpiry,
        ].compactMap { $0 }.min()
    }

    /// Whether deliveries wait only for a later turn (the per-turn cap, not a quota) at `now`: a driver with nothing
    /// else to do ticks again at once instead of sleeping (the next tick ingests them).
    public func hasIngestDue(now: Duration) -> Bool { scheduler.hasIngestDue(now: now) }

    /// How much the dissemination trees use an established link (nil: not established): the feeds it is the parent
    /// of here, plus the feeds whose trees cross it (`SyncSession.treeFeeds`). Of the links a node could drop to make
    /// room, the one with the least load costs the trees least.
    public func treeLoad(of id: LinkID) -> Int? { trees.load(of: id, in: links) }

    /// The peer this node gets the live records of `author`'s feed in `conversation` from (its parent in the feed's
    /// tree), if any: what the lab follows to show the path a slow delivery took.
    public func treeParent(conversation: ConversationID, author: AuthorID) -> AuthorID? {
        trees.parentLink(of: FeedKey(conversation: conversation, author: author)).flatMap { links.peer(of: $0) }
    }

    // MARK: - Inputs

    public func handle(_ input: NodeInput, now: Duration) -> [NodeAction] {
        var out = handleInput(input, now: now)
        out += carryOut(trees.regraftLostParents(links: &links, storedHead: store.storedHead, now: now), now: now)
        out += files.maintain(links: &links, now: now, nowMillis: wallClockMillis(now))
        return out
    }

    private func handleInput(_ input: NodeInput, now: Duration) -> [NodeAction] {
        switch input {
        case .linkOpened(let id, let initiator):
            let opened = links.open(
                id, initiator: initiator, configuration: linkConfiguration, random: &random, now: now)
            return handshakeActions(id, opened, now: now)
        case .bytesReceived(let id, let bytes):
            return receive(id, bytes, now: now) + ingestDeliveries(now: now)
        case .linkClosed(let id):
            scheduler.forget(link: id)
            guard let peer = links.closed(id) else { return [] }
            return [.event(.peerDown(peer, id))]
        case .linkWritable(let id, let writable):
            return syncActions(id, links.withSession(id) { $0.writable(writable, now: now) } ?? [], now: now)
        case .tick:
            return tick(now: now)
        }
    }

    /// Bytes from link `id`'s peer arrived at `time`, perhaps before the node was free to handle them: the link is
    /// alive, whatever it last handled. An established session's silence timeout and a handshake's deadline move
    /// (`LinkTable.HandshakeTimes`: at most twice the timeout from the open); the bytes count once handled.
    public func heard(_ id: LinkID, at time: Duration) {
        links.heard(id, at: time)
    }

    /// Ends every link cleanly: the authenticated goodbye on each established link (so the peer tells this close
    /// from a crash or a cut), then the close. For a graceful shutdown; the core keeps no link afterwards.
    public func closeAllLinks() -> [NodeAction] { links.closeAll() }

    /// Leaves an established link gracefully, to make room for another peer: tells the peer (LEAVING, docs/protocol.md
    /// §3.3 step 6), grafts on the other links every feed this link supplied, and closes the link, with the
    /// goodbye, `Limits.syncLeaveGraceHandshakes` times its handshake's duration later. Meanwhile the link carries
    /// records both ways, so the peer's trees are mended before it goes and nothing in flight is lost.
    /// Nil when the link is not established (still in its handshake, or gone): the caller closes it as it can.
    public func retire(_ id: LinkID, now: Duration) -> [NodeAction]? {
        guard let closing = links.read(id, { $0.closeAt != nil }) else { return nil }
        guard !closing else { return [] }
        var out = syncActions(id, links.leave(id, now: now), now: now)
        out += carryOut(trees.stopSupplying(id, links: &links, storedHead: store.storedHead, now: now), now: now)
        return out
    }

    // MARK: - Authoring

    /// Carries out a person's intents (or the node's own) in order, publishes what they wrote to every peer in the
    /// same turn, and answers with what each wrote or why it was refused. Consecutive content intents share one
    /// transaction and one fsync (`Conversations.author`); nothing is sent before it is durable.
    public func author(_ intents: [ConversationIntent], now: Duration) -> (
        results: [Result<Authored, any Error>], actions: [NodeAction]
    ) {
        let nowMillis = wallClockMillis(now)
        let results = writer?(intents, nowMillis) ?? conversations.author(intents, now: nowMillis)
        let records = automatic.wrote(intents, results, now: now)
        return (results, records.isEmpty ? [] : published(records, now: now))
    }

    /// Pushes records this node wrote to every peer, and reports what changed (`author` calls it; so do drivers
    /// that write through `conversations` directly, such as the lab's workloads and file sending).
    public func published(_ records: [Record], now: Duration) -> [NodeAction] {
        let stored = records.map { StoredRecord($0) }
        for record in records where record.header.author == identity.author {
            scheduler.noteChat(record.header, now: now)
        }
        recentOwnRecords.noteStored(stored.filter { $0.author == identity.author })
        var actions = storedLocally(stored, now: now)
        actions += conversationsMayHaveChanged(stored, priority: false, now: now)
        return actions
    }

    /// The conversation this node's user is viewing now (nil: none): receipts written there say "read", and one is
    /// due at once if something in it is unread.
    public func view(_ conversation: ConversationID?, now: Duration) -> [NodeAction] {
        automatic.view(conversation)
        if let conversation { reviewReceipts(of: conversation, now: now) }
        return []
    }

    /// Looks at every conversation this node reads for receipts and re-keys it owes (at start, or after a restart).
    public func reviewConversations(now: Duration) -> [NodeAction] {
        automatic.reviewAll(in: conversations, me: identity.author, now: now)
    }

    /// Schedules the receipts and re-keys this node owes in `conversation` (`AutomaticWrites.review`).
    private func reviewReceipts(of conversation: ConversationID, now: Duration) {
        automatic.review(conversation, in: conversations, me: identity.author, now: now)
    }

    /// The initial exchange with `peer` completed (`OwnHeadsGuard.learned`). Receipts and re-keys that came due while
    /// the own heads were in doubt were dropped (`writeDue`): once the doubt is lifted they are owed again.
    private func ownHeadsLearned(from peer: AuthorID, now: Duration) -> [NodeAction] {
        let (actions, lifted) = ownHeads.learned(from: peer)
        return lifted ? actions + reviewConversations(now: now) : actions
    }

    /// Lifts the own heads' doubt at the user's word (the REPL's `/force-write`): own writes continue from the stored
    /// heads, at the risk of forking the feeds if other nodes hold more of them. Returns the doubt lifted (nil: none
    /// stood) and what to do next (the receipts and re-keys owed are scheduled again).
    public func forceWrite(now: Duration) throws(StoreError) -> (lifted: OwnHeadsDoubt?, actions: [NodeAction]) {
        guard let lifted = try store.confirmOwnHeads() else { return (nil, []) }
        return (lifted, reviewConversations(now: now))
    }

    /// Writes every receipt and re-key scheduled, due or not: a node that stops leaves none unwritten.
    public func writePending(now: Duration) -> [NodeAction] { writeDue(now: now, all: true) }

    /// Writes the receipts and re-keys due at `now` (`all`: every one scheduled).
    private func writeDue(now: Duration, all: Bool = false) -> [NodeAction] {
        let intents = automatic.take(now: now, all: all)
        guard !intents.isEmpty else { return [] }
        // While the own heads are in doubt every write is refused: these are dropped, not reported one by one, and
        // owed again when the doubt is lifted (`ownHeadsLearned` and `forceWrite` review every conversation).
        guard store.ownHeadsDoubt == nil else { return [] }
        let (results, actions) = author(intents, now: now)
        return AutomaticWrites.failures(intents, results) + actions
    }

    // MARK: - Links

    private func receive(_ id: LinkID, _ bytes: [UInt8], now: Duration) -> [NodeAction] {
        if links.isHandshaking(id) { return handshakeActions(id, links.receiveHandshake(id, bytes), now: now) }
        guard links.isEstablished(id) else { return [] }
        return channelEvents(id, links.receiveChannel(id, bytes), now: now)
    }

    private func handshakeActions(_ id: LinkID, _ actions: [LinkHandshake.Action], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        let openedAt = links.handshakeOpenedAt(id) ?? now
        for action in actions {
            switch action {
            case .send(let bytes):
                out.append(.send(id, bytes))
            case .fail(let error):
                return out + links.handshakeFailed(id, error)
            case .established(let done):
                out += establish(id, done, handshake: now - openedAt, now: now)
            }
        }
        return out
    }

    /// Starts the sync session of a link whose handshake took `handshake` (about one round trip and a half, plus
    /// the key exchange's computation): its push interval scales with it (`Limits.syncPushInterval(upTo:handshake:)`).
    private func establish(_ id: LinkID, _ done: LinkEstablished, handshake: Duration, now: Duration) -> [NodeAction] {
        let peer = AuthorID(done.peer)
        let replaced: LinkID?
        switch links.admission(
            id, peer: peer, me: identity.author, refused: refusedPeers, replacedGrace: configuration.handshakeTimeout,
            now: now)
        {
        case .failure(let refusal): return refusal.actions
        case .success(let old): replaced = old
        }
        var session = SyncSession(
            source: StoreRecordSource(store: store, recent: recentOwnRecords),
            pushInterval: NatterSync.Limits.syncPushInterval(upTo: configuration.syncPushInterval, handshake: handshake)
        )
        let start = session.start(now: now)
        var out = links.bringUp(
            id, peer: peer, me: identity.author, channel: done.channel, session: session, handshake: handshake,
            replacing: replaced, now: now)
        out += syncActions(id, start, now: now)
        if !done.unreadBytes.isEmpty { out += receive(id, done.unreadBytes, now: now) }
        return out
    }

    private func channelEvents(_ id: LinkID, _ events: [SecureChannel.Event], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for event in events {
            guard let peer = links.peer(of: id) else { break }
            switch event {
            case .message(let message) where FileFrame.isFileFrame(message):
                out += files.received(message, on: id, links: &links, now: now, nowMillis: wallClockMillis(now))
            case .message(let message) where TypingFrame.isTypingFrame(message):
                out += typing.received(message, on: id, links: &links, now: now)
            case .message(let message):
                out += syncActions(id, links.withSession(id) { $0.receive(message: message, now: now) } ?? [], now: now)
            case .goodbye:
                out += links.channelEnded(id, peer: peer, failure: nil)
            case .failed(let error):
                out += links.channelEnded(id, peer: peer, failure: error)
            }
        }
        return out
    }

    /// Executes a session's actions in order (the session's contract: after `deliver`, report `ingested` and then
    /// what was stored, before anything else).
    private func syncActions(_ id: LinkID, _ actions: [SyncAction], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            guard let peer = links.peer(of: id) else { break }
            switch action {
            case .send(let message):
                out += links.send(message, on: id)
            case .deliver(let records):
                scheduler.add(records, from: id, lane: .bulk)
            case .deliverPriority(let records):
                scheduler.add(records, from: id, lane: .priority)
            case .caughtUp:
                links.markCaughtUp(id)
                out.append(.event(.caughtUp(peer)))
                out += ownHeadsLearned(from: peer, now: now)
            case .progress(let received, let expected):
                out.append(.event(.syncProgress(peer, received: received, expected: expected)))
            case .peerLeaving:
                out += carryOut(
                    trees.stopSupplying(id, links: &links, storedHead: store.storedHead, now: now), now: now)
            case .rerouted(let feeds):
                out += carryOut(
                    trees.rerouted(feeds, from: id, links: &links, storedHead: store.storedHead, now: now), now: now)
            case .close(let error):
                out += links.fail(id, error)
            }
        }
        return out
    }

    /// Carries out what sessions answered a component (`SessionActions`), link by link in order.
    private func carryOut(_ sessionActions: SessionActions, now: Duration) -> [NodeAction] {
        sessionActions.flatMap { syncActions($0.link, $0.actions, now: now) }
    }

    // MARK: - Ingest

    /// Ingests what the sessions delivered during this input, as the scheduler plans it: each link's consecutive
    /// deliveries of a lane in one transaction, unless the ingest quotas hold them back (then they wait,
    /// unverified, behind the earlier ones of their link and lane); priority deliveries first and alone.
    private func ingestDeliveries(now: Duration) -> [NodeAction] {
        scheduler.startTurn()
        var out = [NodeAction]()
        while let step = scheduler.nextStep(now: now, peer: { self.links.peer(of: $0) }, checkAhead: { self.checkAhead($0, now) }) {
            out += carryOut(step, now: now)
        }
        return out
    }

    /// Deliveries held by the quotas whose time has come: checked again, ingested or held longer.
    private func releaseHeldDeliveries(now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for key in scheduler.dueHeld(now: now) {
            let step = scheduler.release(
                key, now: now, peer: { self.links.peer(of: $0) }, checkAhead: { self.checkAhead($0, now) })
            if let step { out += carryOut(step, now: now) }
        }
        return out
    }

    private func carryOut(_ step: IngestScheduler.Step, now: Duration) -> [NodeAction] {
        switch step {
        case .notice(let line):
            return [.event(.notice(line))]
        case .ingest(let key, let deliveries):
            let out = ingest(deliveries, from: key.link, lane: key.lane, now: now)
            scheduler.checkHeldAhead(
                key, now: now, linkUp: links.isEstablished(key.link), checkAhead: { self.checkAhead($0, now) })
            return out
        }
    }

    /// Has the store check records ahead of their ingest on the other cores, leaving out those the ingest will
    /// refuse unchecked (`RelayGuard.worthCheckingAhead`).
    private func checkAhead(_ records: ArraySlice<Record>, _ now: Duration) {
        store.verifyAhead(
            relay.worthCheckingAhead(records, nowMillis: wallClockMillis(now), neighbours: priorityAuthors))
    }

    /// Ingests records delivered by a link's session, replays buffered successors, reports outcomes to that
    /// session (one report per delivery, in order) and pushes what was stored to every other session.
    private func ingest(_ delivered: [[Record]], from id: LinkID, lane: SyncLane, now: Duration) -> [NodeAction] {
        let records = delivered.count == 1 ? delivered[0] : Array(delivered.joined())
        let screened: RelayGuard.Screened
        do {
            // Stamped with the wall clock and committed as configured (`NodeConfiguration.ingestDurability`).
            screened = try relay.screenedIngest(
                records, for: identity, nowMillis: wallClockMillis(now), neighbours: { priorityAuthors }
            ) { admitted throws(StoreError) in
                try store.ingest(
                    admitted, receivedAtMillis: wallClockMillis(now), durability: configuration.ingestDurability)
            }
        } catch {
            return [.event(.linkFailed(id, "store: \(error)"))]
        }
        let (storeReport, outcomes) = (screened.report, screened.outcomes)
        scheduler.charge(
            link: id, lane: lane, outcomes: outcomes, records: records, refused: screened.refused, now: now)
        // Before the sessions hear of this ingest: the one whose initial exchange it completes lifts the doubt.
        var out = ownHeads.arrived(
            zip(records, outcomes).filter { $0.0.header.author == identity.author && $0.1.isNewToFeed }.map(\.0.header),
            initialExchange: !links.isCaughtUp(id))
        let sorted = SortedIngest(records, outcomes)
        recordsDelivered += records.count
        recordsNew += sorted.appended.count
        if lane == .priority { for record in sorted.appended { scheduler.noteChat(record.header, now: now) } }
        // Refused when its peer holds its share: the session asks for the gap either way.
        if let deliveredBy = links.read(id, { $0.peer }) {
            for record in sorted.outOfOrder { _ = causalBuffer.hold(record, from: deliveredBy, now: now) }
        }
        var stored = sorted.stored
        let fromLink = stored.filter { !$0.isForkEvidence }
        var offset = 0
        for delivery in delivered {
            let reported = outcomes[offset..<(offset + delivery.count)].map(SyncIngestOutcome.init)
            offset += delivery.count
            guard let actions = links.withSession(id, { $0.ingested(reported, lane: lane, now: now) }) else { break }
            out += syncActions(id, actions, now: now)
        }
        out += fetchInvited(screened.invitations, from: id, now: now)
        let drained = causalBuffer.drain(
            into: store, receivedAtMillis: wallClockMillis(now), durability: configuration.ingestDurability)
        recordsNew += drained.stored.count
        stored += drained.stored.map { StoredRecord($0) }
        stored += drained.evidence.map { StoredRecord($0, isForkEvidence: true) }
        // Own records that came back from a peer (a restored identity): the run in memory may no longer end at the head.
        recentOwnRecords.forget(stored.filter { $0.author == identity.author }.map(\.feed))
        out += storedLocally(stored, now: now)
        if !stored.isEmpty { relay.noteStored(now: now) }
        out += carryOut(
            trees.delivered(
                on: id, stored: fromLink + sorted.ahead, copies: sorted.copies, links: &links,
                storedHead: store.storedHead, now: now),
            now: now)
        // A record applied here has every dependency applied: only those still waiting can reveal a lagging feed.
        let appliedIDs = Set((storeReport.applied + drained.applied).map(\.id))
        let waiting =
            sorted.appended.filter { !appliedIDs.contains($0.id) }.map(\.header) + drained.stored.map(\.header)
        out += carryOut(
            trees.regraftLagging(waiting, links: &links, heads: store.storedHeads(of:), now: now), now: now)
        var applied = storeReport.applied + drained.applied
        // A fork the drain found cuts what the ingest before it may have applied: report what is applied now.
        if !drained.rebuilt.isEmpty {
            do {
                applied = try stillApplied(applied, in: Set(drained.rebuilt))
            } catch {
                out.append(.event(.notice("store: cannot read the feeds a fork cut (\(error))")))
            }
        }
        if !applied.isEmpty { out.append(.event(.applied(applied))) }
        out += conversationsMayHaveChanged(stored, priority: lane == .priority, now: now)
        out += tallyRelay(stored, now: now)
        return out
    }

    /// The records of `refs` in `conversations` that their feed's applied prefix still holds (a fork may have cut
    /// them).
    private func stillApplied(_ refs: [RecordRef], in conversations: Set<ConversationID>) throws -> [RecordRef] {
        var applied = [ConversationID: [AuthorID: UInt64]]()
        for conversation in conversations {
            applied[conversation] = Dictionary(
                try store.feeds(of: conversation).map { ($0.author, $0.applied) }, uniquingKeysWith: max)
        }
        return refs.filter { ref in
            guard let feeds = applied[ref.position.conversation] else { return true }
            return ref.position.sequence <= feeds[ref.position.author] ?? 0
        }
    }

    /// Asks the delivering peer for every feed an invitation's commit depends on (and the commit's own feed), from
    /// the start (`RelayGuard.feedsToFetch`).
    private func fetchInvited(_ invitations: [Record], from id: LinkID, now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for feed in RelayGuard.feedsToFetch(invitations) {
            let actions = links.withSession(id) {
                $0.missing(conversation: feed.conversation, author: feed.author, from: 1, now: now)
            }
            guard let actions else { break }
            out += syncActions(id, actions, now: now)
        }
        return out
    }

    /// `now` on the wall clock, in milliseconds since 1970 (`clockOriginMillis`; virtual in simulations).
    private func wallClockMillis(_ now: Duration) -> Int64 {
        configuration.clockOriginMillis + now.wholeMilliseconds
    }

    /// Tells every session what the node stored, so they push it to their peers: records of this node and of its
    /// neighbours on the priority lane (`priorityAuthors`), the rest on the bulk lane.
    private func storedLocally(_ records: [StoredRecord], now: Duration) -> [NodeAction] {
        guard !records.isEmpty else { return [] }
        var out = [NodeAction]()
        let priority = priorityAuthors
        for id in links.establishedIDs {
            let actions = links.withSession(id) { $0.localRecordsStored(records, priorityAuthors: priority, now: now) }
            out += syncActions(id, actions ?? [], now: now)
        }
        return out
    }

    /// Sends one application message on an established link, as the sessions, file transfer and typing do (tests
    /// use it to send what an honest node never does).
    func sendApplicationMessage(_ message: [UInt8], on id: LinkID) -> [NodeAction] { links.send(message, on: id) }

    // MARK: - The relay quota

    /// Adds what was just stored to the relay tally and, past the quota, derives the pending conversations and
    /// evicts at once (`RelayGuard`).
    private func tallyRelay(_ stored: [StoredRecord], now: Duration) -> [NodeAction] {
        let (passes, notice) = relay.tallyReporting(stored)
        return passes ? refreshPending(now: now) + enforceRelayQuota(now: now) : notice
    }

    /// Evicts relay-only conversations past the quota (`RelayGuard.enforce`), forgetting what is cached and buffered
    /// of them.
    private func enforceRelayQuota(now: Duration) -> [NodeAction] {
        relay.enforceReporting(now: now, nowMillis: wallClockMillis(now), neighbours: neighbourSets.neighbours) {
            conversations.forgetCache(of: $0)
            causalBuffer.drop(conversation: $0)
        }
    }

    // MARK: - Conversation tables

    /// Records were stored (by a priority delivery: `priority`): refresh the conversation tables now, or when the
    /// refresh delay (or the driver) says.
    private func conversationsMayHaveChanged(_ stored: [StoredRecord], priority: Bool, now: Duration) -> [NodeAction] {
        let viewed = automatic.viewing.map { viewing in stored.contains { $0.conversation == viewing } } ?? false
        return refreshes.stored(now: now, viewed: viewed, priority: priority) ? refreshPending(now: now) : []
    }

    /// Whether records were stored since the conversation tables were last brought up to date.
    public var isRefreshPending: Bool { refreshes.isPending }

    /// Whether records of the conversation being viewed were stored since the last refresh, and whether a priority
    /// delivery (docs/protocol.md §3.7) brought some: a driver shows those at once (`RefreshPacing`), so a
    /// neighbour's chat is not shown late.
    public var storedSinceRefresh: RefreshPacing.Stored { refreshes.storedSinceRefresh }

    /// Brings the conversation tables up to date now if records were stored since the last refresh, and reports
    /// what changed: the node actor after each turn (`conversationRefreshDelay` nil), and for a reader (the REPL)
    /// about to query them, so what it reads is never behind what it was told.
    public func refreshPending(now: Duration) -> [NodeAction] {
        guard refreshes.begin() else { return [] }
        let (events, newLines) = conversations.refreshEvents()
        // Reviewed after the events are made, which the review does not change.
        for conversation in newLines { reviewReceipts(of: conversation, now: now) }
        return events
    }

    // MARK: - Files and typing (FileTransfer, TypingRelay)

    /// Starts (or continues) fetching a file message's chunks from the connected peers; chunks already stored are
    /// not fetched again, so a fetch resumes wherever it stopped. Progress and completion arrive as
    /// `NodeEvent.file`; a file stored completely reports completion at once.
    public func fetchFile(_ message: RecordID, in conversation: ConversationID, now: Duration) throws
        -> [NodeAction]
    {
        try files.fetch(message, in: conversation, links: &links, now: now, nowMillis: wallClockMillis(now))
    }

    /// Stops fetching a file (what is stored stays).
    public func cancelFetch(_ message: RecordID, now: Duration) -> [NodeAction] {
        files.cancel(message, links: &links, now: now, nowMillis: wallClockMillis(now))
    }

    /// Plaintext bytes held and total of a file being fetched; nil when it is not being fetched.
    public func fetchProgress(of message: RecordID) -> (bytes: UInt64, total: UInt64)? { files.progress(of: message) }

    /// File messages being fetched, in the order asked.
    public var filesFetching: [RecordID] { files.fetching }

    /// Chunks rejected since start because their bytes did not match their id.
    public var chunksRejected: Int { files.chunksRejected }

    /// The user edited a non-command line for `conversation` (a keystroke). Sends a "typing" frame to every link
    /// when one is due; nothing when this node cannot write there (not a member, no key yet).
    public func userTyping(in conversation: ConversationID, now: Duration) -> [NodeAction] {
        typing.keystroke(in: conversation, links: &links, random: &random, now: now, nowMillis: wallClockMillis(now))
    }

    /// The user sent the line, cleared it, or left the conversation: a "stopped" frame if typing was announced.
    public func userStoppedTyping(in conversation: ConversationID, now: Duration) -> [NodeAction] {
        typing.stopped(in: conversation, links: &links, random: &random, now: now, nowMillis: wallClockMillis(now))
    }

    /// The people typing in `conversation` now (members only; never this node's own identity).
    public func typingPeople(in conversation: ConversationID) -> [AuthorID] { typing.people(in: conversation) }

    // MARK: - Time

    private func tick(now: Duration) -> [NodeAction] {
        var out = releaseHeldDeliveries(now: now)
        if let expiry = causalBuffer.nextExpiry, now >= expiry { _ = causalBuffer.expire(now: now) }
        if refreshes.isDue(now: now) { out += refreshPending(now: now) }
        if relay.takeCheckDue(now: now) { out += enforceRelayQuota(now: now) }
        out += links.closeReplaced(now: now)
        for id in links.ids {
            if let ended = links.endIfDue(id, now: now, handshakeTimeout: configuration.handshakeTimeout) {
                out += ended
                continue
            }
            guard links.isDue(id, now: now) else { continue }
            out += syncActions(id, links.withSession(id) { $0.tick(now: now) } ?? [], now: now)
        }
        out += typing.tick(links: &links, random: &random, now: now, nowMillis: wallClockMillis(now))
        out += writeDue(now: now)
        return out
    }
}
