public import NatterModel

/// A record log in memory, for tests and simulations of the sync session without a database: feeds as arrays,
/// fork evidence beside them, and an `ingest` that follows NatterStore's chain rules (append, duplicate, fork
/// evidence, out-of-order). It checks record structure but not signatures, and it computes no applied state.
public final class InMemoryRecordSource: RecordSource {
    /// Each conversation's feeds: the contiguous chain held, records 1...n.
    public private(set) var chains: [ConversationID: [AuthorID: [Record]]] = [:]
    /// Contradicting records kept as evidence, per feed, at most `evidencePerFeedMax`.
    public private(set) var evidence: [FeedKey: [Record]] = [:]
    /// Evidence kept per feed, as NatterStore's `StoreLimits.forkEvidencePerFeedMax`.
    public static let evidencePerFeedMax = 16

    public init() {}

    /// Appends records that must extend their feeds' chains (building fixtures; a mistake traps).
    public func append(_ records: [Record]) {
        for record in records {
            let header = record.header
            let chain = chains[header.conversation]?[header.author] ?? []
            precondition(header.sequence == UInt64(chain.count) + 1, "fixture record out of order")
            precondition(header.previous == (chain.last?.id ?? .none), "fixture record does not chain")
            chains[header.conversation, default: [:]][header.author, default: []].append(record)
        }
    }

    /// What NatterStore would make of `batch`, applied in order; returns one outcome per record and what was
    /// stored (chain records and new evidence), in order.
    public func ingest(_ batch: [[UInt8]]) -> (outcomes: [SyncIngestOutcome], stored: [StoredRecord]) {
        var outcomes = [SyncIngestOutcome]()
        var stored = [StoredRecord]()
        for bytes in batch {
            let record: Record
            do {
                record = try Record.decode(bytes)
            } catch {
                outcomes.append(.rejected(error))
                continue
            }
            let header = record.header
            let key = FeedKey(conversation: header.conversation, author: header.author)
            let chain = chains[header.conversation]?[header.author] ?? []
            let held = UInt64(chain.count)
            if header.sequence <= held {
                if chain[Int(header.sequence) - 1].id == record.id {
                    outcomes.append(.duplicate)
                } else {
                    outcomes.append(keepEvidence(record, key: key, stored: &stored))
                }
            } else if header.sequence > held + 1 {
                outcomes.append(.outOfOrder(missingFrom: held + 1))
            } else if header.previous != (chain.last?.id ?? .none) {
                outcomes.append(keepEvidence(record, key: key, stored: &stored))
            } else {
                chains[header.conversation, default: [:]][header.author, default: []].append(record)
                stored.append(StoredRecord(record))
                outcomes.append(.stored)
            }
        }
        return (outcomes, stored)
    }

    private func keepEvidence(_ record: Record, key: FeedKey, stored: inout [StoredRecord]) -> SyncIngestOutcome {
        let kept = evidence[key] ?? []
        if kept.contains(record) { return .duplicate }
        if kept.count < Self.evidencePerFeedMax {
            evidence[key, default: []].append(record)
            stored.append(StoredRecord(record, isForkEvidence: true))
        }
        return .forkEvidence
    }

    /// Every chain record held, in (conversation, author, sequence) order.
    public var allRecords: [Record] {
        conversations().flatMap { conversation in
            (chains[conversation] ?? [:]).sorted { $0.key < $1.key }.flatMap(\.value)
        }
    }

    /// Number of chain records held.
    public var recordCount: Int { chains.values.reduce(0) { $0 + $1.values.reduce(0) { $0 + $1.count } } }

    // MARK: - RecordSource

    public func conversations() -> [ConversationID] {
        chains.filter { !$0.value.isEmpty }.keys.sorted()
    }

    public func feedHeads(of conversation: ConversationID) -> [FeedHead] {
        (chains[conversation] ?? [:]).compactMap { author, chain in
            chain.last.map { FeedHead(author: author, sequence: UInt64(chain.count), head: $0.id) }
        }.sorted { $0.author < $1.author }
    }

    public func forkEvidence(of conversation: ConversationID) -> [StoredRecord] {
        evidence.filter { $0.key.conversation == conversation }.sorted { $0.key < $1.key }.flatMap { _, records in
            records.sorted { ($0.header.sequence, $0.id) < ($1.header.sequence, $1.id) }.map {
                StoredRecord($0, isForkEvidence: true)
            }
        }
    }

    public func records(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int) -> [[UInt8]] {
        precondition(from >= 1 && limit >= 0)
        guard let chain = chains[conversation]?[author], from <= UInt64(chain.count) else { return [] }
        let start = Int(from) - 1
        return chain[start..<min(chain.count, start + limit)].map(\.bytes)
    }
}
