import NatterModel
import NatterStore
import NatterSync

/// One ingest's records sorted by what the store did with each (`IngestOutcome`), in delivery order: what the
/// sessions push on, what the trees learn, what waits for a predecessor. Pure: the core acts on it.
struct SortedIngest {
    /// Stored records, appended or kept as fork evidence: pushed to the other links.
    private(set) var stored = [StoredRecord]()
    /// The records appended to their feeds (not fork evidence): new here, and checked for a lagging tree.
    private(set) var appended = [Record]()
    /// Records whose feed has a gap: held in the causal buffer until their predecessor arrives.
    private(set) var outOfOrder = [Record]()
    /// The same records as sent on: their link is ahead of this node in their feed.
    var ahead: [StoredRecord] { outOfOrder.map { StoredRecord($0) } }
    /// The feeds of copies already held (a tree may prune the link that brought them).
    private(set) var copies = [FeedKey]()

    init(_ records: [Record], _ outcomes: [IngestOutcome]) {
        for (record, outcome) in zip(records, outcomes) {
            let header = record.header
            switch outcome {
            case .stored, .forkEvidence:
                let isEvidence = if case .forkEvidence = outcome { true } else { false }
                if !isEvidence { appended.append(record) }
                stored.append(
                    StoredRecord(
                        conversation: header.conversation, author: header.author, sequence: header.sequence,
                        bytes: record.bytes, isForkEvidence: isEvidence))
            case .outOfOrder:
                outOfOrder.append(record)
            case .duplicate:
                copies.append(FeedKey(conversation: header.conversation, author: header.author))
            case .rejected:
                break
            }
        }
    }
}
