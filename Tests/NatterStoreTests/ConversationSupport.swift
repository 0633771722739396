import Foundation
import NatterCrypto
import NatterModel
import NatterStore
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

    var id: AuthorID { identity.author }

    func tick() -> Int64 {
        clock += 1_000
        return clock
    }

    /// Receives everything `other` holds.
    func pull(from other: Replica) throws {
        _ = try deliver(try other.store.allRecords(), to: store, batchSizes: 1...64, rng: nil)
    }

    func state(_ conversation: ConversationID) throws -> ConversationState {
        try conversations.snapshot(of: conversation).state
    }

    func texts(_ conversation: ConversationID) throws -> [String] {
        try state(conversation).timeline.compactMap { item in
            if case let .message(message) = item { return message.deleted ? "(deleted)" : message.text }
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
