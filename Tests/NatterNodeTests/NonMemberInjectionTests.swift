// Goal: a swarm member who is not in a group can write records into it (the log layer stores and relays any
// well-formed, correctly signed record), but nothing they write has any effect on the members: no line, no rename,
// and above all no lock-out. Before issue 19 one unreadable commit of a stranger made every member's node believe it
// had been removed ("a membership change was sealed without you") and refuse to send. Method: real node cores over
// pipes; Mallory relays the group and writes records of her own into it, then the members go on as usual.
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

@Suite("Non-member injection")
struct NonMemberInjectionTests {
    @Test("a stranger's commits and messages in a group change nothing and lock no member out")
    func strangerRecordsHaveNoEffect() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 701)
        let bob = try net.add("Bob", seed: 702)
        let mallory = try net.add("Mallory", seed: 703)
        net.connect(alice, bob)
        net.connect(mallory, alice)
        net.connect(mallory, bob)
        net.run()
        let group = try net.group("Plans", by: alice, with: [bob])
        net.publish(alice, try alice.conversations.send("hello", in: group, now: 11))
        let genesis = EpochID(raw: try alice.store.appliedRecords(of: group)[0].id.raw)

        // Mallory has no key: she writes under an invented epoch and under the genesis epoch, with keys of her own. The
        // members cannot read the first two and read the last as malformed (it does not open under the epoch key).
        // An unreadable commit comes first: a feed whose first record members can judge is junk at once.
        let invented = EpochID(raw: RecordID(bytes: SecureRandom.bytes(32)).raw)
        let injected = [
            try mallory.write(.commit, in: group, epoch: invented, now: 13) { header in
                ConversationPayload.sealInEpochCommit(.leave, key: .generate(), header: RecordCodec.encodeHeader(header))
            },
            try mallory.write(.content, in: group, epoch: invented, now: 14) { header in
                ConversationPayload.sealContent(
                    .message(text: "I am Alice", replyTo: nil), key: .generate(), header: RecordCodec.encodeHeader(header))
            },
            try mallory.write(.commit, in: group, epoch: genesis, now: 15) { header in
                ConversationPayload.sealInEpochCommit(
                    .rename(title: "pwned"), key: .generate(), header: RecordCodec.encodeHeader(header))
            },
        ]
        for record in injected { net.publish(mallory, record) }
        for member in [alice, bob] {
            let malloryFeed = try member.store.feeds(of: group).first { $0.author == mallory.identity.author }
            #expect(malloryFeed?.applied == 3, "the injected records reached the member and were applied")
            #expect(
                try !member.store.liveFeeds(of: group).contains { $0.author == mallory.identity.author },
                "her feed is judged junk (she was never in the roster) and reduced to its frontier")
            let snapshot = try member.conversations.snapshot(of: group)
            let lockedOut = snapshot.lockedOut
            #expect(!lockedOut)
            #expect(snapshot.state.title == "Plans")
            #expect(snapshot.state.members.count == 2)
        }
        // Both members go on: a message, an add, a rename.
        let carol = try net.add("Carol", seed: 704)
        net.connect(carol, alice)
        net.run()
        net.publish(bob, try bob.conversations.send("still here", in: group, now: 20))
        net.publish(alice, try alice.conversations.add([carol.identity.author], to: group, now: 21))
        net.publish(alice, try alice.conversations.rename(group, to: "Plans, still", now: 22))
        for member in [alice, bob, carol] {
            let state = try member.conversations.snapshot(of: group).state
            #expect(state.title == "Plans, still")
            #expect(try member.conversations.history(group).compactMap(\.text) == ["hello", "still here"])
            #expect(state.timeline.allSatisfy { $0.id != injected[1].id })
        }
    }
}
