// Goal: the key slots of epoch-opening commits (docs/protocol.md §10.2) give each member its key and nobody else
// anything: a relay cannot tell who holds a slot, a key is taken only when it opens the commit it claims to open
// (so a planted commit cannot poison a history chain, issue 19 item 5), a wrongly sealed slot is seen by its owner and
// by any member holding the key, and the largest commit fits a record. Method: the documented vector rebuilt, then
// commits built with the real sealing code and edited where an attacker would edit them.
import Foundation
import NatterCrypto
import Testing

@testable import NatterModel

@Suite("Key slots of opening commits")
struct KeySlotTests {
    // MARK: - The documented vector

    @Test("sealOpeningCommit rebuilds the documented vector, and each member opens its slot")
    func documentedVector() throws {
        let blocks = try ProtocolDocument.vectorBlocks(try ProtocolDocument.text(), prefix: "slots-")
        let inputs = try #require(blocks["slots-1-inputs"])
        var fields = [String: [String]]()
        for line in inputs.split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            fields[parts[0], default: []].append(parts[1])
        }
        func hex(_ text: String) throws -> [UInt8] { try ProtocolDocument.hex(text, "slots-1") }
        let key = try SymmetricKey(bytes: try hex(fields["key"]![0]))
        let parentParts = fields["parent"]![0].split(separator: " ").map(String.init)
        let parent = (EpochID(bytes: try hex(parentParts[0])), try SymmetricKey(bytes: try hex(parentParts[1])))
        var members = [(AuthorID, EncryptionKeyPair)]()
        for line in fields["member"]! {
            let parts = line.split(separator: " ").map(String.init)
            members.append((AuthorID(bytes: try hex(parts[0])), try EncryptionKeyPair(secret: try hex(parts[1]))))
        }
        let operation = try ControlOperation.decode(try hex(fields["operation"]![0]))
        let header = try hex(fields["header"]![0])
        let payload = try ConversationPayload.sealOpeningCommit(
            operation, newKey: key, parents: [parent], roster: members.map { ($0.0, $0.1.publicKey) }, header: header,
            nonce: try AEADNonce(bytes: try hex(fields["nonce"]![0])))
        #expect(Hex.encode(payload) == Hex.encode(try hex(try #require(blocks["slots-1-payload"]))))
        #expect(KeySlots.ephemeral(of: key) == (try hex(try #require(blocks["slots-1-ephemeral"]))))

        let commit = try ConversationPayload.parseCommit(payload)
        for (_, keyPair) in members {
            guard case .key(let opened) = KeySlots.open(slots: commit.slots, ephemeral: commit.ephemeral!, keyPair: keyPair)
            else { Issue.record("a member's slot did not open"); continue }
            #expect(opened.secret.constantTimeEquals(key.secret))
        }
        let content = try ConversationPayload.openCommit(commit, key: key, header: header)
        #expect(content.operation == operation && content.parents.map(\.0) == [parent.0])
        let tagKey = KeySlots.rosterTagKey(key)
        #expect(content.tags == members.map(\.0).sorted().map { KeySlots.rosterTag($0, tagKey: tagKey) })
    }

    // MARK: - What a relay learns

    @Test("a non-member finds no slot, and one member's hints differ from commit to commit")
    func hintsNameNobody() throws {
        let roster = (0..<4).map { _ in (AuthorID(IdentityKeyPair.generate().publicKey), EncryptionKeyPair.generate()) }
        let sealedTo = roster.map { ($0.0, $0.1.publicKey) }
        let header = [UInt8](repeating: 7, count: 156)
        let first = try ConversationPayload.parseCommit(
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: .generate(), parents: [], roster: sealedTo, header: header))
        let second = try ConversationPayload.parseCommit(
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: .generate(), parents: [], roster: sealedTo, header: header))
        let outsider = EncryptionKeyPair.generate()
        guard case .none = KeySlots.open(slots: first.slots, ephemeral: first.ephemeral!, keyPair: outsider) else {
            Issue.record("an outsider opened a slot")
            return
        }
        // The same roster, sealed twice: no hint repeats, so slots cannot be linked from commit to commit (nor, the
        // hints being keyed by X25519 secrets, tested against a list of identities).
        #expect(Set(first.slots.map(\.hint)).isDisjoint(with: Set(second.slots.map(\.hint))))
        #expect(first.ephemeral != second.ephemeral)
    }

    // MARK: - Keys that do not open their commit

    /// A slot for `recipient` in a commit of `key` that holds `wrongKey`, with the right hint: what a hostile author
    /// (or a broken one) can write.
    static func wrongSlot(for recipient: EncryptionPublicKey, key: SymmetricKey, wrongKey: SymmetricKey) throws
        -> [UInt8]
    {
        let ephemeral = KeySlots.ephemeral(of: key)
        let shared = try X25519.sharedSecret(secret: key.derive(purpose: "natrslot").secret, peerPublicKey: recipient.bytes)
        let (hint, wrapKey) = KeySlots.secrets(shared: shared, ephemeral: ephemeral, recipient: recipient)
        return hint + ChaCha20Poly1305.seal(wrongKey.secret.exposedCopy(), key: wrapKey, counter: 0, associatedData: [UInt8]())
    }

    @Test("a slot holding a key that does not open its commit is wrongly sealed, for its owner and for the others")
    func wronglySealedSlot() throws {
        var members = (0..<3).map { _ in (AuthorID(IdentityKeyPair.generate().publicKey), EncryptionKeyPair.generate()) }
        members.sort { $0.0 < $1.0 }
        let key = SymmetricKey.generate()
        let sealedTo = members.map { ($0.0, $0.1.publicKey) }
        let commit = try ConversationPayload.parseCommit(
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: key, parents: [], roster: sealedTo, header: [1, 2, 3]))
        var slots = commit.slots
        let broken = try Self.wrongSlot(for: members[1].1.publicKey, key: key, wrongKey: .generate())
        slots[1] = (Array(broken.prefix(KeySlots.hintBytes)), Array(broken.dropFirst(KeySlots.hintBytes)))
        let ephemeral = commit.ephemeral!
        guard case .wrong = KeySlots.open(slots: slots, ephemeral: ephemeral, keyPair: members[1].1) else {
            Issue.record("the victim did not see its slot as wrongly sealed")
            return
        }
        guard case .key = KeySlots.open(slots: slots, ephemeral: ephemeral, keyPair: members[0].1) else {
            Issue.record("another member lost its key")
            return
        }
        #expect(KeySlots.wronglySealed(slots: slots, key: key, roster: sealedTo) == [members[1].0])
        #expect(KeySlots.wronglySealed(slots: commit.slots, key: key, roster: sealedTo).isEmpty)
        // A missing slot (two for the others only) is one for the member left out too.
        #expect(KeySlots.wronglySealed(slots: [slots[0], slots[2]], key: key, roster: sealedTo).contains(members[1].0))
    }

    // MARK: - The history chain

    @Test(
        "a parent key is taken only when it opens the parent commit, whatever order the records come in",
        arguments: [false, true])
    func plantedParentKeyIsRefused(plantFirst: Bool) throws {
        let founder = Fixtures.identities[0]
        let newcomer = (AuthorID(Fixtures.identities[1].publicKey), EncryptionKeyPair.generate())
        let stranger = Fixtures.identities[2]
        let founderKeys = EncryptionKeyPair.generate()
        let conversation = ConversationID(raw: Fixtures.bytes32("group"))
        func commit(
            by identity: IdentityKeyPair, sequence: UInt64, previous: RecordID = .none, epoch: EpochID, lamport: UInt64,
            dependencies: VectorClock, payload: (RecordHeader) throws -> [UInt8]
        ) throws -> Record {
            let header = RecordHeader(
                kind: .commit, conversation: conversation, author: AuthorID(identity.publicKey), sequence: sequence,
                previous: previous, epoch: epoch, lamport: lamport, createdAtMillis: 1, dependencies: dependencies)
            return try Record.sign(header: header, payload: try payload(header), by: identity)
        }
        let genesisKey = SymmetricKey.generate()
        let founderID = AuthorID(founder.publicKey)
        let genesis = try commit(by: founder, sequence: 1, epoch: .none, lamport: 1, dependencies: VectorClock()) {
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: genesisKey, parents: [], roster: [(founderID, founderKeys.publicKey)],
                header: RecordCodec.encodeHeader($0))
        }
        let genesisEpoch = EpochID(raw: genesis.id.raw)
        // The stranger's plant: its own epoch, sealed to the newcomer, naming the genesis with a key of its own.
        let plant = try commit(
            by: stranger, sequence: 1, epoch: genesisEpoch, lamport: 2, dependencies: VectorClock([founderID: 1])
        ) {
            try ConversationPayload.sealOpeningCommit(
                .rekey, newKey: .generate(), parents: [(genesisEpoch, .generate())],
                roster: [(newcomer.0, newcomer.1.publicKey)], header: RecordCodec.encodeHeader($0))
        }
        // The founder's add: the real genesis key in its chain.
        let add = try commit(
            by: founder, sequence: 2, previous: genesis.id, epoch: genesisEpoch, lamport: 2,
            dependencies: VectorClock([founderID: 1])
        ) {
            try ConversationPayload.sealOpeningCommit(
                .add(members: [newcomer.0]), newKey: .generate(), parents: [(genesisEpoch, genesisKey)],
                roster: [(founderID, founderKeys.publicKey), (newcomer.0, newcomer.1.publicKey)],
                header: RecordCodec.encodeHeader($0))
        }
        let reader = ConversationReader(member: newcomer.0, keyPair: newcomer.1)
        let records = plantFirst ? [plant, genesis, add] : [genesis, add, plant]
        let (entries, keys) = reader.read(records)
        #expect(keys[genesisEpoch].map { $0.secret.constantTimeEquals(genesisKey.secret) } == true)
        let genesisEntry = try #require(entries.first { $0.id == genesis.id })
        guard case .control = genesisEntry.body else {
            Issue.record("the genesis did not open: \(genesisEntry.body)")
            return
        }
        // Read in two calls (the plant first, as a node holding it before the add does): the same.
        let (_, early) = reader.read([plant, genesis])
        #expect(early[genesisEpoch] == nil, "the plant's parent key was refused")
        let (_, later) = reader.read([genesis, add], knownKeys: early)
        #expect(later[genesisEpoch].map { $0.secret.constantTimeEquals(genesisKey.secret) } == true)
    }

    // MARK: - Size

    @Test("the largest possible commit fits a record: 256 members, 255 parents, 255 named, 512 dependencies")
    func largestCommitFits() throws {
        let roster = (0..<Limits.groupMembersMax).map { index in
            (AuthorID(bytes: Blake2b.hash([UInt8(index & 0xFF), UInt8(index >> 8)], outputBytes: 32)),
                EncryptionKeyPair.generate().publicKey)
        }
        let author = Fixtures.identities[0]
        let parents = (0..<255).map { (EpochID(bytes: Blake2b.hash([UInt8($0)], outputBytes: 32)), SymmetricKey.generate()) }
        let title = String(repeating: "é", count: ConversationLimits.titleCharactersMax)  // 200 bytes of 100 characters
        let longest = String(repeating: "\u{1F600}", count: ConversationLimits.titleCharactersMax)  // 400 bytes
        #expect(longest.utf8.count == ConversationLimits.titleBytesMax && title.count == longest.count)
        let operation = ControlOperation.create(
            kind: .group, title: longest, members: roster.dropFirst().map(\.0), salt: [UInt8](repeating: 1, count: 16))
        let dependencies = VectorClock(
            Dictionary(uniqueKeysWithValues: (0..<Limits.dependenciesMax).map { index in
                (AuthorID(bytes: Blake2b.hash([UInt8(index & 0xFF), UInt8(index >> 8), 9], outputBytes: 32)), UInt64(1))
            }))
        let header = RecordHeader(
            kind: .commit, conversation: ConversationID(raw: Fixtures.bytes32("big")), author: AuthorID(author.publicKey),
            sequence: 1, previous: .none, epoch: parents[0].0, lamport: 2, createdAtMillis: 1, dependencies: dependencies)
        let payload = try ConversationPayload.sealOpeningCommit(
            operation, newKey: .generate(), parents: parents, roster: roster, header: RecordCodec.encodeHeader(header))
        let record = try Record.sign(header: header, payload: payload, by: author)
        let size = record.bytes.count
        print("largest commit: \(size) bytes of \(Limits.recordBytesMax) (payload \(payload.count))")
        #expect(size == 62_069, "docs/protocol.md §10.2 gives this figure")
        #expect(size <= Limits.recordBytesMax)
    }

    // MARK: - Who repairs

    @Test("SlotRepair names the smallest member holding the key, not the author, while the epoch is a head")
    func repairDuty() {
        let people = (0..<4).map { Fixtures.author($0) }.sorted()
        let epoch = EpochID(raw: Fixtures.bytes32("epoch"))
        var state = ConversationState()
        for person in people {
            state.members[person] = MemberInfo(
                role: .member, flags: [], joined: EntryPosition(lamport: 1, id: RecordID(raw: Fixtures.bytes32("g"))))
        }
        state.epochs[epoch] = EpochInfo(
            id: epoch, roster: people, parents: [], position: EntryPosition(lamport: 2, id: RecordID(raw: epoch.raw)))
        state.epochHeads = [epoch]
        // people[0] wrote it and sealed people[1] a wrong key: people[2] repairs.
        #expect(SlotRepair.duty(epoch: epoch, author: people[0], wronglySealed: [people[1]], in: state) == people[2])
        // Written by people[3], people[0] left out: people[1].
        #expect(SlotRepair.duty(epoch: epoch, author: people[3], wronglySealed: [people[0]], in: state) == people[1])
        // Nobody left out, or the one left out is gone: no duty.
        #expect(SlotRepair.duty(epoch: epoch, author: people[0], wronglySealed: [], in: state) == nil)
        var gone = state
        gone.members[people[1]] = nil
        #expect(SlotRepair.duty(epoch: epoch, author: people[0], wronglySealed: [people[1]], in: gone) == nil)
        // A later epoch chains it: repaired already.
        var chained = state
        chained.epochHeads = [EpochID(raw: Fixtures.bytes32("later"))]
        #expect(SlotRepair.duty(epoch: epoch, author: people[0], wronglySealed: [people[1]], in: chained) == nil)
        // Two members, the author's peer left out: nobody else holds the key.
        var pair = state
        pair.epochs[epoch] = EpochInfo(
            id: epoch, roster: Array(people.prefix(2)), parents: [], position: state.epochs[epoch]!.position)
        #expect(SlotRepair.duty(epoch: epoch, author: people[0], wronglySealed: [people[1]], in: pair) == nil)
    }
}
