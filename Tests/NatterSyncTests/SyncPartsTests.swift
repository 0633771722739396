import NatterCrypto
import NatterModel
import Testing

// Goal: show that summaries and heads larger than one message travel in parts that each respect their limits, and
// that the receiver treats the parts as one; and that the largest messages the limits allow fit a secure-channel
// message. Method: logs with more conversations than one SUMMARY holds and a conversation with more feeds than one
// HEADS holds, synced through `SyncPair` (which checks every message); the largest messages built and measured.
@testable import NatterSync

@Suite("Sync messages in parts")
struct SyncPartsTests {
    static let alice = Fixture.identity(0x20)

    @Test("a summary of more conversations than one message holds travels in parts")
    func summaryParts() {
        let count = Limits.syncSummaryEntriesPerMessageMax + 100
        var shared = [Record]()
        shared.reserveCapacity(count)
        for number in 0..<count {
            shared += Fixture.feed(Self.alice, in: Fixture.conversation(number), count: 1, payloadBytes: 0)
        }
        let extra = Fixture.feed(Self.alice, in: Fixture.conversation(count + 1), count: 2)
        // B lacks the newest conversation and one from the first part.
        let missing = shared[17]
        var pair = SyncPair(a: Fixture.log(shared + extra), b: Fixture.log(shared.filter { $0 != missing }))
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        #expect(pair.stats[.a]!.count(.summary) == 2 && pair.stats[.b]!.count(.summary) == 2)
        #expect(Set(pair.stats[.a]!.recordIDs) == Set((extra + [missing]).map(\.id)))
        #expect(pair.stats[.b]!.recordIDs.isEmpty)
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
    }

    @Test("heads of more feeds than one message holds travel in parts")
    func headsParts() {
        let conversation = Fixture.conversation(1)
        let authors = Limits.syncFeedHeadsPerMessageMax + 40
        var shared = [Record]()
        for index in 0..<authors {
            // A distinct identity per index: the index in the seed's first four bytes.
            var seed = counting(from: 0)
            for byte in 0..<4 { seed[byte] = UInt8(truncatingIfNeeded: index >> (8 * byte)) }
            let identity = try! IdentityKeyPair(seed: seed)
            shared += Fixture.feed(identity, in: conversation, count: 1, payloadBytes: 0)
        }
        let more = Fixture.feed(Self.alice, in: conversation, count: 3)
        var pair = SyncPair(a: Fixture.log(shared + more), b: Fixture.log(shared))
        pair.start()
        pair.run()
        #expect(pair.violations.isEmpty)
        #expect(pair.a.caughtUpCount == 1 && pair.b.caughtUpCount == 1)
        // One offer each way, each in two parts (two messages).
        #expect(pair.stats[.a]!.count(.heads) == 2 && pair.stats[.b]!.count(.heads) == 2)
        #expect(pair.stats[.a]!.recordIDs == more.map(\.id))
        #expect(pair.stats[.b]!.recordIDs.isEmpty)
        #expect(pair.b.progress.last.map { $0 == (3, 3) } == true)
    }

    @Test("the largest messages the limits allow fit one secure-channel message")
    func largestMessages() {
        let entries = (0..<Limits.syncSummaryEntriesPerMessageMax).map {
            SummaryEntry(conversation: Fixture.conversation($0), digest: SyncDigest(high: 1, low: UInt64($0)))
        }.sorted { $0.conversation < $1.conversation }
        let summary = SyncMessage.summary(isFinal: true, entries: entries).encoded()
        #expect(summary.count == 4 + 48 * Limits.syncSummaryEntriesPerMessageMax)

        let feedsPerEntry = Limits.syncFeedHeadsPerMessageMax / Limits.syncHeadsConversationsPerMessageMax
        let feeds = (0..<feedsPerEntry).map {
            FeedHead(
                author: AuthorID(bytes: [UInt8](repeating: 0, count: 31) + [UInt8($0)]), sequence: 1,
                head: RecordID(bytes: [UInt8](repeating: 1, count: 32)))
        }
        let heads = SyncMessage.heads(
            (0..<Limits.syncHeadsConversationsPerMessageMax).map {
                HeadsEntry(conversation: Fixture.conversation($0), isFinal: true, wantsReply: false, feeds: feeds)
            }
        ).encoded()
        #expect(heads.count == 625_667)
        #expect(heads.count <= Limits.applicationMessageBytesMax)
        let recordsMax = 3 + 4 * Limits.syncBatchRecordsMax + Limits.syncBatchBytesMax
        #expect(recordsMax <= Limits.applicationMessageBytesMax)
        #expect((try? SyncMessage.decode(heads)) != nil)
        #expect((try? SyncMessage.decode(summary)) != nil)
    }
}
