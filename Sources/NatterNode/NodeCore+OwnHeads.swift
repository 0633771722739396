import NatterModel
public import NatterStore

/// Never forking its own feeds (SPEC F20, DESIGN §3): a node whose store may be behind what other nodes hold of its
/// own identity (`OwnHeadsDoubt`: an imported identity, a copied or restored data directory) writes nothing —
/// `RecordStore.appendOwn` refuses — until a peer that knows this identity has completed its initial exchange with
/// it, which brings every own record that peer holds; or until the user forces it. Own records a peer brings during
/// an initial exchange prove the store was behind, and raise the doubt until that exchange completes.
extension NodeCore {
    /// The initial exchange with `peer` completed: every record of this identity that the peer held is here now.
    /// Lifts the doubt if the peer knew this identity (its profile, the first record any identity writes, is held
    /// now); a peer that never met it taught nothing, and sending keeps waiting.
    func ownHeadsLearned(from peer: AuthorID, now: Duration) -> [NodeAction] {
        guard store.ownHeadsDoubt != nil else { return [] }
        let name = peer.publicKey.fingerprint
        guard holdsOwnProfile else {
            return [
                .event(
                    .notice(
                        "synced with \(name), which holds no record of this identity: sending still waits for a peer "
                            + "that knows it (/force-write to write anyway)"))
            ]
        }
        do {
            try store.confirmOwnHeads()
        } catch {
            return [.event(.notice("own feeds learned from \(name), but the store cannot record it: \(error)"))]
        }
        // Receipts and re-keys that came due meanwhile were dropped (`writeDue`): owed again from now.
        return [.event(.notice("own feeds learned from \(name): sending resumes"))] + reviewConversations(now: now)
    }

    /// Records of this identity that the store lacked arrived from a peer (`headers`, stored or held for a gap).
    /// During the link's initial exchange they show the store was behind: writing waits until the exchange
    /// completes. After it, another node is writing as this identity now: say so, once a run (waiting would not
    /// help — the other node writes on — and both writing will fork the feeds).
    func ownRecordsArrived(_ headers: [RecordHeader], initialExchange: Bool) -> [NodeAction] {
        guard let first = headers.first else { return [] }
        let place = "record \(first.sequence) of your feed in conversation \(first.conversation.shortHex)"
        if initialExchange {
            guard store.ownHeadsDoubt == nil else { return [] }
            do {
                try store.doubtOwnHeads(.peerAhead)
            } catch {
                return [.event(.notice("a peer holds records of this identity this node lacked (\(place)): \(error)"))]
            }
            return [
                .event(
                    .notice(
                        "a peer holds records of this identity that this node lacked (\(place)): sending waits until "
                            + "the sync with it completes"))
            ]
        }
        guard !toldOfAnotherWriter else { return [] }
        toldOfAnotherWriter = true
        return [
            .event(
                .notice(
                    "another node is writing as this identity (\(place) arrived from a peer): stop one of them, or "
                        + "the two will fork this identity's feeds"))
        ]
    }

    /// Whether the store holds this identity's profile feed.
    private var holdsOwnProfile: Bool {
        let feed = ConversationID.profileFeed(of: identity.author)
        // Unreadable store: answer no, so sending keeps waiting rather than risk a fork.
        let feeds = (try? store.feeds(of: feed)) ?? []
        return feeds.contains { $0.author == identity.author && $0.stored > 0 }
    }

    /// Lifts the doubt at the user's word (the REPL's `/force-write`): own writes continue from the stored heads, at
    /// the risk of forking the feeds if other nodes hold more of them. Returns the doubt lifted (nil: none stood) and
    /// what to do next (the receipts and re-keys owed are scheduled again).
    public func forceWrite(now: Duration) throws(StoreError) -> (lifted: OwnHeadsDoubt?, actions: [NodeAction]) {
        guard let lifted = try store.confirmOwnHeads() else { return (nil, []) }
        return (lifted, reviewConversations(now: now))
    }
}

extension IngestOutcome {
    /// A record the store lacked at its place in its feed: stored, or held for a gap before it.
    var isNewToFeed: Bool {
        switch self {
        case .stored, .outOfOrder: true
        case .duplicate, .forkEvidence, .rejected: false
        }
    }
}
