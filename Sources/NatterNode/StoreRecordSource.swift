import NatterModel
import NatterStore
import NatterSync

/// The sync sessions' window onto the SQLite log: `RecordSource` over `RecordStore`.
///
/// `RecordSource` cannot throw (the sessions are pure); a database error here means the node's own disk failed,
/// which the node reports separately — the session then sees an empty answer and anti-entropy retries later.
struct StoreRecordSource: RecordSource {
    let store: RecordStore

    func conversations() -> [ConversationID] {
        let feeds = (try? store.feeds()) ?? []
        var seen = [ConversationID]()
        for feed in feeds where feed.stored > 0 && seen.last != feed.conversation { seen.append(feed.conversation) }
        return seen
    }

    func feedHeads(of conversation: ConversationID) -> [FeedHead] {
        ((try? store.feeds(of: conversation)) ?? []).filter { $0.stored > 0 }.map {
            FeedHead(author: $0.author, sequence: $0.stored, head: $0.storedHead)
        }
    }

    func records(conversation: ConversationID, author: AuthorID, from: UInt64, limit: Int) -> [[UInt8]] {
        (try? store.recordBytes(conversation: conversation, author: author, from: from, limit: limit)) ?? []
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
