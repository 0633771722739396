public import NatterCrypto
public import NatterModel
public import NatterStore
import NatterSync

/// A link between this node and a peer, named by whoever carries its bytes (a TCP connection, a simulated pipe).
public struct LinkID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.raw < rhs.raw }
    public var description: String { "link \(raw)" }
}

/// What happens to a node: everything the transport and the clock tell it.
public enum NodeInput: Sendable {
    /// A connection is up; `initiator` when this node dialled it.
    case linkOpened(LinkID, initiator: Bool)
    case bytesReceived(LinkID, [UInt8])
    /// The connection ended (closed, reset, or cut).
    case linkClosed(LinkID)
    /// The connection's socket stopped (false) or started again (true) taking writes without queueing: sync batches
    /// wait meanwhile (`SyncSession.writable`).
    case linkWritable(LinkID, Bool)
    /// Time passed (the caller calls at `nextDeadline()` at the latest).
    case tick
}

/// What the node asks its driver to do, in order.
public enum NodeAction: Equatable, Sendable {
    case send(LinkID, [UInt8])
    case close(LinkID)
    case event(NodeEvent)
}

/// What the node reports upward (to the REPL, the lab, logs).
public enum NodeEvent: Equatable, Sendable {
    /// A link finished its handshake: the peer's identity is known.
    case peerUp(AuthorID, LinkID)
    case peerDown(AuthorID, LinkID)
    /// A link failed: handshake, channel or sync error (the peer is penalised for malformed input).
    case linkFailed(LinkID, String)
    /// The initial exchange with a peer completed in both directions.
    case caughtUp(AuthorID)
    /// Initial sync progress with a peer.
    case syncProgress(AuthorID, received: Int, expected: Int)
    /// Records became applied (from any link, or authored here), with where they sit.
    case applied([RecordRef])
    /// A conversation's derived state changed (new or retracted lines).
    case conversationChanged(ConversationID, TimelineChanges)
    /// Something a person may want to know about the node itself (discovery, ports), one line.
    case notice(String)
    /// The peer on this link did something an honest node never does (follows its `linkFailed`): the driver scores
    /// it (`PeerPenalties`). Timeouts and cuts are not reported here.
    case misbehaved(LinkID, Misbehaviour)
    /// File transfer: progress, completion, rejected chunks (SPEC F13).
    case file(FileEvent)
    /// The people typing in a conversation changed (SPEC F12): everyone typing there now, empty when nobody is.
    /// Only for conversations this node is a member of, and only members; never stored.
    case typing(ConversationID, [AuthorID])
}

/// Bounds and timings of a node, each with its reason.
public struct NodeConfiguration: Sendable {
    /// Bounds of the records held while their feed has a gap (arrived ahead of a predecessor), per peer and in all.
    public var causalBuffer = CausalBufferLimits()
    /// Records held while their feed has a gap, at most (`causalBuffer.recordsMax`).
    public var causalBufferRecordsMax: Int {
        get { causalBuffer.recordsMax }
        set { causalBuffer.recordsMax = newValue }
    }
    /// A handshake that has not finished by then is abandoned (a half-open or hostile connection).
    public var handshakeTimeout: Duration = .seconds(5)
    /// Frames per direction between rekeys (tests lower it).
    public var rekeyIntervalFrames: UInt64 = NatterSync.Limits.rekeyIntervalFrames
    /// Milliseconds since 1970 when the core's clock read zero, so receive times are stored as wall-clock times
    /// (the conversation list sorts by them and shows them). Zero in simulations, whose clock is virtual.
    public var clockOriginMillis: Int64 = 0
    /// How long after records arrive the conversation tables are brought up to date (`Conversations.refreshChanged`,
    /// then `conversationChanged` events). A refresh rewrites a changed conversation's derived rows, so one per
    /// delivered batch costs O(history) per batch; a delay lets every delivery of a burst share one refresh.
    /// `.zero` (the default) refreshes within the input that stored them. The lab, where nobody reads between
    /// deliveries, waits (`LabLimits.conversationRefreshDelay`) and the core refreshes on the tick. `nil` leaves it
    /// to the driver (`refreshPending()`): the node actor calls it once it has handed a turn's sends to the network,
    /// so a message is on its way before the tables are rewritten, and a node catching up rewrites them once per
    /// burst of batches, not once per batch (decision 0006).
    public var conversationRefreshDelay: Duration? = .zero
    /// Longest a live push waits on a link for others to share its RECORDS (`NatterSync.Limits.syncPushInterval`,
    /// 40 ms; also the least time between RECORDS after one that was not full); each
    /// link holds for less when its handshake was quick (`Limits.syncPushInterval(upTo:handshake:)`). The lab varies
    /// it to measure the trade-off.
    public var syncPushInterval: Duration = NatterSync.Limits.syncPushInterval
    /// Ingest quotas per link and author, and relay quotas (SPEC F16): `QuotaConfiguration`'s defaults.
    public var quotas = QuotaConfiguration()
    /// How the core's ingests of received records commit (`RecordStore.IngestDurability`). `.synced` (the default)
    /// fsyncs each one. `.deferred` commits without the fsync, so a record shows (`applied`) a disk flush sooner;
    /// a driver that sets it must call `RecordStore.syncDeferred` before it sends anything (`Node` does, before
    /// every turn's sends), so nothing acknowledges a record a power cut could still take (DESIGN §6).
    public var ingestDurability: RecordStore.IngestDurability = .synced

    public init() {}
}

/// The node's deterministic core: the store, the conversation service, and one handshake / secure channel / sync
/// session per link. Inputs in, actions out; no sockets, clocks, tasks or system randomness inside (time arrives
/// as `now`, randomness through the injected generator). The production actor and the lab both drive this class.
///
/// Not thread-safe: one driver calls it at a time.
public final class NodeCore {
    public let store: RecordStore
    public let identity: LocalIdentity
    public let conversations: Conversations
    public let configuration: NodeConfiguration
    private let linkConfiguration: LinkConfiguration
    var random: any RandomNumberGenerator
    private var links: [LinkID: Link] = [:]
    private var roles: [LinkID: LinkHandshake.Role] = [:]
    /// Records waiting for a predecessor in their feed, charged to the peers that delivered them (CausalBuffer.swift).
    private var causalBuffer: CausalBuffer
    /// This node's newest own records, which the sessions push without reading them back (`RecentOwnRecords`).
    private let recentOwnRecords = RecentOwnRecords()
    /// Identities whose links are closed as soon as their handshake completes, before any sync (banned peers; set
    /// by the driver).
    public var refusedPeers: Set<AuthorID> = []
    /// Fetches the chunks of files this node was asked to fetch, from the links (NodeCore+Files.swift).
    var fetcher = FileFetcher<LinkID>()
    /// When the conversation tables are next brought up to date (nil: nothing stored since the last refresh).
    private var refreshAt: Duration?
    /// `refreshAt` when the core refreshes on its own (`conversationRefreshDelay` not nil): a deadline of the tick.
    private var refreshDeadline: Duration? { configuration.conversationRefreshDelay == nil ? nil : refreshAt }
    /// Records the sessions delivered while the current input is handled, per delivery and in order. They are
    /// ingested together, in one store transaction, once the input's messages are all read: a link that carries
    /// several sync batches in one input (a node catching up) commits them at once.
    private var deliveries: [(link: LinkID, lane: SyncLane, records: [Record])] = []
    /// Each feed's parent link in its dissemination tree (FeedParents.swift).
    private var feedParents = FeedParents()
    /// Feeds grafted back recently, and until when copies of them prune nothing: the links answer the graft with
    /// the records the node lacks, all about one round trip later whatever their distance from the author, so the
    /// parent is left to the first link to bring a *new* record (`Limits.syncTreeRegraftRace`). At most
    /// `Limits.syncFeedParentsMax` feeds (expired entries are dropped when it is full; past it, a graft races not).
    private var racing: [FeedKey: Duration] = [:]
    /// Typing indicators: when to send, who is typing, which frames were seen (NodeCore+Typing.swift).
    var typing = TypingTracker()
    /// Typing frames each link may still bring (`Limits.typingFramesPerLink…`).
    var typingBuckets: [LinkID: TokenBucket] = [:]
    /// Ingest quotas per link and per author, checked before a delivery is verified.
    var quotas: IngestQuotas
    private var floodNotices = FloodNotices()
    /// Deliveries the ingest quotas hold back, per link and lane (`HeldRun`). At most a sync window's worth per link
    /// and lane: the session returns no credit for them, so the sender waits.
    private var heldDeliveries: [LaneKey: HeldRun] = [:]
    /// When this node last wrote a record or stored one from a priority lane: its chat is live for
    /// `QuotaConfiguration.liveChatWindow` after, and bulk turns are shorter meanwhile.
    private var chatLiveAt: Duration?
    /// Conversations the relay quota evicted (also in the store), with when: their records are refused unchecked,
    /// except those of this node's neighbours (`priorityAuthors`) — unless the conversation is in `evictedAgain`.
    var evicted: [ConversationID: Int64] = [:]
    /// Evicted conversations that were evicted again while remembered: even their neighbours' feeds alone do not fit
    /// the relay quota, so every record of theirs is refused (no fetch-and-evict loop).
    var evictedAgain: Set<ConversationID> = []
    /// When the relay quota is next checked (nil: nothing stored since the last check).
    var relayCheckAt: Duration?
    /// Relay-only usage as last measured plus what was stored since: passing the quota checks it at once. Nil until
    /// the first records are stored.
    var relayTally: RelayTally?
    /// Conversations found not relay-only (a member, or written in here) since the tally was last measured: their
    /// records are not looked up again on every ingest (a chat message would pay a read transaction for it). A
    /// membership lost since is counted from the next measurement, at most `relayCheckInterval` later.
    var notRelayOnly = Set<ConversationID>()
    /// Relay-only conversations evicted since the core started.
    public internal(set) var conversationsEvicted = 0

    /// One lane of one link: priority lanes sort first, so their held deliveries are released first.
    private struct LaneKey: Hashable, Comparable {
        let link: LinkID
        let lane: SyncLane
        static func < (lhs: LaneKey, rhs: LaneKey) -> Bool { (lhs.lane, lhs.link) < (rhs.lane, rhs.link) }
    }

    /// A link's deliveries of one lane that wait, in order: until `until` (a quota), or only for the next turn
    /// (`until` now). The store is already checking the first `checkedAhead` records (`verifyHeldAhead`).
    private struct HeldRun {
        var deliveries: [[Record]]
        let until: Duration
        var checkedAhead: Int
    }

    private enum Link {
        case handshaking(LinkHandshake, openedAt: Duration)
        case established(Established)
    }

    private struct Established {
        let peer: AuthorID
        /// Who dialled this link: decides which link survives when both sides dialled at once.
        let initiatedBy: AuthorID
        var channel: SecureChannel
        var session: SyncSession<StoreRecordSource>
        /// How long the handshake took (one to two round trips): the scale of the link's grace period.
        let handshake: Duration
        /// Whether either side is leaving the link (LEAVING sent or received): it supplies no feed any more and
        /// takes no new parent role; the other links were grafted for what it supplied.
        var leaving = false
        /// When this side closes the link it is leaving (nil: not leaving it, or the peer is the one leaving).
        var closeAt: Duration?
    }

    public init(
        store: RecordStore, identity: LocalIdentity, networkKey: NetworkKey,
        configuration: NodeConfiguration = NodeConfiguration(), random: any RandomNumberGenerator
    ) {
        self.store = store
        self.identity = identity
        self.configuration = configuration
        self.random = random
        conversations = Conversations(store: store, identity: identity)
        quotas = IngestQuotas(configuration: configuration.quotas)
        causalBuffer = CausalBuffer(limits: configuration.causalBuffer)
        // A fresh Noise static key per run: it is bound to the identity by a signature in every handshake.
        var generator = random
        let staticKey = NoiseKeyPair.generate(using: &generator)
        self.random = generator
        linkConfiguration = LinkConfiguration(
            identity: identity.signing, staticKey: staticKey, networkKey: networkKey,
            rekeyIntervalFrames: configuration.rekeyIntervalFrames)
        evicted =
            (try? store.evictedConversations(
                sinceMillis: configuration.clockOriginMillis - Self.millis(configuration.quotas.evictionMemory))) ?? [:]
    }

    /// Peers with an established link, and the link.
    public var connectedPeers: [AuthorID: LinkID] {
        var peers = [AuthorID: LinkID]()
        for (id, link) in links {
            if case .established(let established) = link { peers[established.peer] = id }
        }
        return peers
    }

    /// Authors whose live records go on the priority lane of every link (docs/protocol.md §3.7): this node and the
    /// peers of its established links. Chat between neighbours thus passes a flood queued on a link; records of
    /// authors further away stay bulk (a flood slows multi-hop chat, not chat with a neighbour's author).
    var priorityAuthors: Set<AuthorID> {
        var authors: Set<AuthorID> = [identity.author]
        for link in links.values {
            if case .established(let established) = link { authors.insert(established.peer) }
        }
        return authors
    }

    /// Records currently held in the causal buffer (bounded by `configuration.causalBuffer`).
    public var causalBufferCount: Int { causalBuffer.count }

    /// Records the sessions delivered to this core since it started, and those among them that were new to the
    /// store (stored at once or later from the causal buffer): the difference is redundant copies (the lab's
    /// gossip-efficiency figures).
    public private(set) var recordsDelivered = 0
    public private(set) var recordsNew = 0
    /// Application messages this core sent, by kind (`SyncFrameKind.name(of:)`: records, credit, ping, …), since
    /// it started. Handshake messages and goodbyes are not counted here.
    public private(set) var messagesSentByKind: [String: Int] = [:]

    // MARK: - Inputs

    public func handle(_ input: NodeInput, now: Duration) -> [NodeAction] {
        var out = handleInput(input, now: now)
        out += regraftLostParents(now: now)
        out += fileMaintenance(now: now)
        return out
    }

    private func handleInput(_ input: NodeInput, now: Duration) -> [NodeAction] {
        switch input {
        case .linkOpened(let id, let initiator):
            var generator = random
            let ephemeral = NoiseKeyPair.generate(using: &generator)
            random = generator
            var handshake = LinkHandshake(
                role: initiator ? .initiator : .responder, configuration: linkConfiguration, ephemeralKey: ephemeral)
            let actions = handshake.start()  // the responder's start sends nothing: it waits for message 1
            links[id] = .handshaking(handshake, openedAt: now)
            roles[id] = handshake.role
            return handshakeActions(id, actions, now: now)
        case .bytesReceived(let id, let bytes):
            let out = receive(id, bytes, now: now)
            return out + ingestDeliveries(now: now)
        case .linkClosed(let id):
            roles[id] = nil
            for lane in SyncLane.allCases { heldDeliveries[LaneKey(link: id, lane: lane)] = nil }
            quotas.forget(link: id)
            guard let link = links.removeValue(forKey: id) else { return [] }
            if case .established(let established) = link { return [.event(.peerDown(established.peer, id))] }
            return []
        case .linkWritable(let id, let writable):
            guard case .established(var established) = links[id] else { return [] }
            let actions = established.session.writable(writable, now: now)
            links[id] = .established(established)
            return syncActions(id, actions, now: now)
        case .tick:
            return tick(now: now)
        }
    }

    /// When `.tick` next has work (session timers, handshake timeouts).
    public func nextDeadline() -> Duration? {
        var deadlines = [Duration]()
        for link in links.values {
            switch link {
            case .handshaking(_, let openedAt): deadlines.append(openedAt + configuration.handshakeTimeout)
            case .established(let established):
                if let deadline = established.session.nextDeadline() { deadlines.append(deadline) }
                if let closeAt = established.closeAt { deadlines.append(closeAt) }
            }
        }
        if let deadline = fetcher.nextDeadline() { deadlines.append(deadline) }
        if let refreshDeadline { deadlines.append(refreshDeadline) }
        if let deadline = typing.nextDeadline() { deadlines.append(deadline) }
        deadlines += heldDeliveries.values.map(\.until)
        if let relayCheckAt { deadlines.append(relayCheckAt) }
        if let expiry = causalBuffer.nextExpiry { deadlines.append(expiry) }
        return deadlines.min()
    }

    /// Whether deliveries wait only for a later turn (the per-turn cap, not a quota) at `now`: a driver with nothing
    /// else to do ticks again at once instead of sleeping (the next tick ingests them).
    public func hasIngestDue(now: Duration) -> Bool {
        heldDeliveries.values.contains { $0.until <= now }
    }

    /// Ends one established link cleanly: the goodbye, then the close.
    private func closeLink(_ id: LinkID) -> [NodeAction] {
        guard case .established(var established) = links[id] else { return [] }
        var out = [NodeAction]()
        if let goodbye = try? established.channel.sendGoodbye() { out.append(.send(id, goodbye)) }
        links[id] = nil
        roles[id] = nil
        return out + [.event(.peerDown(established.peer, id)), .close(id)]
    }

    /// Ends every link cleanly: the authenticated goodbye on each established link (so the peer tells this close
    /// from a crash or a cut), then the close. For a graceful shutdown; the core keeps no link afterwards.
    public func closeAllLinks() -> [NodeAction] {
        var out = [NodeAction]()
        for id in links.keys.sorted() {
            if case .established = links[id] {
                out += closeLink(id)
                continue
            }
            links[id] = nil
            roles[id] = nil
            out.append(.close(id))
        }
        return out
    }

    /// How much the dissemination trees use an established link (nil: not established): the feeds it is the parent
    /// of here, plus the feeds whose trees cross it (`SyncSession.treeFeeds`). Of the links a node could drop to make
    /// room, the one with the least load costs the trees least.
    public func treeLoad(of id: LinkID) -> Int? {
        guard case .established(let established) = links[id], !established.leaving else { return nil }
        return feedParents.count(of: id) + established.session.treeFeeds
    }

    /// Leaves an established link gracefully, to make room for another peer: tells the peer (LEAVING, docs/protocol.md
    /// §3.3 step 6), grafts on the other links every feed this link supplied, and closes the link, with the
    /// goodbye, `Limits.syncLeaveGraceHandshakes` times its handshake's duration later. Meanwhile the link carries
    /// records both ways, so the peer's trees are mended before it goes and nothing in flight is lost.
    /// Nil when the link is not established (still in its handshake, or gone): the caller closes it as it can.
    public func retire(_ id: LinkID, now: Duration) -> [NodeAction]? {
        guard case .established(var established) = links[id] else { return nil }
        guard established.closeAt == nil else { return [] }
        established.closeAt = now + established.handshake * NatterSync.Limits.syncLeaveGraceHandshakes
        let actions = established.session.leave(now: now)
        links[id] = .established(established)
        var out = syncActions(id, actions, now: now)
        out += stopSupplying(id, now: now)
        return out
    }

    // MARK: - Authoring

    /// Pushes records this node wrote (through `conversations`) to every peer, and reports what changed. Call
    /// after each authoring call.
    public func published(_ records: [Record], now: Duration) -> [NodeAction] {
        let stored = records.map { StoredRecord($0) }
        for record in records where record.header.author == identity.author { noteChat(record.header, now: now) }
        recentOwnRecords.noteStored(stored.filter { $0.author == identity.author })
        var actions = storedLocally(stored, except: nil, now: now)
        actions += conversationsMayHaveChanged(now: now)
        return actions
    }

    // MARK: - Links

    private func receive(_ id: LinkID, _ bytes: [UInt8], now: Duration) -> [NodeAction] {
        switch links[id] {
        case nil:
            return []
        case .handshaking(var handshake, let openedAt):
            let actions = handshake.receive(bytes)
            links[id] = .handshaking(handshake, openedAt: openedAt)
            return handshakeActions(id, actions, now: now)
        case .established(var established):
            let events = established.channel.receive(bytes)
            links[id] = .established(established)
            return channelEvents(id, events, now: now)
        }
    }

    private func handshakeActions(_ id: LinkID, _ actions: [LinkHandshake.Action], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        let openedAt: Duration = if case .handshaking(_, let at) = links[id] { at } else { now }
        for action in actions {
            switch action {
            case .send(let bytes):
                out.append(.send(id, bytes))
            case .fail(let error):
                links[id] = nil
                out += [.event(.linkFailed(id, "handshake: \(error)"))]
                if let misbehaviour = Misbehaviour(handshake: error) {
                    out.append(.event(.misbehaved(id, misbehaviour)))
                }
                return out + [.close(id)]
            case .established(let done):
                let peer = AuthorID(done.peer)
                if peer == identity.author {
                    links[id] = nil
                    return out + [.event(.linkFailed(id, "connected to itself")), .close(id)]
                }
                if refusedPeers.contains(peer) {
                    // Closed without an event: a ban is reported once, when it is imposed, and a blocked person's
                    // node redials every couple of seconds — a notice per refusal would repeat for as long as the
                    // block lasts.
                    links[id] = nil
                    return out + [.close(id)]
                }
                // One link per peer. When both dialled, both ends keep the link dialled by the smaller identity
                // (a redial by the same side replaces the old link, which is probably dead).
                let initiatedBy = roles[id] == .initiator ? identity.author : peer
                if let existingID = connectedPeers[peer], case .established(let existing) = links[existingID] {
                    let keepNew = initiatedBy == existing.initiatedBy || initiatedBy < existing.initiatedBy
                    if !keepNew {
                        links[id] = nil
                        return out + [.close(id)]
                    }
                    links[existingID] = nil
                    out += [.event(.peerDown(peer, existingID)), .close(existingID)]
                }
                out += establish(id, done, peer, initiatedBy: initiatedBy, handshake: now - openedAt, now: now)
            }
        }
        return out
    }

    /// Starts the sync session of a link whose handshake took `handshake` (about one round trip and a half, plus
    /// the key exchange's computation): its push interval scales with it (`Limits.syncPushInterval(upTo:handshake:)`).
    private func establish(
        _ id: LinkID, _ done: LinkEstablished, _ peer: AuthorID, initiatedBy: AuthorID, handshake: Duration,
        now: Duration
    ) -> [NodeAction] {
        var session = SyncSession(
            source: StoreRecordSource(store: store, recent: recentOwnRecords),
            pushInterval: NatterSync.Limits.syncPushInterval(upTo: configuration.syncPushInterval, handshake: handshake)
        )
        let start = session.start(now: now)
        links[id] = .established(
            Established(
                peer: peer, initiatedBy: initiatedBy, channel: done.channel, session: session, handshake: handshake))
        var out: [NodeAction] = [.event(.peerUp(peer, id))]
        out += syncActions(id, start, now: now)
        if !done.unreadBytes.isEmpty { out += receive(id, done.unreadBytes, now: now) }
        return out
    }

    private func channelEvents(_ id: LinkID, _ events: [SecureChannel.Event], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for event in events {
            guard case .established(var established) = links[id] else { break }
            switch event {
            case .message(let message) where FileFrame.isFileFrame(message):
                out += fileFrame(id, message, now: now)
            case .message(let message) where TypingFrame.isTypingFrame(message):
                out += typingFrame(id, message, now: now)
            case .message(let message):
                let actions = established.session.receive(message: message, now: now)
                links[id] = .established(established)
                out += syncActions(id, actions, now: now)
            case .goodbye:
                links[id] = nil
                out += [.event(.peerDown(established.peer, id)), .close(id)]
            case .failed(let error):
                links[id] = nil
                out.append(.event(.linkFailed(id, "channel: \(error)")))
                if let misbehaviour = Misbehaviour(channel: error) { out.append(.event(.misbehaved(id, misbehaviour))) }
                out += [.event(.peerDown(established.peer, id)), .close(id)]
            }
        }
        return out
    }

    /// Executes a session's actions in order (the session's contract: after `deliver`, report `ingested` and then
    /// what was stored, before anything else).
    private func syncActions(_ id: LinkID, _ actions: [SyncAction], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            guard case .established(let established) = links[id] else { break }
            switch action {
            case .send(let message):
                out += sendApplicationMessage(message, on: id)
            case .deliver(let records):
                deliveries.append((id, .bulk, records))
            case .deliverPriority(let records):
                deliveries.append((id, .priority, records))
            case .caughtUp:
                out.append(.event(.caughtUp(established.peer)))
            case .progress(let received, let expected):
                out.append(.event(.syncProgress(established.peer, received: received, expected: expected)))
            case .peerLeaving:
                out += stopSupplying(id, now: now)
            case .rerouted(let feeds):
                out += rerouted(feeds, from: id, now: now)
            case .close(let error):
                out += failLink(id, error)
            }
        }
        return out
    }

    // MARK: - Ingest

    /// Ingests what the sessions delivered during this input, each link's consecutive deliveries of a lane in one
    /// transaction, unless the ingest quotas hold them back (then they wait, unverified, behind the earlier ones of
    /// their link and lane). Priority deliveries go first and alone (docs/protocol.md §3.7): a chat message is not
    /// read after the flood that arrived with it, nor stored, passed on and shown only after a bulk batch of it —
    /// the input's bulk deliveries wait for the next turn, due at once (`hasIngestDue`).
    private func ingestDeliveries(now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        let postponeBulk = deliveries.contains(where: { $0.lane == .priority })
        if postponeBulk {
            deliveries = deliveries.filter { $0.lane == .priority } + deliveries.filter { $0.lane == .bulk }
        }
        while let first = deliveries.first {
            let key = LaneKey(link: first.link, lane: first.lane)
            let run = deliveries.prefix { $0.link == key.link && $0.lane == key.lane }.map(\.records)
            deliveries.removeFirst(run.count)
            // Behind a held run of its link and lane, or bulk postponed: held (a new run is due at once).
            if heldDeliveries[key] != nil || (postponeBulk && key.lane == .bulk) {
                heldDeliveries[key, default: HeldRun(deliveries: [], until: now, checkedAhead: 0)].deliveries += run
                verifyHeldAhead(key, now: now)
                continue
            }
            out += admit(run, from: key, now: now)
        }
        return out
    }

    /// Ingests a link's deliveries of one lane if the quotas allow it now (the headers name the authors; no signature
    /// is checked before), or holds them and logs the flood once per peer. At most `ingestRecordsPerTurnMax`
    /// records go at once; the rest wait for the next tick, so other inputs come between. A priority delivery is
    /// checked against the link's priority bucket instead of its bulk one, and the authors' buckets as any other.
    /// `checkedAhead`: how many of the run's leading records the store is checking already (`verifyHeldAhead`).
    private func admit(_ run: [[Record]], from key: LaneKey, checkedAhead: Int = 0, now: Duration) -> [NodeAction] {
        let id = key.link
        let turnMax =
            key.lane == .bulk && isChatLive(now)
            ? configuration.quotas.ingestRecordsPerLiveTurnMax : configuration.quotas.ingestRecordsPerTurnMax
        var taken = 1
        var records = run[0].count
        while taken < run.count, records + run[taken].count <= turnMax {
            records += run[taken].count
            taken += 1
        }
        let first = Array(run.prefix(taken))
        let authors = Set(first.joined().map(\.header.author))
        guard let wait = quotas.wait(link: id, lane: key.lane, authors: authors, now: now) else {
            if taken < run.count {
                // The records left for later turns are handed to the workers now, behind this turn's (which are
                // started with them, in order, if they were not already): the cores check them while this turn
                // stores, instead of idling until it ends — a fresh window's first turn would otherwise check its
                // first part alone.
                let started = startChecks(of: run, from: checkedAhead, for: key, now: now)
                heldDeliveries[key] = HeldRun(
                    deliveries: Array(run[taken...]), until: now, checkedAhead: max(0, started - records))
            }
            let out = ingest(first, from: id, lane: key.lane, now: now)
            verifyHeldAhead(key, now: now)
            return out
        }
        heldDeliveries[key] = HeldRun(deliveries: run, until: now + wait, checkedAhead: checkedAhead)
        guard case .established(let established) = links[id],
            let line = floodNotices.held(established.peer, now: now)
        else { return [] }
        return [.event(.notice(line))]
    }

    /// Has the store start checking the records of `key`'s held run that wait only for a later turn (not for a
    /// quota), as far as the link's quota allows them now: they are decoded and verified on the other cores while
    /// this turn's records are stored (`RecordStore.verifyAhead`). Nothing is checked ahead that the quota would not
    /// let in, so a flood costs no more verification than without it; the outcome of the ingest is the same.
    private func verifyHeldAhead(_ key: LaneKey, now: Duration) {
        guard let held = heldDeliveries[key], held.until <= now else { return }
        let started = startChecks(of: held.deliveries, from: held.checkedAhead, for: key, now: now)
        heldDeliveries[key]!.checkedAhead = started
    }

    /// Starts the store checking `deliveries` of `key` from record `checkedAhead` on, as far as the link's quota
    /// would let them in now; returns how far they are started. Only the records not yet started are copied out:
    /// this runs after every delivery to a held run, which can hold a whole sync window.
    private func startChecks(of deliveries: [[Record]], from checkedAhead: Int, for key: LaneKey, now: Duration)
        -> Int
    {
        guard case .established = links[key.link] else { return checkedAhead }
        let total = deliveries.reduce(0) { $0 + $1.count }
        let end = min(total, quotas.available(link: key.link, lane: key.lane, now: now))
        guard end > checkedAhead else { return checkedAhead }
        store.verifyAhead(
            worthCheckingAhead(deliveries.joined().dropFirst(checkedAhead).prefix(end - checkedAhead), now: now))
        return end
    }

    /// Marks the chat live for a record this node wrote or took from a priority lane, if it is chat: not a profile
    /// update (a node publishes its profile as it starts, catch-up or not).
    private func noteChat(_ header: RecordHeader, now: Duration) {
        if header.kind != .plain { chatLiveAt = now }
    }

    /// Whether the node's chat is live (`chatLiveAt`): bulk turns are shorter meanwhile.
    private func isChatLive(_ now: Duration) -> Bool {
        chatLiveAt.map { now - $0 < configuration.quotas.liveChatWindow } ?? false
    }

    /// Deliveries held by the quotas whose time has come: checked again, ingested or held longer.
    private func releaseHeldDeliveries(now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for key in heldDeliveries.keys.sorted() where heldDeliveries[key]!.until <= now {
            let held = heldDeliveries.removeValue(forKey: key)!
            guard case .established = links[key.link] else { continue }
            out += admit(held.deliveries, from: key, checkedAhead: held.checkedAhead, now: now)
        }
        return out
    }

    /// Ingests records delivered by a link's session, replays buffered successors, reports outcomes to that
    /// session (one report per delivery, in order) and pushes what was stored to every other session.
    private func ingest(_ delivered: [[Record]], from id: LinkID, lane: SyncLane, now: Duration) -> [NodeAction] {
        let records = delivered.count == 1 ? delivered[0] : Array(delivered.joined())
        // Records of evicted conversations are refused unchecked (reported as held, so the session does not ask
        // again), except a commit that invites this node (the eviction is forgotten and the conversation fetched)
        // and the records of this node's neighbours: a flood that got a conversation evicted (junk feeds this
        // relay cannot tell from real ones) does not cut the chat of the relay's own neighbours through it — their
        // feeds come back whole (a gap: the session asks for them from the start), the junk stays refused.
        var refused = Set<Int>()
        var invitations = [Record]()
        var neighbours: Set<AuthorID>?
        for (index, record) in records.enumerated() {
            let header = record.header
            guard isEvicted(header.conversation, now: now) else { continue }
            if header.kind == .commit, let invitation = invitation(record) {
                forgetEviction(header.conversation)
                invitations.append(invitation)
                continue
            }
            if neighbours == nil { neighbours = priorityAuthors }
            if refusesInEvicted(header, neighbours: neighbours!) { refused.insert(index) }
        }
        let admitted = refused.isEmpty ? records : records.indices.filter { !refused.contains($0) }.map { records[$0] }
        let storeReport: IngestReport
        do {
            storeReport = try storeIngest(admitted, now: now)
        } catch {
            return [.event(.linkFailed(id, "store: \(error)"))]
        }
        var storeOutcomes = storeReport.outcomes.makeIterator()
        let outcomes = records.indices.map { refused.contains($0) ? .duplicate(records[$0].id) : storeOutcomes.next()! }
        chargeQuotas(link: id, lane: lane, outcomes: outcomes, records: records, refused: refused, now: now)
        var stored = [StoredRecord]()
        /// The records appended to their feeds (not fork evidence), for the tree's lag check.
        var appended = [Record]()
        var out = [NodeAction]()
        var copies = [FeedKey]()
        /// New records held for a gap: their link is ahead of us in their feed.
        var ahead = [StoredRecord]()
        recordsDelivered += records.count
        let deliveredBy: AuthorID? = if case .established(let established) = links[id] { established.peer } else { nil }
        for (record, outcome) in zip(records, outcomes) {
            if case .stored = outcome {
                recordsNew += 1
                if lane == .priority { noteChat(record.header, now: now) }
            }
            let header = record.header
            switch outcome {
            case .stored, .forkEvidence:
                let isEvidence = if case .forkEvidence = outcome { true } else { false }
                stored.append(
                    StoredRecord(
                        conversation: header.conversation, author: header.author, sequence: header.sequence,
                        bytes: record.bytes, isForkEvidence: isEvidence))
                if !isEvidence { appended.append(record) }
            case .outOfOrder:
                // Refused when its peer holds its share: the session asks for the gap either way.
                if let deliveredBy { _ = causalBuffer.hold(record, from: deliveredBy, now: now) }
                ahead.append(StoredRecord(record))
            case .duplicate:
                copies.append(FeedKey(conversation: header.conversation, author: header.author))
            case .rejected:
                break
            }
        }
        let fromLink = stored.filter { !$0.isForkEvidence }
        var offset = 0
        for delivery in delivered {
            guard case .established(var established) = links[id] else { break }
            let reported = outcomes[offset..<(offset + delivery.count)]
            offset += delivery.count
            let actions = established.session.ingested(reported.map(SyncIngestOutcome.init), lane: lane, now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        out += fetchInvited(invitations, from: id, now: now)
        let drained = drainCausalBuffer(now: now)
        recordsNew += drained.stored.count
        stored += drained.stored.map { StoredRecord($0) }
        // Own records that came back from a peer (a restored identity): the run in memory may no longer end at the head.
        recentOwnRecords.forget(stored.filter { $0.author == identity.author }.map(\.feed))
        if lane == .priority, !stored.isEmpty { priorityStoredSinceRefresh = true }
        out += storedLocally(stored, except: nil, now: now)
        if !stored.isEmpty, relayCheckAt == nil { relayCheckAt = now + configuration.quotas.relayCheckInterval }
        out += updateTree(link: id, stored: fromLink + ahead, copies: copies, now: now)
        // A record applied here has every dependency applied: only those still waiting can reveal a lagging feed.
        let appliedIDs = Set((storeReport.applied + drained.applied).map(\.id))
        out += regraftLagging(
            appended.filter { !appliedIDs.contains($0.id) }.map(\.header)
                + drained.stored.map(\.header), now: now)
        let applied = storeReport.applied + drained.applied
        if !applied.isEmpty { out.append(.event(.applied(applied))) }
        out += conversationsMayHaveChanged(now: now)
        out += tallyRelay(stored, now: now)
        return out
    }

    /// Asks the delivering peer for every feed an invitation's commit depends on (and the commit's own feed), from
    /// the start: the conversation was evicted here, so the session's belief that this node holds them is wrong.
    private func fetchInvited(_ invitations: [Record], from id: LinkID, now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for invitation in invitations {
            let header = invitation.header
            for author in Set(header.dependencies.map(\.author) + [header.author]).sorted() {
                guard case .established(var established) = links[id] else { return out }
                let actions = established.session.missing(
                    conversation: header.conversation, author: author, from: 1, now: now)
                links[id] = .established(established)
                out += syncActions(id, actions, now: now)
            }
        }
        return out
    }

    /// Forgets buffered records of a conversation (it was evicted).
    func dropBuffered(_ conversation: ConversationID) {
        causalBuffer.drop(conversation: conversation)
    }

    /// `now` on the wall clock, in milliseconds since 1970 (`clockOriginMillis`; virtual in simulations).
    func wallClockMillis(_ now: Duration) -> Int64 {
        configuration.clockOriginMillis + Self.millis(now)
    }

    /// Ingests buffered records whose predecessors have arrived; returns what was stored and what became applied.
    private func drainCausalBuffer(now: Duration) -> (stored: [Record], applied: [RecordRef]) {
        var stored = [Record]()
        var applied = [RecordRef]()
        var progress = true
        while progress && causalBuffer.count > 0 {
            progress = false
            for feed in causalBuffer.feeds {
                guard let state = try? store.feeds(of: feed.conversation).first(where: { $0.author == feed.author }),
                    let record = causalBuffer.take(feed, next: state.stored + 1)
                else { continue }
                if let report = try? storeIngest([record], now: now), case .stored = report.outcomes[0] {
                    stored.append(record)
                    applied += report.applied
                    progress = true
                }
            }
        }
        return (stored, applied)
    }

    /// Ingests received records into the store, stamped with the wall clock and committed as configured
    /// (`NodeConfiguration.ingestDurability`).
    private func storeIngest(_ records: [Record], now: Duration) throws(StoreError) -> IngestReport {
        try store.ingest(records, receivedAtMillis: wallClockMillis(now), durability: configuration.ingestDurability)
    }

    /// Tells every session (but `except`) what the node stored, so they push it to their peers: records of this node
    /// and of its neighbours on the priority lane (`priorityAuthors`), the rest on the bulk lane.
    private func storedLocally(_ records: [StoredRecord], except: LinkID?, now: Duration) -> [NodeAction] {
        guard !records.isEmpty else { return [] }
        var out = [NodeAction]()
        let priority = priorityAuthors
        for id in links.keys.sorted() where id != except {
            guard case .established(var established) = links[id] else { continue }
            let actions = established.session.localRecordsStored(records, priorityAuthors: priority, now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        return out
    }

    // MARK: - Dissemination trees (docs/protocol.md §3.3, step 6)

    /// `link` delivered these new records and copies of records already held: it becomes the parent of the new
    /// records' feeds (grafted back if we had pruned it: its records crossed our PRUNE), and it is pruned for the
    /// copies' feeds whose parent is another link, unless they race after a graft. A link being left takes no part.
    private func updateTree(link id: LinkID, stored: [StoredRecord], copies: [FeedKey], now: Duration)
        -> [NodeAction]
    {
        guard case .established(var established) = links[id], !established.leaving else { return [] }
        var actions = [SyncAction]()
        var newest = [FeedKey: UInt64]()
        for record in stored { newest[record.feed] = max(newest[record.feed] ?? 0, record.sequence) }
        for feed in newest.keys.sorted() {
            feedParents.delivered(feed, at: newest[feed]!, by: id)
            if feedParents.parent(of: feed) == id, established.session.hasPruned(feed) {
                actions += established.session.graft(feed, from: newest[feed]! + 1, now: now)
            }
        }
        // The author's own link is never pruned for its feed: the tree's root stays attached to every neighbour.
        let prune = copies.filter {
            $0.author != established.peer && (feedParents.parent(of: $0).map { $0 != id } ?? false)
                && !isRacing($0, now: now)
        }
        if !prune.isEmpty { actions += established.session.prune(prune, now: now) }
        links[id] = .established(established)
        return syncActions(id, actions, now: now)
    }

    /// Feeds whose parent link is gone are grafted back on every link that pruned them, from the first record the
    /// node lacks, so their records flood again until copies prune a new tree.
    private func regraftLostParents(now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for lost in feedParents.parentLinks {
            if case .established = links[lost] { continue }
            let feeds = feedParents.remove(lost)
            for feed in feeds { out += regraft(feed, now: now) }
            out += announceReroute(feeds, except: lost, now: now)
        }
        return out
    }

    /// Whether `feed` was grafted back less than `Limits.syncTreeRegraftRace` ago (expired entries are dropped).
    private func isRacing(_ feed: FeedKey, now: Duration) -> Bool {
        guard let until = racing[feed] else { return false }
        if until > now { return true }
        racing[feed] = nil
        return false
    }

    /// Grafts `feed` back on every link that pruned it, from the first record the node lacks.
    private func regraft(_ feed: FeedKey, now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        if racing.count >= Limits.syncFeedParentsMax { racing = racing.filter { $0.value > now } }
        if racing[feed] != nil || racing.count < Limits.syncFeedParentsMax {
            racing[feed] = now + Limits.syncTreeRegraftRace
        }
        let stored = (try? store.feeds(of: feed.conversation))?.first { $0.author == feed.author }?.stored ?? 0
        for id in links.keys.sorted() {
            guard case .established(var established) = links[id], !established.leaving,
                established.session.hasPruned(feed)
            else { continue }
            let actions = established.session.graft(feed, from: stored + 1, now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        return out
    }

    /// Stored records name, in their dependencies, records of other feeds: a feed the node lags in by more than
    /// `syncTreeLagMax` is no longer reached by its tree, so it forgets the parent and grafts the feed back.
    private func regraftLagging(_ headers: [RecordHeader], now: Duration) -> [NodeAction] {
        var lagging = Set<FeedKey>()
        var heads = [ConversationID: [AuthorID: UInt64]]()
        for header in headers {
            let conversation = header.conversation
            if heads[conversation] == nil {
                let feeds = (try? store.feeds(of: conversation)) ?? []
                heads[conversation] = Dictionary(feeds.map { ($0.author, $0.stored) }, uniquingKeysWith: max)
            }
            for dependency in header.dependencies
            where dependency.sequence > (heads[conversation]?[dependency.author] ?? 0) + Limits.syncTreeLagMax {
                lagging.insert(FeedKey(conversation: conversation, author: dependency.author))
            }
        }
        var out = [NodeAction]()
        for feed in lagging.sorted() {
            feedParents.forget(feed)
            out += regraft(feed, now: now)
        }
        out += announceReroute(lagging.sorted(), except: nil, now: now)
        return out
    }

    /// A link is being left (by either side): it is nobody's parent from now on, and the feeds it was the parent of
    /// are grafted back on every other link that pruned them, while it still carries records.
    private func stopSupplying(_ id: LinkID, now: Duration) -> [NodeAction] {
        guard case .established(var established) = links[id] else { return [] }
        established.leaving = true
        links[id] = .established(established)
        var out = [NodeAction]()
        let feeds = feedParents.remove(id)
        for feed in feeds { out += regraft(feed, now: now) }
        out += announceReroute(feeds, except: id, now: now)
        return out
    }

    /// Tells every other link that this node's supply of `feeds` changed (it grafted them back), so the nodes that
    /// get them from here race them again (REROUTE, docs/protocol.md §3.3 step 6).
    private func announceReroute(_ feeds: [FeedKey], except: LinkID?, now: Duration) -> [NodeAction] {
        guard !feeds.isEmpty else { return [] }
        var out = [NodeAction]()
        for id in links.keys.sorted() where id != except {
            guard case .established(var established) = links[id], !established.leaving else { continue }
            let actions = established.session.reroute(feeds, now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        return out
    }

    /// The peer on `id` rerouted these feeds: those it is the parent of here, and that are not racing already, are
    /// grafted back on the other links so their next records race along every path, and the REROUTE goes on to the
    /// links this node pushes them to. A feed races once per `Limits.syncTreeRegraftRace`, so a REROUTE never
    /// circles.
    private func rerouted(_ feeds: [FeedKey], from id: LinkID, now: Duration) -> [NodeAction] {
        let ours = feeds.filter { feedParents.parent(of: $0) == id && !isRacing($0, now: now) }
        var out = [NodeAction]()
        for feed in ours { out += regraft(feed, now: now) }
        out += announceReroute(ours, except: id, now: now)
        return out
    }

    /// Records were stored: refresh the conversation tables now, or when the refresh delay (or the driver) says.
    private func conversationsMayHaveChanged(now: Duration) -> [NodeAction] {
        if refreshAt == nil { refreshAt = now + (configuration.conversationRefreshDelay ?? .zero) }
        return configuration.conversationRefreshDelay == .zero ? refreshPending() : []
    }

    /// Whether records were stored since the conversation tables were last brought up to date.
    public var isRefreshPending: Bool { refreshAt != nil }

    /// Whether a priority delivery (docs/protocol.md §3.7) stored records since the last refresh: a driver that lets
    /// bulk turns' refreshes wait refreshes at once for these, so a neighbour's chat is not shown late.
    public private(set) var priorityStoredSinceRefresh = false

    /// Brings the conversation tables up to date now if records were stored since the last refresh, and reports
    /// what changed: the node actor after each turn (`conversationRefreshDelay` nil), and for a reader (the REPL)
    /// about to query them, so what it reads is never behind what it was told.
    public func refreshPending() -> [NodeAction] {
        guard refreshAt != nil else { return [] }
        refreshAt = nil
        priorityStoredSinceRefresh = false
        guard var changes = try? conversations.refreshChanged() else { return [] }
        // Junk feeds in conversations this node reads are reduced to their frontier, then the tables refreshed again.
        let reduced = changes.keys.sorted().filter { !((try? conversations.reduceJunk(in: $0)) ?? []).isEmpty }
        if !reduced.isEmpty, let again = try? conversations.refreshChanged() {
            // Junk records were rejected by the rules, so dropping them changes no line; report what did.
            for (conversation, change) in again where changes[conversation] == nil { changes[conversation] = change }
        }
        return changes.keys.sorted().compactMap { conversation in
            let change = changes[conversation]!
            return change.added.isEmpty && change.retracted.isEmpty
                ? nil : .event(.conversationChanged(conversation, change))
        }
    }

    // MARK: - Link access for file transfer (NodeCore+Files.swift)

    /// Established links and their peers.
    var establishedLinks: [LinkID: AuthorID] {
        var result = [LinkID: AuthorID]()
        for (id, link) in links {
            if case .established(let established) = link { result[id] = established.peer }
        }
        return result
    }

    /// Sends one application message on an established link (nothing if the link is gone): a session's, a file
    /// frame or a TYPING frame.
    func sendApplicationMessage(_ message: [UInt8], on id: LinkID) -> [NodeAction] {
        guard case .established(var established) = links[id] else { return [] }
        do {
            let bytes = try established.channel.send(message)
            messagesSentByKind[SyncFrameKind.name(of: message), default: 0] += 1
            links[id] = .established(established)
            return [.send(id, bytes)]
        } catch {
            links[id] = nil
            return [.event(.linkFailed(id, "send: \(error)")), .event(.peerDown(established.peer, id)), .close(id)]
        }
    }

    /// Closes an established link on a sync failure (a session's `close`, a malformed TYPING or file frame): with a
    /// goodbye, so the peer knows it was us, and a `misbehaved` event when the failure is the peer's fault.
    func failLink(_ id: LinkID, _ error: SyncError) -> [NodeAction] {
        guard case .established(var established) = links[id] else { return [] }
        links[id] = nil
        var out = [NodeAction]()
        if let goodbye = try? established.channel.sendGoodbye() { out.append(.send(id, goodbye)) }
        out.append(.event(.linkFailed(id, "sync: \(error)")))
        if let misbehaviour = Misbehaviour(sync: error) { out.append(.event(.misbehaved(id, misbehaviour))) }
        return out + [.event(.peerDown(established.peer, id)), .close(id)]
    }

    // MARK: - Time

    private func tick(now: Duration) -> [NodeAction] {
        var out = releaseHeldDeliveries(now: now)
        if let expiry = causalBuffer.nextExpiry, now >= expiry { _ = causalBuffer.expire(now: now) }
        if let refreshDeadline, now >= refreshDeadline { out += refreshPending() }
        if let relayCheckAt, now >= relayCheckAt {
            self.relayCheckAt = nil
            out += enforceRelayQuota(now: now)
        }
        for id in links.keys.sorted() {
            switch links[id] {
            case .handshaking(_, let openedAt) where now >= openedAt + configuration.handshakeTimeout:
                links[id] = nil
                // Scored only while the transport's handshake slots are under load (`Node`): then it held a place.
                let stalled = Misbehaviour(.stalledHandshake, "no handshake within \(configuration.handshakeTimeout)")
                out += [.event(.linkFailed(id, "handshake timed out")), .event(.misbehaved(id, stalled)), .close(id)]
            case .established(var established):
                if let closeAt = established.closeAt, now >= closeAt {
                    out += closeLink(id)
                    continue
                }
                let actions = established.session.tick(now: now)
                links[id] = .established(established)
                out += syncActions(id, actions, now: now)
            default:
                break
            }
        }
        out += typingTick(now: now)
        return out
    }
}

// MARK: - Which failures are misbehaviour

extension Misbehaviour {
    /// A handshake failure that an honest peer never causes; nil for cuts, closes and version mismatches.
    init?(handshake error: LinkError) {
        switch error {
        case .wrongNetworkKey: self.init(.wrongNetworkKey, "\(error)")
        case .decryptFailed, .truncated, .frameTooLarge, .messageTooLarge, .malformedPayload, .unexpectedMessage,
            .badIdentityBinding, .weakPeerKey:
            self.init(.failedHandshake, "\(error)")
        case .noCommonVersion, .nonceExhausted, .peerClosedHandshake, .cut, .closed: return nil
        }
    }

    /// A secure-channel failure that an honest peer never causes (TCP does not corrupt, reorder or replay bytes).
    init?(channel error: LinkError) {
        switch error {
        case .decryptFailed, .truncated, .frameTooLarge, .messageTooLarge, .malformedPayload, .unexpectedMessage,
            .badIdentityBinding, .weakPeerKey, .wrongNetworkKey:
            self.init(.malformedFrame, "\(error)")
        case .noCommonVersion, .nonceExhausted, .peerClosedHandshake, .cut, .closed: return nil
        }
    }

    /// A sync failure that is the peer's fault (docs/protocol.md §3.5); nil for a timeout (redial instead).
    init?(sync error: SyncError) {
        switch error {
        case .malformed, .invalidRecord, .excessiveRequests: self.init(.protocolViolation, "\(error)")
        case .timeout: return nil
        }
    }
}
