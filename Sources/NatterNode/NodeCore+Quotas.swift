import NatterCrypto
import NatterModel
import NatterStore
import NatterSync

/// Quotas (SPEC F16): charging the ingest buckets, and the relay quota with its evictions and invitations.
extension NodeCore {
    static func millis(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// Charges the link's bucket of `lane` and the authors for the records that cost a signature check (not copies
    /// of records held already), and the link alone for the records of evicted conversations refused unchecked
    /// (reported as copies): a peer that keeps sending what this node refuses (a flood into a conversation it
    /// evicted) is held to the link's rate like any other, instead of refilling its bucket meanwhile for a burst
    /// into the next conversation. An honest peer sends each of them once, since they are reported as held.
    func chargeQuotas(
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

    /// Whether `conversation` was evicted and the eviction is still remembered at `now`.
    func isEvicted(_ conversation: ConversationID, now: Duration) -> Bool {
        guard let at = evicted[conversation] else { return false }
        if wallClockMillis(now) - at < Self.millis(configuration.quotas.evictionMemory) { return true }
        evicted[conversation] = nil
        evictedAgain.remove(conversation)
        return false
    }

    /// Whether a record of an evicted conversation (`isEvicted`) is refused unchecked once it is not an invitation:
    /// every record when the conversation was evicted again, otherwise all but those of this node's `neighbours`
    /// (`priorityAuthors`).
    func refusesInEvicted(_ header: RecordHeader, neighbours: Set<AuthorID>) -> Bool {
        evictedAgain.contains(header.conversation) || !neighbours.contains(header.author)
    }

    /// The records of `records` worth checking ahead of their ingest: not those `ingest` will refuse unchecked
    /// (`refusesInEvicted`), nor the commits it checks itself for an invitation. A flood into a conversation this
    /// node evicted goes on arriving; checking it ahead would verify for nothing what the ingest then refuses.
    func worthCheckingAhead(_ records: some Sequence<Record>, now: Duration) -> [Record] {
        guard !evicted.isEmpty else { return Array(records) }
        let neighbours = priorityAuthors
        return records.filter { record in
            let header = record.header
            return !isEvicted(header.conversation, now: now) || !refusesInEvicted(header, neighbours: neighbours)
        }
    }

    /// The record, if it is a correctly signed commit that seals a key to this node (an invitation).
    func invitation(_ record: Record) -> Record? {
        guard record.header.kind == .commit, record.hasValidSignature,
            let commit = try? ConversationPayload.parseCommit(record.payload), let ephemeral = commit.ephemeral,
            case .key = KeySlots.open(slots: commit.slots, ephemeral: ephemeral, keyPair: identity.encryption)
        else { return nil }
        return record
    }

    func forgetEviction(_ conversation: ConversationID) {
        evicted[conversation] = nil
        evictedAgain.remove(conversation)
        try? store.forgetEviction(conversation)
    }

    /// The relay quota as enforced: evictions go an eighth below each bound (`RelayQuota.headroomDivisor`).
    var relayQuota: RelayQuota {
        RelayQuota(
            conversationsMax: configuration.quotas.relayConversationsMax, bytesMax: configuration.quotas.relayBytesMax,
            headroomDivisor: 8)
    }

    /// Adds what was just stored in conversations that may be relay-only to the relay tally and, if the tally passes
    /// the relay quota, derives the pending conversations and enforces the quota at once, in this turn: the store
    /// holds more than its relay quota only between an ingest and the end of its turn.
    func tallyRelay(_ stored: [StoredRecord], now: Duration) -> [NodeAction] {
        var bytes = [ConversationID: Int]()
        for record in stored where !record.isForkEvidence && record.conversation != .profileFeed(of: record.author) {
            bytes[record.conversation, default: 0] += record.bytes.count
        }
        guard !bytes.isEmpty else { return [] }
        if var tally = relayTally {
            let unknown = Set(bytes.keys).subtracting(notRelayOnly)
            if !unknown.isEmpty {
                guard let relay = try? store.possiblyRelayOnly(unknown, member: identity.author) else { return [] }
                notRelayOnly.formUnion(unknown.subtracting(relay))
            }
            for conversation in bytes.keys.sorted() where !notRelayOnly.contains(conversation) {
                tally.add(conversation, bytes: bytes[conversation]!)
            }
            relayTally = tally
        } else {
            // The first records stored since the core started: measured here (what was just stored included), not
            // at start-up, so a node that only reads pays nothing for it.
            relayTally = measuredRelayTally(remaining: (try? store.relayUsage(member: identity.author)) ?? [])
        }
        guard relayTally!.exceeds(relayQuota) else { return [] }
        return refreshPending() + enforceRelayQuota(now: now)
    }

    /// A tally from a measurement of the relay-only conversations, plus those still pending (which the measurement
    /// leaves out: their membership is not derived yet) with their bytes.
    func measuredRelayTally(remaining: [RelayUsage]) -> RelayTally {
        notRelayOnly = []
        var tally = RelayTally()
        tally.measured(remaining, pending: (try? store.pendingRelayBytes(member: identity.author)) ?? [:])
        return tally
    }

    /// Evicts relay-only conversations beyond the relay quota: those no connected peer writes in first, least
    /// recently active first (`RecordStore.relayUsage`), down to an eighth below the bound that was passed.
    func enforceRelayQuota(now: Duration) -> [NodeAction] {
        let quotas = configuration.quotas
        let nowMillis = wallClockMillis(now)
        // Conversations whose membership is not derived yet are left out of this check: check again once it is,
        // even if nothing more arrives.
        if (try? store.hasPendingConversations()) == true { relayCheckAt = now + quotas.relayCheckInterval }
        guard
            let enforcement = try? store.enforce(
                relayQuota, member: identity.author, neighbours: Set(connectedPeers.keys), nowMillis: nowMillis,
                rememberedMax: quotas.evictionsRememberedMax)
        else { return [] }
        relayTally = measuredRelayTally(remaining: enforcement.remaining)
        let victims = enforcement.evicted
        guard !victims.isEmpty else { return [] }
        for conversation in victims {
            // Back through its neighbours' feeds and over the quota again: from now on nothing of it is taken.
            if isEvicted(conversation, now: now) { evictedAgain.insert(conversation) }
            evicted[conversation] = nowMillis
            conversations.forgetCache(of: conversation)
            dropBuffered(conversation)
        }
        if evicted.count > quotas.evictionsRememberedMax {
            let keep = evicted.sorted { ($0.value, $0.key) > ($1.value, $1.key) }.prefix(quotas.evictionsRememberedMax)
            evicted = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
            evictedAgain = evictedAgain.filter { evicted[$0] != nil }
        }
        let first = conversationsEvicted == 0
        conversationsEvicted += victims.count
        guard first else { return [] }
        return [
            .event(
                .notice(
                    "relay quota reached (\(quotas.relayConversationsMax) conversations, \(quotas.relayBytesMax) bytes):"
                        + " evicting whole conversations this node is not in, least recently active first"))
        ]
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
