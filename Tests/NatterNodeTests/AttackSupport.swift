// Shared by the attack tests (issue 19): a group founded on a PipeNetwork, and records an attacker writes into its
// own feed of a conversation with a payload of its choosing.
import NatterCrypto
import NatterModel
import NatterStore

@testable import NatterNode

extension PipeNetwork {
    /// `founder` creates a group with `members` and every node receives the genesis.
    func group(_ title: String, by founder: NodeCore, with members: [NodeCore], now: Int64 = 10) throws
        -> ConversationID
    {
        let group = try founder.conversations.createGroup(
            title: title, members: members.map(\.identity.author), now: now)
        perform(index(founder), founder.published(try founder.store.appliedRecords(of: group), now: self.now))
        run()
        return group
    }
}

extension NodeCore {
    /// A record of this node's own, next in its feed of `conversation` (dependencies and Lamport number as the store
    /// chooses them), with whatever payload `payload` makes of the header: what a hostile client writes. Not yet sent.
    func write(
        _ kind: RecordKind, in conversation: ConversationID, epoch: EpochID, now: Int64 = 15,
        payload: (RecordHeader) throws -> [UInt8]
    ) throws -> Record {
        try store.appendOwn(
            conversation: conversation, kind: kind, epoch: epoch, createdAtMillis: now, identity: identity.signing,
            makePayload: payload)
    }
}
