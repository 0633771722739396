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
