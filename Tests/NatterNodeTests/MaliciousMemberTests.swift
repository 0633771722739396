// Goal: a member who runs a hostile client can break nothing for the others (issue 19, item 8): a record signed
// under its name with another member's ciphertext, a commit sealed to one member too many or one too few, a commit
// that seals one member a key that does not open it, and a message under an epoch from before a removal. Each is
// written by the member's own node (its own feed, correctly signed, so every node stores and relays it) and sent
// over real node cores; the honest members must reject it alike — or, for the wrong key, detect it, name who
// re-keys, and once that member re-keys, converge again with the member left out.
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

@Suite("A hostile member")
struct MaliciousMemberTests {
    /// Alice founded a group with Bob, Carol and Mallory; everyone is linked to Alice, and Alice has said hello.
    struct Group {
        let net: PipeNetwork
        let alice, bob, carol, mallory: NodeCore
        let id: ConversationID

        /// `automatic`: the nodes write their receipts and due re-keys themselves (node policy).
        init(seed: UInt64, automatic: Bool = false) throws {
            net = PipeNetwork()
            alice = try net.add("Alice", seed: seed, receipts: automatic)
            bob = try net.add("Bob", seed: seed + 1, receipts: automatic)
            carol = try net.add("Carol", seed: seed + 2, receipts: automatic)
            mallory = try net.add("Mallory", seed: seed + 3, receipts: automatic)
            for node in [bob, carol, mallory] { net.connect(node, alice) }
            net.run()
            id = try net.group("Plans", by: alice, with: [bob, carol, mallory])
            net.publish(alice, try alice.conversations.send("hello", in: id, now: 11))
        }

        var honest: [NodeCore] { [alice, bob, carol] }
        var everyone: [NodeCore] { [alice, bob, carol, mallory] }

        func state(_ node: NodeCore) throws -> ConversationState { try node.conversations.snapshot(of: id).state }
        func texts(_ node: NodeCore) throws -> [String] { try node.conversations.history(id).compactMap(\.text) }

        /// Mallory's view of the current epoch: its id and key, and every member's encryption key.
        func current() throws -> (epoch: EpochID, key: SymmetricKey, roster: [(AuthorID, EncryptionPublicKey)]) {
            let snapshot = try mallory.conversations.snapshot(of: id)
            let epoch = try #require(snapshot.state.currentEpoch)
            let roster = try snapshot.state.sortedMembers.map { member in
                (member, try #require(try mallory.conversations.profile(of: member)).encryptionKey)
            }
            return (epoch, try #require(snapshot.keys[epoch]), roster)
        }

        /// Mallory's re-key, sealed to `owners`, with a wrong key for `wrongKeyFor`.
        func forgedRekey(owners: [(AuthorID, EncryptionPublicKey)], wrongKeyFor: Set<AuthorID> = []) throws -> Record {
            let (epoch, key, _) = try current()
            return try mallory.write(.commit, in: id, epoch: epoch) { header in
                try ForgedCommit.opening(
                    .rekey, key: .generate(), parents: [(epoch, key)], slotOwners: owners, wrongKeyFor: wrongKeyFor,
                    header: RecordCodec.encodeHeader(header))
            }
        }
    }

    @Test("author substitution: another member's ciphertext under Mallory's header is rejected by everyone")
    func authorSubstitution() throws {
        let group = try Group(seed: 810)
        let original = try group.alice.conversations.send("meet at noon", in: group.id, now: 12)
        group.net.publish(group.alice, original)
        let stolen = try group.mallory.write(.content, in: group.id, epoch: original.header.epoch) { _ in
            original.payload
        }
        group.net.publish(group.mallory, stolen)
        for node in group.everyone {
            let state = try group.state(node)
            #expect(state.rejected[stolen.id] == "malformed: does not decrypt under its epoch key")
            #expect(state.timeline.compactMap { item -> AuthorID? in
                if case .message(let message) = item, message.text == "meet at noon" { return message.author }
                return nil
            } == [group.alice.identity.author])
        }
    }

    @Test("a commit sealed to one member too many (an outsider) is rejected by every member; the outsider is none")
    func extraSlot() throws {
        let group = try Group(seed: 820)
        let eve = try group.net.add("Eve", seed: 824)
        group.net.connect(eve, group.alice)
        group.net.run()
        let (before, _, roster) = try group.current()
        let eveKey = try #require(try group.mallory.conversations.profile(of: eve.identity.author)).encryptionKey
        let forged = try group.forgedRekey(owners: roster + [(eve.identity.author, eveKey)])
        group.net.publish(group.mallory, forged)
        for node in group.everyone {
            let state = try group.state(node)
            #expect(state.rejected[forged.id] == "keys sealed to the wrong members")
            #expect(state.currentEpoch == before)
        }
        group.net.publish(group.bob, try group.bob.conversations.send("still the old key", in: group.id, now: 20))
        #expect(try group.texts(group.carol) == ["hello", "still the old key"])
        // Eve got the keys Mallory chose to give her (a member can always disclose what it reads), but she is a member
        // nowhere, not even in her own view, and whatever she writes is rejected.
        #expect(try group.everyone.allSatisfy { try group.state($0).members[eve.identity.author] == nil })
        #expect(try group.state(eve).members[eve.identity.author] == nil)
        #expect(throws: ConversationError.self) { try eve.conversations.send("let me in", in: group.id, now: 22) }
    }

    @Test("a commit that leaves a member out is rejected; the member left out is locked out until another writes")
    func missingSlot() throws {
        let group = try Group(seed: 830)
        let (before, _, roster) = try group.current()
        let forged = try group.forgedRekey(owners: roster.filter { $0.0 != group.bob.identity.author })
        group.net.publish(group.mallory, forged)
        for node in [group.alice, group.carol, group.mallory] {
            let state = try group.state(node)
            #expect(state.rejected[forged.id] == "keys sealed to the wrong members")
            #expect(state.currentEpoch == before)
        }
        // Bob cannot read it and cannot tell it from his removal.
        let bobLocked = try group.bob.conversations.snapshot(of: group.id).lockedOut
        #expect(bobLocked)
        // Carol writes under the epoch Bob holds, after the commit: had it removed him, she could not have.
        group.net.publish(group.carol, try group.carol.conversations.send("Bob, you are still in", in: group.id, now: 20))
        let bobStillLocked = try group.bob.conversations.snapshot(of: group.id).lockedOut
        #expect(!bobStillLocked)
        group.net.publish(group.bob, try group.bob.conversations.send("thanks", in: group.id, now: 21))
        #expect(try group.texts(group.alice) == ["hello", "Bob, you are still in", "thanks"])
    }

    @Test("a wrong key sealed to one member: detected by it and by the others, repaired by the member the rule names")
    func wrongKeyForOneMember() throws {
        let group = try Group(seed: 840)
        let (_, _, roster) = try group.current()
        let carol = group.carol.identity.author
        let forged = try group.forgedRekey(owners: roster, wrongKeyFor: [carol])
        group.net.publish(group.mallory, forged)
        let epoch = EpochID(raw: forged.id.raw)
        for node in [group.alice, group.bob, group.mallory] { #expect(try group.state(node).currentEpoch == epoch) }
        group.net.publish(group.bob, try group.bob.conversations.send("under Mallory's key", in: group.id, now: 20))
        // Carol sees what happened to her; she cannot read the new epoch.
        let carolSees = try group.carol.conversations.snapshot(of: group.id).wronglySealed
        #expect(carolSees == [forged.id])
        #expect(try !group.texts(group.carol).contains("under Mallory's key"))
        // The others find it by rebuilding the slots, and exactly one of them owes the repair.
        for node in [group.alice, group.bob] {
            let found = try node.conversations.wronglySealed(in: group.id)
            #expect(found.map(\.epoch) == [epoch] && found.map(\.members) == [[carol]])
            #expect(found.map(\.author) == [group.mallory.identity.author])
        }
        let owing = try group.everyone.filter { try $0.conversations.owesSlotRepair(in: group.id) }
        let expected = [group.alice, group.bob].min { $0.identity.author < $1.identity.author }!
        #expect(owing.map(\.identity.author) == [expected.identity.author])
        // The repair: a re-key that chains Mallory's epoch. Carol reads everything, and all agree again.
        group.net.publish(expected, try expected.conversations.rekey(group.id, now: 30))
        #expect(try group.texts(group.carol) == ["hello", "under Mallory's key"])
        #expect(try group.everyone.allSatisfy { try !$0.conversations.owesSlotRepair(in: group.id) })
        let digests = try Set(group.everyone.map { try group.state($0).digest() })
        #expect(digests.count == 1)
    }

    @Test("end to end: the node the rule names re-keys by itself, and the member sealed a wrong key reads again")
    func wrongKeyRepairedByNodePolicy() throws {
        let group = try Group(seed: 870, automatic: true)
        let (_, _, roster) = try group.current()
        let carol = group.carol.identity.author
        let forged = try group.forgedRekey(owners: roster, wrongKeyFor: [carol])
        group.net.publish(group.mallory, forged)
        group.net.publish(group.bob, try group.bob.conversations.send("under Mallory's key", in: group.id, now: 20))
        #expect(try !group.texts(group.carol).contains("under Mallory's key"))
        // Nobody calls rekey: the nodes' own policy, on their timers, writes the repair.
        for _ in 0..<5 { group.net.advance(.milliseconds(200)) }
        #expect(try group.texts(group.carol) == ["hello", "under Mallory's key"])
        // One repair, by one node, not one per member who noticed.
        let repairs = try group.state(group.alice).timeline.filter { item in
            guard case .system(let event) = item, case .rekeyed = event.change else { return false }
            return event.author != group.mallory.identity.author
        }
        #expect(repairs.count == 1)
        #expect(try group.everyone.allSatisfy { try !$0.conversations.owesSlotRepair(in: group.id) })
        let digests = try Set(group.everyone.map { try group.state($0).digest() })
        #expect(digests.count == 1)
    }

    @Test("a removed member can neither post nor add itself back, with the keys it still holds")
    func removedMemberPostsAndReaddsItself() throws {
        let group = try Group(seed: 860)
        let (old, oldKey, roster) = try group.current()
        group.net.publish(group.alice, try group.alice.conversations.remove([group.bob.identity.author], from: group.id, now: 20))
        let bob = group.bob
        let bobLocked = try bob.conversations.snapshot(of: group.id).lockedOut
        #expect(bobLocked, "his own node knows and refuses")
        // His hostile client writes anyway, after the removal, under the last key he holds.
        let post = try bob.write(.content, in: group.id, epoch: old) { header in
            ConversationPayload.sealContent(
                .message(text: "I am still here", replyTo: nil), key: oldKey, header: RecordCodec.encodeHeader(header))
        }
        group.net.publish(bob, post)
        let readd = try bob.write(.commit, in: group.id, epoch: old) { header in
            try ForgedCommit.opening(
                .add(members: [bob.identity.author]), key: .generate(), parents: [(old, oldKey)], slotOwners: roster,
                header: RecordCodec.encodeHeader(header))
        }
        group.net.publish(bob, readd)
        for node in [group.alice, group.carol, group.mallory] {
            let state = try group.state(node)
            #expect(state.rejected[post.id] == "not a member at this point")
            #expect(state.rejected[readd.id] == "not a member at this point")
            #expect(state.members[bob.identity.author] == nil)
            #expect(try !group.texts(node).contains("I am still here"))
        }
    }

    @Test("a message under an epoch from before a removal is rejected, so the removed member is never fed")
    func staleEpochSend() throws {
        let group = try Group(seed: 850)
        let (old, oldKey, _) = try group.current()
        group.net.publish(group.alice, try group.alice.conversations.remove([group.bob.identity.author], from: group.id, now: 20))
        #expect(try group.state(group.mallory).currentEpoch != old)
        // Mallory has seen the removal (her record depends on it) and still writes under the key Bob holds.
        let stale = try group.mallory.write(.content, in: group.id, epoch: old) { header in
            ConversationPayload.sealContent(
                .message(text: "psst, Bob", replyTo: nil), key: oldKey, header: RecordCodec.encodeHeader(header))
        }
        group.net.publish(group.mallory, stale)
        for node in [group.alice, group.carol, group.mallory] {
            #expect(try group.state(node).rejected[stale.id] == "uses an epoch from before a removal")
            #expect(try !group.texts(node).contains("psst, Bob"))
        }
        // An honest client writes under the new epoch.
        let honest = try group.alice.conversations.send("Bob is gone", in: group.id, now: 21)
        #expect(honest.header.epoch != old)
    }
}
