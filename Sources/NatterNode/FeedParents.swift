import NatterSync

/// Each feed's parent in its dissemination tree: the link that delivered the feed's highest new record, stored or
/// held for a gap (docs/protocol.md §3.3, step 6). The parent held that record first, so following parents never
/// goes round in a circle: every chain ends at the author. A copy of the feed arriving on any other link prunes that link for the feed;
/// the parent is never pruned, and losing it grafts the feed back on every link that pruned it.
///
/// Pure bookkeeping, bounded by `Limits.syncFeedParentsMax`: a feed without a parent is never pruned.
struct FeedParents {
    private var parents: [FeedKey: (link: LinkID, sequence: UInt64)] = [:]
    /// The same, by link, so a lost link finds its feeds without a scan.
    private var feedsByLink: [LinkID: Set<FeedKey>] = [:]

    var count: Int { parents.count }

    /// The parent of `feed`, if known.
    func parent(of feed: FeedKey) -> LinkID? { parents[feed]?.link }

    /// `link` delivered a new record of `feed` at `sequence`: it becomes the feed's parent if the record is above
    /// the one the parent delivered (and the table has room).
    mutating func delivered(_ feed: FeedKey, at sequence: UInt64, by link: LinkID) {
        if let old = parents[feed] {
            guard sequence > old.sequence else { return }
            if old.link != link {
                feedsByLink[old.link]?.remove(feed)
                if feedsByLink[old.link]?.isEmpty == true { feedsByLink[old.link] = nil }
            }
        } else if parents.count >= Limits.syncFeedParentsMax {
            return
        }
        parents[feed] = (link, sequence)
        feedsByLink[link, default: []].insert(feed)
    }

    /// Feeds whose parent is `link`.
    func count(of link: LinkID) -> Int { feedsByLink[link]?.count ?? 0 }

    /// Links that are the parent of some feed, ascending.
    var parentLinks: [LinkID] { feedsByLink.keys.sorted() }

    /// Forgets the parent of `feed`.
    mutating func forget(_ feed: FeedKey) {
        guard let old = parents.removeValue(forKey: feed) else { return }
        feedsByLink[old.link]?.remove(feed)
        if feedsByLink[old.link]?.isEmpty == true { feedsByLink[old.link] = nil }
    }

    /// Forgets `link` as a parent; returns the feeds it was the parent of, ascending.
    mutating func remove(_ link: LinkID) -> [FeedKey] {
        let feeds = feedsByLink.removeValue(forKey: link) ?? []
        for feed in feeds { parents[feed] = nil }
        return feeds.sorted()
    }
}
