// Goal: the priority lane on node cores (docs/protocol.md §3.7): a neighbour's own records are ingested while the
// link's bulk deliveries — a flood from throwaway identities — are held by the ingest quota, and the held flood still
// arrives in the end. Method: two NodeCores over pipes in virtual time, the flooder's store filled before the link
// opens, the victim's link quota small; the flooder then creates a group with the victim, which travels on the
// priority lane.
import NatterModel
import NatterStore
import NatterSync
import NatterTestSupport
import Testing

@testable import NatterNode

extension NodeCoreTests {
    @Test("a turn with a priority delivery takes only that: the bulk that came with it follows on the next tick")
    func priorityTurnAlone() throws {
        let net = PipeNetwork()
        net.coalescesBytes = true  // what piled up arrives as one input, as in the node
        let sender = try net.add("Sender", seed: 71)
        let receiver = try net.add("Receiver", seed: 72)
        net.connect(sender, receiver)
        net.run()
        // Throwaway authors' records (bulk: not the sender's own) and the sender's chat (priority) go out together.
        let conversation = floodConversation("with-chat")
        let flood = try floodRecords(conversation: conversation, authors: 2, perAuthor: 50, seed: 73)
        _ = try sender.store.ingest(flood.map(\.bytes), receivedAtMillis: 1)
        let group = try sender.conversations.createGroup(
            title: "Now", members: [receiver.identity.author], now: 10)
        let chat = try sender.store.appliedRecords(of: group)
        net.perform(net.index(sender), sender.published(flood + chat, now: net.now))
        let delivered = receiver.recordsDelivered
        net.run()  // no tick: the input's own turn only
        func held(_ conversation: ConversationID) throws -> Int {
            try receiver.store.feeds(of: conversation).reduce(0) { $0 + Int($1.stored) }
        }
        #expect(receiver.recordsDelivered - delivered == chat.count, "the turn took the chat alone")
        #expect(try held(group) == chat.count)
        #expect(try held(conversation) == 0, "the bulk waits for the next turn")
        #expect(receiver.hasIngestDue(now: net.now), "due at once, not after a quota wait")
        net.advance(.milliseconds(1))
        #expect(try held(conversation) == flood.count)
    }

    @Test("a priority delivery is ingested while the link's bulk deliveries are held by the quota")
    func priorityPassesHeldBulk() throws {
        let (net, flooder, victim, conversation, flood) = try heldFlood(seed: 61, "held")
        func held(_ conversation: ConversationID) throws -> Int {
            try victim.store.feeds(of: conversation).reduce(0) { $0 + Int($1.stored) }
        }
        let before = try held(conversation)
        #expect(before < flood.count, "the link's bulk deliveries are held: \(before) of \(flood.count)")
        let deliveredBefore = victim.recordsDelivered
        // Time does not move: the held deliveries stay held while the flooder's own records cross.
        let group = try flooder.conversations.createGroup(
            title: "Past the queue", members: [victim.identity.author], now: 10)
        let genesis = try flooder.store.appliedRecords(of: group)
        net.perform(net.index(flooder), flooder.published(genesis, now: net.now))
        net.run()
        #expect(try held(group) == genesis.count)
        #expect(try held(conversation) == before, "the flood is still held")
        #expect(flooder.messagesSentByKind["priority-records", default: 0] >= 1)
        // The flood's records never took the lane: it carried the group's records and nothing else.
        #expect(victim.recordsDelivered - deliveredBefore == genesis.count)
        // And the held flood arrives in the end.
        var seconds = 0
        while try held(conversation) < flood.count, seconds < 30 {
            net.advance(.seconds(1))
            seconds += 1
        }
        #expect(try held(conversation) == flood.count)
        #expect(try victim.store.logDigest() == flooder.store.logDigest())
    }
}

extension NodeCoreTests {
    @Test("a peer linked after the first records were stored is a priority author from then on")
    func laterNeighbourIsPriority() throws {
        let net = PipeNetwork()
        let relay = try net.add("Relay", seed: 81)
        let alice = try net.add("Alice", seed: 82)
        let bob = try net.add("Bob", seed: 83)
        net.connect(alice, relay)
        net.run()
        // The relay stores and pushes records while Alice is its only neighbour.
        _ = try net.group("Before", by: alice, with: [relay])
        net.connect(bob, relay)
        net.run()
        // Bob is a neighbour now: the relay passes his new records to Alice on the priority lane.
        let before = relay.messagesSentByKind["priority-records", default: 0]
        let second = try net.group("After", by: bob, with: [relay], now: 20)
        let stored = try alice.store.feeds(of: second).reduce(0) { $0 + Int($1.stored) }
        #expect(stored == (try bob.store.appliedRecords(of: second)).count)
        #expect(relay.messagesSentByKind["priority-records", default: 0] > before)
    }
}
