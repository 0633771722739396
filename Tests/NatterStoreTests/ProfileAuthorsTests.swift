// Goal: the store answers "whose profiles do I hold" and "which conversations do I hold" from small reads that give
// exactly what a scan of every feed row gave, on a fresh store, after more profiles arrive, and after an upgrade
// from schema v10 (which had no profile_author table). Method: a real SQLite file with profiles, a group and
// relayed flood conversations of throwaway authors (many feeds that are not profiles).
import Foundation
import GRDB
import NatterModel
import NatterTestSupport
import Testing

@testable import NatterStore

@Suite("Profile authors and held conversations")
struct ProfileAuthorsTests {
    /// What `context(for:)` and the sync summary used to compute from every feed row.
    static func scanned(_ store: RecordStore) throws -> (profiles: [AuthorID], conversations: [ConversationID]) {
        let feeds = try store.feeds()
        let profiles = feeds.filter { $0.applied > 0 && $0.conversation == .profileFeed(of: $0.author) }.map(\.author)
        var conversations = [ConversationID]()
        for feed in feeds where feed.stored > 0 && conversations.last != feed.conversation {
            conversations.append(feed.conversation)
        }
        return (profiles.sorted(), conversations)
    }

    @Test("both reads equal the scan of every feed, before and after another profile arrives")
    func equalTheScan() throws {
        let quota = RelayQuotaTests()
        let directory = try quota.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, _, group, relays) = try quota.bobsStore(in: directory, relayed: 3)
        var expected = try Self.scanned(store)
        #expect(expected.profiles.count == 2, "Alice and Bob; the flood's throwaway authors have no profile")
        #expect(expected.conversations.contains(group) && relays.allSatisfy(expected.conversations.contains))
        #expect(try store.profileAuthors() == expected.profiles)
        #expect(try store.conversationsHeld() == expected.conversations)
        let carol = try Replica("Carol", seed: 903)
        _ = try store.ingest(try carol.store.allRecords().map(\.bytes), receivedAtMillis: 5)
        expected = try Self.scanned(store)
        #expect(expected.profiles.contains(carol.id) && expected.profiles.count == 3)
        #expect(try store.profileAuthors() == expected.profiles)
        #expect(try store.conversationsHeld() == expected.conversations)
    }

    @Test("a v10 database gets profile_author filled from its feeds")
    func upgradesFromV10() throws {
        let quota = RelayQuotaTests()
        let directory = try quota.temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let expected: [AuthorID]
        do {
            let (store, _, _, _) = try quota.bobsStore(in: directory, relayed: 2)
            expected = try Self.scanned(store).profiles
            let older = try DatabaseQueue()
            try Schema.migrator.migrate(older, upTo: "v10-feed-sizes")
            try SearchMigrationTests().downgrade(store.writer, to: older)
            #expect(try store.writer.read { db in try db.tableExists("profile_author") } == false)
        }
        let reopened = try RecordStore.open(directory: directory)
        #expect(expected.count == 2)
        #expect(try reopened.profileAuthors() == expected)
        #expect(try reopened.integrityCheck() == "ok")
    }
}

@Suite("Live feeds: junk feeds cost authoring nothing")
struct LiveFeedTests {
    @Test("junk feeds are left out of live feeds, the applied clock and what a new record depends on")
    func junkLeftOut() throws {
        let (alice, _, group, flood) = try floodedGroup(seed: 31, authors: 600, perAuthor: 1)
        _ = try alice.store.ingest(flood.map(\.bytes), receivedAtMillis: 1)
        try alice.conversations.refreshChanged()
        #expect(try alice.conversations.reduceJunk(in: group).count == 600)
        let live = try alice.store.liveFeeds(of: group)
        #expect(live.map(\.author) == [alice.id], "Bob has not written; the 600 throwaway feeds are junk")
        #expect(try alice.store.feeds(of: group).filter(\.isJunk).count == 600)
        #expect(try alice.store.appliedClock(of: group) == VectorClock([alice.id: 2]))
        // More authors than a record may depend on (512), all junk: writing goes on, depending on no junk feed.
        let record = try alice.conversations.send("after the flood", in: group, now: alice.tick())
        #expect(record.header.dependencies == VectorClock([alice.id: 2]))
        let receipt = try alice.conversations.markRead(group, now: alice.tick())
        #expect(receipt.header.dependencies == VectorClock([alice.id: 3]))
        #expect(try !alice.conversations.snapshot(of: group).lockedOut)
    }

    @Test("saving a feed updates its row in place, and a changed junk mark is written both ways")
    func junkMarkSaved() throws {
        let (alice, _, group, flood) = try floodedGroup(seed: 32, authors: 3, perAuthor: 1)
        _ = try alice.store.ingest(flood.map(\.bytes), receivedAtMillis: 1)
        try alice.conversations.refreshChanged()
        func feed(_ author: AuthorID) throws -> FeedState? {
            try alice.store.feeds(of: group).first { $0.author == author }
        }
        let author = flood[0].header.author
        var state = try #require(try feed(author))
        #expect(!state.isJunk)
        state.isJunk = true
        state.lastReceivedMillis = 7
        try alice.store.writeTransaction { db in try state.save(db) }
        alice.store.invalidateCaches()
        #expect(try feed(author) == state)
        #expect(try !alice.store.liveFeeds(of: group).contains { $0.author == author })
        state.isJunk = false
        state.lastReceivedMillis = 9
        try alice.store.writeTransaction { db in try state.save(db) }
        alice.store.invalidateCaches()
        #expect(try feed(author) == state)
        #expect(try alice.store.liveFeeds(of: group).contains { $0.author == author })
        #expect(try alice.store.feeds(of: group).count == 4, "Alice's feed and the three others, no row added")
    }
}
