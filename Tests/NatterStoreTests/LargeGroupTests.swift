// Goal: groups at the size of a room work at 64 members (issue 18, point 5): created, a member removed and the group
// re-keyed, every remaining member reads the next message and the removed one cannot. Method: 64 replicas (stores
// with their conversation service) exchanging records by hand through the founder, a hub (`Replica.pull`); the
// removed member's database is read directly.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@Suite("Groups of 64", .serialized)
struct LargeGroupTests {
    @Test("64 members: created, one removed and re-keyed; the rest read the next message, the removed one cannot")
    func sixtyFourMembers() throws {
        let people = try (0..<64).map { try Replica("P\($0)", seed: 64_000 + UInt64($0)) }
        let founder = people[0]
        // Profiles (encryption keys) reach the founder, who seals the group to everyone.
        for person in people.dropFirst() { try founder.pull(from: person) }
        let group = try founder.conversations.createGroup(
            title: "Hall", members: people.dropFirst().map(\.id), now: founder.tick())
        try founder.conversations.send("welcome", in: group, now: founder.tick())
        for person in people.dropFirst() { try person.pull(from: founder) }
        for person in people {
            #expect(try person.state(group).members.count == 64)
            #expect(try person.texts(group) == ["welcome"], "\(person.name)")
        }

        // The founder removes P5: the removal opens a new epoch sealed to the 63 others.
        let removed = people[5]
        let removal = try founder.conversations.remove([removed.id], from: group, now: founder.tick())
        #expect(removal.bytes.count <= NatterModel.Limits.recordBytesMax)
        try founder.conversations.send("after the removal", in: group, now: founder.tick())
        for person in people.dropFirst() { try person.pull(from: founder) }

        for person in people where person !== removed {
            let state = try person.state(group)
            #expect(state.members.count == 63 && state.members[removed.id] == nil, "\(person.name)")
            #expect(try person.texts(group).last == "after the removal", "\(person.name)")
        }
        // The removed member holds the records (a relay may) but reads nothing sent after its removal: its own
        // database has neither the new epoch's key nor the message's text.
        #expect(try removed.store.feeds(of: group).contains { $0.author == founder.id && $0.stored >= 4 })
        #expect(try removed.texts(group) == ["welcome"])
        try removed.conversations.refresh(group)
        let keys = try removed.store.writer.read { db in
            try Int.fetchOne(db, sql: "SELECT COUNT(*) FROM epoch_key WHERE conversation = ?", arguments: [Data(group.bytes)])
        }
        #expect(keys == 1, "only the founding epoch's key")
        #expect(try !removed.conversations.search("removal").contains { $0.conversation == group })
    }

    @Test("the largest group the limits allow: a 256-member create commit fits the record cap, and a member opens it")
    func largestGroupFits() throws {
        let founder = try Replica("Founder", seed: 256_000)
        let people = try (1..<NatterModel.Limits.groupMembersMax).map { try Replica("P\($0)", seed: 256_000 + UInt64($0)) }
        for person in people { try founder.pull(from: person) }
        let group = try founder.conversations.createGroup(title: "Hall", members: people.map(\.id), now: founder.tick())
        let genesis = try #require(try founder.store.records(conversation: group, author: founder.id, from: 1, limit: 1).first)
        #expect(genesis.bytes.count <= NatterModel.Limits.recordBytesMax)
        let last = people[people.count - 1]
        try last.pull(from: founder)
        #expect(try last.state(group).members.count == NatterModel.Limits.groupMembersMax)
        // One more is refused by the author, before anything is written.
        let extra = try Replica("Extra", seed: 257_000)
        try founder.pull(from: extra)
        #expect(throws: (any Error).self) {
            try founder.conversations.add([extra.id], to: group, now: founder.tick())
        }
    }
}
