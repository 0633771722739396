// Goal: the derived tables answer what the REPL asks — the conversation list with previews and unread counts, and
// history pages by cursor — and are a faithful, rebuildable cache of the derived state. Method: real replicas
// write through `Conversations`, `refresh` fills the tables, and the queries are compared with the state.
import Foundation
import GRDB
import NatterCrypto
import NatterModel
import Testing

@testable import NatterStore

@Suite("Conversation tables and queries")
struct ConversationTableTests {
    @Test("the list sorts by last activity, previews \"Name: text\" in groups, counts unread until read")
    func conversationList() throws {
        let alice = try Replica("Alice", seed: 301)
        let bob = try Replica("Bob", seed: 302)
        let carol = try Replica("Carol", seed: 303)
        try introduce([alice, bob, carol])
        let group = try alice.conversations.createGroup(
            title: "Book club", members: [bob.id, carol.id], now: alice.tick())
        try alice.conversations.send(String(repeating: "x", count: 150), in: group, now: alice.tick())
        try alice.conversations.send("chapter 3 tonight", in: group, now: alice.tick())
        let direct = try carol.conversations.sendDirect("hey Bob", to: bob.id, now: carol.tick()).header.conversation
        try bob.pull(from: alice)
        try bob.pull(from: carol)
        for id in [group, direct] { try bob.conversations.refresh(id) }
        let list = try bob.conversations.conversationList()
        #expect(list.count == 2)
        let book = try #require(list.first { $0.id == group })
        #expect(book.title == "Book club")
        #expect(book.preview == "Alice: chapter 3 tonight")
        #expect(book.unread == 2)
        let chat = try #require(list.first { $0.id == direct })
        #expect(chat.title == "Carol" && chat.preview == "hey Bob" && chat.unread == 1)
        #expect(try bob.conversations.totalUnread() == 3)
        #expect(try bob.conversations.conversationList(filter: "book").map(\.id) == [group])
        #expect(try bob.conversations.conversationList(filter: "carol").map(\.id) == [direct])

        try bob.conversations.markRead(group, now: bob.tick())
        try bob.conversations.refresh(group)
        #expect(try bob.conversations.totalUnread() == 1)
        // Sorted by local receive time of the last activity (records here all "arrive" at 1; ties by id).
        #expect(Set(try bob.conversations.conversationList().map(\.id)) == [group, direct])
    }

    @Test("a relay's refresh reads only new commits while it holds no key, and shows everything once invited")
    func relayReadsOnlyCommits() throws {
        let alice = try Replica("Alice", seed: 311)
        let bob = try Replica("Bob", seed: 312)
        let relay = try Replica("Relay", seed: 313)
        try introduce([alice, bob, relay])
        let group = try alice.conversations.createGroup(title: "Plans", members: [bob.id], now: alice.tick())
        for n in 0..<3 { try alice.conversations.send("early \(n)", in: group, now: alice.tick()) }
        try relay.pull(from: alice)
        #expect(try relay.conversations.refreshChanged().deltas[group] != nil, "the first refresh derives it in full")
        let checked = try #require(relay.conversations.keyless.withLock { $0[group] }, "no key: remembered")
        for n in 0..<40 { try alice.conversations.send("later \(n)", in: group, now: alice.tick()) }
        try relay.pull(from: alice)
        #expect(try relay.conversations.refreshChanged().deltas[group] == nil, "nothing to show, nothing reported")
        let read = relay.conversations.caches.withLock { $0[group]?.applied[alice.id] ?? 0 }
        let applied = try relay.store.feeds(of: group).first { $0.author == alice.id }!.applied
        #expect(read < applied, "the 40 messages were not read")
        #expect(relay.conversations.keyless.withLock { $0[group]?[alice.id] } == applied)
        #expect(checked[alice.id]! < applied)
        #expect(try relay.conversations.conversationList().isEmpty)

        // Invited: the commit with its slot opens the key, and the whole history shows.
        try alice.conversations.add([relay.id], to: group, now: alice.tick())
        try relay.pull(from: alice)
        #expect(try relay.conversations.refreshChanged().deltas[group] != nil)
        #expect(relay.conversations.keyless.withLock { $0[group] } == nil)
        #expect(try relay.conversations.conversationList().map(\.id) == [group])
        #expect(try relay.texts(group) == (0..<3).map { "early \($0)" } + (0..<40).map { "later \($0)" })
        let page = try relay.conversations.history(group)
        #expect(page.contains { $0.text == "later 39" })
    }

    @Test("history pages: the last 50, then older pages by cursor, oldest first within a page")
    func historyPages() throws {
        let alice = try Replica("Alice", seed: 311)
        let bob = try Replica("Bob", seed: 312)
        try introduce([alice, bob])
        let chat = try alice.conversations.createGroup(title: nil, members: [bob.id], now: alice.tick())
        for index in 0..<120 { try alice.conversations.send("line \(index)", in: chat, now: alice.tick()) }
        try alice.conversations.refresh(chat)
        let last = try alice.conversations.history(chat)
        #expect(last.count == 50)
        #expect(last.first?.text == "line 70" && last.last?.text == "line 119")
        let older = try alice.conversations.history(chat, before: last.first!.cursor)
        #expect(older.first?.text == "line 20" && older.last?.text == "line 69")
        let oldest = try alice.conversations.history(chat, before: older.first!.cursor)
        #expect(oldest.count == 21)
        #expect(oldest.first?.isSystem == true && oldest.first?.systemText == "Alice created the group")
        #expect(oldest.last?.text == "line 19")
        let times = (oldest + older + last).map(\.displayedAtMillis)
        #expect(times == times.sorted())
        #expect(try alice.conversations.conversationList().first?.title == "Bob")
    }

    @Test("the tables are a cache: refreshing again, or after dropping them, gives the same rows")
    func rebuildable() throws {
        let (people, chat) = try ConversationTests().group(["Alice", "Bob", "Carol"], seed: 320)
        let (alice, bob) = (people[0], people[1])
        let message = try alice.conversations.send("hi", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.react(.laugh, to: message.id, in: chat, now: bob.tick())
        try bob.conversations.edit(
            try bob.conversations.send("typo", in: chat, now: bob.tick()).id, to: "fixed",
            in: chat, now: bob.tick())
        try bob.conversations.refresh(chat)
        let before = try dump(bob.store)
        try bob.conversations.refresh(chat)
        #expect(try dump(bob.store) == before)
        try bob.store.writer.write { db in
            for table in ["timeline", "timeline_file", "reaction", "conversation_member", "conversation", "epoch_key"] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
        }
        try bob.conversations.refresh(chat)
        #expect(try dump(bob.store) == before)
        #expect(before.contains("fixed") && before.contains("\(Reaction.laugh.rawValue)"))
    }

    func dump(_ store: RecordStore) throws -> String {
        try store.writer.read { db in
            let tables = try ["conversation", "conversation_member", "timeline", "timeline_file", "reaction", "epoch_key"].map {
                table in
                try Row.fetchAll(db, sql: "SELECT * FROM \(table) ORDER BY 1, 2").map { "\($0)" }.joined(
                    separator: "\n")
            }
            // Search documents without their rowids (a shown-time slot: the order of insertion picks it).
            let documents = try Row.fetchAll(
                db, sql: "SELECT message, conversation, scope, text FROM search_document ORDER BY 1"
            ).map { "\($0)" }.joined(separator: "\n")
            return (tables + [documents]).joined(separator: "\n--\n")
        }
    }
}

extension ConversationTableTests {
    @Test("ingest marks changed conversations in its own transaction; a restart refreshes what a crash left behind")
    func dirtyConversationsSurviveACrash() throws {
        let alice = try Replica("Alice", seed: 331)
        let bob = try Replica("Bob", seed: 332)
        try introduce([alice, bob])
        let chat = try alice.conversations.createGroup(title: "Ops", members: [bob.id], now: alice.tick())
        try alice.conversations.send("deploy at noon", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        // Bob's node "crashes" before refreshing: a fresh service on the same store catches up from the marks.
        let restarted = Conversations(store: bob.store, identity: bob.identity)
        let changes = try restarted.refreshChanged()
        #expect(changes.deltas[chat]?.lines.filter { $0.kind == .new }.count == 2)
        #expect(try restarted.history(chat).last?.text == "deploy at noon")
        #expect(try restarted.refreshChanged().deltas.isEmpty)
        try bob.pull(from: alice)  // nothing new: nothing marked
        #expect(try restarted.refreshChanged().deltas.isEmpty)
    }
}

extension ConversationTableTests {
    /// Refresh writes only the rows that changed: after random actions and partial exchanges, each followed by a
    /// refresh, the tables must equal a rebuild from empty tables — edits, deletes, retractions, reactions changed
    /// and removed, members and renames included.
    @Test("tables refreshed row by row after every step equal a rebuild from empty tables", arguments: 0..<12)
    func incrementalRefreshEqualsRebuild(seed: UInt64) throws {
        var rng = SeededGenerator(seed: 9_000 + seed)
        let replicas = try (0..<3).map { try Replica("R\($0)", seed: 9_100 + seed * 10 + UInt64($0)) }
        try introduce(replicas)
        let chat = try replicas[0].conversations.createGroup(
            title: "g", members: [replicas[1].id, replicas[2].id], now: replicas[0].tick())
        try syncAll(replicas)
        for _ in 0..<40 {
            let actor = replicas.randomElement(using: &rng)!
            if Int.random(in: 0..<3, using: &rng) == 0 {
                let source = replicas.randomElement(using: &rng)!
                _ = try deliver(try source.store.allRecords(), to: actor.store, batchSizes: 1...4, rng: &rng)
            } else {
                _ = try ConversationConvergenceTests.act(actor, in: chat, replicas: replicas, rng: &rng)
            }
            for replica in replicas { try replica.conversations.refreshChanged() }
        }
        for replica in replicas {
            try expectRebuildMatches(replica, chat, "seed \(seed): \(replica.name)'s tables differ")
        }
    }

    /// Drops the derived tables, refreshes `chat` from empty tables and expects the rows the incremental refreshes
    /// left.
    func expectRebuildMatches(
        _ replica: Replica, _ chat: ConversationID, _ message: String = "tables differ from a rebuild",
        sourceLocation: SourceLocation = #_sourceLocation
    ) throws {
        let incremental = try dump(replica.store)
        try replica.store.writer.write { db in
            for table in [
                "timeline", "timeline_file", "reaction", "conversation_member", "conversation", "epoch_key",
                "search_document",
            ] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
        }
        try replica.conversations.refresh(chat)
        #expect(try dump(replica.store) == incremental, "\(message)", sourceLocation: sourceLocation)
    }
}

extension ConversationTableTests {
    /// An incremental refresh deletes a line's file and reaction rows only where it wrote some: a deleted file
    /// message and an un-reacted message lose theirs, and the tables still equal a rebuild.
    @Test("an incremental refresh removes a deleted file message's file row and an undone reaction's row")
    func incrementalRefreshRemovesFileAndReactionRows() throws {
        let alice = try Replica("Alice", seed: 321)
        let bob = try Replica("Bob", seed: 322)
        try introduce([alice, bob])
        let chat = try alice.conversations.createGroup(title: "g", members: [bob.id], now: alice.tick())
        let file = try alice.conversations.sendFile([1, 2, 3], name: "notes.txt", in: chat, now: alice.tick())
        let text = try alice.conversations.send("hello", in: chat, now: alice.tick())
        try alice.conversations.react(.love, to: text.id, in: chat, now: alice.tick())
        try alice.conversations.refreshChanged()
        func count(_ sql: String) throws -> Int { try alice.store.writer.read { try Int.fetchOne($0, sql: sql) ?? 0 } }
        #expect(try count("SELECT count(*) FROM timeline_file") == 1)
        #expect(try count("SELECT count(*) FROM reaction") == 1)
        try alice.conversations.delete(file.id, in: chat, now: alice.tick())
        try alice.conversations.unreact(text.id, in: chat, now: alice.tick())
        try alice.conversations.refreshChanged()
        #expect(try count("SELECT count(*) FROM timeline_file") == 0)
        #expect(try count("SELECT count(*) FROM reaction") == 0)
        try expectRebuildMatches(alice, chat)
    }
}
