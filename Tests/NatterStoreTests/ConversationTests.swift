// Goal: the conversation rules of SPEC F1–F11 hold end to end: what a member writes through `Conversations` is
// what every other member derives, permissions are enforced by every reader, and keys reach exactly the roster.
// Method: replicas with real identities, real SQLite stores (in memory) and real encryption, exchanging every
// record they hold; each test checks what each member's own derived state shows.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@Suite("Conversations")
struct ConversationTests {
    // MARK: - Direct conversations (F1, F7)

    @Test("1:1: sending → sent → delivered → read, and both sides agree")
    func directStatuses() throws {
        let alice = try Replica("Alice", seed: 1)
        let bob = try Replica("Bob", seed: 2)
        try introduce([alice, bob])
        let first = try alice.conversations.sendDirect("hello Bob", to: bob.id, now: alice.tick())
        let chat = first.header.conversation
        #expect(try chat == bob.conversations.directConversationID(with: alice.id))
        #expect(try alice.state(chat).status(of: first.id)?.phase == .sent)

        try bob.pull(from: alice)
        #expect(try bob.texts(chat) == ["hello Bob"])
        try bob.conversations.send("hi Alice", in: chat, now: bob.tick())
        try alice.pull(from: bob)
        #expect(try alice.state(chat).status(of: first.id)?.phase == .delivered)

        try bob.conversations.markRead(chat, now: bob.tick())
        try alice.pull(from: bob)
        let status = try #require(try alice.state(chat).status(of: first.id))
        #expect(status.phase == .read)
        #expect(status.description == "read")
        #expect(try alice.state(chat).digest() == bob.state(chat).digest())
        #expect(try alice.texts(chat) == ["hello Bob", "hi Alice"])
    }

    @Test("1:1: both sides start the conversation at once and end in the same one")
    func directBothStart() throws {
        let alice = try Replica("Alice", seed: 3)
        let bob = try Replica("Bob", seed: 4)
        try introduce([alice, bob])
        let a = try alice.conversations.sendDirect("from Alice", to: bob.id, now: alice.tick())
        let b = try bob.conversations.sendDirect("from Bob", to: alice.id, now: bob.tick())
        #expect(a.header.conversation == b.header.conversation)
        try syncAll([alice, bob])
        let chat = a.header.conversation
        #expect(try Set(alice.texts(chat)) == ["from Alice", "from Bob"])
        #expect(try alice.state(chat).digest() == bob.state(chat).digest())
        #expect(try alice.state(chat).rejected.isEmpty)
        // After the race both can keep talking.
        try alice.conversations.send("again", in: chat, now: alice.tick())
        try syncAll([alice, bob])
        #expect(try bob.texts(chat).last == "again")
    }

    // MARK: - Groups (F2, F3, F4)

    func group(_ names: [String], seed: UInt64) throws -> ([Replica], ConversationID) {
        let replicas = try names.enumerated().map { try Replica($1, seed: seed + UInt64($0)) }
        try introduce(replicas)
        let creator = replicas[0]
        let id = try creator.conversations.createGroup(
            title: "Lab", members: replicas.dropFirst().map(\.id), now: creator.tick())
        try syncAll(replicas)
        return (replicas, id)
    }

    @Test("a 3-person group: read by 1 of 2, then read; adding a fourth member does not turn it back")
    func groupReadStatus() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 10)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        let message = try alice.conversations.send("standup in 5", in: chat, now: alice.tick())
        try syncAll(people)
        try bob.conversations.markRead(chat, now: bob.tick())
        try alice.pull(from: bob)
        let half = try #require(try alice.state(chat).status(of: message.id))
        #expect(half.phase == .delivered)
        #expect(half.description == "read by 1 of 2")
        try carol.conversations.markRead(chat, now: carol.tick())
        try alice.pull(from: carol)
        #expect(try alice.state(chat).status(of: message.id)?.phase == .read)

        let dave = try Replica("Dave", seed: 13)
        try introduce(people + [dave])
        try alice.conversations.add([dave.id], to: chat, now: alice.tick())
        try syncAll(people + [dave])
        #expect(try alice.state(chat).status(of: message.id)?.phase == .read)
        #expect(try alice.state(chat).status(of: message.id)?.recipients.count == 2)
        // The newcomer reads the whole history.
        #expect(try dave.texts(chat) == ["standup in 5"])
        let view = try alice.state(chat).receiptsView(of: message.id)
        #expect(view.count == 2 && view.allSatisfy { if case .read = $0.state { true } else { false } })
    }

    /// An add concurrent with a re-key (ConversationConvergenceTests seeds 10 and 201): the re-key's epoch is a head
    /// sealed without the member added, so only a merge re-key lets that member read what was written under it. The
    /// rules owe it; the member owed it re-keys once (`owesRekey`), and then everyone agrees.
    @Test("an add concurrent with a re-key: the re-key owed merges the heads, and the newcomer reads everything")
    func addConcurrentWithRekey() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 40)
        let dave = try Replica("Dave", seed: 43)
        let everyone = people + [dave]
        try introduce(everyone)
        try people[0].conversations.add([dave.id], to: chat, now: people[0].tick())
        try people[1].conversations.rekey(chat, now: people[1].tick())
        let said = try people[1].conversations.send("under my re-key", in: chat, now: people[1].tick())
        try syncAll(everyone)
        let duty = try #require(try people[0].state(chat).rekeyDuty)
        let owed = try everyone.filter { try $0.conversations.snapshot(of: chat).owesRekey }
        #expect(owed.map(\.id) == [duty] && duty != dave.id)
        #expect(try dave.state(chat).unreadable.contains(said.id))
        try owed[0].conversations.rekey(chat, now: owed[0].tick())
        try syncAll(everyone)
        #expect(try dave.texts(chat) == ["under my re-key"])
        #expect(try everyone.allSatisfy { try !$0.conversations.snapshot(of: chat).owesRekey })
        let digests = try Set(everyone.map { try $0.state(chat).digest() })
        #expect(digests.count == 1)
    }

    @Test("system messages for create, add, remove, rename and role change, in order")
    func systemMessages() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 20)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        try alice.conversations.rename(chat, to: "Lab 2", now: alice.tick())
        try alice.conversations.setRole(.admin, of: bob.id, in: chat, now: alice.tick())
        try bob.pull(from: alice)
        try bob.conversations.remove([carol.id], from: chat, now: bob.tick())
        try syncAll(people)
        let changes = try alice.state(chat).timeline.compactMap { item -> SystemEvent.Change? in
            if case .system(let event) = item { return event.change }
            return nil
        }
        #expect(changes.count == 4)
        #expect(changes[1] == .renamed("Lab 2"))
        #expect(changes[2] == .roleChanged(bob.id, .admin))
        #expect(changes[3] == .removed([carol.id]))
        #expect(try alice.state(chat).title == "Lab 2")
        #expect(try alice.state(chat).sortedMembers == [alice.id, bob.id].sorted())
    }

    @Test("a member cannot remove, rename or promote without the right; an admin cannot remove the creator")
    func permissions() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 30)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        #expect(throws: ConversationError.refused("not allowed to remove this member")) {
            try bob.conversations.remove([carol.id], from: chat, now: bob.tick())
        }
        #expect(throws: ConversationError.refused("not allowed to rename the group")) {
            try bob.conversations.rename(chat, to: "mine", now: bob.tick())
        }
        #expect(throws: ConversationError.refused("only the creator sets roles")) {
            try bob.conversations.setRole(.admin, of: carol.id, in: chat, now: bob.tick())
        }
        try alice.conversations.setRole(.admin, of: bob.id, in: chat, now: alice.tick())
        try bob.pull(from: alice)
        #expect(throws: ConversationError.refused("the creator cannot be removed")) {
            try bob.conversations.remove([alice.id], from: chat, now: bob.tick())
        }
        // A flag granted by the creator gives a plain member the right.
        try alice.conversations.setFlags(.canRename, of: carol.id, in: chat, now: alice.tick())
        try carol.pull(from: alice)
        try carol.conversations.rename(chat, to: "Carol's lab", now: carol.tick())
        try syncAll(people)
        #expect(try bob.state(chat).title == "Carol's lab")
    }

    @Test("a forged or non-member record is rejected by every member, whatever the sender's client did")
    func nonMemberRejected() throws {
        let (people, chat) = try group(["Alice", "Bob"], seed: 40)
        let (alice, bob) = (people[0], people[1])
        let mallory = try Replica("Mallory", seed: 42)
        try introduce(people + [mallory])
        // Mallory learns the key (say, from a leaked device) and writes directly with Record.sign.
        let snapshot = try alice.conversations.snapshot(of: chat)
        let epoch = try #require(snapshot.state.currentEpoch)
        let key = try #require(snapshot.keys[epoch])
        let clock = try alice.store.appliedClock(of: chat)
        let header = RecordHeader(
            kind: .content, conversation: chat, author: mallory.id, sequence: 1, previous: .none, epoch: epoch,
            lamport: 99, createdAtMillis: 1, dependencies: clock)
        _ = key
        let lamport = try alice.store.feeds(of: chat).map(\.appliedLamport).max()! + 1
        var honest = header
        honest.lamport = lamport
        let payload = ConversationPayload.sealContent(
            .message(text: "let me in", replyTo: nil), key: key, header: RecordCodec.encodeHeader(honest))
        let forged = try Record.sign(header: honest, payload: payload, by: mallory.identity.signing)
        for member in people {
            _ = try member.store.ingest([forged.bytes], receivedAtMillis: 1)
            #expect(try member.state(chat).rejected[forged.id] == "not a member at this point")
            #expect(try !member.texts(chat).contains("let me in"))
        }
        _ = bob
    }

    @Test("a removed member reads everything before the removal and nothing after it; a new member reads all")
    func removalAndHistory() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 50)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        try alice.conversations.send("before", in: chat, now: alice.tick())
        try syncAll(people)
        try alice.conversations.remove([carol.id], from: chat, now: alice.tick())
        try syncAll(people)
        let canary = "after-\(UUID().uuidString)"
        try bob.conversations.send(canary, in: chat, now: bob.tick())
        try syncAll(people)
        #expect(try bob.texts(chat) == ["before", canary])
        #expect(try carol.texts(chat) == ["before"])
        #expect(try !carol.state(chat).unreadable.isEmpty)
        // Carol's store holds the record (as a relay would) but no plaintext of it, in the log or the tables.
        let raw = try carol.store.allRecords().flatMap(\.bytes)
        #expect(!raw.contains(subsequence: Array(canary.utf8)))
        try carol.conversations.refresh(chat)
        let tables = try ConversationTableTests().dump(carol.store)
        #expect(tables.contains("before") && !tables.contains(canary))
        #expect(throws: ConversationError.self) { try carol.conversations.send("still here?", in: chat, now: 9) }

        let dave = try Replica("Dave", seed: 53)
        try introduce(people + [dave])
        try alice.conversations.add([dave.id], to: chat, now: alice.tick())
        try syncAll(people + [dave])
        #expect(try dave.texts(chat) == ["before", canary])
    }

    @Test("concurrent removals in two partitions converge to one roster excluding both, locking out no one")
    func concurrentRemovals() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol", "Dave", "Erin"], seed: 60)
        let (alice, bob, carol, dave, erin) = (people[0], people[1], people[2], people[3], people[4])
        try alice.conversations.setRole(.admin, of: bob.id, in: chat, now: alice.tick())
        try syncAll(people)
        // Partition 1: Alice removes Carol. Partition 2: Bob removes Dave.
        try alice.conversations.remove([carol.id], from: chat, now: alice.tick())
        try bob.conversations.remove([dave.id], from: chat, now: bob.tick())
        try syncAll(people)
        let expected = [alice.id, bob.id, erin.id].sorted()
        for person in [alice, bob, erin] { #expect(try person.state(chat).sortedMembers == expected) }
        // No epoch matches the merged roster yet: the duty member merges.
        let duty = try #require(try alice.state(chat).rekeyDuty)
        let merger = try #require([alice, bob, erin].first { $0.id == duty })
        try merger.conversations.rekey(chat, now: merger.tick())
        try syncAll(people)
        for person in [alice, bob, erin] {
            let state = try person.state(chat)
            #expect(state.currentEpoch != nil)
            try person.conversations.send("\(person.name) is still in", in: chat, now: person.tick())
        }
        try syncAll(people)
        let digests = try Set([alice, bob, erin].map { try $0.state(chat).digest() })
        #expect(digests.count == 1)
        #expect(try alice.texts(chat).count == 3)
        #expect(try carol.texts(chat).isEmpty || !carol.texts(chat).contains("Alice is still in"))
        #expect(try !dave.texts(chat).contains("Alice is still in"))
    }

    @Test("a concurrent removal arriving after the removed member's line was shown retracts it, visibly")
    func lateRemovalRetracts() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 95)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        try bob.conversations.refresh(chat)
        let line = try carol.conversations.send("my last words", in: chat, now: carol.tick())
        try alice.conversations.remove([carol.id], from: chat, now: alice.tick())  // Alice has not seen Carol's line
        try bob.pull(from: carol)
        #expect(try bob.conversations.refresh(chat).lines.filter { $0.kind == .new }.map(\.line.id) == [line.id])
        #expect(try bob.conversations.history(chat).last?.text == "my last words")
        try bob.pull(from: alice)
        let changes = try bob.conversations.refresh(chat)
        #expect(changes.lines.filter { $0.kind == .retracted }.map(\.line.id) == [line.id])
        let row = try #require(try bob.conversations.history(chat).first { $0.id == line.id })
        #expect(row.retracted && row.text == "my last words")
        #expect(try carol.state(chat).status(of: line.id)?.phase == .sent)
        try carol.pull(from: bob)
        // Carol cannot read the removal, but she sees she was locked out, and everyone else rejects her line.
        #expect(try carol.conversations.snapshot(of: chat).lockedOut)
        #expect(try bob.state(chat).status(of: line.id)?.phase == .notDelivered("you were no longer a member"))
        #expect(try alice.state(chat).rejected[line.id] == nil)  // Alice never received it
    }

    @Test(
        "a 64-member group through 200 epochs: every commit fits a record, the last member added reads the first line")
    func largeGroupManyEpochs() throws {
        var rng = SeededGenerator(seed: 64)
        let creator = try Replica("Creator", seed: 640)
        let others = try (0..<63).map { index -> LocalIdentity in
            LocalIdentity(
                signing: try IdentityKeyPair(seed: rng.bytes(32)),
                encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        }
        // Their profiles reach the creator (as sync would bring them).
        for identity in others {
            let profile = Profile(name: "member-\(identity.author.shortHex)", certificate: identity.certificate)
            let header = RecordHeader(
                kind: .plain, conversation: .profileFeed(of: identity.author), author: identity.author, sequence: 1,
                previous: .none, epoch: .none, lamport: 1, createdAtMillis: 1, dependencies: VectorClock())
            let record = try Record.sign(header: header, payload: profile.encoded(), by: identity.signing)
            _ = try creator.store.ingest([record.bytes], receivedAtMillis: 1)
        }
        let last = others.last!
        let chat = try creator.conversations.createGroup(
            title: "everyone", members: others.dropLast().map(\.author), now: creator.tick())
        let first = try creator.conversations.send("the very first line", in: chat, now: creator.tick())
        var largest = 0
        for round in 0..<199 {
            let record: Record
            switch round % 4 {
            case 0:
                record = try creator.conversations.remove([others[round % 62].author], from: chat, now: creator.tick())
            case 1:
                record = try creator.conversations.add([others[(round - 1) % 62].author], to: chat, now: creator.tick())
            default: record = try creator.conversations.rekey(chat, now: creator.tick())
            }
            largest = max(largest, record.bytes.count)
        }
        let added = try creator.conversations.add([last.author], to: chat, now: creator.tick())
        largest = max(largest, added.bytes.count)
        let state = try creator.state(chat)
        #expect(state.epochs.count == 201)
        #expect(state.members.count == 64)
        #expect(largest < Limits.recordBytesMax)
        // The last member, sealed only the newest key, walks the chain back to the first epoch.
        let newcomer = Replica(name: "Last", identity: last)
        try newcomer.pull(from: creator)
        #expect(try newcomer.state(chat).message(first.id)?.text == "the very first line")
        #expect(try newcomer.state(chat).unreadable.isEmpty)
        #expect(try newcomer.state(chat).digest() == state.digest())
    }

    // MARK: - Reactions (F9), edits and deletes (F10)

    @Test("reactions: changing replaces, identical ones group with count 2, system messages refuse them")
    func reactions() throws {
        let (people, chat) = try group(["Alice", "Bob", "Carol"], seed: 70)
        let (alice, bob, carol) = (people[0], people[1], people[2])
        let message = try alice.conversations.send("pizza?", in: chat, now: alice.tick())
        try syncAll(people)
        try bob.conversations.react(.like, to: message.id, in: chat, now: bob.tick())
        try bob.conversations.react(.love, to: message.id, in: chat, now: bob.tick())
        try carol.conversations.react(.love, to: message.id, in: chat, now: carol.tick())
        try syncAll(people)
        let summary = try alice.state(chat).reactionSummary(of: message.id, viewer: bob.id)
        #expect(summary.count == 1)
        #expect(summary.first?.reaction == .love && summary.first?.count == 2 && summary.first?.mine == true)
        try bob.conversations.unreact(message.id, in: chat, now: bob.tick())
        try syncAll(people)
        #expect(try alice.state(chat).reactionSummary(of: message.id, viewer: alice.id).first?.count == 1)

        let created = try #require(try alice.state(chat).timeline.first?.id)
        #expect(throws: ConversationError.refused("cannot react to system messages")) {
            try alice.conversations.react(.laugh, to: created, in: chat, now: alice.tick())
        }
    }

    @Test("edits keep at most 10 versions; deletes leave a tombstone; only the author may do either")
    func editsAndDeletes() throws {
        let (people, chat) = try group(["Alice", "Bob"], seed: 80)
        let (alice, bob) = (people[0], people[1])
        let message = try alice.conversations.send("v0", in: chat, now: alice.tick())
        for version in 1...12 {
            try alice.conversations.edit(message.id, to: "v\(version)", in: chat, now: alice.tick())
        }
        try syncAll(people)
        let edited = try #require(try bob.state(chat).message(message.id))
        #expect(edited.text == "v12" && edited.edited && edited.versions.count == 10 && edited.versions.first == "v3")
        #expect(throws: ConversationError.refused("only the author may change a message")) {
            try bob.conversations.delete(message.id, in: chat, now: bob.tick())
        }
        let reply = try bob.conversations.send("nice", in: chat, replyTo: message.id, now: bob.tick())
        try alice.conversations.delete(message.id, in: chat, now: alice.tick())
        try syncAll(people)
        #expect(try bob.state(chat).message(message.id)?.deleted == true)
        #expect(try bob.state(chat).message(reply.id)?.replyTo == message.id)
        #expect(try alice.state(chat).digest() == bob.state(chat).digest())
    }

    @Test("text rules: trimmed, control characters removed, empty and too long refused with the SPEC's words")
    func textRules() throws {
        let (people, chat) = try group(["Alice", "Bob"], seed: 90)
        let alice = people[0]
        #expect(throws: ConversationError.text(.empty)) { try alice.conversations.send("  \u{7}\n ", in: chat, now: 1) }
        #expect(ConversationError.text(.empty).description == "Message cannot be empty")
        #expect(throws: ConversationError.text(.tooLong)) {
            try alice.conversations.send(String(repeating: "é", count: 10_001), in: chat, now: 1)
        }
        #expect(ConversationError.text(.tooLong).description == "Message is too long (max 10000 characters)")
        // 10,000 grapheme clusters of a 4-byte script is exactly 40,000 bytes: allowed.
        let long = try alice.conversations.send(String(repeating: "𝄞", count: 10_000), in: chat, now: alice.tick())
        #expect(long.bytes.count < Limits.recordBytesMax)
        try alice.conversations.send("  hi\u{0}\tthere \n", in: chat, now: alice.tick())
        #expect(try alice.texts(chat).last == "hi\tthere")
    }
}

extension Array where Element: Equatable {
    func contains(subsequence: [Element]) -> Bool {
        guard !subsequence.isEmpty, subsequence.count <= count else { return subsequence.isEmpty }
        return (0...(count - subsequence.count)).contains { Array(self[$0..<($0 + subsequence.count)]) == subsequence }
    }
}
