import NatterCrypto
import NatterModel
import NatterStore
import NatterSync

extension Duration {
    /// The duration in whole milliseconds (rounded down).
    var wholeMilliseconds: Int64 {
        components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000
    }
}

/// The relay quota (SPEC F16, docs/protocol.md §3.6): a tally of what relay-only conversations hold, their eviction
/// (whole conversations, least recently active first), and the memory of evicted conversations, whose records are
/// refused unchecked — except a commit inviting this node, and the feeds of this node's neighbours, unless the
/// conversation was evicted again while remembered.
struct RelayGuard {
    private let store: RecordStore
    private let member: AuthorID
    private let configuration: QuotaConfiguration
    /// Conversations the relay quota evicted (also in the store), with when (wall-clock milliseconds).
    private var evicted: [ConversationID: Int64] = [:]
    /// Evicted conversations that were evicted again while remembered: even their neighbours' feeds alone do not fit
    /// the relay quota, so every record of theirs is refused (no fetch-and-evict loop).
    private var evictedAgain: Set<ConversationID> = []
    /// When the relay quota is next checked (nil: nothing stored since the last check).
    private(set) var nextCheck: Duration?
    /// Relay-only usage as last measured plus what was stored since: passing the quota checks it at once. Nil until
    /// the first records are stored.
    private var tally: RelayTally?
    /// Conversations found not relay-only (a member, or written in here) since the tally was last measured: their
    /// records are not looked up again on every ingest (a chat message would pay a read transaction for it). A
    /// membership lost since is counted from the next measurement, at most `relayCheckInterval` later.
    private var notRelayOnly = Set<ConversationID>()
    /// Relay-only conversations evicted since the guard started.
    private(set) var conversationsEvicted = 0

    /// Remembers the evictions the store recorded within `evictionMemory` before `nowMillis`.
    init(store: RecordStore, member: AuthorID, configuration: QuotaConfiguration, nowMillis: Int64) {
        self.store = store
        self.member = member
        self.configuration = configuration
        do {
            evicted = try store.evictedConversations(
                sinceMillis: nowMillis - configuration.evictionMemory.wholeMilliseconds)
        } catch {
            // Starting without the memory only means an evicted conversation may be relayed again until the quota
            // evicts it anew; the store's error shows again on its next use.
            evicted = [:]
        }
    }

    /// The conversations evicted again while remembered (tests).
    var evictedAgainConversations: Set<ConversationID> { evictedAgain }

    /// Whether any eviction is remembered.
    var hasEvictions: Bool { !evicted.isEmpty }

    /// Whether `conversation` was evicted and the eviction is still remembered at `nowMillis`.
    mutating func isEvicted(_ conversation: ConversationID, nowMillis: Int64) -> Bool {
        guard let at = evicted[conversation] else { return false }
        if nowMillis - at < configuration.evictionMemory.wholeMilliseconds { return true }
        evicted[conversation] = nil
        evictedAgain.remove(conversation)
        return false
    }

    /// Whether a record of an evicted conversation (`isEvicted`) is refused unchecked once it is not an invitation:
    /// every record when the conversation was evicted again, otherwise all but those of this node's `neighbours`.
    func refusesInEvicted(_ header: RecordHeader, neighbours: Set<AuthorID>) -> Bool {
        evictedAgain.contains(header.conversation) || !neighbours.contains(header.author)
    }

    /// The records of `records` worth checking ahead of their ingest: not those the ingest will refuse unchecked
    /// (`refusesInEvicted`), nor the commits it checks itself for an invitation. A flood into a conversation this
    /// node evicted goes on arriving; checking it ahead would verify for nothing what the ingest then refuses.
    mutating func worthCheckingAhead(
        _ records: some Sequence<Record>, nowMillis: Int64, neighbours: Set<AuthorID>
    ) -> [Record] {
        guard !evicted.isEmpty else { return Array(records) }
        return records.filter { record in
            let header = record.header
            return !isEvicted(header.conversation, nowMillis: nowMillis)
                || !refusesInEvicted(header, neighbours: neighbours)
        }
    }

    /// Which of `records` are refused unchecked because their conversation was evicted (reported as held, so the
    /// session does not ask again), and the commits among them that invite `identity` (the eviction is forgotten
    /// and the conversation fetched). The records of this node's neighbours are not refused: a flood that got a
    /// conversation evicted (junk feeds this relay cannot tell from real ones) does not cut the chat of the relay's
    /// own neighbours through it — their feeds come back whole (a gap: the session asks for them from the start),
    /// the junk stays refused.
    mutating func screen(
        _ records: [Record], for identity: LocalIdentity, nowMillis: Int64, neighbours: () -> Set<AuthorID>
    ) -> (refused: Set<Int>, invitations: [Record]) {
        guard hasEvictions else { return ([], []) }
        var refused = Set<Int>()
        var invitations = [Record]()
        var known: Set<AuthorID>?
        for (index, record) in records.enumerated() {
            let header = record.header
            guard isEvicted(header.conversation, nowMillis: nowMillis) else { continue }
            if header.kind == .commit, let invitation = Self.invitation(record, for: identity) {
                do {
                    try forgetEviction(header.conversation)
                } catch {
                    // The memory of the eviction is gone here; the store's row stays until the next eviction check
                    // rewrites it, so the conversation is fetched now and may be refused again after a restart.
                }
                invitations.append(invitation)
                continue
            }
            if known == nil { known = neighbours() }
            if refusesInEvicted(header, neighbours: known!) { refused.insert(index) }
        }
        return (refused, invitations)
    }

    /// What `screenedIngest` stored and found.
    struct Screened {
        /// The store's report on the records admitted.
        let report: IngestReport
        /// An outcome for every record, in order: those refused unchecked count as duplicates (the session asks no
        /// more of them).
        let outcomes: [IngestOutcome]
        /// The indices of the records refused.
        let refused: Set<Int>
        /// Invitations found in evicted conversations (`screen`).
        let invitations: [Record]
    }

    /// Screens `records` (`screen`) and has `ingest` store those admitted.
    mutating func screenedIngest(
        _ records: [Record], for identity: LocalIdentity, nowMillis: Int64, neighbours: () -> Set<AuthorID>,
        ingest: ([Record]) throws(StoreError) -> IngestReport
    ) throws(StoreError) -> Screened {
        let (refused, invitations) = screen(records, for: identity, nowMillis: nowMillis, neighbours: neighbours)
        let admitted = refused.isEmpty ? records : records.indices.filter { !refused.contains($0) }.map { records[$0] }
        let report = try ingest(admitted)
        var storeOutcomes = report.outcomes.makeIterator()
        let outcomes = records.indices.map { refused.contains($0) ? .duplicate(records[$0].id) : storeOutcomes.next()! }
        return Screened(report: report, outcomes: outcomes, refused: refused, invitations: invitations)
    }

    /// The feeds to fetch from the start for `invitations`: each commit's own and those it depends on, in order. The
    /// conversation was evicted here, so the delivering session's belief that this node holds them is wrong.
    static func feedsToFetch(_ invitations: [Record]) -> [(conversation: ConversationID, author: AuthorID)] {
        invitations.flatMap { invitation in
            let header = invitation.header
            return Set(header.dependencies.map(\.author) + [header.author]).sorted().map { (header.conversation, $0) }
        }
    }

    /// `tallyPasses`, with a notice instead of an error when the store cannot measure the quota.
    mutating func tallyReporting(_ stored: [StoredRecord]) -> (passes: Bool, notice: [NodeAction]) {
        do {
            return (try tallyPasses(stored), [])
        } catch {
            return (false, [.event(.notice("store: cannot measure the relay quota (\(error))"))])
        }
    }

    /// The record, if it is a correctly signed commit that seals a key to `identity` (an invitation).
    static func invitation(_ record: Record, for identity: LocalIdentity) -> Record? {
        guard record.header.kind == .commit, record.hasValidSignature,
            let commit = try? ConversationPayload.parseCommit(record.payload), let ephemeral = commit.ephemeral,
            case .key = KeySlots.open(slots: commit.slots, ephemeral: ephemeral, keyPair: identity.encryption)
        else { return nil }
        return record
    }

    /// Forgets the eviction of `conversation` (an invitation arrived): it is fetched again.
    mutating func forgetEviction(_ conversation: ConversationID) throws {
        evicted[conversation] = nil
        evictedAgain.remove(conversation)
        try store.forgetEviction(conversation)
    }

    /// Records were stored at `now`: the quota is checked within `relayCheckInterval`.
    mutating func noteStored(now: Duration) {
        if nextCheck == nil { nextCheck = now + configuration.relayCheckInterval }
    }

    /// Whether the periodic check is due at `now` (it is then cleared).
    mutating func takeCheckDue(now: Duration) -> Bool {
        guard let nextCheck, now >= nextCheck else { return false }
        self.nextCheck = nil
        return true
    }

    /// The relay quota as enforced: evictions go an eighth below each bound (`RelayQuota.headroomDivisor`).
    private var quota: RelayQuota {
        RelayQuota(
            conversationsMax: configuration.relayConversationsMax, bytesMax: configuration.relayBytesMax,
            headroomDivisor: 8)
    }

    /// Adds what was just stored in conversations that may be relay-only to the tally; true when the tally passes
    /// the relay quota: the caller then derives the pending conversations and calls `enforce` at once, in this turn,
    /// so the store holds more than its relay quota only between an ingest and the end of its turn.
    mutating func tallyPasses(_ stored: [StoredRecord]) throws -> Bool {
        var bytes = [ConversationID: Int]()
        for record in stored where !record.isForkEvidence && record.conversation != .profileFeed(of: record.author) {
            bytes[record.conversation, default: 0] += record.bytes.count
        }
        guard !bytes.isEmpty else { return false }
        if var tally {
            let unknown = Set(bytes.keys).subtracting(notRelayOnly)
            if !unknown.isEmpty {
                let relay = try store.possiblyRelayOnly(unknown, member: member)
                notRelayOnly.formUnion(unknown.subtracting(relay))
            }
            for conversation in bytes.keys.sorted() where !notRelayOnly.contains(conversation) {
                tally.add(conversation, bytes: bytes[conversation]!)
            }
            self.tally = tally
        } else {
            // The first records stored since the guard started: measured here (what was just stored included), not
            // at start-up, so a node that only reads pays nothing for it.
            tally = try measuredTally(remaining: store.relayUsage(member: member))
        }
        return tally!.exceeds(quota)
    }

    /// Evicts relay-only conversations beyond the relay quota: those no neighbour writes in first, least recently
    /// active first (`RecordStore.relayUsage`), down to an eighth below the bound that was passed. Returns the
    /// conversations evicted and, for the first eviction since start, a notice.
    mutating func enforce(now: Duration, nowMillis: Int64, neighbours: Set<AuthorID>) throws
        -> (evicted: [ConversationID], notice: String?)
    {
        // Conversations whose membership is not derived yet are left out of this check: check again once it is,
        // even if nothing more arrives.
        if try store.hasPendingConversations() { nextCheck = now + configuration.relayCheckInterval }
        let enforcement = try store.enforce(
            quota, member: member, neighbours: neighbours, nowMillis: nowMillis,
            rememberedMax: configuration.evictionsRememberedMax)
        tally = try measuredTally(remaining: enforcement.remaining)
        let victims = enforcement.evicted
        guard !victims.isEmpty else { return ([], nil) }
        for conversation in victims {
            // Back through its neighbours' feeds and over the quota again: from now on nothing of it is taken.
            if isEvicted(conversation, nowMillis: nowMillis) { evictedAgain.insert(conversation) }
            evicted[conversation] = nowMillis
        }
        if evicted.count > configuration.evictionsRememberedMax {
            let keep = evicted.sorted { ($0.value, $0.key) > ($1.value, $1.key) }.prefix(
                configuration.evictionsRememberedMax)
            evicted = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
            evictedAgain = evictedAgain.filter { evicted[$0] != nil }
        }
        let first = conversationsEvicted == 0
        conversationsEvicted += victims.count
        guard first else { return (victims, nil) }
        return (
            victims,
            "relay quota reached (\(configuration.relayConversationsMax) conversations, \(configuration.relayBytesMax) "
                + "bytes): evicting whole conversations this node is not in, least recently active first"
        )
    }

    /// `enforce`, told as the node's events: each conversation evicted is handed to `forget` (to drop what is held of
    /// it elsewhere), and the notice or why the quota could not be enforced is reported.
    mutating func enforceReporting(
        now: Duration, nowMillis: Int64, neighbours: Set<AuthorID>, forget: (ConversationID) -> Void
    ) -> [NodeAction] {
        let result: (evicted: [ConversationID], notice: String?)
        do {
            result = try enforce(now: now, nowMillis: nowMillis, neighbours: neighbours)
        } catch {
            return [.event(.notice("store: cannot enforce the relay quota (\(error))"))]
        }
        result.evicted.forEach(forget)
        return result.notice.map { [.event(.notice($0))] } ?? []
    }

    /// A tally from a measurement of the relay-only conversations, plus those still pending (which the measurement
    /// leaves out: their membership is not derived yet) with their bytes.
    private mutating func measuredTally(remaining: [RelayUsage]) throws -> RelayTally {
        notRelayOnly = []
        var tally = RelayTally()
        tally.measured(remaining, pending: try store.pendingRelayBytes(member: member))
        return tally
    }
}

/// An upper estimate of the store's relay-only usage between exact measurements (`RecordStore.relayUsage`): what
/// the last measurement found plus every record stored since in a conversation that may be relay-only
/// (`RecordStore.possiblyRelayOnly`, which counts a conversation not derived yet). Since it never underestimates
/// what arrives, checking the quota only when the tally passes it lets no ingest push the store past its quota
/// unnoticed, without measuring the log on every ingest. Bounded: its conversations are those measured (at most the
/// quota's count after an enforcement) plus those of the records stored since, and a tally past the quota is
/// measured again at once.
struct RelayTally {
    private(set) var bytes = 0
    private(set) var conversations = Set<ConversationID>()

    /// Starts again from a measurement, plus the conversations it could not judge yet (`pending`, with their bytes).
    mutating func measured(_ usage: [RelayUsage], pending: [ConversationID: Int] = [:]) {
        bytes = usage.reduce(0) { $0 + $1.bytes } + pending.values.reduce(0, +)
        conversations = Set(usage.map(\.conversation)).union(pending.keys)
    }

    mutating func add(_ conversation: ConversationID, bytes: Int) {
        self.bytes += bytes
        conversations.insert(conversation)
    }

    func exceeds(_ quota: RelayQuota) -> Bool {
        quota.isExceeded(conversations: conversations.count, bytes: bytes)
    }
}
