import NatterModel
import NatterSync

/// The node's quotas (SPEC F16, DESIGN §3), each named, with its default and reason. Every one is configurable
/// (`NodeConfiguration.quotas`, `natter run` options); docs/protocol.md ("Ingest and relay quotas") lists them.
public struct QuotaConfiguration: Sendable, Equatable {
    /// New records (not already held) ingested per second from one link: 2,000 by default. About a fifth of what
    /// one core verifies, so one peer cannot take the node's whole ingest; a LAN's honest traffic is far below it.
    public var peerRecordsPerSecond: Double = 2_000
    /// Records one link may bring at once before its rate applies: 20,000 by default, so a peer catching us up on
    /// a typical history is not slowed, while a flood is held to the rate within seconds.
    public var peerRecordsBurst: Int = 20_000
    /// New records one link's priority lane brings per second (PRIORITY RECORDS, docs/protocol.md §3.7: live records
    /// of the sender and its neighbours): 200 by default. Priority deliveries are neither charged to nor held by the
    /// link's bucket (`peerRecordsPerSecond`), so a chat message passes a link whose bulk deliveries a flood has put
    /// in debt; this bucket, with the authors' buckets, bounds what the lane brings. An honest sender caps each
    /// author at 50 a second on the lane (`Limits.syncPriorityAuthorRecordsPerSecond`), and a person types a few.
    public var peerPriorityRecordsPerSecond: Double = 200
    /// Records one link's priority lane may bring at once before its rate applies: 1,000 by default (five authors'
    /// bursts on the sender's side).
    public var peerPriorityRecordsBurst: Int = 1_000
    /// New records ingested per second from one author, over all links together: 500 by default (a person types a
    /// few per second; a script or benchmark can be allowed more).
    public var authorRecordsPerSecond: Double = 500
    /// Records of one author taken at once before its rate applies: 5,000 by default (catching up on a long feed).
    public var authorRecordsBurst: Int = 5_000
    /// Authors whose bucket is remembered: 65,536 by default (about 6 MiB). Past it, buckets that have refilled are
    /// forgotten first, then the least recently used: forgetting only forgives a debt, and throwaway identities get
    /// fresh buckets anyway (the per-link bucket is what holds them).
    public var authorsTrackedMax: Int = 65_536
    /// Conversations held only as a relay (this node is not a member): 256 by default.
    public var relayConversationsMax: Int = 256
    /// Record bytes held in relay-only conversations: 64 MiB by default.
    public var relayBytesMax: Int = 64 << 20
    /// Evicted conversations remembered (their records are refused without being checked): 4,096 by default.
    public var evictionsRememberedMax: Int = 4_096
    /// How long an eviction is remembered: one hour by default; afterwards the conversation may be relayed again.
    public var evictionMemory: Duration = .seconds(3_600)
    /// Least time between two relay-quota checks (a grouped query over the log): one second.
    public var relayCheckInterval: Duration = .seconds(1)
    /// Records one link's deliveries may bring into one ingest (one store transaction, one turn of the node) while
    /// more wait: 512 by default, two sync batches. A flood arrives in windows of 2,048; checking them a part at a
    /// time lets the node read other links (a chat message) in between, so one link's flood does not hold another's
    /// messages behind a long transaction. At least one delivery is always taken.
    public var ingestRecordsPerTurnMax: Int = 512
    /// The same while the node's chat is live (it wrote a record, or took one on a priority lane, within
    /// `liveChatWindow`): 256 by default, one sync batch (a turn always takes at least one delivery whole). A
    /// priority delivery waits for the bulk turn in progress to end; under a flood on shared cores a turn of 512
    /// took 20–60 ms (docs/performance.md, "A flood through a relay"), and half of it halves that wait. Bulk
    /// throughput pays an `fsync` per batch instead of per two, only while people are talking.
    public var ingestRecordsPerLiveTurnMax: Int = 256
    /// How long after the node's last own record or priority delivery its chat counts as live: 10 s by default.
    public var liveChatWindow: Duration = .seconds(10)

    public init() {}
}

/// Per-link and per-author token buckets, checked before a delivery is verified (a header parse gives the authors).
/// A link has two: one for its bulk deliveries and a smaller one for its priority lane.
///
/// A link in debt (or one whose records' author is) has its next delivery held, unverified: the sync session
/// returns no credit for it, so the sender stops after its window (`Limits.syncWindowBatches`) and nothing is
/// dropped. The debt is charged after ingest for the records that cost a signature check (not those already held).
/// Pure: time is an argument.
struct IngestQuotas {
    let configuration: QuotaConfiguration
    private var links: [LinkID: TokenBucket] = [:]
    private var priorityLinks: [LinkID: TokenBucket] = [:]
    private var authors: [AuthorID: (bucket: TokenBucket, used: Duration)] = [:]

    init(configuration: QuotaConfiguration) {
        self.configuration = configuration
    }

    /// How long from `now` until a delivery from `link`'s `lane` with records of `authors` may be verified; nil: at
    /// once.
    func wait(link: LinkID, lane: SyncLane = .bulk, authors: some Sequence<AuthorID>, now: Duration) -> Duration? {
        var longest = (lane == .bulk ? links : priorityLinks)[link]?.waitTime(now: now)
        for author in authors {
            if let wait = self.authors[author]?.bucket.waitTime(now: now), wait > longest ?? .zero { longest = wait }
        }
        return longest
    }

    /// How many records `link`'s bucket of `lane` would let in at `now` (a link not seen yet: its whole burst).
    func available(link: LinkID, lane: SyncLane = .bulk, now: Duration) -> Int {
        guard let bucket = (lane == .bulk ? links : priorityLinks)[link] else {
            return lane == .bulk ? configuration.peerRecordsBurst : configuration.peerPriorityRecordsBurst
        }
        return max(0, Int(bucket.tokens(now: now)))
    }

    /// Charges `link`'s bucket of `lane` and each author for the records that were checked.
    mutating func charge(
        link: LinkID, lane: SyncLane = .bulk, records: Int, byAuthor: [AuthorID: Int], now: Duration
    ) {
        guard records > 0 else { return }
        if lane == .bulk {
            let fresh = bucket(configuration.peerRecordsBurst, configuration.peerRecordsPerSecond, now)
            links[link, default: fresh].take(records, now: now)
        } else {
            let fresh = bucket(configuration.peerPriorityRecordsBurst, configuration.peerPriorityRecordsPerSecond, now)
            priorityLinks[link, default: fresh].take(records, now: now)
        }
        for (author, count) in byAuthor where count > 0 {
            var entry =
                authors[author]
                ?? (bucket(configuration.authorRecordsBurst, configuration.authorRecordsPerSecond, now), now)
            entry.bucket.take(count, now: now)
            entry.used = now
            authors[author] = entry
        }
        if authors.count > configuration.authorsTrackedMax { pruneAuthors(now: now) }
    }

    /// Forgets a closed link's bucket (a new link starts full: the link limit is about one connection's pace).
    mutating func forget(link: LinkID) {
        links[link] = nil
        priorityLinks[link] = nil
    }

    var authorsTracked: Int { authors.count }

    private func bucket(_ capacity: Int, _ rate: Double, _ now: Duration) -> TokenBucket {
        TokenBucket(capacity: max(1, capacity), refillPerSecond: max(rate, .leastNonzeroMagnitude), now: now)
    }

    /// Drops buckets that have refilled since their last use, then the least recently used, down to three
    /// quarters of the bound (so pruning is rare).
    private mutating func pruneAuthors(now: Duration) {
        let refill = Double(configuration.authorRecordsBurst) / max(configuration.authorRecordsPerSecond, 1e-9)
        let full = Duration.milliseconds(Int64(min(refill, 1e9) * 1_000))
        authors = authors.filter { now - $0.value.used < full }
        let target = configuration.authorsTrackedMax * 3 / 4
        if authors.count > target {
            let oldest = authors.sorted { $0.value.used < $1.value.used }.prefix(authors.count - target)
            for (author, _) in oldest { authors[author] = nil }
        }
    }
}

/// Flood notices: one line per peer, then at most one per `interval` while the flood lasts, with a count.
struct FloodNotices {
    static let interval: Duration = .seconds(600)
    private var last: [AuthorID: Duration] = [:]
    private var heldSince: [AuthorID: Int] = [:]

    /// A delivery from `peer` was held at `now`: the line to log, if one is due.
    mutating func held(_ peer: AuthorID, now: Duration) -> String? {
        heldSince[peer, default: 0] += 1
        if let at = last[peer], now - at < Self.interval { return nil }
        let count = heldSince[peer]!
        last[peer] = now
        heldSince[peer] = 0
        if last.count > 1_024 { last = last.filter { now - $0.value < Self.interval } }
        return "peer \(peer.publicKey.fingerprint) sends records faster than its ingest quota; its link is slowed"
            + (count > 1 ? " (\(count) deliveries held since the last notice)" : "")
    }
}
