import NatterModel
import NatterStore
import NatterSync

/// The sync sessions' window onto the SQLite log: `RecordSource` over `RecordStore`.
///
/// `RecordSource` cannot throw (the sessions are pure); a database error here means the node's own disk failed,
/// which the node reports separately — the session then sees an empty answer and anti-entropy retries later.
struct StoreRecordSource: RecordSource {
    let store: RecordStore
    /// This node's newest own records, which every session pushes at once: served from memory.
    let recent: RecentOwnRecords

    func conversations() -> [ConversationID] {
        (try? store.conversationsHeld()) ?? []
    }

    func feedHeads(of conversation: ConversationID) -> [FeedHead] {
        ((try? store.feeds(of: conversation)) ?? []).filter { $0.stored > 0 }.map {
            FeedHead(author: $0.author, sequence: $0.stored, head: $0.storedHead)
        }
    }

    func forkEvidence(of conversation: ConversationID) -> [StoredRecord] {
        // The feed rows (cached) say which feeds forked; only those read their evidence. `try?` as in the methods
        // above: a store error is the node's own disk failing, reported apart; the session offers nothing this
        // round and the next summary round offers it again.
        let forked = ((try? store.feeds(of: conversation)) ?? []).filter { $0.forkSequence != nil }
        return forked.flatMap { feed in
            ((try? store.forkEvidence(conversation: conversation, author: feed.author)) ?? []).compactMap { bytes in
                RecordCodec.claimedPosition(bytes).map {
                    StoredRecord(
                        conversation: conversation, author: feed.author, sequence: $0.sequence, bytes: bytes,
                        isForkEvidence: true)
                }
            }
        }
    }

    func records(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int) -> [[UInt8]] {
        if let held = recent.records(FeedKey(conversation: conversation, author: author), from: from, limit: limit) {
            return held
        }
        return (try? store.recordBytes(conversation: conversation, author: author, from: from, limit: limit)) ?? []
    }
}

/// The records this node wrote most recently, per own feed, as the run of consecutive sequence numbers that ends
/// at the feed's head: live push sends a new message to every peer right away, and reading it back from SQLite
/// cost a read transaction per link (about 50 µs here, on the send → shown path). Own records only: their bytes
/// are exactly what the store holds (never junk, never evicted), and every one passes `NodeCore.published`.
/// Bounded by `recordsMax` (the oldest runs go first); a request it cannot answer whole goes to the store.
final class RecentOwnRecords {
    /// Records held: a few seconds of anyone's typing, a few batches of a script's.
    static let recordsMax = 512

    private var runs: [FeedKey: (first: UInt64, bytes: [[UInt8]])] = [:]
    /// Feeds in the order their runs were last extended, oldest first.
    private var order: [FeedKey] = []
    private var count = 0

    /// Notes own records just stored (in sequence order per feed).
    func noteStored(_ records: [StoredRecord]) {
        for record in records where !record.isForkEvidence {
            let feed = record.feed
            if var run = runs[feed], run.first + UInt64(run.bytes.count) == record.sequence {
                run.bytes.append(record.bytes)
                runs[feed] = run
            } else {
                count -= runs[feed]?.bytes.count ?? 0
                runs[feed] = (record.sequence, [record.bytes])
            }
            count += 1
            order.removeAll { $0 == feed }
            order.append(feed)
        }
        while count > Self.recordsMax, let oldest = order.first {
            let run = runs[oldest]!
            let drop = min(run.bytes.count, count - Self.recordsMax)
            if drop == run.bytes.count {
                runs[oldest] = nil
                order.removeFirst()
            } else {
                runs[oldest] = (run.first + UInt64(drop), Array(run.bytes.dropFirst(drop)))
            }
            count -= drop
        }
    }

    /// Drops the runs of these feeds: records of them arrived by another way than `noteStored`.
    func forget(_ feeds: [FeedKey]) {
        for feed in Set(feeds) {
            guard let run = runs.removeValue(forKey: feed) else { continue }
            count -= run.bytes.count
            order.removeAll { $0 == feed }
        }
    }

    /// Up to `limit` records of `feed` from `from` on, when the run holds `from`: the run ends at the feed's head,
    /// so what follows `from` in it is all the store would give. Nil otherwise.
    func records(_ feed: FeedKey, from: UInt64, limit: Int) -> [[UInt8]]? {
        guard let run = runs[feed], from >= run.first, from < run.first + UInt64(run.bytes.count) else { return nil }
        let start = Int(from - run.first)
        return Array(run.bytes[start..<min(run.bytes.count, start + limit)])
    }
}

extension SyncIngestOutcome {
    /// The store's outcome as the sync session sees it.
    init(_ outcome: IngestOutcome) {
        switch outcome {
        case .stored: self = .stored
        case .duplicate: self = .duplicate
        case .forkEvidence: self = .forkEvidence
        case .outOfOrder(_, let missingFrom): self = .outOfOrder(missingFrom: missingFrom)
        case .rejected(let error): self = .rejected(error)
        }
    }
}

extension RecordStore {
    /// The stored heads of a conversation's feeds (empty when the store cannot say: the feeds are then grafted from
    /// their start, which only costs copies).
    func storedHeads(of conversation: ConversationID) -> [AuthorID: UInt64] {
        guard let feeds = try? feeds(of: conversation) else { return [:] }  // `try?`: see above
        return Dictionary(feeds.map { ($0.author, $0.stored) }, uniquingKeysWith: max)
    }

    /// The stored head of a feed (0 when the store cannot say, as for `storedHeads`).
    func storedHead(_ feed: FeedKey) -> UInt64 {
        storedHeads(of: feed.conversation)[feed.author] ?? 0
    }
}
