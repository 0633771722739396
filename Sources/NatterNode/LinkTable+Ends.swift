import NatterModel
import NatterSync

/// How a link starts and ends, as the node reports it: the handshake opened with a fresh ephemeral key; admitted and
/// brought up; or forgotten, with the failure (and the misbehaviour, when it is one an honest peer never causes) or
/// the peer down, and the close.
extension LinkTable {
    /// Opens link `id` with a handshake under `configuration` and an ephemeral key drawn from `random`: its first
    /// actions (the initiator's message 1).
    mutating func open(
        _ id: LinkID, initiator: Bool, configuration: LinkConfiguration, random: inout some RandomNumberGenerator,
        now: Duration
    ) -> [LinkHandshake.Action] {
        let ephemeral = NoiseKeyPair.generate(using: &random)
        let handshake = LinkHandshake(
            role: initiator ? .initiator : .responder, configuration: configuration, ephemeralKey: ephemeral)
        return open(id, handshake, now: now)
    }

    /// Starts leaving established link `id` (`NodeCore.retire`): its close scheduled `Limits.syncLeaveGraceHandshakes`
    /// times its handshake's duration from `now`, and its session's LEAVING (nothing if it is not established).
    mutating func leave(_ id: LinkID, now: Duration) -> [SyncAction] {
        guard let handshake = read(id, { $0.handshake }) else { return [] }
        scheduleClose(id, at: now + handshake * NatterSync.Limits.syncLeaveGraceHandshakes)
        return withSession(id) { $0.leave(now: now) } ?? []
    }

    /// Link `id`'s handshake failed.
    mutating func handshakeFailed(_ id: LinkID, _ error: LinkError) -> [NodeAction] {
        remove(id)
        var out: [NodeAction] = [.event(.linkFailed(id, "handshake: \(error)"))]
        if let misbehaviour = Misbehaviour(handshake: error) { out.append(.event(.misbehaved(id, misbehaviour))) }
        return out + [.close(id)]
    }

    /// The channel of link `id` to `peer` ended: the peer said goodbye (`failure` nil), or the channel failed.
    mutating func channelEnded(_ id: LinkID, peer: AuthorID, failure: LinkError?) -> [NodeAction] {
        remove(id)
        var out = [NodeAction]()
        if let failure {
            out.append(.event(.linkFailed(id, "channel: \(failure)")))
            if let misbehaviour = Misbehaviour(channel: failure) { out.append(.event(.misbehaved(id, misbehaviour))) }
        }
        return out + [.event(.peerDown(peer, id)), .close(id)]
    }

    /// Admits link `id` to `peer` (`admit`): the link it replaces, if any, or — refused — the events and the close.
    mutating func admission(
        _ id: LinkID, peer: AuthorID, me: AuthorID, refused: Set<AuthorID>, replacedGrace: Duration, now: Duration
    ) -> Result<LinkID?, Refusal> {
        switch admit(id, peer: peer, me: me, refused: refused, now: now, replacedGrace: replacedGrace) {
        case .connectedToItself:
            return .failure(Refusal(actions: [.event(.linkFailed(id, "connected to itself")), .close(id)]))
        case .refused:
            // Closed without an event: a ban is reported once, when it is imposed, and a blocked person's node
            // redials every couple of seconds — a notice per refusal would repeat for as long as the block lasts.
            return .failure(Refusal(actions: [.close(id)]))
        case .duplicate:
            // Said, so that the driver stops redialling an address whose person is linked by the other link.
            return .failure(Refusal(actions: [.event(.redundantLink(peer, id)), .close(id)]))
        case .established(let replaced):
            return .success(replaced)
        }
    }

    /// What ends a link `admission` refused.
    struct Refusal: Error {
        let actions: [NodeAction]
    }

    /// Establishes admitted link `id` to `peer` with its channel and `session` (whose handshake took `handshake`):
    /// the events of its coming up, and of `replaced` going down.
    mutating func bringUp(
        _ id: LinkID, peer: AuthorID, me: AuthorID, channel: SecureChannel, session: SyncSession<StoreRecordSource>,
        handshake: Duration, replacing replaced: LinkID?, now: Duration
    ) -> [NodeAction] {
        establish(
            id,
            Established(
                peer: peer, initiatedBy: initiator(of: id, peer: peer, me: me), channel: channel, session: session,
                handshake: handshake, establishedAt: now))
        // The new link is up before the one it replaces goes down: the peer never looks offline in between. The old
        // one is closed now by the link's responder, and by its initiator only when the responder has closed it or
        // a handshake timeout has passed (`LinkTable.Link.replaced`).
        var out: [NodeAction] = [.event(.peerUp(peer, id))]
        if let replaced { out += [.event(.peerDown(peer, replaced))] + closeReplaced(now: now) }
        return out
    }
}
