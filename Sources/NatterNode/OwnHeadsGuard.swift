import NatterModel
import NatterStore

/// Never forking its own feeds (SPEC F20, DESIGN §3): a node whose store may be behind what other nodes hold of its
/// own identity (`OwnHeadsDoubt`: an imported identity, a copied or restored data directory) writes nothing —
/// `RecordStore.appendOwn` refuses — until a peer that knows this identity has completed its initial exchange with
/// it, which brings every own record that peer holds; or until the user forces it. Own records a peer brings during
/// an initial exchange prove the store was behind, and raise the doubt until that exchange completes.
struct OwnHeadsGuard {
    private let store: RecordStore
    /// This node's identity.
    private let me: AuthorID
    /// Whether the node said that another node writes as this identity (once a run).
    private var toldOfAnotherWriter = false

    init(store: RecordStore, me: AuthorID) {
        self.store = store
        self.me = me
    }

    /// The initial exchange with `peer` completed: every record of this identity that the peer held is here now.
    /// Lifts the doubt if the peer knew this identity (its profile, the first record any identity writes, is held
    /// now); a peer that never met it taught nothing, and sending keeps waiting. `lifted`: the doubt was lifted now.
    func learned(from peer: AuthorID) -> (actions: [NodeAction], lifted: Bool) {
        guard store.ownHeadsDoubt != nil else { return ([], false) }
        let name = peer.publicKey.fingerprint
        guard holdsOwnProfile else {
            return ([
                .event(
                    .notice(
                        "synced with \(name), which holds no record of this identity: sending still waits for a peer "
                            + "that knows it (/force-write to write anyway)"))
            ], false)
        }
        do {
            try store.confirmOwnHeads()
        } catch {
            let notice = "own feeds learned from \(name), but the store cannot record it: \(error)"
            return ([.event(.notice(notice))], false)
        }
        return ([.event(.notice("own feeds learned from \(name): sending resumes"))], true)
    }

    /// Records of this identity that the store lacked arrived from a peer (`headers`, stored or held for a gap).
    /// During the link's initial exchange they show the store was behind: writing waits until the exchange
    /// completes. After it, another node is writing as this identity now: say so, once a run (waiting would not
    /// help — the other node writes on — and both writing will fork the feeds).
    mutating func arrived(_ headers: [RecordHeader], initialExchange: Bool) -> [NodeAction] {
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
        let feed = ConversationID.profileFeed(of: me)
        // Unreadable store: answer no, so sending keeps waiting rather than risk a fork.
        let feeds = (try? store.feeds(of: feed)) ?? []
        return feeds.contains { $0.author == me && $0.stored > 0 }
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
