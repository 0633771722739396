import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import NatterTestSupport
import Testing

/// A member's node in miniature: identity, store and conversation service, exchanging records with others by
/// handing over everything it holds (the sync engine's job, done by hand here).
final class Replica {
    let name: String
    let identity: LocalIdentity
    let store: RecordStore
    let conversations: Conversations
    var clock: Int64 = 1_700_000_000_000

    init(_ name: String, seed: UInt64) throws {
        var rng = SeededGenerator(seed: seed)
        self.name = name
        identity = LocalIdentity(
            signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        store = try RecordStore.inMemory()
        conversations = Conversations(store: store, identity: identity)
        try conversations.publishProfile(name: name, now: clock)
    }

    init(name: String, identity: LocalIdentity) {
        self.name = name
        self.identity = identity
        store = try! RecordStore.inMemory()
        conversations = Conversations(store: store, identity: identity)
    }

    var id: AuthorID { identity.author }

    func tick() -> Int64 {
        clock += 1_000
        return clock
    }

    /// Receives everything `other` holds that this replica lacks (per feed, beyond what it stores: what the sync
    /// engine will do, without the wire).
    func pull(from other: Replica) throws {
        struct Key: Hashable {
            let conversation: ConversationID
            let author: AuthorID
        }
        var mine = [Key: UInt64]()
        for feed in try store.feeds() { mine[Key(conversation: feed.conversation, author: feed.author)] = feed.stored }
        var missing = [Record]()
        for feed in try other.store.feeds() {
            let have = mine[Key(conversation: feed.conversation, author: feed.author)] ?? 0
            guard feed.stored > have else { continue }
            missing += try other.store.records(
                conversation: feed.conversation, author: feed.author, from: have + 1, limit: Int(feed.stored - have))
        }
        if !missing.isEmpty { _ = try deliver(missing, to: store, batchSizes: 1...256, rng: nil) }
    }

    func state(_ conversation: ConversationID) throws -> ConversationState {
        try conversations.snapshot(of: conversation).state
    }

    func texts(_ conversation: ConversationID) throws -> [String] {
        try state(conversation).timeline.compactMap { item in
            if case .message(let message) = item { return message.deleted ? "(deleted)" : message.text }
            return nil
        }
    }
}

/// Everyone pulls from everyone until nothing changes (at most `rounds` passes).
func syncAll(_ replicas: [Replica], rounds: Int = 3) throws {
    for _ in 0..<rounds {
        for receiver in replicas {
            for sender in replicas where sender !== receiver { try receiver.pull(from: sender) }
        }
    }
}

/// Makes every replica know everyone's profile.
func introduce(_ replicas: [Replica]) throws { try syncAll(replicas, rounds: 1) }

/// Alice and Bob, introduced, in a group of Alice's that holds one message, and `authors` × `perAuthor` signed
/// records of throwaway identities in that group (not ingested anywhere yet): the start of every junk-feed test.
func floodedGroup(seed: UInt64, authors: Int, perAuthor: Int) throws -> (
    alice: Replica, bob: Replica, group: ConversationID, junk: [Record]
) {
    let alice = try Replica("Alice", seed: seed)
    let bob = try Replica("Bob", seed: seed + 1)
    try introduce([alice, bob])
    let group = try alice.conversations.createGroup(title: "Flooded", members: [bob.id], now: alice.tick())
    try alice.conversations.send("before the flood", in: group, now: alice.tick())
    let junk = try floodRecords(conversation: group, authors: authors, perAuthor: perAuthor, seed: seed + 2)
    return (alice, bob, group, junk)
}
