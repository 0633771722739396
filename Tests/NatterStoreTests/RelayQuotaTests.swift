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
            RelayQuota(conversationsMax: 2, bytesMax: 1 << 30), member: bob.id, nowMillis: 5_000, rememberedMax: 100)
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
            rememberedMax: 100)
        #expect(evicted == Array(relays.prefix(3)))
        // A zero quota evicts every relay conversation, and only those.
        let all = try store.enforce(
            RelayQuota(conversationsMax: 0, bytesMax: 0), member: bob.id, nowMillis: 6_000, rememberedMax: 100)
        #expect(all == [relays[3]])
        #expect(try store.relayUsage(member: bob.id).isEmpty)
        #expect(try !store.feeds(of: group).isEmpty)
        #expect(try !store.feeds(of: .profileFeed(of: bob.id)).isEmpty)
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
            nowMillis: 5_000, rememberedMax: 100)
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

    @Test("a database from before the relay quota (v5) upgrades: the evictions table appears, the log is intact")
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
            #expect(try store.writer.read { db in try db.tableExists("evicted_conversation") } == false)
        }
        let reopened = try RecordStore.open(directory: directory)
        #expect(try reopened.writer.read { db in try db.tableExists("evicted_conversation") })
        #expect(try reopened.logDigest() == digest)
        #expect(try reopened.evictedConversations(sinceMillis: 0).isEmpty)
        #expect(try reopened.integrityCheck() == "ok")
    }
}
