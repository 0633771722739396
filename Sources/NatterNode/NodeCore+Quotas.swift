import NatterCrypto
import NatterModel
import NatterStore

/// Quotas (SPEC F16): charging the ingest buckets, and the relay quota with its evictions and invitations.
extension NodeCore {
    static func millis(_ duration: Duration) -> Int64 {
        duration.components.seconds * 1_000 + duration.components.attoseconds / 1_000_000_000_000_000
    }

    /// Charges the link and the authors for the records that cost a signature check (not those held already, nor
    /// the content records of evicted conversations, refused unchecked; their commits were checked for an
    /// invitation).
    func chargeQuotas(
        link: LinkID, outcomes: [IngestOutcome], headers: [RecordHeader?], refused: Set<Int>, now: Duration
    ) {
        var checked = 0
        var byAuthor = [AuthorID: Int]()
        for (index, outcome) in outcomes.enumerated() where !refused.contains(index) || headers[index]?.kind == .commit {
            if case .duplicate = outcome { continue }
            checked += 1
            if let author = headers[index]?.author { byAuthor[author, default: 0] += 1 }
        }
        quotas.charge(link: link, records: checked, byAuthor: byAuthor, now: now)
    }

    /// Whether `conversation` was evicted and the eviction is still remembered at `now`.
    func isEvicted(_ conversation: ConversationID, now: Duration) -> Bool {
        guard let at = evicted[conversation] else { return false }
        if wallClockMillis(now) - at < Self.millis(configuration.quotas.evictionMemory) { return true }
        evicted[conversation] = nil
        return false
    }

    /// The record, if it is a correctly signed commit that seals a key to this node (an invitation).
    func invitation(_ bytes: [UInt8]) -> Record? {
        guard let record = try? Record.decodeVerified(bytes), record.header.kind == .commit,
            let commit = try? ConversationPayload.parseCommit(record.payload),
            ConversationPayload.openSlot(commit, member: identity.author, keyPair: identity.encryption) != nil
        else { return nil }
        return record
    }

    func forgetEviction(_ conversation: ConversationID) {
        evicted[conversation] = nil
        try? store.forgetEviction(conversation)
    }

    /// Evicts relay-only conversations beyond the relay quota: those no connected peer writes in first, least
    /// recently active first (`RecordStore.relayUsage`).
    func enforceRelayQuota(now: Duration) -> [NodeAction] {
        let quotas = configuration.quotas
        let nowMillis = wallClockMillis(now)
        // Conversations whose membership is not derived yet are left out of this check: check again once it is,
        // even if nothing more arrives.
        if (try? store.hasPendingConversations()) == true { relayCheckAt = now + quotas.relayCheckInterval }
        guard
            let victims = try? store.enforce(
                RelayQuota(conversationsMax: quotas.relayConversationsMax, bytesMax: quotas.relayBytesMax),
                member: identity.author, neighbours: Set(connectedPeers.keys), nowMillis: nowMillis,
                rememberedMax: quotas.evictionsRememberedMax),
            !victims.isEmpty
        else { return [] }
        for conversation in victims {
            evicted[conversation] = nowMillis
            conversations.forgetCache(of: conversation)
            dropBuffered(conversation)
        }
        if evicted.count > quotas.evictionsRememberedMax {
            let keep = evicted.sorted { ($0.value, $0.key) > ($1.value, $1.key) }.prefix(quotas.evictionsRememberedMax)
            evicted = Dictionary(uniqueKeysWithValues: keep.map { ($0.key, $0.value) })
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
