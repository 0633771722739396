// Goal: the incremental conversation engine equals a derivation from scratch in the cases the seeded convergence
// scenarios (Tests/NatterStoreTests/ConversationConvergenceTests.swift) found it did not. Method: hand-built
// entries (headers and decrypted bodies, no crypto but the roster tags), fed in batches, each state compared with
// `ConversationRules.derive` of everything fed so far.
import NatterCrypto
import NatterModel
import Testing

@Suite("Conversation engine")
struct ConversationEngineTests {
    /// A group founded by `Fixtures.author(0)`, and entries written into it by hand: each writer's feed, its
    /// dependencies (a full vector clock, as a node writes them) and Lamport numbers follow what it has seen.
    struct Group {
        let conversation: ConversationID
        let salt: [UInt8] = Array(repeating: 7, count: 16)
        var clocks: [AuthorID: VectorClock] = [:]
        var lamports: [AuthorID: UInt64] = [:]
        var count = 0
        var entries: [RecordID: ConversationEntry] = [:]

        init() {
            conversation = ConversationContext.groupID(creator: Fixtures.author(0), salt: salt)
        }

        var context: ConversationContext { ConversationContext(conversation: conversation) }

        /// Writes an entry by `author` under `epoch` (the genesis epoch when nil) with `body`.
        mutating func write(_ author: AuthorID, kind: RecordKind, epoch: EpochID, _ body: ConversationEntry.Body)
            -> ConversationEntry
        {
            count += 1
            var clock = clocks[author] ?? VectorClock()
            let sequence = clock[author] + 1
            let lamport = (lamports[author] ?? 0) + 1
            let id = RecordID(raw: Fixtures.bytes32("entry \(count)"))
            let header = RecordHeader(
                kind: kind, conversation: conversation, author: author, sequence: sequence,
                previous: sequence == 1 ? .none : RecordID(raw: Fixtures.bytes32("previous \(count)")),
                epoch: epoch, lamport: lamport, createdAtMillis: 1_700_000_000_000 + Int64(count),
                dependencies: clock)
            clock[author] = sequence
            clocks[author] = clock
            lamports[author] = lamport
            let entry = ConversationEntry(id: id, header: header, body: body)
            entries[id] = entry
            return entry
        }

        /// `reader` has seen what `writer` has (its clock and Lamport number).
        mutating func see(_ reader: AuthorID, from writer: AuthorID) {
            clocks[reader] = (clocks[reader] ?? VectorClock()).merged(with: clocks[writer] ?? VectorClock())
            lamports[reader] = max(lamports[reader] ?? 0, lamports[writer] ?? 0)
        }

        /// An epoch-opening commit: sealed to `roster`, chaining `parents`.
        mutating func opening(
            _ author: AuthorID, _ operation: ControlOperation, roster: [AuthorID], parents: [EpochID]
        ) -> ConversationEntry {
            let key = SymmetricKey.generate()
            let opening = EpochOpening(
                parents: parents, roster: roster, key: key, announced: operation.isRemoval)
            return write(author, kind: .commit, epoch: parents.first ?? .none, .control(operation, opening: opening))
        }

        /// The genesis: the founder (`Fixtures.author(0)`) and `members`.
        mutating func found(with members: [AuthorID]) -> ConversationEntry {
            let founder = Fixtures.author(0)
            return opening(
                founder, .create(kind: .group, title: nil, members: members, salt: salt),
                roster: members + [founder], parents: [])
        }

        mutating func message(_ author: AuthorID, _ text: String, replyTo: RecordID? = nil, epoch: EpochID)
            -> ConversationEntry
        {
            write(author, kind: .content, epoch: epoch, .content(.message(text: text, replyTo: replyTo)))
        }
    }

    /// Feeds `batches` in turn to one engine, returning the first batch after which it differs from a derivation.
    static func firstDivergence(_ batches: [[ConversationEntry]], context: ConversationContext) -> Int? {
        var engine = ConversationEngine(context: context)
        var fed = [ConversationEntry]()
        for (index, batch) in batches.enumerated() {
            fed += batch
            engine.add(batch)
            if engine.state != ConversationRules.derive(fed, context: context) { return index }
        }
        return nil
    }

    /// Seed 468 of the convergence scenarios: content the rules had rejected for another reason (here a reply to a
    /// message this reader cannot read) becomes *retracted* once a concurrent removal of its author is known — the
    /// removal check comes first — so a removal that sorts after it must re-derive, not only one that retracts
    /// accepted content.
    @Test("a removal retracts its target's concurrent content the rules had rejected for another reason")
    func removalRetractsRejectedContent() {
        let (alice, bob, carol) = (Fixtures.author(0), Fixtures.author(1), Fixtures.author(2))
        var group = Group()
        let genesis = group.found(with: [bob, carol])
        let epoch = EpochID(raw: genesis.id.raw)
        group.see(bob, from: alice)
        // Bob replies to a message nobody holds: rejected ("replies to an unknown message").
        let reply = group.message(bob, "hm", replyTo: RecordID(raw: Fixtures.bytes32("unknown")), epoch: epoch)
        // Alice, who has not seen it, writes and then removes Bob: the removal sorts after the reply.
        let hello = group.message(alice, "hello", epoch: epoch)
        let removal = group.opening(alice, .remove(members: [bob]), roster: [alice, carol], parents: [epoch])
        #expect(reply.isConcurrent(with: removal))
        #expect(reply.position < removal.position)
        let state = ConversationRules.derive([genesis, reply, hello, removal], context: group.context)
        #expect(state.rejected[reply.id]?.hasPrefix("retracted") == true, "\(state.rejected)")
        #expect(Self.firstDivergence([[genesis], [reply, hello], [removal]], context: group.context) == nil)
    }
}

extension ConversationEngineTests {
    /// Alice founds a group with Bob and Carol, then adds Dave while Bob, who has not seen it, re-keys.
    static func addBesideRekey()
        -> (Group, genesis: ConversationEntry, add: ConversationEntry, rekey: ConversationEntry)
    {
        let (alice, bob, carol, dave) = (Fixtures.author(0), Fixtures.author(1), Fixtures.author(2), Fixtures.author(3))
        var group = Group()
        let genesis = group.found(with: [bob, carol])
        let first = EpochID(raw: genesis.id.raw)
        group.see(bob, from: alice)
        let add = group.opening(alice, .add(members: [dave]), roster: [alice, bob, carol, dave], parents: [first])
        let rekey = group.opening(bob, .rekey, roster: [alice, bob, carol], parents: [first])
        return (group, genesis, add, rekey)
    }

    /// Seeds 10 and 201 of the convergence scenarios: Alice adds Dave while Bob re-keys. The add's epoch holds every
    /// member, so it is current, but the re-key's epoch is a head sealed without Dave: no later epoch chains it, so
    /// Dave never reads what Bob wrote under it while Alice and Carol do, and their states differ (a reply to it is
    /// valid for them, "replies to an unknown message" for Dave). The rules must name someone who holds both heads
    /// to re-key, chaining both; once that re-key is in, nobody is owed one.
    @Test("a head sealed without a member who stays makes the rules name someone who holds every head to re-key")
    func headWithoutMemberIsMerged() {
        let (alice, bob, carol, dave) = (Fixtures.author(0), Fixtures.author(1), Fixtures.author(2), Fixtures.author(3))
        var (group, genesis, add, rekey) = Self.addBesideRekey()
        let said = group.message(bob, "said under the re-key", epoch: EpochID(raw: rekey.id.raw))
        #expect(add.isConcurrent(with: rekey))
        let state = ConversationRules.derive([genesis, add, rekey, said], context: group.context)
        #expect(state.members.keys.sorted() == [alice, bob, carol, dave].sorted())
        #expect(state.currentEpoch == EpochID(raw: add.id.raw))
        #expect(Set(state.epochHeads) == [EpochID(raw: add.id.raw), EpochID(raw: rekey.id.raw)])
        // Before the fix: nil (an epoch matches the roster), and Dave could never read `said`.
        let duty = try! #require(state.rekeyDuty)
        #expect(duty != dave, "Dave holds only the add's key")
        #expect(state.epochHeads.allSatisfy { state.epochs[$0]!.roster.contains(duty) })

        // The duty member's re-key chains both heads: every head then holds every member, and no re-key is owed.
        for member in [alice, bob, carol, dave] where member != duty { group.see(duty, from: member) }
        let merge = group.opening(
            duty, .rekey, roster: [alice, bob, carol, dave],
            parents: [EpochID(raw: add.id.raw), EpochID(raw: rekey.id.raw)].sorted())
        let merged = ConversationRules.derive([genesis, add, rekey, said, merge], context: group.context)
        #expect(merged.rejected[merge.id] == nil, "\(merged.rejected)")
        #expect(merged.epochHeads == [EpochID(raw: merge.id.raw)])
        #expect(merged.currentEpoch == EpochID(raw: merge.id.raw))
        #expect(merged.rekeyDuty == nil)
    }

    /// Without concurrency the duty is what it was: after a leave (no epoch matches), the smallest member; and no
    /// re-key is owed while the single head holds every member.
    @Test("with a single head the re-key duty is the smallest member, and only when no epoch matches")
    func dutyWithoutConcurrency() {
        let (alice, bob, carol) = (Fixtures.author(0), Fixtures.author(1), Fixtures.author(2))
        var group = Group()
        let genesis = group.found(with: [bob, carol])
        #expect(ConversationRules.derive([genesis], context: group.context).rekeyDuty == nil)
        group.see(carol, from: alice)
        let leave = group.write(
            carol, kind: .commit, epoch: EpochID(raw: genesis.id.raw), .control(.leave, opening: nil))
        let state = ConversationRules.derive([genesis, leave], context: group.context)
        #expect(state.currentEpoch == nil)
        #expect(state.rekeyDuty == min(alice, bob))
    }
}

extension ConversationEngineTests {
    /// Seed 466 of the convergence scenarios (in some runs: record ids are random): Bob re-keys while Alice removes
    /// him, so the rules reject his re-key ("removed concurrently"); Alice then adds Dave. Alice reads the re-key (it
    /// was sealed to her), Dave cannot (sealed before he joined, and a rejected commit opens no epoch that a later
    /// one could chain): only Alice knows the reason. Roster and timeline agree; the shared digest must too.
    @Test("a rejected commit sealed before a member joined leaves the members' digests equal")
    func rejectedCommitSealedBeforeJoining() {
        let (alice, bob, dave) = (Fixtures.author(0), Fixtures.author(1), Fixtures.author(3))
        var group = Group()
        let genesis = group.found(with: [bob])
        let first = EpochID(raw: genesis.id.raw)
        group.see(bob, from: alice)
        let removal = group.opening(alice, .remove(members: [bob]), roster: [alice], parents: [first])
        var rekey = group.opening(bob, .rekey, roster: [alice, bob], parents: [first])
        if rekey.position < removal.position {
            // Only a removal earlier in the order rejects a commit: give the re-key a later Lamport number.
            var header = rekey.header
            header.lamport = removal.header.lamport + 1
            rekey = ConversationEntry(id: rekey.id, header: header, body: rekey.body)
        }
        group.see(alice, from: bob)
        let add = group.opening(
            alice, .add(members: [dave]), roster: [alice, dave], parents: [EpochID(raw: removal.id.raw)])
        let aliceReads = ConversationRules.derive([genesis, removal, rekey, add], context: group.context)
        let daveReads = ConversationRules.derive(
            [genesis, removal, ConversationEntry(id: rekey.id, header: rekey.header, body: .unreadable), add],
            context: group.context)
        #expect(aliceReads.rejected[rekey.id] == "removed concurrently", "\(aliceReads.rejected)")
        #expect(aliceReads.sortedMembers == [alice, dave].sorted())
        #expect(daveReads.sortedMembers == aliceReads.sortedMembers)
        #expect(daveReads.timeline == aliceReads.timeline)
        #expect(daveReads.digest() == aliceReads.digest())
    }
}

extension ConversationEngineTests {
    /// Seeds 80, 123 and 366 of the convergence scenarios, with late content absorbed without re-deriving
    /// (`Derivation.absorbLateContent`): Bob reacts to Alice's message while she deletes it. The reaction sorts
    /// first, so the rules accept it and the deletion then clears it; but whether a message is deleted is not
    /// causal for a reaction by someone else, so a reaction arriving after the deletion must not be decided against
    /// the deleted message ("message deleted").
    @Test("a reaction that sorts before a deletion of its message, arriving after it, is decided as in a rebuild")
    func lateReactionBeforeDeletion() {
        let (alice, bob) = (Fixtures.author(0), Fixtures.author(1))
        var group = Group()
        let genesis = group.found(with: [bob])
        let epoch = EpochID(raw: genesis.id.raw)
        let message = group.message(alice, "hello", epoch: epoch)
        group.see(bob, from: alice)
        let other = group.message(alice, "one more", epoch: epoch)
        let deletion = group.write(alice, kind: .content, epoch: epoch, .content(.delete(target: message.id)))
        let reaction = group.write(
            bob, kind: .content, epoch: epoch, .content(.react(target: message.id, reaction: .like)))
        #expect(reaction.position < deletion.position && reaction.isConcurrent(with: deletion))
        let all = [genesis, message, other, deletion, reaction]
        #expect(ConversationRules.derive(all, context: group.context).rejected[reaction.id] == nil)
        #expect(
            Self.firstDivergence([[genesis, message], [other, deletion], [reaction]], context: group.context) == nil)
        // And the other way round: a deletion arriving after a reaction that sorts after it.
        var reverse = Group()
        let genesis2 = reverse.found(with: [bob])
        let epoch2 = EpochID(raw: genesis2.id.raw)
        let message2 = reverse.message(alice, "hello", epoch: epoch2)
        reverse.see(bob, from: alice)
        let deletion2 = reverse.write(alice, kind: .content, epoch: epoch2, .content(.delete(target: message2.id)))
        let other2 = reverse.message(bob, "first", epoch: epoch2)
        let reaction2 = reverse.write(
            bob, kind: .content, epoch: epoch2, .content(.react(target: message2.id, reaction: .like)))
        #expect(deletion2.position < reaction2.position && deletion2.isConcurrent(with: reaction2))
        #expect(
            Self.firstDivergence([[genesis2, message2], [other2, reaction2], [deletion2]], context: reverse.context)
                == nil)
    }
}

extension ConversationEngineTests {
    /// The member the rules name for a merge re-key writes it only if it would merge something: with the key of one
    /// head only (the other sealed it a wrong key, which `SlotRepair` mends), a re-key would leave the heads as they
    /// are and be owed again at every refresh.
    @Test("a merge re-key is owed only by a member holding what it would merge")
    func mergeOwedOnlyWithKeys() {
        let dave = Fixtures.author(3)
        let (group, genesis, add, rekey) = Self.addBesideRekey()
        let state = ConversationRules.derive([genesis, add, rekey], context: group.context)
        let duty = try! #require(state.rekeyDuty)
        let (added, rekeyed) = (EpochID(raw: add.id.raw), EpochID(raw: rekey.id.raw))
        #expect(state.owesRekey(duty, holding: { [added, rekeyed].contains($0) }))
        #expect(!state.owesRekey(duty, holding: { $0 == added }), "the add's head holds everyone: nothing to merge")
        #expect(state.owesRekey(duty, holding: { $0 == rekeyed }), "chaining the re-key's head gives Dave its key")
        #expect(!state.owesRekey(dave, holding: { _ in true }), "not named")
    }
}
