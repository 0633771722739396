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
    /// Both sides dialled and this link lost (the one dialled by the smaller identity stays): it closes now, with
    /// no `peerUp` or `peerDown`. The driver does not redial it while the person stays linked.
    case redundantLink(AuthorID, LinkID)
    /// A link failed: handshake, channel or sync error (the peer is penalised for malformed input).
    case linkFailed(LinkID, String)
    /// The initial exchange with a peer completed in both directions.
    case caughtUp(AuthorID)
    /// Initial sync progress with a peer.
    case syncProgress(AuthorID, received: Int, expected: Int)
    /// Records became applied (from any link, or authored here), with where they sit.
    case applied([RecordRef])
    /// What changed in a conversation (new, edited, deleted and retracted lines, reactions, statuses of this node's
    /// messages, its details), as deltas from the conversation engine's change log: each change once, lines in
    /// timeline order. A front end renders these; it never re-derives a conversation to learn what changed.
    case conversation(ConversationDelta)
    /// A person's profile (display name) arrived or changed: names shown from now on use it.
    case profile(AuthorID, name: String?)
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
    /// Receipts and due re-keys this node writes on its own (`ReceiptConfiguration`).
    public var receipts = ReceiptConfiguration()

    public init() {}
}


/// Why the node could not take a request, in words a person can act on.
public enum NodeError: Error, Equatable, Sendable, CustomStringConvertible {
    /// More intents are waiting than the node queues (`WriteQueue.intentsMax`).
    case busy
    /// The node is shutting down.
    case stopped

    public var description: String {
        switch self {
        case .busy: "the node is busy writing earlier lines; wait for them and try again"
        case .stopped: "the node has stopped"
        }
    }
}
