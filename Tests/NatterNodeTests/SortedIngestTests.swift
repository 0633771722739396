// Goal: `SortedIngest` sorts one ingest's records by what the store did with each — appended, fork evidence, out of
// order, a copy, rejected — keeping delivery order within each list, so the core pushes exactly what was stored,
// holds exactly what came early and tells the trees which feeds sent copies. Method: the pure type over real signed
// records and every outcome.
import NatterModel
import NatterStore
import NatterSync
import NatterTestSupport
import Testing

@testable import NatterNode

@Suite("Sorted ingest")
struct SortedIngestTests {
    static let records = try! floodRecords(
        conversation: floodConversation("sorted-ingest"), authors: 2, perAuthor: 5, payloadBytes: 40, seed: 3)

    @Test("each outcome lands in its list, in delivery order; rejected records in none")
    func sortsEveryOutcome() {
        let records = Self.records
        let outcomes: [IngestOutcome] = [
            .stored(records[0].id), .duplicate(records[1].id), .outOfOrder(records[2].id, missingFrom: 2),
            .forkEvidence(records[3].id, forkSequence: 4), .rejected(.truncated(field: "test")), .stored(records[5].id),
            .outOfOrder(records[6].id, missingFrom: 1), .duplicate(records[7].id), .stored(records[8].id),
        ]
        let sorted = SortedIngest(Array(records.prefix(outcomes.count)), outcomes)
        #expect(sorted.appended.map(\.id) == [records[0].id, records[5].id, records[8].id])
        #expect(sorted.stored.map(\.sequence) == [0, 3, 5, 8].map { records[$0].header.sequence })
        #expect(sorted.stored.map(\.isForkEvidence) == [false, true, false, false])
        #expect(sorted.stored.allSatisfy { !$0.bytes.isEmpty })
        #expect(sorted.outOfOrder.map(\.id) == [records[2].id, records[6].id])
        #expect(sorted.ahead.map(\.sequence) == [records[2].header.sequence, records[6].header.sequence])
        #expect(
            sorted.copies == [1, 7].map {
                FeedKey(conversation: records[$0].header.conversation, author: records[$0].header.author)
            })
    }

    @Test("an ingest of nothing but copies stores nothing and holds nothing")
    func onlyCopies() {
        let records = Array(Self.records.prefix(4))
        let sorted = SortedIngest(records, records.map { .duplicate($0.id) })
        #expect(sorted.stored.isEmpty && sorted.appended.isEmpty && sorted.outOfOrder.isEmpty && sorted.ahead.isEmpty)
        #expect(sorted.copies.count == 4)
    }
}
