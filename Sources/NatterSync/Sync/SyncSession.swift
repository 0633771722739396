internal import NatterCrypto
public import NatterModel

/// The sync session of one established link: pure, sans-IO and deterministic. Both ends run the same machine.
///
/// Each side sends a SUMMARY (a digest per conversation) so unchanged conversations are skipped; for those whose
/// digests differ the two exchange full feed heads (HEADS); then each streams exactly the records the other lacks,
/// per feed in sequence order, in bounded batches under the receiver's credit (RECORDS, CREDIT); after that it
/// pushes what the local node stores, at most once per link. A DONE marks the end of the initial exchange, a PING
/// keeps a quiet link alive, a REQUEST asks for a range the node found missing, and a fresh SUMMARY every
/// `Limits.syncAntiEntropyInterval` repairs what live push missed. Live records of the authors the node names as
/// priority travel in a second, small window (PRIORITY RECORDS, PRIORITY CREDIT: the priority lane, §3.7), so they
/// pass a bulk window full of a flood. Byte layouts and rules: docs/protocol.md §3.
///
/// One mutating method per input, each returning the actions to execute in order; time is an argument, the log is
/// read through `RecordSource`, nothing else is consulted. The node must execute every `deliver` by ingesting the
/// records and then calling `ingested` (and `localRecordsStored` for what was stored) before the next input.
public struct SyncSession<Source: RecordSource> {
    /// The local log, read during inputs.
    public let source: Source

    private enum Phase { case created, running, closed }

    /// What this side knows of the peer's holdings in one conversation, beyond the per-feed `peerHeld` entries.
    private enum Knowledge {
        /// The digests matched: the peer held exactly our heads when we compared. A feed without an entry that
        /// gets a new record at sequence s was at s - 1 then (the node reports every record it stores).
        case matched
        /// The peer reported its heads; a feed without an entry was empty on its side.
        case known
        /// Only the peer had the conversation; it pushes it and sends its heads, so wait for those.
        case peerOnly
    }

    /// The merge walk of one incoming summary (possibly in parts) against our conversations.
    private struct IncomingSummary {
        var ours: [ConversationID]
        var index = 0
        var lastPeer: ConversationID?
    }

    /// The parts of one conversation's heads received so far.
    private struct IncomingHeads {
        let conversation: ConversationID
        /// Our feeds of the conversation when its first part arrived.
        let local: [AuthorID: FeedHead]
        /// The peer's heads of the feeds we hold (others are not kept: memory follows our own log).
        var reported: [AuthorID: FeedHead] = [:]
        var lastAuthor: AuthorID?
    }

    /// What the session remembers of a record it delivered, to act on the store's outcome.
    private struct DeliveredRecord {
        let feed: FeedKey
        let sequence: UInt64
        let previous: RecordID
        let id: RecordID
    }

    /// A delivered batch waiting for its `ingested` report, and whether it was full (at least half the lane's record
    /// or byte cap: a stream's, `Limits.syncStreamCreditReturnBatches`).
    private struct PendingBatch {
        let records: [DeliveredRecord]
        let isFull: Bool
    }

    private var phase = Phase.created
    /// The time of the input being handled.
    private var now = Duration.zero
    /// The actions of the input being handled.
    private var actions: [SyncAction] = []

    // MARK: Liveness
    private var lastSentAt = Duration.zero
    private var lastReceivedAt = Duration.zero
    private var nextAntiEntropyAt = Duration.zero

    // MARK: Flow control
    /// One lane's credit and deliveries, in each direction.
    private struct LaneFlow {
        /// Batches we may still send before the peer returns credit.
        var sendCredit: Int
        /// Batches received whose credit we have not returned yet (pending delivery or ingested).
        var batchesHeld = 0
        /// Ingested batches whose credit is due to the peer: it rides on our next batch of the lane, or goes alone
        /// (CREDIT, PRIORITY CREDIT) once it reaches the lane's `creditReturnBatches`.
        var creditToReturn = 0
        /// Of the batches due, how many were full (`Limits.syncStreamCreditReturnBatches`).
        var fullBatchesDue = 0
        /// Delivered batches not yet reported `ingested`, oldest first.
        var pending: [PendingBatch] = []
        /// When each batch still outstanding was sent, oldest first (one per spent unit of credit): credit returns
        /// batches in the order they were sent, so the newest batch it returns times a round trip plus the
        /// receiver's work on that batch (`roundTripObserved`).
        var sentAt: [Duration] = []

        init(_ lane: SyncLane) { sendCredit = lane.windowBatches }

        /// Whether the credit due goes back alone now: half the window, or (bulk) a stream of full batches.
        func creditIsDue(_ lane: SyncLane) -> Bool {
            guard creditToReturn > 0 else { return false }
            return creditToReturn >= lane.creditReturnBatches
                || (lane == .bulk && fullBatchesDue >= Limits.syncStreamCreditReturnBatches)
        }
    }
    private var bulk = LaneFlow(.bulk)
    /// The priority lane (docs/protocol.md §3.7): live records of priority authors only.
    private var priority = LaneFlow(.priority)
    /// Feeds of priority authors whose live records wait for the priority lane. A feed is never in this queue and
    /// `pushQueue` at once, so each lane sends a feed in sequence order from `peerHeld` on.
    private var priorityQueue = FeedQueue()
    /// When the oldest record waiting in `priorityQueue` was queued (nil: none waits); it goes within `pushInterval`.
    private var prioritySince: Duration?
    /// Per author, the records it may still send on this link's priority lane: one over its rate is demoted to the
    /// bulk lane (`Limits.syncPriorityAuthorRecordsPerSecond`). Entries only for authors that were priority.
    private var priorityBuckets: [AuthorID: TokenBucket] = [:]
    /// Until when the next RECORDS waits: `pushInterval` after a batch that was not full (nil after a full one), so a
    /// burst shares frames.
    private var recordsHeldUntil: Duration?
    /// When the oldest live push still waiting was queued (nil: none waits). A live push goes once it has waited
    /// `pushInterval`, so the records stored meanwhile share its batch: no record waits longer than the interval.
    private var livePushSince: Duration?
    /// Whether the push queue holds more than live pushes (the initial exchange, a REQUEST's range): those go as
    /// soon as `recordsHeldUntil` allows, without gathering.
    private var pushUrgent = false

    // MARK: What the peer holds
    /// Per feed, the highest sequence of its chain the peer is known to hold (from its reports, records it sent,
    /// records we sent). Only raised, except by the peer's own REQUEST. Entries exist for the feeds we hold or were
    /// sent, and for at most `syncPeerFeedsTrackedMax` others the peer reported.
    private var peerHeld: [FeedKey: UInt64] = [:]
    /// Entries of `peerHeld` for feeds we did not hold when the peer reported them (bounded).
    private var peerOnlyFeedsTracked = 0
    /// Per feed, the stored sequence the peer counts us at: what we last reported, or the last record it sent us.
    /// A feed whose head is still there is left out of later heads (the peer remembers).
    private var reportedToPeer: [FeedKey: UInt64] = [:]
    private var knowledge: [ConversationID: Knowledge] = [:]
    /// Conversations whose heads we offered and whose heads from the peer have not arrived yet.
    private var awaitingHeads: Set<ConversationID> = []
    /// Feeds where the peer holds another fork: no range pushes or requests, evidence only.
    private var diverged: Set<FeedKey> = []
    /// Feeds where we may hold records the peer lacks, in the order they became so.
    private var pushQueue = FeedQueue()
    /// Fork evidence (and the conflicting chain records) waiting to be sent.
    private var evidenceQueue: [[UInt8]] = []
    /// Evidence ids that crossed this link, either way.
    private var evidenceKnown: Set<RecordID> = []
    private var evidenceSentPerFeed: [FeedKey: Int] = [:]
    /// Outstanding REQUESTs: feed → first sequence asked.
    private var outstandingRequests: [FeedKey: UInt64] = [:]
    /// Per feed, the highest sequence the peer had been sent or reported when it asked again for records at or
    /// below it (a REQUEST): records up to here are resends, counted in `resentBytes` as they go. Only feeds this
    /// side holds have entries; an entry goes once the resend passes it.
    private var resendUpTo: [FeedKey: UInt64] = [:]
    /// Bytes of records sent again at the peer's REQUEST this anti-entropy interval (`Limits.syncResentBytesMax`).
    private var resentBytes = 0
    /// The feed whose resend went past `Limits.syncResentBytesMax`: the link closes before that batch goes.
    private var excessiveResend: FeedKey?
    /// Whether the link's socket accepts writes without queueing (the node's `writable` input): batches wait
    /// while it does not, whatever the credit.
    private var isWritable = true

    // MARK: Dissemination tree (docs/protocol.md §3.3, step 6)
    /// Feeds the peer pruned: their new records are not pushed live on this link (heads, requests and anti-entropy
    /// still send what the peer lacks). At most `syncPrunedFeedsMax`; a REQUEST for the feed grafts it back.
    private var prunedByPeer: Set<FeedKey> = []
    /// Feeds we pruned: the peer does not push them to us live. At most `syncPrunedFeedsMax`.
    private var prunedByUs: Set<FeedKey> = []
    /// Whether we sent LEAVING, and whether the peer did (each at most once per session).
    private var leavingSent = false
    private var peerLeaving = false

    // MARK: Incoming exchange
    private var incomingSummary: IncomingSummary?
    private var peerSummariesCompleted = 0
    private var incomingHeads: IncomingHeads?
    private var outgoingHeads: [HeadsEntry] = []
    private var outgoingHeadFeeds = 0

    // MARK: Deliveries and the initial exchange
    /// Bulk deliveries emitted and ingested (the initial exchange counts these; priority ones are live records).
    private var deliveriesEmitted = 0
    private var deliveriesIngested = 0
    /// Deliveries emitted before the peer's DONE arrived: caught up once they are all ingested.
    private var peerDoneAfterDeliveries: Int?
    private var doneSent = false
    private var caughtUpEmitted = false
    private var recordsReceived = 0
    private var recordsExpected = 0

    /// Records read from the source at a time while filling a batch (not a protocol limit): at most this many are
    /// read and left unsent when a batch fills by bytes.
    static var readChunkRecords: Int { 32 }

    /// Longest a live push waits for others to share its RECORDS, and least time between RECORDS after one that
    /// was not full. The node passes its estimate from the handshake's duration (`Limits.syncPushInterval(upTo:
    /// handshake:)`); `.zero`, the default here, sends every push at once. It only comes down from there: the
    /// peer's DONE and each credit time a round trip (`roundTripObserved`), which a handshake with a busy peer
    /// overstates.
    public private(set) var pushInterval: Duration

    /// When `start` sent our first summary: the peer's DONE answers it (it needs our whole summary and heads), so
    /// it times a round trip at the link's start, before any credit could.
    private var startedAt = Duration.zero

    /// A session over `source`; call `start` once the link is established.
    public init(source: Source, pushInterval: Duration = .zero) {
        precondition(pushInterval >= .zero, "the push interval is not negative")
        self.source = source
        self.pushInterval = pushInterval
    }

    // MARK: - Inputs

    /// The link is established: send the summary and arm the timers.
    public mutating func start(now: Duration) -> [SyncAction] {
        precondition(phase == .created, "a sync session starts once")
        phase = .running
        begin(now)
        startedAt = now
        lastReceivedAt = now
        nextAntiEntropyAt = now + Limits.syncAntiEntropyInterval
        sendSummary()
        return finish()
    }

    /// Bytes from the peer arrived at `time` but are not handled yet (the node is busy): the link is not silent. Moves
    /// only the silence timeout (`Limits.syncSilenceTimeout`); nothing else changes until the bytes are handled.
    public mutating func heard(at time: Duration) {
        guard phase == .running else { return }
        lastReceivedAt = max(lastReceivedAt, time)
    }

    /// One application message from the peer.
    public mutating func receive(message: [UInt8], now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        lastReceivedAt = now
        do {
            try handle(try SyncMessage.decode(message))
        } catch {
            close(.malformed(error))
        }
        return finish()
    }

    /// The local node stored these records (its own, or ingested from any link, this one included), in the order
    /// it stored them. Those the peer is not known to hold are pushed to it, each at most once per link.
    ///
    /// New records of `priorityAuthors` (the node passes its own identity and its neighbours') go on the priority
    /// lane, within each author's rate, unless their feed is queued on the bulk lane already; the rest go bulk.
    public mutating func localRecordsStored(
        _ records: [StoredRecord], priorityAuthors: Set<AuthorID> = [], now: Duration
    ) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        // Buckets of authors no longer priority are forgotten (a fresh one starts full: at most one burst more).
        if priorityBuckets.count > priorityAuthors.count {
            priorityBuckets = priorityBuckets.filter { priorityAuthors.contains($0.key) }
        }
        for record in records {
            if record.isForkEvidence {
                relayEvidence(record)
            } else {
                noteStored(record, priority: priorityAuthors.contains(record.author))
            }
        }
        return finish()
    }

    /// The store's outcome for each record of the oldest `deliver` (or, for `.priority`, `deliverPriority`) not yet
    /// reported, in the delivered order. Each lane's deliveries are reported in their own order.
    public mutating func ingested(
        _ outcomes: [SyncIngestOutcome], lane: SyncLane = .bulk, now: Duration
    ) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        precondition(!self[flow: lane].pending.isEmpty, "ingested reported without a pending delivery")
        let batch = self[flow: lane].pending.removeFirst()
        if batch.isFull { self[flow: lane].fullBatchesDue += 1 }
        precondition(outcomes.count == batch.records.count, "one outcome per delivered record")
        if lane == .bulk { deliveriesIngested += 1 }
        for (record, outcome) in zip(batch.records, outcomes) {
            switch outcome {
            case .stored, .duplicate:
                break
            case .forkEvidence:
                if evidenceKnown.count < Limits.syncEvidenceTrackedMax { evidenceKnown.insert(record.id) }
                diverged.insert(record.feed)
                walkBack(from: record)
            case .outOfOrder(let missingFrom):
                // Also a gap across the lanes (the missing record still waits in a bulk delivery): the REQUEST costs
                // a few copies, and holds when the node's causal buffer could not keep the record.
                request(record.feed, from: missingFrom)
            case .rejected(let error):
                close(.invalidRecord(error))
                return finish()
            }
        }
        self[flow: lane].creditToReturn += 1
        return finish()
    }

    /// The node's causal buffer holds a record that depends on this feed from `from` on: ask the peer for it. At
    /// most `Limits.syncRequestsOutstandingMax` feeds are asked at once; more are dropped (anti-entropy repairs).
    public mutating func missing(
        conversation: ConversationID, author: AuthorID, from: UInt64, now: Duration
    ) -> [SyncAction] {
        precondition((1...NatterModel.Limits.sequenceMax).contains(from), "sequences start at 1")
        guard beginInput(now) else { return [] }
        request(FeedKey(conversation: conversation, author: author), from: from)
        return finish()
    }

    /// The node gets these feeds' new records over another link (this one just delivered a copy): ask the peer to
    /// stop pushing them live. Feeds pruned already, forked on this link, or beyond `syncPrunedFeedsMax` are left
    /// out; nothing is sent when none is left.
    public mutating func prune(_ feeds: [FeedKey], now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        var fresh = [FeedKey]()
        for feed in Set(feeds).sorted() where !prunedByUs.contains(feed) && !diverged.contains(feed) {
            guard prunedByUs.count < Limits.syncPrunedFeedsMax else { break }
            prunedByUs.insert(feed)
            fresh.append(feed)
        }
        var remaining = fresh[...]
        while !remaining.isEmpty {
            send(.prune(Array(remaining.prefix(Limits.syncPruneFeedsPerMessageMax))))
            remaining = remaining.dropFirst(Limits.syncPruneFeedsPerMessageMax)
        }
        return finish()
    }

    /// Undoes our prune of `feed`: a REQUEST from `from` on (the first sequence the node lacks), after which the
    /// peer pushes the feed live again. Nothing when the feed is not pruned on this link.
    public mutating func graft(_ feed: FeedKey, from: UInt64, now: Duration) -> [SyncAction] {
        precondition((1...NatterModel.Limits.sequenceMax).contains(from), "sequences start at 1")
        guard beginInput(now) else { return [] }
        if prunedByUs.remove(feed) != nil {
            reportedToPeer[feed] = from - 1
            send(.request(feed, from: from))
        }
        return finish()
    }

    /// This side will close the link once its grace period is over (the node's choice, e.g. to make room for
    /// another peer): tell the peer, so it grafts elsewhere the feeds this link supplies while the link still
    /// carries them. Live push goes on until the close. At most one LEAVING per session; later calls send nothing.
    public mutating func leave(now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        if !leavingSent {
            leavingSent = true
            send(.leaving)
        }
        return finish()
    }

    /// Tells the peer that our supply of these feeds changed (we lost or left their tree parent and grafted them
    /// back), so that if it gets them from us it races them again: a REROUTE of those it did not prune (the feeds
    /// we push it live). Nothing is sent when none is left.
    public mutating func reroute(_ feeds: [FeedKey], now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        var remaining = Set(feeds).filter { !prunedByPeer.contains($0) && !diverged.contains($0) }.sorted()[...]
        while !remaining.isEmpty {
            send(.reroute(Array(remaining.prefix(Limits.syncPruneFeedsPerMessageMax))))
            remaining = remaining.dropFirst(Limits.syncPruneFeedsPerMessageMax)
        }
        return finish()
    }

    /// Feeds whose trees use this link: those the peer is known in and has not pruned (we push their new records to
    /// it live, or it is where they come from). A node that drops one of its links drops the one with the fewest.
    public var treeFeeds: Int { max(0, peerHeld.count - prunedByPeer.count) }

    /// Whether we asked the peer to stop pushing `feed` live and have not grafted it back.
    public func hasPruned(_ feed: FeedKey) -> Bool { prunedByUs.contains(feed) }

    /// The link's socket stopped accepting writes without queueing (false), or started again (true). Batches wait
    /// meanwhile, whatever the credit: a peer that returns credit without reading what it was sent cannot make the
    /// node queue without end, and its next credit overflows the window (`SyncMessageError.unexpected`).
    public mutating func writable(_ writable: Bool, now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        isWritable = writable
        return finish()
    }

    /// Time passed: close a silent link, start an anti-entropy round, send a heartbeat when due.
    public mutating func tick(now: Duration) -> [SyncAction] {
        guard beginInput(now) else { return [] }
        let silence = now - lastReceivedAt
        if silence >= Limits.syncSilenceTimeout {
            close(.timeout(silence: silence))
            return finish()
        }
        if now >= nextAntiEntropyAt {
            nextAntiEntropyAt = now + Limits.syncAntiEntropyInterval
            // Requests are hints; a new round asks again through the heads if anything is still missing.
            outstandingRequests.removeAll()
            resentBytes = 0
            sendSummary()
        }
        if now - lastSentAt >= Limits.syncHeartbeatInterval {
            send(.ping)
        }
        return finish()
    }

    /// When `tick` next has something to do; nil once closed (or before `start`).
    public func nextDeadline() -> Duration? {
        guard phase == .running else { return nil }
        let timers = min(
            lastReceivedAt + Limits.syncSilenceTimeout, lastSentAt + Limits.syncHeartbeatInterval, nextAntiEntropyAt)
        var deadline = timers
        if bulk.sendCredit > 0, !pushQueue.isEmpty || !evidenceQueue.isEmpty, let held = pushHeldUntil {
            deadline = min(deadline, held)
        }
        if priority.sendCredit > 0, let held = priorityHeldUntil { deadline = min(deadline, held) }
        return deadline
    }

    /// When the push interval lets the next PRIORITY RECORDS go, if it is holding them now: the oldest waiting
    /// record goes once it has waited `pushInterval`, never longer than a live push on the bulk lane.
    private var priorityHeldUntil: Duration? {
        guard let since = prioritySince, since + pushInterval > now else { return nil }
        return since + pushInterval
    }

    /// Whether the peer is taking this side's bulk batches as they come: fewer outstanding than it returns credit
    /// for. Then the priority lane's waiting records ride in a RECORDS that goes now, instead of a PRIORITY RECORDS
    /// of their own a little later (docs/protocol.md §3.7): they would wait behind nothing. A flood keeps the bulk
    /// window full, so nothing rides then.
    private var bulkQuiet: Bool { SyncLane.bulk.windowBatches - bulk.sendCredit < SyncLane.bulk.creditReturnBatches }

    /// When the push interval lets the next RECORDS go, if it is holding them now.
    private var pushHeldUntil: Duration? {
        var until = recordsHeldUntil
        if !pushUrgent, evidenceQueue.isEmpty, let since = livePushSince {
            until = max(until ?? since, since + pushInterval)
        }
        guard let until, until > now else { return nil }
        return until
    }

    /// Whether the session has closed (after a `.close` action).
    public var isClosed: Bool { phase == .closed }

    // MARK: - Input plumbing

    private mutating func begin(_ time: Duration) {
        precondition(time >= now, "time never goes backwards")
        now = time
        actions = []
    }

    /// Starts an input; false when the session is closed and the input is ignored.
    private mutating func beginInput(_ time: Duration) -> Bool {
        precondition(phase != .created, "start the sync session before feeding it inputs")
        guard phase == .running else { return false }
        begin(time)
        return true
    }

    /// Sends what the input queued, pushes records while credit lasts, and checks the initial exchange.
    private mutating func finish() -> [SyncAction] {
        if phase == .running {
            flushHeads()
            pump()
            if pushQueue.isEmpty {
                livePushSince = nil
                pushUrgent = false
            }
            if priorityQueue.isEmpty { prioritySince = nil }
            // Credit that no batch of its lane carried goes alone once half the lane's window is due, or, on the
            // bulk lane, once the batches due were a stream of full ones (`Limits.syncStreamCreditReturnBatches`).
            for lane in SyncLane.allCases where self[flow: lane].creditIsDue(lane) {
                let due = self[flow: lane].creditToReturn
                send(lane == .bulk ? .credit(due) : .priorityCredit(due))
                self[flow: lane].batchesHeld -= due
                self[flow: lane].creditToReturn = 0
                self[flow: lane].fullBatchesDue = 0
            }
            if !doneSent, peerSummariesCompleted > 0, awaitingHeads.isEmpty, evidenceQueue.isEmpty,
                pushQueue.isEmpty
            {
                doneSent = true
                send(.done)
            }
            if !caughtUpEmitted, doneSent, let needed = peerDoneAfterDeliveries, deliveriesIngested >= needed {
                caughtUpEmitted = true
                actions.append(.caughtUp)
            }
            checkInvariants()
        }
        let result = actions
        actions = []
        return result
    }

    private func checkInvariants() {
        for lane in SyncLane.allCases {
            let flow = self[flow: lane]
            assert((0...lane.windowBatches).contains(flow.sendCredit), "credit within the window")
            assert(flow.sentAt.count == lane.windowBatches - flow.sendCredit, "one send time per outstanding batch")
            assert((0...lane.windowBatches).contains(flow.batchesHeld), "held batches within the window")
            assert(flow.pending.count + flow.creditToReturn <= flow.batchesHeld, "every held batch is pending or due")
        }
        assert(priorityQueue.members.isDisjoint(with: pushQueue.members), "a feed is queued in one lane at most")
        assert(outstandingRequests.count <= Limits.syncRequestsOutstandingMax)
        assert(evidenceKnown.count <= Limits.syncEvidenceTrackedMax)
        assert(prunedByUs.count <= Limits.syncPrunedFeedsMax && prunedByPeer.count <= Limits.syncPrunedFeedsMax)
        assert(outgoingHeads.isEmpty, "heads are flushed by the end of every input")
    }

    private mutating func close(_ error: SyncError) {
        actions.append(.close(error))
        phase = .closed
        outgoingHeads = []
        outgoingHeadFeeds = 0
    }

    private mutating func send(_ message: SyncMessage) {
        actions.append(.send(message.encoded()))
        lastSentAt = now
    }

    // MARK: - Messages

    private mutating func handle(_ message: SyncMessage) throws(SyncMessageError) {
        switch message {
        case .summary(let isFinal, let entries):
            try handleSummary(isFinal: isFinal, entries: entries)
        case .heads(let entries):
            for entry in entries { try handleHeads(entry) }
        case .records(let records, let credit):
            try receiveCredit(credit, lane: .bulk)
            try handleRecords(records, lane: .bulk)
        case .priorityRecords(let records, let credit):
            try receiveCredit(credit, lane: .priority)
            try handleRecords(records, lane: .priority)
        case .credit(let batches):
            try receiveCredit(batches, lane: .bulk)
        case .priorityCredit(let batches):
            try receiveCredit(batches, lane: .priority)
        case .request(let feed, let from):
            handleRequest(feed, from: from)
        case .done:
            guard peerDoneAfterDeliveries == nil else { throw .unexpected("a second DONE") }
            peerDoneAfterDeliveries = deliveriesEmitted
            roundTripObserved(now - startedAt)
        case .ping:
            break
        case .prune(let feeds):
            for feed in feeds where prunedByPeer.count < Limits.syncPrunedFeedsMax { prunedByPeer.insert(feed) }
        case .reroute(let feeds):
            actions.append(.rerouted(feeds))
        case .leaving:
            guard !peerLeaving else { throw .unexpected("a second LEAVING") }
            peerLeaving = true
            actions.append(.peerLeaving)
        }
    }

    private mutating func receiveCredit(_ batches: Int, lane: SyncLane) throws(SyncMessageError) {
        guard self[flow: lane].sendCredit + batches <= lane.windowBatches else {
            throw .unexpected("\(lane.prefix)credit of \(batches) batches beyond the \(lane.prefix)window")
        }
        self[flow: lane].sendCredit += batches
        guard batches > 0 else { return }
        roundTripObserved(now - self[flow: lane].sentAt[batches - 1])
        self[flow: lane].sentAt.removeFirst(batches)
    }

    /// One lane's flow state.
    private subscript(flow lane: SyncLane) -> LaneFlow {
        get { lane == .bulk ? bulk : priority }
        _modify {
            if lane == .bulk { yield &bulk } else { yield &priority }
        }
    }

    /// A batch went out and came back credited (or our first summary was answered by DONE) in `elapsed`: at least
    /// one round trip, however busy either side was during the handshake. The push interval becomes what this round
    /// trip gives if that is less (the same rule as for the handshake's duration, which is longer than a round
    /// trip), and never grows back.
    private mutating func roundTripObserved(_ elapsed: Duration) {
        let lowered = Limits.syncPushInterval(upTo: pushInterval, handshake: elapsed)
        guard lowered < pushInterval else { return }
        // The wait after the last batch was set with the old interval: it ends the new interval after that batch.
        recordsHeldUntil = recordsHeldUntil.map { $0 - (pushInterval - lowered) }
        pushInterval = lowered
    }

    // MARK: Summaries

    /// Our summary: every conversation's digest, in parts of at most `syncSummaryEntriesPerMessageMax`.
    private mutating func sendSummary() {
        var entries = [SummaryEntry]()
        for conversation in source.conversations() {
            let heads = source.feedHeads(of: conversation)
            guard !heads.isEmpty else { continue }
            entries.append(SummaryEntry(conversation: conversation, digest: .of(heads)))
            if entries.count == Limits.syncSummaryEntriesPerMessageMax {
                send(.summary(isFinal: false, entries: entries))
                entries = []
            }
        }
        send(.summary(isFinal: true, entries: entries))
    }

    /// Merge-walks the peer's summary against our conversations: equal digests are skipped, differing ones get
    /// an offer of our heads, ours alone are pushed whole, the peer's alone are left to the peer.
    private mutating func handleSummary(isFinal: Bool, entries: [SummaryEntry]) throws(SyncMessageError) {
        var walk = incomingSummary ?? IncomingSummary(ours: source.conversations())
        if let first = entries.first, let last = walk.lastPeer, !(last < first.conversation) {
            throw .unsorted(field: "summary conversations across parts")
        }
        for entry in entries {
            while walk.index < walk.ours.count, walk.ours[walk.index] < entry.conversation {
                pushWhole(walk.ours[walk.index])
                walk.index += 1
            }
            if walk.index < walk.ours.count, walk.ours[walk.index] == entry.conversation {
                compare(entry)
                walk.index += 1
            } else if knowledge[entry.conversation] == nil {
                knowledge[entry.conversation] = .peerOnly
            }
            walk.lastPeer = entry.conversation
        }
        if isFinal {
            while walk.index < walk.ours.count {
                pushWhole(walk.ours[walk.index])
                walk.index += 1
            }
            incomingSummary = nil
            peerSummariesCompleted += 1
        } else {
            incomingSummary = walk
        }
    }

    /// A conversation the peer's summary lacks: it holds none of it, so everything not already sent goes, after
    /// our heads (which let the peer count what is coming).
    private mutating func pushWhole(_ conversation: ConversationID) {
        let heads = source.feedHeads(of: conversation)
        guard !heads.isEmpty else { return }
        offerForkEvidence(conversation)
        knowledge[conversation] = .known
        var queued = false
        for head in heads {
            let feed = FeedKey(conversation: conversation, author: head.author)
            let held = peerHeld[feed] ?? 0
            peerHeld[feed] = held
            if head.sequence > held, !diverged.contains(feed) {
                queueBulk(feed)
                pushUrgent = true
                queued = true
            }
        }
        if queued { queueHeads(conversation, heads, wantsReply: false) }
    }

    private mutating func compare(_ entry: SummaryEntry) {
        offerForkEvidence(entry.conversation)
        let heads = source.feedHeads(of: entry.conversation)
        if SyncDigest.of(heads) == entry.digest {
            knowledge[entry.conversation] = .matched
            for head in heads {
                let feed = FeedKey(conversation: entry.conversation, author: head.author)
                if let held = peerHeld[feed], held < head.sequence { peerHeld[feed] = head.sequence }
            }
        } else if !awaitingHeads.contains(entry.conversation) {
            awaitingHeads.insert(entry.conversation)
            queueHeads(entry.conversation, heads, wantsReply: true)
        }
    }

    // MARK: Heads

    /// Adds one conversation's heads to the outgoing HEADS messages, in parts when they do not fit one. Feeds
    /// reported before at the same sequence are left out: the peer remembers them.
    private mutating func queueHeads(_ conversation: ConversationID, _ heads: [FeedHead], wantsReply: Bool) {
        var changed = [FeedHead]()
        for head in heads {
            let feed = FeedKey(conversation: conversation, author: head.author)
            guard reportedToPeer[feed] != head.sequence else { continue }
            reportedToPeer[feed] = head.sequence
            changed.append(head)
        }
        var remaining = changed[...]
        repeat {
            if outgoingHeads.count == Limits.syncHeadsConversationsPerMessageMax
                || outgoingHeadFeeds == Limits.syncFeedHeadsPerMessageMax
            {
                flushHeads()
            }
            let part = remaining.prefix(Limits.syncFeedHeadsPerMessageMax - outgoingHeadFeeds)
            remaining = remaining.dropFirst(part.count)
            outgoingHeads.append(
                HeadsEntry(
                    conversation: conversation, isFinal: remaining.isEmpty, wantsReply: wantsReply,
                    feeds: Array(part)))
            outgoingHeadFeeds += part.count
            // Parts of one conversation are contiguous: an unfinished part ends its message.
            if !remaining.isEmpty { flushHeads() }
        } while !remaining.isEmpty
    }

    private mutating func flushHeads() {
        guard !outgoingHeads.isEmpty else { return }
        send(.heads(outgoingHeads))
        outgoingHeads = []
        outgoingHeadFeeds = 0
    }

    private mutating func handleHeads(_ entry: HeadsEntry) throws(SyncMessageError) {
        var incoming: IncomingHeads
        if let pending = incomingHeads {
            guard pending.conversation == entry.conversation else {
                throw .unexpected("heads of another conversation before the last part of the previous one")
            }
            incoming = pending
        } else {
            let local = source.feedHeads(of: entry.conversation)
            incoming = IncomingHeads(
                conversation: entry.conversation,
                local: Dictionary(uniqueKeysWithValues: local.map { ($0.author, $0) }))
        }
        if let first = entry.feeds.first, let last = incoming.lastAuthor, !(last < first.author) {
            throw .unsorted(field: "feed authors across parts")
        }
        let counting = peerDoneAfterDeliveries == nil
        for feed in entry.feeds {
            let ours = incoming.local[feed.author]
            if counting, feed.sequence > ours?.sequence ?? 0 {
                recordsExpected += Int(feed.sequence - (ours?.sequence ?? 0))
            }
            if ours != nil {
                incoming.reported[feed.author] = feed
            } else {
                rememberPeerOnlyFeed(FeedKey(conversation: entry.conversation, author: feed.author), feed.sequence)
            }
        }
        incoming.lastAuthor = entry.feeds.last?.author ?? incoming.lastAuthor
        if entry.isFinal {
            incomingHeads = nil
            finishHeads(incoming, wantsReply: entry.wantsReply)
        } else {
            incomingHeads = incoming
        }
    }

    /// The peer holds a feed we do not: remember how far, within `syncPeerFeedsTrackedMax`, so we never send it
    /// back what it has once we get the feed elsewhere.
    private mutating func rememberPeerOnlyFeed(_ feed: FeedKey, _ sequence: UInt64) {
        if let held = peerHeld[feed] {
            if sequence > held { peerHeld[feed] = sequence }
        } else if peerOnlyFeedsTracked < Limits.syncPeerFeedsTrackedMax {
            peerHeld[feed] = sequence
            peerOnlyFeedsTracked += 1
        }
    }

    /// The peer's complete heads of one conversation: learn what it holds, push what it lacks, send evidence where
    /// it holds another record at our head's position, and answer an offer unless ours crossed it.
    private mutating func finishHeads(_ incoming: IncomingHeads, wantsReply: Bool) {
        let conversation = incoming.conversation
        let wasAwaiting = awaitingHeads.remove(conversation) != nil
        knowledge[conversation] = .known
        let local = incoming.local.values.sorted { $0.author < $1.author }
        for head in local {
            let feed = FeedKey(conversation: conversation, author: head.author)
            let reported = incoming.reported[head.author]
            let held = max(peerHeld[feed] ?? 0, reported?.sequence ?? 0)
            peerHeld[feed] = held
            guard !diverged.contains(feed) else { continue }
            if let reported, reported.sequence == head.sequence, reported.head != head.head {
                diverged.insert(feed)
                if let record = ownRecord(feed, at: head.sequence) { queueEvidence(record.bytes, id: record.id, feed) }
            } else if head.sequence > held {
                queueBulk(feed)
                pushUrgent = true
            }
        }
        if wantsReply, !wasAwaiting { queueHeads(conversation, local, wantsReply: false) }
    }

    // MARK: Records

    private mutating func handleRecords(_ records: [Record], lane: SyncLane) throws(SyncMessageError) {
        guard self[flow: lane].batchesHeld < lane.windowBatches else {
            throw .unexpected("a \(lane.prefix)batch beyond the \(lane.windowBatches)-batch \(lane.prefix)window")
        }
        self[flow: lane].batchesHeld += 1
        var delivered = [DeliveredRecord]()
        delivered.reserveCapacity(records.count)
        for record in records {
            let header = record.header
            let feed = FeedKey(conversation: header.conversation, author: header.author)
            if let held = peerHeld[feed] {
                if header.sequence > held { peerHeld[feed] = header.sequence }
            } else {
                peerHeld[feed] = header.sequence
            }
            // The peer counts us at this sequence from now on, as if we had reported it.
            if header.sequence > reportedToPeer[feed] ?? 0 { reportedToPeer[feed] = header.sequence }
            if let asked = outstandingRequests[feed], header.sequence >= asked { outstandingRequests[feed] = nil }
            delivered.append(
                DeliveredRecord(feed: feed, sequence: header.sequence, previous: header.previous, id: record.id))
        }
        // Per feed in sequence order; ties (a record and its contradiction) keep the sender's order.
        let order = delivered.indices.sorted {
            (delivered[$0].feed, delivered[$0].sequence, $0) < (delivered[$1].feed, delivered[$1].sequence, $1)
        }
        let bytes = records.reduce(0) { $0 + $1.bytes.count }
        self[flow: lane].pending.append(
            PendingBatch(
                records: order.map { delivered[$0] },
                isFull: 2 * records.count >= lane.batchRecordsMax || 2 * bytes >= lane.batchBytesMax))
        guard lane == .bulk else {
            actions.append(.deliverPriority(order.map { records[$0] }))
            return
        }
        deliveriesEmitted += 1
        recordsReceived += records.count
        actions.append(.deliver(order.map { records[$0] }))
        if !caughtUpEmitted {
            actions.append(.progress(received: recordsReceived, expected: max(recordsExpected, recordsReceived)))
        }
    }

    /// Sends batches while credit lasts: the priority lane first (unless its records go in a RECORDS now), then on
    /// the bulk lane evidence, then the queued feeds from what the peer holds on, a chunk of `readChunkRecords` from
    /// each feed in turn, and while the bulk lane is quiet the priority records still waiting (`bulkQuiet`).
    private mutating func pump() {
        guard isWritable else { return }
        // On a link that gathers records (a push interval), due priority records and waiting bulk ones go in one
        // RECORDS, the bulk records early if they were still held, instead of a PRIORITY RECORDS and a RECORDS: a
        // relay queues a batch's records on both lanes at once. Without an interval each lane sends as it is due,
        // the priority lane first.
        var bulkDue =
            pushInterval > .zero && bulkQuiet && bulk.sendCredit > 0 && !pushQueue.isEmpty && !priorityQueue.isEmpty
            && priorityHeldUntil == nil
        if !bulkDue, !pumpPriority() { return }
        while bulk.sendCredit > 0 {
            if !bulkDue, pushHeldUntil != nil { break }
            bulkDue = false
            var batch = [[UInt8]]()
            var bytes = 0
            while let next = evidenceQueue.first, batch.count < Limits.syncBatchRecordsMax,
                bytes + next.count <= Limits.syncBatchBytesMax
            {
                batch.append(evidenceQueue.removeFirst())
                bytes += next.count
            }
            fill(&batch, bytes: &bytes, lane: .bulk)
            if closedForResending() { return }
            guard !batch.isEmpty else { break }
            if bulkQuiet { fill(&batch, bytes: &bytes, lane: .priority, caps: .bulk) }
            sendBatch(batch, lane: .bulk)
            let full = batch.count == Limits.syncBatchRecordsMax || !pushQueue.isEmpty
            recordsHeldUntil = full ? nil : now + pushInterval
        }
        // What no RECORDS took (the bulk queue had nothing to send after all) goes on its own lane. (Whether the
        // link closed for resending changes nothing here: the pump ends either way.)
        _ = pumpPriority()
    }

    /// Sends PRIORITY RECORDS while the lane has credit and records due; false when the link closed for resending.
    private mutating func pumpPriority() -> Bool {
        while priority.sendCredit > 0, !priorityQueue.isEmpty, priorityHeldUntil == nil {
            var batch = [[UInt8]]()
            var bytes = 0
            fill(&batch, bytes: &bytes, lane: .priority)
            if closedForResending() { return false }
            guard !batch.isEmpty else { break }
            sendBatch(batch, lane: .priority)
        }
        return true
    }

    /// Sends one batch of `lane`, with the lane's credit that is due.
    private mutating func sendBatch(_ batch: [[UInt8]], lane: SyncLane) {
        let credit = self[flow: lane].creditToReturn
        actions.append(.send(SyncMessage.encodeRecords(batch, credit: credit, lane: lane)))
        self[flow: lane].batchesHeld -= credit
        self[flow: lane].creditToReturn = 0
        self[flow: lane].fullBatchesDue = 0
        self[flow: lane].sendCredit -= 1
        self[flow: lane].sentAt.append(now)
        lastSentAt = now
    }

    /// Closes the link when the peer's REQUESTs made this side resend more than `Limits.syncResentBytesMax` this
    /// interval; true when it did.
    private mutating func closedForResending() -> Bool {
        guard let feed = excessiveResend else { return false }
        close(.excessiveRequests(feed, bytes: resentBytes))
        return true
    }

    /// Adds records to `batch` from the lane's queued feeds, each from what the peer holds on, a chunk of at most
    /// `readChunkRecords` from each feed in turn, until the caps of `caps` (the batch's lane; `lane` when nil). On the
    /// priority lane each record takes a token of its author's bucket; an author out of tokens has its feed moved to
    /// the bulk lane. Priority records riding in a bulk batch take no token.
    private mutating func fill(_ batch: inout [[UInt8]], bytes: inout Int, lane: SyncLane, caps: SyncLane? = nil) {
        let caps = caps ?? lane
        while batch.count < caps.batchRecordsMax, let feed = queue(of: lane).front {
            if diverged.contains(feed) {
                withQueue(of: lane) { $0.popFront() }
                continue
            }
            let held = peerHeld[feed] ?? 0
            // Read in small chunks: a batch may fill by bytes after a few large records.
            let wanted = min(caps.batchRecordsMax - batch.count, Self.readChunkRecords)
            let records = source.records(
                conversation: feed.conversation, author: feed.author, from: held + 1, limit: wanted)
            var taken = 0
            var demoted = false
            for record in records {
                guard bytes + record.count <= caps.batchBytesMax else { break }
                if lane == .priority, caps == .priority, !takePriorityToken(feed.author) {
                    demoted = true
                    break
                }
                batch.append(record)
                bytes += record.count
                taken += 1
            }
            peerHeld[feed] = held + UInt64(taken)
            if let upTo = resendUpTo[feed] { countResent(feed, records[..<taken], from: held + 1, upTo: upTo) }
            if demoted {
                priorityQueue.popFront()
                queueLive(feed)
                continue
            }
            if taken < records.count { return }  // the batch is full by bytes
            if records.count < wanted {
                withQueue(of: lane) { $0.popFront() }  // the feed is exhausted
            } else {
                // More to come: the next chunk is another feed's, so feeds that depend on each other arrive
                // side by side and the receiver can apply as it stores instead of after the last feed.
                withQueue(of: lane) { $0.rotateFront() }
            }
        }
    }

    /// The queue of feeds a lane pushes from. (A switch, not a key path: `fill` runs on every push, and a key path
    /// chosen at run time is instantiated by the runtime each time: about 3 % of a fan-out member's CPU.)
    private func queue(of lane: SyncLane) -> FeedQueue {
        switch lane {
        case .bulk: pushQueue
        case .priority: priorityQueue
        }
    }

    private mutating func withQueue(of lane: SyncLane, _ body: (inout FeedQueue) -> Void) {
        switch lane {
        case .bulk: body(&pushQueue)
        case .priority: body(&priorityQueue)
        }
    }

    /// Counts the records of `feed` just taken from sequence `first` on that are resends (at or below `upTo`).
    private mutating func countResent(_ feed: FeedKey, _ taken: ArraySlice<[UInt8]>, from first: UInt64, upTo: UInt64) {
        for (offset, record) in taken.enumerated() where first + UInt64(offset) <= upTo { resentBytes += record.count }
        if first + UInt64(taken.count) > upTo { resendUpTo[feed] = nil }
        if resentBytes > Limits.syncResentBytesMax, excessiveResend == nil { excessiveResend = feed }
    }

    /// Takes one of `author`'s priority tokens at `now`; false when it is over its rate.
    private mutating func takePriorityToken(_ author: AuthorID) -> Bool {
        var bucket =
            priorityBuckets[author]
            ?? TokenBucket(
                capacity: Limits.syncPriorityAuthorRecordsBurst,
                refillPerSecond: Limits.syncPriorityAuthorRecordsPerSecond, now: now)
        let taken = bucket.takeIfAvailable(now: now)
        priorityBuckets[author] = bucket
        return taken
    }

    // MARK: Live push, requests, evidence

    /// A record the node stored: pushed live on the priority lane when `priority` and its feed is not queued on the
    /// bulk lane already, else on the bulk lane.
    private mutating func noteStored(_ record: StoredRecord, priority: Bool) {
        let feed = record.feed
        guard !diverged.contains(feed), !prunedByPeer.contains(feed) else { return }
        let held: UInt64
        if let known = peerHeld[feed] {
            held = known
        } else {
            switch knowledge[feed.conversation] {
            case .matched: held = record.sequence - 1
            case .known: held = 0
            case .peerOnly: return  // the peer's heads will tell
            case nil:
                // Not compared yet: the summary walk (or the heads it awaits) will account for this record.
                if awaitingHeads.contains(feed.conversation) { return }
                if peerSummariesCompleted == 0 {
                    guard let last = incomingSummary?.lastPeer, feed.conversation <= last else { return }
                }
                held = 0  // a conversation new since the comparison: the peer had none of it
            }
        }
        guard record.sequence > held else { return }
        peerHeld[feed] = held
        if priority, !pushQueue.contains(feed) {
            priorityQueue.add(feed)
            if prioritySince == nil { prioritySince = now }
        } else {
            queueLive(feed)
        }
    }

    /// Queues `feed` on the bulk lane as a live push (it waits up to `pushInterval` for others to share its batch).
    private mutating func queueLive(_ feed: FeedKey) {
        queueBulk(feed)
        if livePushSince == nil { livePushSince = now }
    }

    /// Queues `feed` on the bulk lane, taking it off the priority lane if it waits there: what the initial exchange,
    /// a REQUEST or a demotion sends is bulk.
    private mutating func queueBulk(_ feed: FeedKey) {
        priorityQueue.remove(feed)
        pushQueue.add(feed)
    }

    /// Relays fork evidence the node stored, with our record at the same position, so the peer sees the fork
    /// whichever branch it holds.
    private mutating func relayEvidence(_ record: StoredRecord) {
        let id = RecordID.of(record.bytes)
        // Evidence this link delivered goes no further back, even if the node reports it before `ingested`.
        let delivered = [bulk, priority].flatMap(\.pending).contains { $0.records.contains { $0.id == id } }
        guard !delivered else { return }
        queueEvidence(record.bytes, id: id, record.feed)
        queueContradicted(by: record, id: id)
    }

    /// Sends the peer the fork evidence held for `conversation`, each piece with our record at its position, once per
    /// session (`queueEvidence` remembers what crossed). A fork does not change the heads or the summary digest, so a
    /// node that was away when the evidence was relayed would otherwise hold one branch, and a log digest of its own,
    /// for good; every summary round offers it again to links that have not had it.
    private mutating func offerForkEvidence(_ conversation: ConversationID) {
        for record in source.forkEvidence(of: conversation) {
            let id = RecordID.of(record.bytes)
            queueEvidence(record.bytes, id: id, record.feed)
            queueContradicted(by: record, id: id)
        }
    }

    /// Queues our records that held evidence contradicts, as `walkBack` does for evidence the peer sent: ours at its
    /// position, and ours before it when it names another predecessor. The second is all a peer holding the
    /// evidence's branch lacks when the evidence only extends the other branch (ours ends at the fork).
    private mutating func queueContradicted(by record: StoredRecord, id: RecordID) {
        // `try?`: held evidence was checked when the store kept it; bytes that no longer parse contradict nothing.
        guard let header = try? RecordCodec.storedHeader(record.bytes) else { return }
        walkBack(from: DeliveredRecord(feed: record.feed, sequence: record.sequence, previous: header.previous, id: id))
    }

    /// A record that contradicts ours (the peer sent it, or we hold it as evidence): send ours at its position, and
    /// the one before when the two name different predecessors, so both sides walk back to the first divergence
    /// (bounded per feed).
    private mutating func walkBack(from record: DeliveredRecord) {
        if let ours = ownRecord(record.feed, at: record.sequence), ours.id != record.id {
            queueEvidence(ours.bytes, id: ours.id, record.feed)
        }
        if record.sequence >= 2, let prior = ownRecord(record.feed, at: record.sequence - 1),
            prior.id != record.previous
        {
            queueEvidence(prior.bytes, id: prior.id, record.feed)
        }
    }

    private mutating func queueEvidence(_ bytes: [UInt8], id: RecordID, _ feed: FeedKey) {
        guard !evidenceKnown.contains(id), evidenceKnown.count < Limits.syncEvidenceTrackedMax,
            evidenceSentPerFeed[feed, default: 0] < Limits.syncForkEvidencePerFeedMax
        else { return }
        evidenceKnown.insert(id)
        evidenceSentPerFeed[feed, default: 0] += 1
        evidenceQueue.append(bytes)
    }

    /// Our chain record of `feed` at `sequence`, if held.
    private func ownRecord(_ feed: FeedKey, at sequence: UInt64) -> Record? {
        guard
            let bytes = source.records(
                conversation: feed.conversation, author: feed.author, from: sequence, limit: 1
            ).first,
            let record = try? Record.decode(bytes), record.header.sequence == sequence
        else { return nil }
        return record
    }

    private mutating func request(_ feed: FeedKey, from: UInt64) {
        guard !diverged.contains(feed) else { return }
        if let asked = outstandingRequests[feed] {
            guard from < asked else { return }
        } else {
            guard outstandingRequests.count < Limits.syncRequestsOutstandingMax else { return }
        }
        outstandingRequests[feed] = from
        // The peer will count us at `from - 1` for this feed, and push it live again if we had pruned it.
        reportedToPeer[feed] = from - 1
        prunedByUs.remove(feed)
        send(.request(feed, from: from))
    }

    /// The peer lacks this feed from `from` on: believe it, push from there, and push it live again if it was
    /// pruned (a REQUEST is also the graft). What it was already sent or reported is sent again, and its bytes are
    /// counted as it goes (`fill`): more than `Limits.syncResentBytesMax` in an interval closes the link.
    private mutating func handleRequest(_ feed: FeedKey, from: UInt64) {
        prunedByPeer.remove(feed)
        guard !diverged.contains(feed),
            let head = source.feedHeads(of: feed.conversation).first(where: { $0.author == feed.author }),
            head.sequence >= from
        else { return }
        if let held = peerHeld[feed], from <= held { resendUpTo[feed] = max(resendUpTo[feed] ?? 0, held) }
        peerHeld[feed] = min(peerHeld[feed] ?? (from - 1), from - 1)
        queueBulk(feed)
        pushUrgent = true
    }
}

/// A first-in first-out queue of distinct feeds.
struct FeedQueue {
    private var items: [FeedKey] = []
    private var head = 0
    private(set) var members: Set<FeedKey> = []

    var isEmpty: Bool { head == items.count }
    var front: FeedKey? { isEmpty ? nil : items[head] }

    func contains(_ feed: FeedKey) -> Bool { members.contains(feed) }

    /// Takes `feed` out of the queue, wherever it is (linear: for short queues).
    mutating func remove(_ feed: FeedKey) {
        guard members.remove(feed) != nil, let index = items[head...].firstIndex(of: feed) else { return }
        items.remove(at: index)
    }

    /// Appends `feed` unless it is queued already.
    mutating func add(_ feed: FeedKey) {
        if members.insert(feed).inserted { items.append(feed) }
    }

    /// Moves the front feed to the back.
    mutating func rotateFront() {
        guard let feed = front else { return }
        popFront()
        add(feed)
    }

    mutating func popFront() {
        members.remove(items[head])
        head += 1
        if head >= 1024, head * 2 >= items.count {
            items.removeFirst(head)
            head = 0
        }
    }
}
