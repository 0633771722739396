import NatterCrypto
import NatterModel
import NatterSync

/// The node's links, each in its phase: the Noise handshake, then an established link with its secure channel and
/// sync session. It owns the one-link-per-peer rule, what goes on the wire of a link (every application message is
/// sealed here) and how a link ends (goodbye, close, events); `NodeCore` decides what to do with what a link brings.
///
/// Pure bookkeeping: time arrives as `now`, nothing here reads a clock or does I/O.
struct LinkTable {
    /// An established link: who is on the other end, its channel and its session.
    struct Established {
        let peer: AuthorID
        /// Who dialled this link: decides which link survives when both sides dialled at once.
        let initiatedBy: AuthorID
        var channel: SecureChannel
        var session: SyncSession<StoreRecordSource>
        /// How long the handshake took (one to two round trips): the scale of the link's grace period.
        let handshake: Duration
        /// When the link came up: for `Limits.syncTreeNewLinkRace` its copies prune nothing.
        let establishedAt: Duration
        /// Whether either side is leaving the link (LEAVING sent or received): it supplies no feed any more and
        /// takes no new parent role; the other links were grafted for what it supplied.
        var leaving = false
        /// When this side closes the link it is leaving (nil: not leaving it, or the peer is the one leaving).
        var closeAt: Duration?
        /// Whether the initial exchange completed (the session's `caughtUp`): own records that arrive before it
        /// show the store was behind; after it, that another node is writing as this identity (OwnHeadsGuard).
        var caughtUp = false
    }

    /// An established link's state, boxed: the table mutates it in place (`withEstablished`) instead of moving it
    /// out of the dictionary and back, which copied and destroyed the whole `Established` and hashed its id twice at
    /// every message in or out of every link (4 % of a lab run). Held only by `links`: nothing hands a box out.
    private final class EstablishedBox {
        var value: Established
        init(_ value: Established) { self.value = value }
    }

    private enum Link {
        case handshaking(LinkHandshake, HandshakeTimes)
        case established(EstablishedBox)
        /// Replaced by a newer link to the same peer: silent (what arrives on it is ignored) and left open until the
        /// peer closes it or `closeAt` passes. The peer replaces it too when its side of the new handshake completes;
        /// had this side closed it at once, that close could reach the peer first (two connections keep no order
        /// between them) and the peer would see the person go offline and come back.
        case replaced(closeAt: Duration)
    }

    /// When a handshake opened and when bytes last arrived on its connection. It is abandoned `timeout` after the
    /// later of the two, and never later than `deadlineMaxTimeouts` timeouts after it opened: a peer whose messages
    /// arrive while this node is too busy to handle them at once is not taken for a stalled one, and a peer that
    /// trickles bytes holds a handshake slot twice the timeout at most.
    struct HandshakeTimes: Equatable {
        /// How many handshake timeouts a handshake lasts at most, however recently its peer was heard.
        static let deadlineMaxTimeouts: Int64 = 2

        let openedAt: Duration
        private(set) var heardAt: Duration

        init(openedAt: Duration) {
            self.openedAt = openedAt
            heardAt = openedAt
        }

        mutating func heard(at time: Duration) { heardAt = max(heardAt, time) }

        func deadline(timeout: Duration) -> Duration {
            min(heardAt + timeout, openedAt + timeout * Self.deadlineMaxTimeouts)
        }
    }

    /// What a finished handshake means for the link table (`admit`).
    enum Completion {
        /// The link is to be established; `replaced` is an older link to the same peer it replaces (no longer
        /// established here: it is closed later, `Link.replaced`).
        case established(replaced: LinkID?)
        /// A link to this node's own identity (it dialled itself, e.g. through its own beacon).
        case connectedToItself
        /// The peer is refused (banned or blocked): closed without an event.
        case refused
        /// Both sides dialled: the other link is kept, this one closed without an event.
        case duplicate
    }

    /// Written only by `store` and `withEstablished`, which keep `summaries` in step.
    private var links: [LinkID: Link] = [:]
    /// What the table's readers and `nextDeadline` need of each link, kept beside it (`store`): reading these
    /// instead of the links themselves copies no `Established` (its session's tables: retains and releases of
    /// every buffer, once per link after every turn; 6 % of a fan-out member's CPU).
    private var summaries: [LinkID: Summary] = [:]

    private struct Summary {
        enum Phase {
            case handshaking(HandshakeTimes)
            /// The peer, and when this side closes the link it is leaving (`Established.closeAt`).
            case established(AuthorID, closeAt: Duration?)
            /// When the replaced link is closed.
            case replaced(closeAt: Duration)
        }
        let phase: Phase
        /// When the link next has work, handshake timeouts aside (they depend on the caller's timeout).
        let wakeAt: Duration?

        init(phase: Phase, wakeAt: Duration?) {
            self.phase = phase
            self.wakeAt = wakeAt
        }

        init(_ link: Link) {
            switch link {
            case .handshaking(_, let times): self.init(phase: .handshaking(times), wakeAt: nil)
            case .established(let box): self.init(box.value)
            case .replaced(let closeAt): self.init(phase: .replaced(closeAt: closeAt), wakeAt: closeAt)
            }
        }

        init(_ established: borrowing Established) {  // borrowing: no copy of the link (`run`)
            let wakeAt: Duration? =
                switch (established.session.nextDeadline(), established.closeAt) {
                case (let session?, let close?): min(session, close)
                case (let session, let close): session ?? close
                }
            self.init(phase: .established(established.peer, closeAt: established.closeAt), wakeAt: wakeAt)
        }
    }

    private var roles: [LinkID: LinkHandshake.Role] = [:]
    /// Application messages sent, by kind (`SyncFrameKind.name(of:)`), since the table was made.
    private(set) var messagesSentByKind: [String: Int] = [:]
    /// Told the kind of each application message sealed (`NodeCore.sentMessageTap`).
    var sentMessageTap: ((LinkID, String, [UInt8]) -> Void)?

    /// Changes whenever the set of established links does: what follows that set (`FileTransfer.maintain`) compares
    /// it after each input instead of the links themselves.
    private(set) var establishedGeneration: UInt64 = 0

    /// Sets (nil: removes) link `id`, and its summary.
    private mutating func store(_ id: LinkID, _ link: Link?) {
        let wasEstablished = isEstablished(id)
        if let link {
            summaries[id] = Summary(link)
            links[id] = link
        } else {
            links[id] = nil
            summaries[id] = nil
        }
        if isEstablished(id) != wasEstablished { establishedGeneration &+= 1 }
    }

    // MARK: - Reading

    /// Peers with an established link, and the link.
    var connectedPeers: [AuthorID: LinkID] {
        var peers = [AuthorID: LinkID]()
        for (id, summary) in summaries {
            if case .established(let peer, _) = summary.phase { peers[peer] = id }
        }
        return peers
    }

    /// Established links and their peers.
    var establishedLinks: [LinkID: AuthorID] {
        var result = [LinkID: AuthorID]()
        for (id, summary) in summaries {
            if case .established(let peer, _) = summary.phase { result[id] = peer }
        }
        return result
    }

    /// Every link, established or not, ascending.
    var ids: [LinkID] { links.keys.sorted() }

    /// Established links, ascending.
    var establishedIDs: [LinkID] {
        summaries.compactMap { id, summary in if case .established = summary.phase { id } else { nil } }.sorted()
    }

    func isEstablished(_ id: LinkID) -> Bool {
        if case .established = summaries[id]?.phase { return true }
        return false
    }

    func isHandshaking(_ id: LinkID) -> Bool {
        if case .handshaking = summaries[id]?.phase { return true }
        return false
    }

    /// The peer of an established link.
    func peer(of id: LinkID) -> AuthorID? {
        if case .established(let peer, _) = summaries[id]?.phase { return peer }
        return nil
    }

    /// Whether an established link is being left (nil: not established).
    func isLeaving(_ id: LinkID) -> Bool? {
        if case .established(let box) = links[id] { return box.value.leaving }
        return nil
    }

    /// Reads an established link (nil: not established).
    func read<T>(_ id: LinkID, _ body: (Established) -> T) -> T? {
        if case .established(let box) = links[id] { return body(box.value) }
        return nil
    }

    /// When the links next have work: handshake timeouts, session timers, grace periods of links being left.
    func nextDeadline(handshakeTimeout: Duration) -> Duration? {
        var earliest: Duration?
        for summary in summaries.values {
            var wake = summary.wakeAt
            if case .handshaking(let times) = summary.phase { wake = times.deadline(timeout: handshakeTimeout) }
            if let wake { earliest = min(earliest ?? wake, wake) }
        }
        return earliest
    }

    // MARK: - Handshakes

    /// A connection opened: its handshake starts (this node speaks first when it dialled).
    mutating func open(_ id: LinkID, _ handshake: LinkHandshake, now: Duration) -> [LinkHandshake.Action] {
        var handshake = handshake
        let actions = handshake.start()  // the responder's start sends nothing: it waits for message 1
        store(id, .handshaking(handshake, HandshakeTimes(openedAt: now)))
        roles[id] = handshake.role
        return actions
    }

    /// When the handshake of `id` started (nil: not in its handshake).
    func handshakeOpenedAt(_ id: LinkID) -> Duration? {
        if case .handshaking(let times) = summaries[id]?.phase { return times.openedAt }
        return nil
    }

    /// Bytes arrived on link `id` at `time` (perhaps before a busy node could handle them): a handshake's deadline
    /// moves (`HandshakeTimes`), an established session counts them as the peer alive.
    mutating func heard(_ id: LinkID, at time: Duration) {
        if case .handshaking(let handshake, var times) = links[id] {
            times.heard(at: time)
            store(id, .handshaking(handshake, times))
            return
        }
        _ = withSession(id) { $0.heard(at: time) }
    }

    /// Bytes for a link in its handshake.
    mutating func receiveHandshake(_ id: LinkID, _ bytes: [UInt8]) -> [LinkHandshake.Action] {
        guard case .handshaking(var handshake, let times) = links[id] else { return [] }
        let actions = handshake.receive(bytes)
        store(id, .handshaking(handshake, times))
        return actions
    }

    /// A handshake finished with `peer`: applies the rules of who may be linked (not itself, not a refused peer,
    /// one link per peer). When both sides dialled, both ends keep the link dialled by the smaller identity; a redial
    /// by the same side replaces the old link, which is probably dead (no longer established here: the caller reports
    /// it down and closes it with `closeReplaced` — at once on the responder's side, on the initiator's when the peer
    /// closes it or `replacedGrace` from `now`). A link
    /// refused here is forgotten; one admitted is established by `establish`.
    mutating func admit(
        _ id: LinkID, peer: AuthorID, me: AuthorID, refused: Set<AuthorID>, now: Duration, replacedGrace: Duration
    ) -> Completion {
        if peer == me {
            remove(id)
            return .connectedToItself
        }
        if refused.contains(peer) {
            remove(id)
            return .refused
        }
        var replaced: LinkID?
        if let existingID = connectedPeers[peer], case .established(let existing) = links[existingID] {
            let initiatedBy = initiator(of: id, peer: peer, me: me)
            let existingInitiatedBy = existing.value.initiatedBy
            guard initiatedBy == existingInitiatedBy || initiatedBy < existingInitiatedBy else {
                remove(id)
                return .duplicate
            }
            // The initiator's side completes first (it sends message 3): it waits for the responder, which closes
            // the old link on completing (by then both ends hold the new one), or for the grace to pass.
            store(existingID, .replaced(closeAt: roles[id] == .initiator ? now + replacedGrace : now))
            roles[existingID] = nil
            replaced = existingID
        }
        return .established(replaced: replaced)
    }

    /// Who dialled link `id`: this node when it was the initiator, else the peer.
    func initiator(of id: LinkID, peer: AuthorID, me: AuthorID) -> AuthorID {
        roles[id] == .initiator ? me : peer
    }

    /// Establishes a link `admit` admitted.
    mutating func establish(_ id: LinkID, _ established: Established) {
        store(id, .established(EstablishedBox(established)))
    }

    // MARK: - Established links

    /// Runs `body` on an established link in place, in its box (nil when not established): the box is the only
    /// reference to each buffer and dictionary of the link (the session's per-feed tables), so nothing is copied.
    private mutating func withEstablished<T>(_ id: LinkID, _ body: (inout Established) -> T) -> T? {
        guard case .established(let box)? = links[id] else { return nil }
        let (result, summary) = Self.run(body, on: &box.value)
        summaries[id] = summary
        return result
    }

    /// `body` on `established`, then its summary, both within the one access to the box. The summary borrows the
    /// link: made from an owned copy, it retained every buffer of the link after every call (1.3 % of a fan-out
    /// member's samples, 1.8 % of a 25-node lab run's).
    private static func run<T>(_ body: (inout Established) -> T, on established: inout Established) -> (T, Summary) {
        let result = body(&established)
        return (result, Summary(established))
    }

    /// Bytes for an established link: the channel's events (messages, goodbye, failure).
    mutating func receiveChannel(_ id: LinkID, _ bytes: [UInt8]) -> [SecureChannel.Event] {
        withEstablished(id) { $0.channel.receive(bytes) } ?? []
    }

    /// Whether link `id` has timed work at `now` (its summary's `wakeAt`: the session's `nextDeadline`, or the end of
    /// its grace period, has come). A session's `tick` does nothing before its deadline, so the core's tick visits
    /// only these: a member with 24 links otherwise ran every session's tick on every node tick.
    func isDue(_ id: LinkID, now: Duration) -> Bool {
        summaries[id]?.wakeAt.map { $0 <= now } ?? false
    }

    /// Runs `body` on the session of an established link; nil when the link is not established.
    mutating func withSession<T>(_ id: LinkID, _ body: (inout SyncSession<StoreRecordSource>) -> T) -> T? {
        withEstablished(id) { body(&$0.session) }
    }

    /// Marks an established link as being left; returns whether it was established.
    mutating func markLeaving(_ id: LinkID) -> Bool {
        withEstablished(id) { $0.leaving = true } != nil
    }

    /// Marks an established link's initial exchange as complete (`Established.caughtUp`).
    mutating func markCaughtUp(_ id: LinkID) {
        _ = withEstablished(id) { $0.caughtUp = true }
    }

    /// Whether the initial exchange on link `id` completed (false for a link not established).
    func isCaughtUp(_ id: LinkID) -> Bool {
        read(id) { $0.caughtUp } ?? false
    }

    /// Has this side close an established link at `closeAt` (a link it is leaving).
    mutating func scheduleClose(_ id: LinkID, at closeAt: Duration) {
        _ = withEstablished(id) { $0.closeAt = closeAt }
    }

    /// Sends one application message on an established link (nothing if the link is gone): a session's, a file
    /// frame or a TYPING frame. A channel that cannot seal it any more ends the link.
    mutating func send(_ message: [UInt8], on id: LinkID) -> [NodeAction] {
        let sealed = withEstablished(id) { established -> Result<[UInt8], any Error> in
            Result { try established.channel.send(message) }
        }
        switch sealed {
        case nil:
            return []
        case .success(let bytes):
            let kind = SyncFrameKind.name(of: message)
            messagesSentByKind[kind, default: 0] += 1
            sentMessageTap?(id, kind, bytes)
            return [.send(id, bytes)]
        case .failure(let error):
            let peer = peer(of: id)
            remove(id)
            return [.event(.linkFailed(id, "send: \(error)"))] + (peer.map { [.event(.peerDown($0, id))] } ?? [])
                + [.close(id)]
        }
    }

    // MARK: - Ending links

    /// Forgets a link without a word (a handshake that failed, a link closed by the transport).
    mutating func remove(_ id: LinkID) {
        store(id, nil)
        roles[id] = nil
    }

    /// The link closed (by the transport): forgets it; the peer of an established link, for its `peerDown`.
    mutating func closed(_ id: LinkID) -> AuthorID? {
        roles[id] = nil
        let peer = peer(of: id)
        store(id, nil)
        return peer
    }

    /// Ends one established link cleanly: the goodbye, then the close.
    mutating func close(_ id: LinkID) -> [NodeAction] {
        guard case .established(let box) = links[id] else { return [] }
        var out = [NodeAction]()
        // A channel that cannot seal the goodbye (its nonces exhausted) closes without it: the peer sees a cut.
        if let goodbye = try? box.value.channel.sendGoodbye() { out.append(.send(id, goodbye)) }
        remove(id)
        return out + [.event(.peerDown(box.value.peer, id)), .close(id)]
    }

    /// Ends link `id` if its time is up at `now`: a handshake not done within `handshakeTimeout` (failed, and a
    /// `stalledHandshake` misbehaviour — the node scores it only while the transport's handshake slots are under
    /// load, when it held a place), or a link being left whose close is due (with the goodbye). Nil: it goes on.
    mutating func endIfDue(_ id: LinkID, now: Duration, handshakeTimeout: Duration) -> [NodeAction]? {
        // From the summary: a switch over the link itself would copy its session, for every link at every tick.
        switch summaries[id]?.phase {
        case .handshaking(let times)?:
            guard now >= times.deadline(timeout: handshakeTimeout) else { return [] }
            remove(id)
            let stalled = Misbehaviour(.stalledHandshake, "no handshake within \(handshakeTimeout)")
            return [.event(.linkFailed(id, "handshake timed out")), .event(.misbehaved(id, stalled)), .close(id)]
        case .established(_, let closeAt)?:
            guard let closeAt, now >= closeAt else { return nil }
            return close(id)
        case .replaced, nil:
            return []
        }
    }

    /// Closes the replaced links whose grace has passed (`Link.replaced`).
    mutating func closeReplaced(now: Duration) -> [NodeAction] {
        let due = summaries.compactMap { id, summary -> LinkID? in
            if case .replaced(let closeAt) = summary.phase, now >= closeAt { id } else { nil }
        }
        for id in due { remove(id) }
        return due.sorted().map { .close($0) }
    }

    /// Ends every link: the goodbye on each established one (so the peer tells this close from a crash or a cut),
    /// then the close.
    mutating func closeAll() -> [NodeAction] {
        var out = [NodeAction]()
        for id in links.keys.sorted() {
            if case .established = links[id] {
                out += close(id)
                continue
            }
            remove(id)
            out.append(.close(id))
        }
        return out
    }

    /// Closes an established link on a sync failure (a session's `close`, a malformed TYPING or file frame): with a
    /// goodbye, so the peer knows it was us, and a `misbehaved` event when the failure is the peer's fault.
    mutating func fail(_ id: LinkID, _ error: SyncError) -> [NodeAction] {
        guard case .established(let box) = links[id] else { return [] }
        remove(id)
        var out = [NodeAction]()
        // As in `close`: a goodbye that cannot be sealed is left out.
        if let goodbye = try? box.value.channel.sendGoodbye() { out.append(.send(id, goodbye)) }
        out.append(.event(.linkFailed(id, "sync: \(error)")))
        if let misbehaviour = Misbehaviour(sync: error) { out.append(.event(.misbehaved(id, misbehaviour))) }
        return out + [.event(.peerDown(box.value.peer, id)), .close(id)]
    }
}
