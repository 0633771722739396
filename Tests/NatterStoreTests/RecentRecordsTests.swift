// Goal: the store's memory of the records it stored last (RecentRecords) is bounded and answers only with runs it
// holds whole; the store-level reads against the tables are checked in RelayQuotaTests.recentRecordsMatchTables.
import NatterModel
import NatterTestSupport
import Testing

@testable import NatterStore

@Suite("Recent records in memory")
struct RecentRecordsTests {
    @Test("holds the newest recordsMax records; a run stops where memory does; invalidate forgets all")
    func boundedRuns() throws {
        let conversation = floodConversation("recent")
        let extra = 6
        let records = try floodRecords(
            conversation: conversation, authors: 1, perAuthor: RecentRecords.recordsMax + extra, seed: 1)
        let author = records[0].header.author
        let recent = RecentRecords()
        recent.remember(Array(records.prefix(10)), receivedAtMillis: 5)
        recent.remember(Array(records.dropFirst(10)), receivedAtMillis: 7)
        #expect(recent.run(conversation: conversation, author: author, from: 1, limit: 10).isEmpty, "evicted first")
        let run = recent.run(conversation: conversation, author: author, from: UInt64(extra + 1), limit: 10_000)
        #expect(run.map(\.id) == records.dropFirst(extra).map(\.id))
        #expect(
            recent.run(conversation: conversation, author: author, from: 100, limit: 3).map(\.header.sequence) == [
                100, 101, 102,
            ])
        #expect(recent.receivedAtMillis(of: records[extra].ref) == 5)
        #expect(recent.receivedAtMillis(of: records.last!.ref) == 7)
        #expect(recent.receivedAtMillis(of: records[0].ref) == nil)
        // A ref whose id differs from the record held at its position is not answered.
        let wrong = RecordRef(id: records[extra + 1].id, position: records[extra].header.position)
        #expect(recent.receivedAtMillis(of: wrong) == nil)
        recent.invalidate()
        #expect(recent.run(conversation: conversation, author: author, from: UInt64(extra + 1), limit: 5).isEmpty)
    }
}
