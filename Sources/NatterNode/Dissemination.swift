import NatterModel
import NatterSync

/// What a component asks of the sessions of some links: the actions each session answered, to be carried out by
/// `NodeCore` in order.
typealias SessionActions = [(link: LinkID, actions: [SyncAction])]

/// The per-feed dissemination trees (docs/protocol.md §3.3, step 6): which link is each feed's parent here, which
/// links are pruned for it, grafts after a lost or lagging parent, and REROUTE when this node's supply changes.
/// It decides; the links' sessions carry the PRUNE, GRAFT and REROUTE frames (`SessionActions`).
struct Dissemination {
    /// Each feed's parent link in its dissemination tree.
    private var feedParents = FeedParents()
    /// Feeds grafted back recently, and until when copies of them prune nothing: the links answer the graft with
    /// the records the node lacks, all about one round trip later whatever their distance from the author, so the
    /// parent is left to the first link to bring a *new* record (`Limits.syncTreeRegraftRace`). At most
    /// `Limits.syncFeedParentsMax` feeds (expired entries are dropped when it is full; past it, a graft races not).
    private var racing: [FeedKey: Duration] = [:]
    /// REROUTEs from links that were not the feed's parent when they came, and until when they count: if the link
    /// becomes the parent meanwhile (it brought a new record first), its supply is the changed one and the feed
    /// races as if the REROUTE came then (`Limits.syncTreeRegraftRace`). Bounded as `racing` is.
    private var reroutedBy: [FeedKey: (link: LinkID, until: Duration)] = [:]

    /// Feeds whose parent is `link` here.
    func parentCount(of link: LinkID) -> Int { feedParents.count(of: link) }

    /// The link `feed`'s live records come from here (its tree parent), if any.
    func parentLink(of feed: FeedKey) -> LinkID? { feedParents.parent(of: feed) }

    /// How much the trees use established link `id` (nil: not established, or leaving): the feeds it is the parent
    /// of here, plus the feeds whose trees cross it (`SyncSession.treeFeeds`).
    func load(of id: LinkID, in links: LinkTable) -> Int? {
        guard links.isLeaving(id) == false, let crossing = links.read(id, { $0.session.treeFeeds }) else { return nil }
        return parentCount(of: id) + crossing
    }

    /// `link` delivered these new records and copies of records already held: it becomes the parent of the new
    /// records' feeds (grafted back if we had pruned it: its records crossed our PRUNE), and it is pruned for the
    /// copies' feeds whose parent is another link, unless they race after a graft. A link being left takes no part.
    /// A feed whose parent it becomes after it sent a REROUTE of it (`reroutedBy`) races as that REROUTE asked.
    mutating func delivered(
        on id: LinkID, stored: [StoredRecord], copies: [FeedKey], links: inout LinkTable,
        storedHead: (FeedKey) -> UInt64, now: Duration
    ) -> SessionActions {
        guard let peer = links.peer(of: id), links.isLeaving(id) == false else { return [] }
        var newest = [FeedKey: UInt64]()
        for record in stored { newest[record.feed] = max(newest[record.feed] ?? 0, record.sequence) }
        var parented = [FeedKey]()
        var rerouted = [FeedKey]()
        for feed in newest.keys.sorted() {
            let before = feedParents.parent(of: feed)
            feedParents.delivered(feed, at: newest[feed]!, by: id)
            guard feedParents.parent(of: feed) == id else { continue }
            parented.append(feed)
            if before != id, let reroute = reroutedBy.removeValue(forKey: feed), reroute.link == id,
                reroute.until > now, !isRacing(feed, now: now)
            {
                rerouted.append(feed)
            }
        }
        // The author's own link is never pruned for its feed: the tree's root stays attached to every neighbour.
        // A new link races every feed for a while (`Limits.syncTreeNewLinkRace`).
        let isNew = links.read(id) { now < $0.establishedAt + Limits.syncTreeNewLinkRace } ?? false
        var prune = [FeedKey]()
        for feed in copies where !isNew && feed.author != peer {
            guard let parent = feedParents.parent(of: feed), parent != id, !isRacing(feed, now: now) else { continue }
            prune.append(feed)
        }
        let actions = links.withSession(id) { session in
            var actions = [SyncAction]()
            for feed in parented where session.hasPruned(feed) {
                actions += session.graft(feed, from: newest[feed]! + 1, now: now)
            }
            if !prune.isEmpty { actions += session.prune(prune, now: now) }
            return actions
        }
        var out: SessionActions = [(id, actions ?? [])]
        for feed in rerouted { out += regraft(feed, links: &links, storedHead: storedHead, now: now) }
        return out + announceReroute(rerouted, except: id, links: &links, now: now)
    }

    /// Feeds whose parent link is gone are grafted back on every link that pruned them, from the first record the
    /// node lacks, so their records flood again until copies prune a new tree.
    mutating func regraftLostParents(
        links: inout LinkTable, storedHead: (FeedKey) -> UInt64, now: Duration
    ) -> SessionActions {
        var out = SessionActions()
        for lost in feedParents.parentLinks where !links.isEstablished(lost) {
            let feeds = feedParents.remove(lost)
            for feed in feeds { out += regraft(feed, links: &links, storedHead: storedHead, now: now) }
            out += announceReroute(feeds, except: lost, links: &links, now: now)
        }
        return out
    }

    /// Stored records name, in their dependencies, records of other feeds: a feed the node lags in by more than
    /// `syncTreeLagMax` is no longer reached by its tree, so it forgets the parent and grafts the feed back.
    /// `heads` gives a conversation's stored feed heads.
    mutating func regraftLagging(
        _ headers: [RecordHeader], links: inout LinkTable, heads: (ConversationID) -> [AuthorID: UInt64],
        now: Duration
    ) -> SessionActions {
        var lagging = Set<FeedKey>()
        var known = [ConversationID: [AuthorID: UInt64]]()
        for header in headers {
            let conversation = header.conversation
            if known[conversation] == nil { known[conversation] = heads(conversation) }
            for dependency in header.dependencies
            where dependency.sequence > (known[conversation]?[dependency.author] ?? 0) + Limits.syncTreeLagMax {
                lagging.insert(FeedKey(conversation: conversation, author: dependency.author))
            }
        }
        var out = SessionActions()
        for feed in lagging.sorted() {
            feedParents.forget(feed)
            let head = known[feed.conversation]?[feed.author] ?? 0
            out += regraft(feed, links: &links, storedHead: { _ in head }, now: now)
        }
        out += announceReroute(lagging.sorted(), except: nil, links: &links, now: now)
        return out
    }

    /// A link is being left (by either side): it is nobody's parent from now on, and the feeds it was the parent of
    /// are grafted back on every other link that pruned them, while it still carries records.
    mutating func stopSupplying(
        _ id: LinkID, links: inout LinkTable, storedHead: (FeedKey) -> UInt64, now: Duration
    ) -> SessionActions {
        guard links.markLeaving(id) else { return [] }
        var out = SessionActions()
        let feeds = feedParents.remove(id)
        for feed in feeds { out += regraft(feed, links: &links, storedHead: storedHead, now: now) }
        out += announceReroute(feeds, except: id, links: &links, now: now)
        return out
    }

    /// The peer on `id` rerouted these feeds: those it is the parent of here, and that are not racing already, are
    /// grafted back on the other links so their next records race along every path, and the REROUTE goes on to the
    /// links this node pushes them to. A feed races once per `Limits.syncTreeRegraftRace`, so a REROUTE never
    /// circles. The others are remembered for that long (`reroutedBy`): the link may become their parent yet.
    mutating func rerouted(
        _ feeds: [FeedKey], from id: LinkID, links: inout LinkTable, storedHead: (FeedKey) -> UInt64, now: Duration
    ) -> SessionActions {
        let ours = feeds.filter { feedParents.parent(of: $0) == id && !isRacing($0, now: now) }
        if reroutedBy.count >= Limits.syncFeedParentsMax { reroutedBy = reroutedBy.filter { $0.value.until > now } }
        for feed in feeds where feedParents.parent(of: feed) != id && reroutedBy.count < Limits.syncFeedParentsMax {
            reroutedBy[feed] = (id, now + Limits.syncTreeRegraftRace)
        }
        var out = SessionActions()
        for feed in ours { out += regraft(feed, links: &links, storedHead: storedHead, now: now) }
        out += announceReroute(ours, except: id, links: &links, now: now)
        return out
    }

    // MARK: - Inside

    /// Whether `feed` was grafted back less than `Limits.syncTreeRegraftRace` ago (expired entries are dropped).
    private mutating func isRacing(_ feed: FeedKey, now: Duration) -> Bool {
        guard let until = racing[feed] else { return false }
        if until > now { return true }
        racing[feed] = nil
        return false
    }

    /// Grafts `feed` back on every link that pruned it, from the first record the node lacks.
    private mutating func regraft(
        _ feed: FeedKey, links: inout LinkTable, storedHead: (FeedKey) -> UInt64, now: Duration
    ) -> SessionActions {
        if racing.count >= Limits.syncFeedParentsMax { racing = racing.filter { $0.value > now } }
        if racing[feed] != nil || racing.count < Limits.syncFeedParentsMax {
            racing[feed] = now + Limits.syncTreeRegraftRace
        }
        let from = storedHead(feed) + 1
        var out = SessionActions()
        for id in links.establishedIDs where links.isLeaving(id) == false {
            let actions = links.withSession(id) { session in
                session.hasPruned(feed) ? session.graft(feed, from: from, now: now) : []
            }
            if let actions, !actions.isEmpty { out.append((id, actions)) }
        }
        return out
    }

    /// Tells every other link that this node's supply of `feeds` changed (it grafted them back), so the nodes that
    /// get them from here race them again (REROUTE, docs/protocol.md §3.3 step 6).
    private func announceReroute(
        _ feeds: [FeedKey], except: LinkID?, links: inout LinkTable, now: Duration
    ) -> SessionActions {
        guard !feeds.isEmpty else { return [] }
        var out = SessionActions()
        for id in links.establishedIDs where id != except && links.isLeaving(id) == false {
            if let actions = links.withSession(id, { $0.reroute(feeds, now: now) }) { out.append((id, actions)) }
        }
        return out
    }
}
