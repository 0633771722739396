import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

/// An author with a store of its own: it writes through `appendOwn`, so dependencies and Lamport numbers are
/// exactly what a real node would produce, and it learns others' records through `ingest`.
final class Writer {
    let identity: LocalIdentity
    let store: RecordStore
    var clock: Int64 = 1_700_000_000_000

    init(seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        identity = LocalIdentity(
            signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        store = try RecordStore.inMemory()
    }

    /// A second writer with the same identity and its own store: writing from both forks the feed.
    init(twinOf other: Writer) throws {
        identity = other.identity
        store = try RecordStore.inMemory()
    }

    var author: AuthorID { identity.author }

    @discardableResult
    func write(_ conversation: ConversationID, _ text: String = "hello") throws -> Record {
        clock += 1000
        return try store.appendOwn(
            conversation: conversation, kind: .content, epoch: testEpoch, createdAtMillis: clock,
            identity: identity.signing
        ) { _ in Array(text.utf8) }
    }

    /// Ingests `records`, retrying the ones that arrive before their feed predecessor (a causal buffer).
    @discardableResult
    func receive(_ records: [Record]) throws -> [IngestOutcome] {
        try deliver(records, to: store, batchSizes: 1...records.count.clamped(min: 1), rng: nil).outcomes
    }
}

let testEpoch = EpochID(bytes: [UInt8](repeating: 7, count: 32))

func conversationID(_ name: String) -> ConversationID {
    ConversationID(bytes: Blake2b.hash(Array("test/\(name)".utf8)))
}

extension Int {
    func clamped(min lower: Int) -> Int { Swift.max(self, lower) }
}

/// What a delivery did: every outcome, and the ids in the order they became applied.
struct Delivery {
    var outcomes: [IngestOutcome] = []
    var appliedOrder: [RecordID] = []
    var leftOutOfOrder: [Record] = []
}

/// Delivers `records` to `store` in random batches (shuffled when `rng` is given), keeping out-of-order records
/// in a buffer and retrying them until a full pass makes no progress.
func deliver(
    _ records: [Record], to store: RecordStore, batchSizes: ClosedRange<Int>,
    rng: UnsafeMutablePointer<SeededGenerator>?
) throws -> Delivery {
    var pending = records
    if let rng { pending.shuffle(using: &rng.pointee) }
    var delivery = Delivery()
    while !pending.isEmpty {
        var retry = [Record]()
        var progress = false
        var index = 0
        while index < pending.count {
            let size = rng.map { Int.random(in: batchSizes, using: &$0.pointee) } ?? batchSizes.upperBound
            let batch = Array(pending[index..<Swift.min(index + size, pending.count)])
            index += batch.count
            let report = try store.ingest(batch.map(\.bytes), receivedAtMillis: 1)
            delivery.appliedOrder += report.applied.map(\.id)
            for (record, outcome) in zip(batch, report.outcomes) {
                delivery.outcomes.append(outcome)
                if case .outOfOrder = outcome {
                    retry.append(record)
                } else {
                    progress = true
                }
            }
        }
        if !progress {
            delivery.leftOutOfOrder = retry
            break
        }
        pending = retry
    }
    return delivery
}
