// Goal: the relay quota (SPEC F16, DESIGN §3) on a real SQLite file: whole conversations this node is not in are
// evicted, least recently active first, until the count and byte bounds hold; member conversations, profile feeds
// and conversations this node wrote in are never touched; evictions are remembered (bounded, with expiry) and
// survive a restart; and a database from before the quota upgrades.
import Foundation
import GRDB
import NatterCrypto
import NatterModel
import NatterTestSupport
import Testing

@testable import NatterStore

@Suite("Relay quota on SQLite")
struct RelayQuotaTests {
    func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("natter-relay-\(UUID().uuidString)").path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// Bob's store on disk: a group he is in (with Alice), Alice's and his profiles, and `relayed` conversations of
    /// flood records from throwaway authors, the first received longest ago.
    func bobsStore(in directory: String, relayed: Int) throws -> (RecordStore, Replica, ConversationID, [ConversationID]) {
        let alice = try Replica("Alice", seed: 901)
        let bob = try Replica("Bob", seed: 902)
        try introduce([alice, bob])
        let group = try alice.conversations.createGroup(title: "Kept", members: [bob.id], now: alice.tick())
        try alice.conversations.send("members' history stays", in: group, now: alice.tick())
        let store = try RecordStore.open(directory: directory)
        _ = try store.ingest(try alice.store.allRecords().map(\.bytes), receivedAtMillis: 1)
        _ = try store.ingest(try bob.store.allRecords().map(\.bytes), receivedAtMillis: 1)
        let relays = (0..<relayed).map { floodConversation("relay-\($0)") }
        for (index, conversation) in relays.enumerated() {
            let records = try floodRecords(conversation: conversation, authors: 2, perAuthor: 10, seed: UInt64(index))
            _ = try store.ingest(records.map(\.bytes), receivedAtMillis: 1_000 + Int64(index))
        }
        try Conversations(store: store, identity: bob.identity).refreshChanged()
        return (store, bob, group, relays)
    }

    @Test("over the count bound, the least recently active relay conversations go whole; members' stay")
    func evictsByCount() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, group, relays) = try bobsStore(in: directory, relayed: 5)
        let before = try store.relayUsage(member: bob.id)
        #expect(before.map(\.conversation) == relays, "least recently active first; the group and profiles are not relayed")
        #expect(before.allSatisfy { $0.records == 20 && $0.bytes > 20 * 200 })

        let evicted = try store.enforce(
            RelayQuota(conversationsMax: 2, bytesMax: 1 << 30), member: bob.id, nowMillis: 5_000, rememberedMax: 100).evicted
        #expect(evicted == Array(relays.prefix(3)))
        #expect(try store.relayUsage(member: bob.id).map(\.conversation) == Array(relays.suffix(2)))
        for conversation in evicted {
            #expect(try store.feeds(of: conversation).isEmpty)
            #expect(try store.writer.read { db in
                try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM record WHERE conversation = ?", arguments: [Data(conversation.bytes)])
            } == 0)
        }
        let conversations = Conversations(store: store, identity: bob.identity)
        #expect(try conversations.history(group).last?.text == "members' history stays")
        #expect(try store.integrityCheck() == "ok")
        // Remembered across a restart.
        let remembered = Set(try store.evictedConversations(sinceMillis: 0).keys)
        #expect(remembered == Set(evicted))
    }

    @Test("over the byte bound, evictions go on until the bytes fit; nothing but relay conversations is ever evicted")
    func evictsByBytes() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, group, relays) = try bobsStore(in: directory, relayed: 4)
        let sizes = try store.relayUsage(member: bob.id).map(\.bytes)
        let evicted = try store.enforce(
            RelayQuota(conversationsMax: 100, bytesMax: sizes.suffix(1).reduce(0, +)), member: bob.id, nowMillis: 5_000,
            rememberedMax: 100).evicted
        #expect(evicted == Array(relays.prefix(3)))
        // A zero quota evicts every relay conversation, and only those.
        let all = try store.enforce(
            RelayQuota(conversationsMax: 0, bytesMax: 0), member: bob.id, nowMillis: 6_000, rememberedMax: 100).evicted
        #expect(all == [relays[3]])
        #expect(try store.relayUsage(member: bob.id).isEmpty)
        #expect(try !store.feeds(of: group).isEmpty)
        #expect(try !store.feeds(of: .profileFeed(of: bob.id)).isEmpty)
    }

    @Test("an eviction goes an eighth below the bound that was passed; below the bound nothing goes")
    func evictsWithHeadroom() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, _, relays) = try bobsStore(in: directory, relayed: 8)
        let sizes = try store.relayUsage(member: bob.id).map(\.bytes)
        let total = sizes.reduce(0, +)
        // Within the bound (exactly at it): nothing is evicted, although the usage is above the eviction target.
        let within = try store.enforce(
            RelayQuota(conversationsMax: 8, bytesMax: total, headroomDivisor: 8), member: bob.id, nowMillis: 5_000,
            rememberedMax: 100)
        #expect(within.evicted.isEmpty)
        #expect(within.remaining.map(\.conversation) == relays)
        // One byte over: eviction goes on until three quarters of the bound hold, not just the bound.
        let quota = RelayQuota(conversationsMax: 100, bytesMax: total - 1, headroomDivisor: 4)
        #expect(quota.bytesAfterEviction == (total - 1) - (total - 1) / 4)
        let over = try store.enforce(quota, member: bob.id, nowMillis: 6_000, rememberedMax: 100)
        var expected = 0
        var left = total
        while left > quota.bytesAfterEviction {
            left -= sizes[expected]
            expected += 1
        }
        #expect(expected >= 2, "the headroom takes more than the one conversation the bound alone needs")
        #expect(over.evicted == Array(relays.prefix(expected)))
        #expect(over.remaining.reduce(0) { $0 + $1.bytes } == left)
        #expect(try store.relayUsage(member: bob.id) == over.remaining)
    }

    @Test("possibly relay-only: conversations not derived yet and relay conversations, never members' or own")
    func possiblyRelayOnly() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, group, relays) = try bobsStore(in: directory, relayed: 2)
        let fresh = floodConversation("not derived yet")
        let records = try floodRecords(conversation: fresh, authors: 1, perAuthor: 3, seed: 77)
        _ = try store.ingest(records.map(\.bytes), receivedAtMillis: 9_000)
        let asked = Set([group, fresh, .profileFeed(of: bob.id)] + relays)
        #expect(try store.possiblyRelayOnly(asked, member: bob.id) == Set(relays + [fresh]))
    }

    @Test("conversations a neighbour writes in go last: a flood cannot push them out before its own")
    func neighboursLast() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, _, relays) = try bobsStore(in: directory, relayed: 5)
        // The oldest relay conversation has a feed by a peer next to this node.
        let neighbour = try #require(try store.feeds(of: relays[0]).first?.author)
        let usage = try store.relayUsage(member: bob.id, neighbours: [neighbour])
        #expect(usage.map(\.conversation) == Array(relays[1...]) + [relays[0]])
        #expect(usage.map(\.servesNeighbour) == [false, false, false, false, true])
        let evicted = try store.enforce(
            RelayQuota(conversationsMax: 2, bytesMax: 1 << 30), member: bob.id, neighbours: [neighbour],
            nowMillis: 5_000, rememberedMax: 100).evicted
        #expect(evicted == Array(relays[1...3]))
    }

    @Test("evictions are remembered bounded (oldest forgotten first) and expire; an invitation forgets one")
    func rememberedBounded() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, _, relays) = try bobsStore(in: directory, relayed: 4)
        for (index, conversation) in relays.enumerated() {
            _ = try store.enforce(
                RelayQuota(conversationsMax: relays.count - index - 1, bytesMax: 1 << 30), member: bob.id,
                nowMillis: 10_000 + Int64(index), rememberedMax: 2)
            #expect(try store.feeds(of: conversation).isEmpty)
        }
        #expect(try store.evictedConversations(sinceMillis: 0) == [relays[2]: 10_002, relays[3]: 10_003])
        try store.forgetEviction(relays[3])
        #expect(try store.evictedConversations(sinceMillis: 0) == [relays[2]: 10_002])
        #expect(try store.evictedConversations(sinceMillis: 10_003).isEmpty, "expired")
    }

    @Test("each feed's bytes and newest arrival equal what its records hold: after ingest, junk reduction, eviction")
    func feedSizesMatchRecords() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (store, bob, _, relays) = try bobsStore(in: directory, relayed: 4)
        try Self.expectFeedSizesMatchRecords(store)
        #expect(try store.feeds().contains { $0.storedBytes > 0 && $0.lastReceivedMillis > 1 })
        // The usage the quota measures is what the records hold.
        for usage in try store.relayUsage(member: bob.id) {
            let (records, bytes, newest) = try store.writer.read { db in
                let row = try Row.fetchOne(
                    db, sql: "SELECT COUNT(*), SUM(length(bytes)), MAX(received_ms) FROM record WHERE conversation = ?",
                    arguments: [Data(usage.conversation.bytes)])!
                return (row[0] as Int, row[1] as Int, row[2] as Int64)
            }
            #expect(usage.records == records && usage.bytes == bytes && usage.lastActivityMillis == newest)
        }
        let junkAuthor = try #require(try store.feeds(of: relays[0]).first?.author)
        let dropped = try store.reduceJunk(conversation: relays[0], authors: [junkAuthor])
        #expect(dropped > 0)
        try Self.expectFeedSizesMatchRecords(store)
        _ = try store.enforce(
            RelayQuota(conversationsMax: 2, bytesMax: 1 << 30), member: bob.id, nowMillis: 9_000, rememberedMax: 10)
        try Self.expectFeedSizesMatchRecords(store)
        // More records on top, a second arrival time.
        let more = try floodRecords(conversation: relays[3], authors: 2, perAuthor: 12, seed: 3)
        _ = try store.ingest(more.map(\.bytes), receivedAtMillis: 20_000)
        try Self.expectFeedSizesMatchRecords(store)
    }

    /// Every feed row's `stored_bytes` and `last_received_ms` against its records (the oracle: a scan).
    static func expectFeedSizesMatchRecords(_ store: RecordStore) throws {
        let scanned = try store.writer.read { db in
            try Row.fetchAll(
                db,
                sql: """
                    SELECT f.conversation, f.author, f.stored_bytes, f.last_received_ms,
                        (SELECT COALESCE(SUM(length(r.bytes)), 0) FROM record r
                            WHERE r.conversation = f.conversation AND r.author = f.author),
                        (SELECT COALESCE(MAX(r.received_ms), 0) FROM record r
                            WHERE r.conversation = f.conversation AND r.author = f.author)
                    FROM feed f
                    """)
        }
        #expect(!scanned.isEmpty)
        for row in scanned {
            #expect(row[2] as Int == row[4] as Int, "bytes of feed \(row[1] as Data)")
            #expect(row[3] as Int64 == row[5] as Int64, "newest arrival of feed \(row[1] as Data)")
        }
    }

    @Test("a database from before the quotas (v5) upgrades: evictions table, junk column, the log intact")
    func upgradesFromV5() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let digest: [UInt8]
        do {
            let (store, _, _, _) = try bobsStore(in: directory, relayed: 2)
            digest = try store.logDigest()
            let older = try DatabaseQueue()
            try Schema.migrator.migrate(older, upTo: "v5-search-and-local-settings")
            try SearchMigrationTests().downgrade(store.writer, to: older)
            #expect(try SearchMigrationTests().schema(store.writer) == SearchMigrationTests().schema(older))
            #expect(try store.writer.read { db in try db.tableExists("evicted_conversation") } == false)
        }
        let reopened = try RecordStore.open(directory: directory)
        #expect(try reopened.writer.read { db in try db.tableExists("evicted_conversation") })
        #expect(try reopened.feeds().allSatisfy { !$0.isJunk }, "v7: every existing feed is not junk")
        #expect(try reopened.logDigest() == digest)
        #expect(try reopened.evictedConversations(sinceMillis: 0).isEmpty)
        #expect(try reopened.integrityCheck() == "ok")
        try Self.expectFeedSizesMatchRecords(reopened)  // v10 filled them from the records
    }
}

@Suite("Junk feeds reduced to their frontier")
struct JunkFeedTests {
    @Test("authors never in the roster: frontier kept, bodies dropped, nothing more taken; members' history and writing go on")
    func junkReduced() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-junk-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let (alice, bob, group, junk) = try floodedGroup(seed: 911, authors: 3, perAuthor: 20)
        let store = try RecordStore.open(directory: directory)
        _ = try store.ingest(try alice.store.allRecords().map(\.bytes), receivedAtMillis: 1)
        _ = try store.ingest(try bob.store.allRecords().map(\.bytes), receivedAtMillis: 1)
        _ = try store.ingest(junk.map(\.bytes), receivedAtMillis: 2)
        let conversations = Conversations(store: store, identity: bob.identity)
        try conversations.refreshChanged()
        let digest = try store.logDigest()
        let junkAuthors = Set(junk.map(\.header.author))

        #expect(Set(try conversations.junkAuthors(in: group)) == junkAuthors)
        #expect(Set(try conversations.reduceJunk(in: group)) == junkAuthors)
        try conversations.refreshChanged()
        #expect(try conversations.junkAuthors(in: group).isEmpty, "reduced once")
        // The frontier stays (sync stops fetching; the digest is unchanged), the bodies are gone.
        #expect(try store.logDigest() == digest)
        for feed in try store.feeds(of: group) where junkAuthors.contains(feed.author) {
            #expect(feed.stored == 20 && feed.applied == 20 && feed.isJunk && feed.stalledReason == nil)
            #expect(try store.recordBytes(conversation: group, author: feed.author, from: 1, limit: 100).isEmpty)
        }
        #expect(try store.appliedRecords(of: group).allSatisfy { !junkAuthors.contains($0.header.author) })
        // Delivered again, junk is a duplicate (not even verified); continued, its frontier advances without bodies.
        // (The same seed gives the first author again, with 5 records past its frontier.)
        let more = try floodRecords(conversation: group, authors: 1, perAuthor: 25, seed: 913)
        #expect(Array(more.prefix(20)) == Array(junk.prefix(20)))
        let outcomes = try store.ingest(more.map(\.bytes), receivedAtMillis: 3).outcomes
        #expect(outcomes.prefix(20).allSatisfy { if case .duplicate = $0 { true } else { false } })
        #expect(outcomes.suffix(5).allSatisfy { if case .stored = $0 { true } else { false } })
        let continued = try #require(try store.feeds(of: group).first { $0.author == more[0].header.author })
        #expect(continued.isJunk && continued.stored == 25 && continued.applied == 25)
        #expect(try store.recordBytes(conversation: group, author: continued.author, from: 1, limit: 100).isEmpty)
        // Members read and write on (a new record depends on the junk feeds' frontier: ids and Lamport numbers kept).
        #expect(try conversations.history(group).compactMap(\.text) == ["before the flood"])
        let reply = try conversations.send("after the flood", in: group, now: 1_800_000_000_000)
        try conversations.refreshChanged()
        #expect(try conversations.history(group).last?.text == "after the flood")
        _ = try alice.store.ingest(try store.allRecords().map(\.bytes), receivedAtMillis: 4)
        try alice.conversations.refreshChanged()
        #expect(try alice.store.appliedClock(of: group)[bob.id] == reply.header.sequence, "applies elsewhere")
        #expect(try store.integrityCheck() == "ok")
    }
}

extension RelayQuotaTests {
    @Test("records read from memory (RecentRecords) equal what the tables hold: after ingest, junk reduction, eviction")
    func recentRecordsMatchTables() throws {
        let (directory, other) = (try temporaryDirectory(), try temporaryDirectory())
        // `try?`: removing the temporary directories is cleanup; one left behind fails nothing.
        defer { for path in [directory, other] { try? FileManager.default.removeItem(atPath: path) } }
        // Junk reduction drops bodies the memory holds.
        let (store, _, _, relays) = try bobsStore(in: directory, relayed: 4)
        try Self.expectReadsMatchTables(store)
        let junkAuthor = try #require(try store.feeds(of: relays[3]).first?.author)
        #expect(try store.reduceJunk(conversation: relays[3], authors: [junkAuthor]) > 0)
        try Self.expectReadsMatchTables(store)
        let more = try floodRecords(conversation: relays[3], authors: 2, perAuthor: 12, seed: 3)
        _ = try store.ingest(more.map(\.bytes), receivedAtMillis: 20_000)
        try Self.expectReadsMatchTables(store)
        // A write past the store (the lab's broken variants) is seen once the caches are dropped.
        try store.writer.write { db in
            try db.execute(
                sql: "UPDATE record SET bytes = X'' WHERE conversation = ?", arguments: [Data(relays[3].bytes)])
        }
        store.invalidateCaches()
        try Self.expectReadsMatchTables(store)
        // Eviction deletes records the memory holds.
        let (evicting, bob, _, _) = try bobsStore(in: other, relayed: 4)
        let feedsBefore = try evicting.feeds()
        _ = try evicting.enforce(
            RelayQuota(conversationsMax: 2, bytesMax: 1 << 30), member: bob.id, nowMillis: 9_000, rememberedMax: 10)
        try Self.expectReadsMatchTables(evicting)
        let evicted = Set(feedsBefore.map(\.conversation)).subtracting(try evicting.feeds().map(\.conversation))
        #expect(!evicted.isEmpty)
        for feed in feedsBefore where evicted.contains(feed.conversation) {
            let bytes = try evicting.recordBytes(
                conversation: feed.conversation, author: feed.author, from: 1, limit: 1)
            #expect(bytes.isEmpty)
        }
    }

    /// Every feed's records, from every start and with a few limits, and their arrival times, against a scan of the
    /// record table (the oracle).
    static func expectReadsMatchTables(_ store: RecordStore, sourceLocation: SourceLocation = #_sourceLocation) throws {
        for feed in try store.feeds() {
            let rows = try store.writer.read { db in
                try Row.fetchAll(
                    db,
                    sql: """
                        SELECT sequence, id, bytes, received_ms FROM record
                        WHERE conversation = ? AND author = ? AND length(bytes) > 0 ORDER BY sequence
                        """, arguments: [Data(feed.conversation.bytes), Data(feed.author.bytes)])
            }
            for from in 1...max(1, feed.stored) {
                for limit in [1, 3, 1_000] {
                    let expected = rows.filter { ($0[0] as Int64) >= Int64(from) }.prefix(limit).map {
                        [UInt8]($0[2] as Data)
                    }
                    let bytes = try store.recordBytes(
                        conversation: feed.conversation, author: feed.author, from: from, limit: limit)
                    #expect(
                        bytes == Array(expected), "\(feed.author) from \(from) limit \(limit)",
                        sourceLocation: sourceLocation)
                    let records = try store.records(
                        conversation: feed.conversation, author: feed.author, from: from, limit: limit)
                    #expect(records.map(\.bytes) == Array(expected), sourceLocation: sourceLocation)
                }
            }
            let refs = rows.map { row in
                RecordRef(
                    id: RecordID(bytes: row[1] as Data),
                    position: RecordPosition(
                        conversation: feed.conversation, author: feed.author, sequence: UInt64(row[0] as Int64)))
            }
            let times = try store.receiveTimes(of: refs)
            let arrivals = rows.map { (RecordID(bytes: $0[1] as Data), $0[3] as Int64) }
            #expect(times == Dictionary(uniqueKeysWithValues: arrivals), sourceLocation: sourceLocation)
        }
    }
}
