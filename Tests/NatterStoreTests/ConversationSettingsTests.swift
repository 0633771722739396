// Goal: mute and archive (SPEC F5, F15) are this node's own settings: a mute lasts until its time (or for ever),
// an archived conversation leaves the list and the unread total until a new line arrives, and neither ever becomes
// a record or changes what members agree on. Method: replicas with explicit clocks; the list and `isMuted` are read
// at chosen times.
import Foundation
import NatterModel
import NatterStore
import Testing

@Suite("Conversation settings: mute and archive")
struct ConversationSettingsTests {
    @Test("a mute lasts until its time; for ever until unmuted; muting again replaces the time")
    func muteUntil() throws {
        let (people, chat) = try ConversationTests().group(["Alice", "Bob"], seed: 800)
        let bob = people[1]
        try bob.conversations.refresh(chat)
        let conversations = bob.conversations
        #expect(try !conversations.isMuted(chat, at: 0))
        #expect(try conversations.conversationList().first?.mutedUntilMillis == nil)

        try conversations.mute(chat, until: 5_000)
        #expect(try conversations.isMuted(chat, at: 4_999))
        #expect(try !conversations.isMuted(chat, at: 5_000))
        let row = try #require(try conversations.conversationList().first)
        #expect(row.mutedUntilMillis == 5_000 && row.isMuted(at: 1_000) && !row.isMuted(at: 6_000))

        try conversations.mute(chat, until: nil)
        #expect(try conversations.isMuted(chat, at: .max - 1))
        #expect(try conversations.conversationList().first?.mutedUntilMillis == .max)
        try conversations.mute(chat, until: 2_000)
        #expect(try !conversations.isMuted(chat, at: 3_000))

        try conversations.mute(chat, until: nil)
        try conversations.unmute(chat)
        #expect(try !conversations.isMuted(chat, at: 0))
        #expect(try conversations.conversationList().first?.isMuted(at: 0) == false)
    }

    @Test("archived: out of the list and the unread total until a new line arrives, then back by itself")
    func archiveUntilNewActivity() throws {
        let (people, chat) = try ConversationTests().group(["Alice", "Bob"], seed: 810)
        let (alice, bob) = (people[0], people[1])
        let quiet = try alice.conversations.createGroup(title: "Quiet", members: [bob.id], now: alice.tick())
        try alice.conversations.send("first", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.refreshChanged()
        #expect(try bob.conversations.totalUnread() == 1)

        try bob.conversations.archive(chat)
        #expect(try bob.conversations.conversationList().map(\.id) == [quiet])
        #expect(Set(try bob.conversations.conversationList(includeArchived: true).map(\.id)) == [chat, quiet])
        #expect(try bob.conversations.conversationList(includeArchived: true).first { $0.id == chat }?.archived == true)
        #expect(try bob.conversations.conversationList(filter: "Lab").isEmpty)
        #expect(try bob.conversations.totalUnread() == 0)

        // A refresh with nothing new, a reaction, or a read receipt is not new activity.
        let first = try #require(try bob.conversations.history(chat).last)
        try bob.conversations.refresh(chat)
        try bob.conversations.react(.like, to: first.id, in: chat, now: bob.tick())
        try bob.conversations.refresh(chat)
        #expect(try bob.conversations.conversationList().map(\.id) == [quiet])

        try alice.conversations.send("are you there?", in: chat, now: alice.tick())
        try bob.pull(from: alice)
        let changes = try bob.conversations.refreshChanged()
        #expect(changes.deltas[chat]?.lines.filter { $0.kind == .new }.count == 1)
        let row = try #require(try bob.conversations.conversationList().first { $0.id == chat })
        #expect(!row.archived && row.unread == 2)
        #expect(try bob.conversations.totalUnread() == 2)

        // Unarchiving by hand, and settings of a conversation this node cannot read.
        try bob.conversations.archive(quiet)
        try bob.conversations.unarchive(quiet)
        #expect(try bob.conversations.conversationList().count == 2)
        let stranger = ConversationID(bytes: [UInt8](repeating: 7, count: 32))
        #expect(throws: ConversationError.noSuchConversation) { try bob.conversations.archive(stranger) }
        #expect(throws: ConversationError.noSuchConversation) { try bob.conversations.mute(stranger, until: nil) }
    }

    @Test("settings are local: no record is written, the digest is unchanged, a rebuild of the tables keeps them")
    func settingsAreLocal() throws {
        let (people, chat) = try ConversationTests().group(["Alice", "Bob"], seed: 820)
        let bob = people[1]
        try bob.conversations.refresh(chat)
        let records = try bob.store.statistics()
        let digest = try bob.state(chat).digest()
        try bob.conversations.mute(chat, until: nil)
        try bob.conversations.archive(chat)
        #expect(try bob.store.statistics() == records)
        #expect(try bob.state(chat).digest() == digest)
        try bob.store.writer.write { db in
            for table in ["timeline", "reaction", "conversation_member", "conversation", "epoch_key"] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
        }
        try bob.conversations.refresh(chat)
        let row = try #require(try bob.conversations.conversationList(includeArchived: true).first)
        #expect(row.archived && row.mutedUntilMillis == .max)
    }
}
