// Goal: what a driver's refresh pacing learns from the core (`NodeCore.storedSinceRefresh`, `RefreshPacing`): records
// of the conversation the user is viewing are urgent (a chat turn shows them at once), those of any other
// conversation are not (they wait for the pacing interval). Method: two NodeCores over pipes in virtual time, the
// receiver driver-led (no refresh delay) as in the node actor and the lab, viewing one of two groups.
import NatterModel
import NatterStore
import NatterSync
import NatterTestSupport
import Testing

@testable import NatterNode

extension NodeCoreTests {
    @Test("records of the viewed conversation make the pending refresh urgent; another conversation's do not")
    func refreshUrgency() throws {
        let net = PipeNetwork()
        let sender = try net.add("Sender", seed: 81)
        let receiver = try net.add("Receiver", seed: 82, refreshDelay: nil)
        net.connect(sender, receiver)
        net.run()
        _ = receiver.refreshPending(now: net.now)
        #expect(!receiver.isRefreshPending)
        let viewed = try sender.conversations.createGroup(title: "Viewed", members: [receiver.identity.author], now: 10)
        _ = receiver.view(viewed, now: net.now)
        net.perform(net.index(sender), sender.published(try sender.store.appliedRecords(of: viewed), now: net.now))
        net.run()
        #expect(try receiver.store.feeds(of: viewed).isEmpty == false, "the viewed group arrived")
        #expect(receiver.isRefreshPending)
        // The sender is a neighbour writing its own records: they came on the priority lane.
        #expect(receiver.storedSinceRefresh == RefreshPacing.Stored(viewed: true, viewedPriority: true))
        _ = receiver.refreshPending(now: net.now)
        #expect(receiver.storedSinceRefresh == .background, "a refresh takes the urgency with it")

        let other = try sender.conversations.createGroup(title: "Other", members: [receiver.identity.author], now: 20)
        net.perform(net.index(sender), sender.published(try sender.store.appliedRecords(of: other), now: net.now))
        net.run()
        #expect(try receiver.store.feeds(of: other).isEmpty == false, "the other group arrived")
        #expect(receiver.isRefreshPending, "its tables are still to be written")
        #expect(receiver.storedSinceRefresh == .background, "nobody is viewing it: it waits for the interval")
    }
}
