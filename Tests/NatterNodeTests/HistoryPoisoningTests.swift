// Goal: a swarm member who is not in a group cannot break a future member's view of the group's history (issue 19,
// item 5; SPEC F4). The attack: Mallory, relaying the group, plants an epoch-opening commit in it that seals a key of
// her own to Carol (whom she expects to be added) and names the group's first epoch as its parent with a random
// "parent key". If Carol's node took that key, the genesis would no longer open for her and she would never become a
// member. Method: real node cores over pipes (handshake, sync, store, conversations); Mallory writes the commit with
// her own store and publishes it like any record; Alice then adds Carol. Run with Mallory's identity sorting before
// and after everyone else's, since the order the records are read in was what decided the old "first writer wins".
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

@Suite("History-chain poisoning")
struct HistoryPoisoningTests {
    enum Order: String, CaseIterable, CustomTestStringConvertible {
        case attackerFirst, attackerLast
        var testDescription: String { rawValue }
    }

    @Test("a member added after a planted commit sees the group's full history", arguments: Order.allCases)
    func plantedCommitDoesNotBreakHistory(order: Order) throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 501)
        let bob = try net.add("Bob", seed: 502)
        let carol = try net.add("Carol", seed: 503)
        let honest = [alice, bob, carol].map(\.identity.author)
        let malloryIsBelow = order == .attackerFirst
        let mallorySeed = (600...).first { seed in
            let author = Self.author(seed: UInt64(seed))
            return malloryIsBelow ? honest.allSatisfy { author < $0 } : honest.allSatisfy { author > $0 }
        }!
        let mallory = try net.add("Mallory", seed: UInt64(mallorySeed))
        net.connect(alice, bob)
        net.connect(alice, carol)
        net.connect(mallory, alice)
        net.connect(mallory, carol)
        net.run()

        let group = try net.group("Plans", by: alice, with: [bob])
        net.publish(alice, try alice.conversations.send("before anyone planted anything", in: group, now: 11))
        net.publish(bob, try bob.conversations.send("first reply", in: group, now: 12))

        // Mallory relays the group, so she holds its records and can write a record that depends on them.
        let planted = try plant(by: mallory, in: group, sealedTo: carol)
        net.publish(mallory, planted)
        #expect(try carol.store.appliedRecords(of: group).contains { $0.id == planted.id }, "Carol holds the plant")

        net.publish(alice, try alice.conversations.add([carol.identity.author], to: group, now: 20))
        net.publish(alice, try alice.conversations.send("welcome, Carol", in: group, now: 21))

        let state = try carol.conversations.snapshot(of: group).state
        #expect(state.members[carol.identity.author] != nil, "Carol became a member")
        let texts = try carol.conversations.history(group).map(\.text)
        #expect(texts.contains("before anyone planted anything") && texts.contains("first reply"))
        #expect(texts.contains("welcome, Carol"))
        #expect(state.digest() == (try alice.conversations.snapshot(of: group).state.digest()))
        #expect(state.epochs[EpochID(raw: planted.id.raw)] == nil, "the plant opened no epoch (rejected, or junk)")
        #expect(try !carol.conversations.snapshot(of: group).lockedOut)
    }

    static func author(seed: UInt64) -> AuthorID {
        var rng = SeededGenerator(seed: seed)
        return AuthorID(try! IdentityKeyPair(seed: rng.bytes(32)).publicKey)
    }

    /// Mallory's commit: an epoch of her own sealed to Carol, naming the genesis epoch as its parent with a key of
    /// Mallory's choosing, appended to Mallory's own feed of the group (well formed and correctly signed, so every
    /// node stores and relays it).
    func plant(by mallory: NodeCore, in group: ConversationID, sealedTo carol: NodeCore) throws -> Record {
        let genesis = try mallory.store.appliedRecords(of: group).first { $0.header.epoch == .none }!
        let carolKey = try #require(try mallory.conversations.profile(of: carol.identity.author)).encryptionKey
        let fake = SymmetricKey.generate()
        return try mallory.write(.commit, in: group, epoch: EpochID(raw: genesis.id.raw)) { header in
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: SymmetricKey.generate(), parents: [(EpochID(raw: genesis.id.raw), fake)],
                roster: [(carol.identity.author, carolKey)], header: RecordCodec.encodeHeader(header))
        }
    }
}
