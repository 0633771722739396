import NatterModel
import NatterStore
import NatterSync

/// One lane of one link: priority lanes sort first, so their held deliveries are released first.
struct LaneKey: Hashable, Comparable {
    let link: LinkID
    let lane: SyncLane
    static func < (lhs: LaneKey, rhs: LaneKey) -> Bool { (lhs.lane, lhs.link) < (rhs.lane, rhs.link) }
}

/// When the records the sessions delivered are ingested: the ingest quotas per link and author (SPEC F16), checked
/// on the headers before any signature; how many records one turn takes (fewer while the node's chat is live); the
/// priority lane first and alone (docs/protocol.md §3.7); and which held records the store may check ahead on the
/// other cores. `NodeCore` asks it for the next step (`nextStep`, `release`) and carries out each one.
///
/// Pure: time arrives as `now`; the store is reached only through the `checkAhead` closure a caller passes.
struct IngestScheduler {
    /// What to do next.
    enum Step {
        /// Ingest these deliveries of one link and lane now, in one transaction; then call `checkHeldAhead`.
        case ingest(LaneKey, [[Record]])
        /// A delivery was held by a quota: this line for the log (at most one per peer per `FloodNotices.interval`).
        case notice(String)
    }

    /// A link's deliveries of one lane that wait, in order: until `until` (a quota), or only for the next turn
    /// (`until` now). The store is already checking the first `checkedAhead` records (`checkHeldAhead`).
    private struct HeldRun {
        var deliveries: [[Record]]
        let until: Duration
        var checkedAhead: Int
    }

    private let configuration: QuotaConfiguration
    /// Per-link and per-author buckets.
    private var quotas: IngestQuotas
    private var floodNotices = FloodNotices()
    /// Records the sessions delivered while the current input is handled, per delivery and in order. They are
    /// ingested together, in one store transaction, once the input's messages are all read: a link that carries
    /// several sync batches in one input (a node catching up) commits them at once.
    private var delivered: [(link: LinkID, lane: SyncLane, records: [Record])] = []
    /// This input's deliveries being planned (`nextStep`), and whether its bulk ones wait for the next turn.
    private var planning: [(link: LinkID, lane: SyncLane, records: [Record])] = []
    private var postponeBulk = false
    /// Deliveries held back, per link and lane. At most a sync window's worth per link and lane: the session
    /// returns no credit for them, so the sender waits.
    private var held: [LaneKey: HeldRun] = [:]
    /// When this node last wrote a record or stored one from a priority lane: its chat is live for
    /// `QuotaConfiguration.liveChatWindow` after, and bulk turns are shorter meanwhile.
    private var chatLiveAt: Duration?

    init(configuration: QuotaConfiguration) {
        self.configuration = configuration
        quotas = IngestQuotas(configuration: configuration)
    }

    /// Authors whose bucket is remembered.
    var authorsTracked: Int { quotas.authorsTracked }

    /// The earliest time a held delivery may be admitted.
    var nextDeadline: Duration? { held.values.map(\.until).min() }

    /// Whether deliveries wait only for a later turn (the per-turn cap, not a quota) at `now`.
    func hasIngestDue(now: Duration) -> Bool { held.values.contains { $0.until <= now } }

    /// A session delivered records.
    mutating func add(_ records: [Record], from link: LinkID, lane: SyncLane) {
        delivered.append((link, lane, records))
    }

    /// A link closed: its held deliveries and buckets go.
    mutating func forget(link: LinkID) {
        for lane in SyncLane.allCases { held[LaneKey(link: link, lane: lane)] = nil }
        quotas.forget(link: link)
    }

    // MARK: - The chat window

    /// Marks the chat live for a record this node wrote or took from a priority lane, if it is chat: not a profile
    /// update (a node publishes its profile as it starts, catch-up or not).
    mutating func noteChat(_ header: RecordHeader, now: Duration) {
        if header.kind != .plain { chatLiveAt = now }
    }

    /// Whether the node's chat is live (`chatLiveAt`): bulk turns are shorter meanwhile.
    func isChatLive(_ now: Duration) -> Bool {
        chatLiveAt.map { now - $0 < configuration.liveChatWindow } ?? false
    }

    // MARK: - Planning a turn

    /// Starts planning the deliveries of the input just handled. Priority deliveries go first and alone: a chat
    /// message is not read after the flood that arrived with it, nor stored, passed on and shown only after a bulk
    /// batch of it — the input's bulk deliveries wait for the next turn, due at once (`hasIngestDue`).
    mutating func startTurn() {
        postponeBulk = delivered.contains(where: { $0.lane == .priority })
        planning =
            postponeBulk ? delivered.filter { $0.lane == .priority } + delivered.filter { $0.lane == .bulk } : delivered
        delivered = []
    }

    /// The next step of the turn started with `startTurn`, or nil when it is planned through. A link's consecutive
    /// deliveries of a lane form one run; a run behind a held run of its link and lane (or bulk postponed) is held.
    mutating func nextStep(
        now: Duration, peer: (LinkID) -> AuthorID?, checkAhead: (ArraySlice<Record>) -> Void
    ) -> Step? {
        while let first = planning.first {
            let key = LaneKey(link: first.link, lane: first.lane)
            let run = planning.prefix { $0.link == key.link && $0.lane == key.lane }.map(\.records)
            planning.removeFirst(run.count)
            if held[key] != nil || (postponeBulk && key.lane == .bulk) {
                held[key, default: HeldRun(deliveries: [], until: now, checkedAhead: 0)].deliveries += run
                checkHeldAhead(key, now: now, linkUp: peer(key.link) != nil, checkAhead: checkAhead)
                continue
            }
            if let step = admit(run, from: key, checkedAhead: 0, now: now, peer: peer, checkAhead: checkAhead) {
                return step
            }
        }
        return nil
    }

    /// The lanes whose held deliveries are due at `now`, in release order.
    func dueHeld(now: Duration) -> [LaneKey] {
        held.keys.sorted().filter { held[$0]!.until <= now }
    }

    /// Releases the held deliveries of `key`: checked against the quotas again, ingested or held longer. Nil when
    /// nothing is due there, or its link is gone (then they are dropped).
    mutating func release(
        _ key: LaneKey, now: Duration, peer: (LinkID) -> AuthorID?, checkAhead: (ArraySlice<Record>) -> Void
    ) -> Step? {
        guard let run = held[key], run.until <= now else { return nil }
        held[key] = nil
        guard peer(key.link) != nil else { return nil }
        return admit(
            run.deliveries, from: key, checkedAhead: run.checkedAhead, now: now, peer: peer, checkAhead: checkAhead)
    }

    /// Has the store start checking the records of `key`'s held run that wait only for a later turn (not for a
    /// quota), as far as the link's quota allows them now: they are decoded and verified on the other cores while
    /// this turn's records are stored (`RecordStore.verifyAhead`). Nothing is checked ahead that the quota would not
    /// let in, so a flood costs no more verification than without it; the outcome of the ingest is the same.
    mutating func checkHeldAhead(
        _ key: LaneKey, now: Duration, linkUp: Bool, checkAhead: (ArraySlice<Record>) -> Void
    ) {
        guard let run = held[key], run.until <= now else { return }
        let started = startChecks(
            of: run.deliveries, from: run.checkedAhead, for: key, now: now, linkUp: linkUp, checkAhead: checkAhead)
        held[key]!.checkedAhead = started
    }

    // MARK: - Quotas

    /// Charges the link's bucket of `lane` and the authors for the records that cost a signature check (not copies
    /// of records held already), and the link alone for the records of evicted conversations refused unchecked
    /// (reported as copies): a peer that keeps sending what this node refuses (a flood into a conversation it
    /// evicted) is held to the link's rate like any other, instead of refilling its bucket meanwhile for a burst
    /// into the next conversation. An honest peer sends each of them once, since they are reported as held.
    mutating func charge(
        link: LinkID, lane: SyncLane, outcomes: [IngestOutcome], records: [Record], refused: Set<Int>, now: Duration
    ) {
        var charged = 0
        var byAuthor = [AuthorID: Int]()
        for (index, outcome) in outcomes.enumerated() {
            if refused.contains(index) {
                charged += 1
                continue
            }
            if case .duplicate = outcome { continue }
            charged += 1
            byAuthor[records[index].header.author, default: 0] += 1
        }
        quotas.charge(link: link, lane: lane, records: charged, byAuthor: byAuthor, now: now)
    }

    // MARK: - Inside

    /// Admits a link's deliveries of one lane if the quotas allow it now (the headers name the authors; no signature
    /// is checked before), or holds them and logs the flood once per peer. At most `ingestRecordsPerTurnMax`
    /// records go at once; the rest wait for the next tick, so other inputs come between. A priority delivery is
    /// checked against the link's priority bucket instead of its bulk one, and the authors' buckets as any other.
    /// `checkedAhead`: how many of the run's leading records the store is checking already.
    private mutating func admit(
        _ run: [[Record]], from key: LaneKey, checkedAhead: Int, now: Duration, peer: (LinkID) -> AuthorID?,
        checkAhead: (ArraySlice<Record>) -> Void
    ) -> Step? {
        let turnMax =
            key.lane == .bulk && isChatLive(now)
            ? configuration.ingestRecordsPerLiveTurnMax : configuration.ingestRecordsPerTurnMax
        var taken = 1
        var records = run[0].count
        while taken < run.count, records + run[taken].count <= turnMax {
            records += run[taken].count
            taken += 1
        }
        let first = Array(run.prefix(taken))
        let authors = Set(first.joined().map(\.header.author))
        guard let wait = quotas.wait(link: key.link, lane: key.lane, authors: authors, now: now) else {
            if taken < run.count {
                // The records left for later turns are handed to the workers now, behind this turn's (which are
                // started with them, in order, if they were not already): the cores check them while this turn
                // stores, instead of idling until it ends — a fresh window's first turn would otherwise check its
                // first part alone.
                let started = startChecks(
                    of: run, from: checkedAhead, for: key, now: now, linkUp: peer(key.link) != nil,
                    checkAhead: checkAhead)
                held[key] = HeldRun(
                    deliveries: Array(run[taken...]), until: now, checkedAhead: max(0, started - records))
            }
            return .ingest(key, first)
        }
        held[key] = HeldRun(deliveries: run, until: now + wait, checkedAhead: checkedAhead)
        guard let peer = peer(key.link), let line = floodNotices.held(peer, now: now) else { return nil }
        return .notice(line)
    }

    /// Starts the store checking `deliveries` of `key` from record `checkedAhead` on, as far as the link's quota
    /// would let them in now; returns how far they are started. Only the records not yet started are copied out:
    /// this runs after every delivery to a held run, which can hold a whole sync window.
    private func startChecks(
        of deliveries: [[Record]], from checkedAhead: Int, for key: LaneKey, now: Duration, linkUp: Bool,
        checkAhead: (ArraySlice<Record>) -> Void
    ) -> Int {
        guard linkUp else { return checkedAhead }
        let total = deliveries.reduce(0) { $0 + $1.count }
        let end = min(total, quotas.available(link: key.link, lane: key.lane, now: now))
        guard end > checkedAhead else { return checkedAhead }
        checkAhead(ArraySlice(deliveries.joined().dropFirst(checkedAhead).prefix(end - checkedAhead)))
        return end
    }
}
