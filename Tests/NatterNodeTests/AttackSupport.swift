// Shared by the attack tests (issue 19): a group founded on a PipeNetwork, and records an attacker writes into its
// own feed of a conversation with a payload of its choosing.
import NatterCrypto
import NatterStore

@testable import NatterModel
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

/// Opening commits as a hostile member writes them: the layout of `ConversationPayload.sealOpeningCommit`, with slots
/// sealed to `slotOwners` (not necessarily the roster), and for the members in `wrongKeyFor` a slot that bears their
/// hint but wraps a key of its own. The body is sealed over those slots, so it opens for every holder of the key.
enum ForgedCommit {
    static func opening(
        _ operation: ControlOperation, key: SymmetricKey, parents: [(EpochID, SymmetricKey)],
        slotOwners: [(AuthorID, EncryptionPublicKey)], wrongKeyFor: Set<AuthorID> = [], header: [UInt8]
    ) throws -> [UInt8] {
        let ephemeral = KeySlots.ephemeral(of: key)
        let owners = slotOwners.sorted { $0.0 < $1.0 }
        var slots = [UInt8]()
        appendBigEndian(UInt16(owners.count), to: &slots)
        for (member, encryptionKey) in owners {
            guard wrongKeyFor.contains(member) else {
                slots += try KeySlots.slot(for: encryptionKey, key: key, ephemeral: ephemeral)
                continue
            }
            let shared = try X25519.sharedSecret(
                secret: key.derive(purpose: "natrslot").secret, peerPublicKey: encryptionKey.bytes)
            let (hint, wrapKey) = KeySlots.secrets(shared: shared, ephemeral: ephemeral, recipient: encryptionKey)
            slots += hint + ChaCha20Poly1305.seal(
                SymmetricKey.generate().secret.exposedCopy(), key: wrapKey, counter: 0, associatedData: [UInt8]())
        }
        var body: [UInt8] = [UInt8(parents.count)]
        for (epoch, parentKey) in parents { body += epoch.bytes + parentKey.secret.exposedCopy() }
        let tagKey = KeySlots.rosterTagKey(key)
        for (member, _) in owners { body += KeySlots.rosterTag(member, tagKey: tagKey) }
        body += operation.encoded()
        let nonce = AEADNonce.random()
        return [3] + ephemeral + slots + nonce.bytes
            + AEAD.seal(body, key: key, nonce: nonce, associatedData: header + ephemeral + slots)
    }
}
