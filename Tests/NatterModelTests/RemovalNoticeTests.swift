// Goal: a removed member learns it was removed — who removed whom, and the roster without it — from the removal
// itself, as the members read it, while nothing after the removal opens for it and a relay learns nothing
// (docs/protocol.md §10.2 form 4, decision 0010). Method: groups written record by record with the real sealing code,
// read by each person's `ConversationReader` and derived by `ConversationRules`; hostile removals built by editing the
// layout where an author would edit it.
import Foundation
import NatterCrypto
import Testing

@testable import NatterModel

/// A group written by hand: each person signs its records with the dependencies it has seen; the test knows every
/// epoch key.
struct RemovalScene {
    let signing: [IdentityKeyPair]
    let encryption: [EncryptionKeyPair]
    let salt = [UInt8](repeating: 5, count: 16)
    let conversation: ConversationID
    private(set) var records: [Record] = []
    private var seen: [[AuthorID: UInt64]]
    private var lamport: [UInt64]
    private var previous: [RecordID]
    private var sequence: [UInt64]
    var keys: [EpochID: SymmetricKey] = [:]

    init(people: Int) {
        signing = Array(Fixtures.identities.prefix(people))
        encryption = (0..<people).map { try! EncryptionKeyPair(secret: Blake2b.hash([UInt8($0), 7], outputBytes: 32)) }
        conversation = ConversationContext.groupID(creator: AuthorID(signing[0].publicKey), salt: salt)
        seen = Array(repeating: [:], count: people)
        lamport = Array(repeating: 0, count: people)
        previous = Array(repeating: .none, count: people)
        sequence = Array(repeating: 0, count: people)
    }

    func id(_ person: Int) -> AuthorID { AuthorID(signing[person].publicKey) }
    func sealedTo(_ people: [Int]) -> [(AuthorID, EncryptionPublicKey)] { people.map { (id($0), encryption[$0].publicKey) } }

    /// The header of `person`'s next record under `epoch`, depending on everything it has seen.
    func header(_ person: Int, _ kind: RecordKind, epoch: EpochID) -> RecordHeader {
        RecordHeader(
            kind: kind, conversation: conversation, author: id(person), sequence: sequence[person] + 1,
            previous: previous[person], epoch: epoch, lamport: lamport[person] + 1, createdAtMillis: 1_000,
            dependencies: VectorClock(seen[person].filter { $0.value > 0 }))
    }

    /// Signs and keeps `person`'s record with `header` (from `header(_:_:epoch:)`).
    @discardableResult
    mutating func append(_ person: Int, _ header: RecordHeader, _ payload: [UInt8]) -> Record {
        let record = try! Record.sign(header: header, payload: payload, by: signing[person])
        sequence[person] = header.sequence
        previous[person] = record.id
        records.append(record)
        see(person, [record])
        return record
    }

    /// `person` receives `records` (every record so far when nil).
    mutating func see(_ person: Int, _ some: [Record]? = nil) {
        for record in some ?? records {
            seen[person][record.header.author] = max(seen[person][record.header.author] ?? 0, record.header.sequence)
            lamport[person] = max(lamport[person], record.header.lamport)
        }
    }

    mutating func create(members: [Int]) throws -> EpochID {
        let key = SymmetricKey.generate()
        let header = header(0, .commit, epoch: .none)
        let genesis = append(
            0, header,
            try ConversationPayload.sealOpeningCommit(
                .create(kind: .group, title: nil, members: members.map(id), salt: salt), newKey: key, parents: [],
                roster: sealedTo([0] + members), header: RecordCodec.encodeHeader(header)))
        keys[EpochID(raw: genesis.id.raw)] = key
        return EpochID(raw: genesis.id.raw)
    }

    /// An honest removal: the new key sealed to `roster`, the notice to `removed`.
    mutating func remove(by author: Int, _ removed: [Int], roster: [Int], parents: [EpochID]) throws -> Record {
        let key = SymmetricKey.generate()
        let header = header(author, .commit, epoch: parents[0])
        let record = append(
            author, header,
            try ConversationPayload.sealOpeningCommit(
                .remove(members: removed.map(id)), newKey: key, parents: parents.map { ($0, keys[$0]!) },
                roster: sealedTo(roster), notify: sealedTo(removed), header: RecordCodec.encodeHeader(header)))
        keys[EpochID(raw: record.id.raw)] = key
        return record
    }

    mutating func send(by author: Int, _ text: String, epoch: EpochID) -> Record {
        let header = header(author, .content, epoch: epoch)
        return append(
            author, header,
            ConversationPayload.sealContent(
                .message(text: text, replyTo: nil), key: keys[epoch]!, header: RecordCodec.encodeHeader(header)))
    }

    @discardableResult
    mutating func inEpoch(by author: Int, _ operation: ControlOperation, epoch: EpochID) -> Record {
        let header = header(author, .commit, epoch: epoch)
        return append(
            author, header,
            ConversationPayload.sealInEpochCommit(operation, key: keys[epoch]!, header: RecordCodec.encodeHeader(header)))
    }

    /// What `keyPair`'s owner reads of `records` and derives from it.
    func view(_ person: Int, of some: [Record]? = nil) -> (state: ConversationState, entries: [RecordID: ConversationEntry]) {
        view(member: id(person), keyPair: encryption[person], of: some ?? records)
    }

    func view(member: AuthorID, keyPair: EncryptionKeyPair, of some: [Record]) -> (
        state: ConversationState, entries: [RecordID: ConversationEntry]
    ) {
        let (entries, _) = ConversationReader(member: member, keyPair: keyPair).read(some)
        let state = ConversationRules.derive(entries, context: ConversationContext(conversation: conversation))
        return (state, Dictionary(uniqueKeysWithValues: entries.map { ($0.id, $0) }))
    }
}

extension ConversationState {
    /// The system change a record made, if it is one valid here.
    func change(_ record: Record) -> SystemEvent.Change? {
        guard case .system(let event) = items[record.id] else { return nil }
        return event.change
    }
}

@Suite("Removal notices")
struct RemovalNoticeTests {
    @Test("sealOpeningCommit rebuilds the documented removal vector; the member removed reads its notice, the others the body")
    func documentedVector() throws {
        let blocks = try ProtocolDocument.vectorBlocks(try ProtocolDocument.text(), prefix: "slots-")
        var fields = [String: [String]]()
        for line in try #require(blocks["slots-2-inputs"]).split(separator: "\n") {
            let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
            fields[parts[0], default: []].append(parts[1])
        }
        func hex(_ text: String) throws -> [UInt8] { try ProtocolDocument.hex(text, "slots-2") }
        func people(_ field: String) throws -> [(AuthorID, EncryptionKeyPair)] {
            try fields[field]!.map { line in
                let parts = line.split(separator: " ").map(String.init)
                return (AuthorID(bytes: try hex(parts[0])), try EncryptionKeyPair(secret: try hex(parts[1])))
            }
        }
        let key = try SymmetricKey(bytes: try hex(fields["key"]![0]))
        let parentParts = fields["parent"]![0].split(separator: " ").map(String.init)
        let parent = (EpochID(bytes: try hex(parentParts[0])), try SymmetricKey(bytes: try hex(parentParts[1])))
        let (members, removed) = (try people("member"), try people("removed"))
        let operation = try ControlOperation.decode(try hex(fields["operation"]![0]))
        let header = try hex(fields["header"]![0])
        let payload = try ConversationPayload.sealOpeningCommit(
            operation, newKey: key, parents: [parent], roster: members.map { ($0.0, $0.1.publicKey) },
            notify: removed.map { ($0.0, $0.1.publicKey) }, header: header,
            nonce: try AEADNonce(bytes: try hex(fields["nonce"]![0])))
        #expect(
            Hex.encode(payload) == Hex.encode(try hex(try #require(blocks["slots-2-payload"]))),
            "payload \(Hex.encode(payload)) (\(payload.count) bytes)")
        #expect(KeySlots.ephemeral(of: key) == (try hex(try #require(blocks["slots-2-ephemeral"]))))

        let commit = try ConversationPayload.parseCommit(payload)
        let notice = try #require(commit.notice)
        let removedKey = try #require(
            RemovalNotice.find(slots: notice.slots, check: notice.check, ephemeral: commit.ephemeral!, keyPair: removed[0].1))
        #expect(try ConversationPayload.openNotice(notice, noticeKey: removedKey, header: header) == operation)
        guard case .none = KeySlots.open(slots: commit.slots, ephemeral: commit.ephemeral!, keyPair: removed[0].1) else {
            Issue.record("the member removed holds a key slot")
            return
        }
        for (_, keyPair) in members {
            #expect(RemovalNotice.find(slots: notice.slots, check: notice.check, ephemeral: commit.ephemeral!, keyPair: keyPair) == nil)
            guard case .key(let opened) = KeySlots.open(slots: commit.slots, ephemeral: commit.ephemeral!, keyPair: keyPair)
            else { Issue.record("a member's slot did not open"); continue }
            let content = try ConversationPayload.openCommit(commit, key: opened, header: header)
            #expect(content.operation == operation && content.announced && content.parents.map(\.0) == [parent.0])
        }
    }

    @Test("the removed member reads who removed it and the roster without it, as the members do; nothing after")
    func removedMemberReadsItsRemoval() throws {
        var scene = RemovalScene(people: 3)  // Alice 0, Bob 1, Carol 2
        let genesis = try scene.create(members: [1, 2])
        for person in 0..<3 { scene.see(person) }
        let removal = try scene.remove(by: 0, [1], roster: [0, 2], parents: [genesis])
        #expect(removal.payload.first == 4, "a removal is written in the removal form")
        let after = scene.send(by: 0, "after the removal", epoch: EpochID(raw: removal.id.raw))
        let bob = scene.view(1)
        let carol = scene.view(2)
        for state in [bob.state, carol.state] {
            #expect(state.change(removal) == .removed([scene.id(1)]))
            #expect(state.sortedMembers == [scene.id(0), scene.id(2)].sorted())
            #expect(state.rejected[removal.id] == nil)
        }
        guard case .notice(.remove(let named)) = bob.entries[removal.id]?.body, named == [scene.id(1)] else {
            Issue.record("Bob did not read the removal through its notice: \(String(describing: bob.entries[removal.id]?.body))")
            return
        }
        // Bob has no key for the new epoch: the line after it stays unreadable; Carol reads it.
        #expect(bob.state.unreadable.contains(after.id) && bob.state.message(after.id) == nil)
        #expect(carol.state.message(after.id)?.text == "after the removal")
        // A relay, or anyone not removed, finds nothing in the notice.
        let relay = scene.view(member: AuthorID(Fixtures.identities[5].publicKey), keyPair: .generate(), of: scene.records)
        #expect(relay.entries[removal.id]?.isUnreadable == true)
    }

    @Test("strong removal: the removed member's concurrent line is retracted in its own view too, applied late")
    func concurrentLineRetractedForTheRemoved() throws {
        var scene = RemovalScene(people: 3)
        let genesis = try scene.create(members: [1, 2])
        for person in 0..<3 { scene.see(person) }
        let line = scene.send(by: 1, "my last words", epoch: genesis)  // Alice has not seen it
        let removal = try scene.remove(by: 0, [1], roster: [0, 2], parents: [genesis])
        for person in [1, 2] {
            let view = scene.view(person)
            #expect(view.state.rejected[line.id]?.hasPrefix("retracted") == true, "person \(person)")
            #expect(view.state.change(removal) == .removed([scene.id(1)]))
        }
        // Bob's engine showed the line first; the removal arriving later retracts it there.
        let reader = ConversationReader(member: scene.id(1), keyPair: scene.encryption[1])
        var engine = ConversationEngine(context: ConversationContext(conversation: scene.conversation))
        engine.add(reader.read(scene.records.filter { $0.id != removal.id }).entries)
        #expect(engine.state.message(line.id)?.text == "my last words")
        let cursor = engine.changeCursor
        engine.add(reader.read(scene.records).entries)
        #expect(engine.state.retracted[line.id] != nil && engine.state.message(line.id) == nil)
        #expect(engine.state.members[scene.id(1)] == nil)
        _ = cursor
    }

    @Test("concurrent removals: each removed member reads both, every roster agrees, a later removal tells only its own")
    func concurrentRemovals() throws {
        var scene = RemovalScene(people: 5)  // Alice 0 (creator), Bob 1, Carol 2 (admin), Dave 3, Erin 4
        let genesis = try scene.create(members: [1, 2, 3, 4])
        for person in 0..<5 { scene.see(person) }
        scene.inEpoch(by: 0, .setRole(member: scene.id(2), role: .admin), epoch: genesis)
        for person in 0..<5 { scene.see(person) }
        // Alice removes Bob while Carol removes Dave: neither has seen the other's.
        let first = try scene.remove(by: 0, [1], roster: [0, 2, 3, 4], parents: [genesis])
        let second = try scene.remove(by: 2, [3], roster: [0, 1, 2, 4], parents: [genesis])
        let expected = [scene.id(0), scene.id(2), scene.id(4)].sorted()
        for person in 0..<5 {
            let state = scene.view(person).state
            #expect(state.sortedMembers == expected, "person \(person)")
            #expect(state.change(first) == .removed([scene.id(1)]) && state.change(second) == .removed([scene.id(3)]))
        }
        // Bob read his own removal through its notice and Dave's through the slot Carol still sealed him.
        let bob = scene.view(1)
        guard case .notice = bob.entries[first.id]?.body, case .control = bob.entries[second.id]?.body else {
            Issue.record("Bob's reading: \(String(describing: bob.entries[first.id]?.body)), \(String(describing: bob.entries[second.id]?.body))")
            return
        }
        // Alice, having seen both, removes Erin: Erin learns it; Bob and Dave, no longer members, learn nothing.
        scene.see(0)
        let third = try scene.remove(
            by: 0, [4], roster: [0, 2],
            parents: [EpochID(raw: first.id.raw), EpochID(raw: second.id.raw)].sorted())
        #expect(scene.view(4).state.change(third) == .removed([scene.id(4)]))
        #expect(scene.view(4).state.sortedMembers == [scene.id(0), scene.id(2)].sorted())
        for person in [1, 3] { #expect(scene.view(person).entries[third.id]?.isUnreadable == true, "person \(person)") }
    }

    // MARK: - Hostile removals

    /// A removal as a hostile author may write it: form 4 with the new key sealed to `slotOwners`, the body's roster
    /// tags for them, the operation sealed under `noticeKey` with its check, notice slots for `notify` (a garbage one
    /// for `garbageFor`), and the given form byte (3: the operation in the body and no notice at all).
    static func forged(
        _ operation: ControlOperation, key: SymmetricKey, noticeKey: SymmetricKey? = nil, form: UInt8 = 4,
        parents: [(EpochID, SymmetricKey)], slotOwners: [(AuthorID, EncryptionPublicKey)],
        notify: [(AuthorID, EncryptionPublicKey)], garbageFor: AuthorID? = nil, header: [UInt8]
    ) throws -> [UInt8] {
        let noticeKey = noticeKey ?? RemovalNotice.key(of: key)
        let ephemeral = KeySlots.ephemeral(of: key)
        let owners = slotOwners.sorted { $0.0 < $1.0 }
        var authenticated = ephemeral
        appendBigEndian(UInt16(owners.count), to: &authenticated)
        for (_, encryptionKey) in owners { authenticated += try KeySlots.slot(for: encryptionKey, key: key, ephemeral: ephemeral) }
        var body: [UInt8] = [UInt8(parents.count)]
        for (epoch, parentKey) in parents { body += epoch.bytes + parentKey.secret.exposedCopy() }
        for (member, _) in owners { body += KeySlots.rosterTag(member, tagKey: KeySlots.rosterTagKey(key)) }
        if form == 3 {
            body += operation.encoded()
        } else {
            authenticated.append(UInt8(notify.count))
            for (member, encryptionKey) in notify.sorted(by: { $0.0 < $1.0 }) {
                let shared = try X25519.sharedSecret(
                    secret: key.derive(purpose: "natrslot").secret, peerPublicKey: encryptionKey.bytes)
                let (hint, mask) = RemovalNotice.hintAndMask(shared: shared, ephemeral: ephemeral, recipient: encryptionKey)
                let n = member == garbageFor ? SymmetricKey.generate() : noticeKey
                authenticated += hint + zip(n.secret.exposedCopy(), mask).map { $0 ^ $1 }
            }
            authenticated += RemovalNotice.check(of: noticeKey)
            let plain = operation.encoded()
            appendBigEndian(UInt16(plain.count + 16), to: &authenticated)
            authenticated += ChaCha20Poly1305.seal(plain, key: noticeKey, counter: 0, associatedData: header + authenticated)
        }
        let nonce = AEADNonce.random()
        return [form] + authenticated + nonce.bytes + AEAD.seal(body, key: key, nonce: nonce, associatedData: header + authenticated)
    }

    enum Forgery: String, CaseIterable, CustomTestStringConvertible {
        case foreignNoticeKey, slotsDisagree, garbageNoticeSlot, noNotice, noticeOnRekey, slotCountOff
        var testDescription: String { rawValue }
    }

    /// Alice 0 (creator), Bob 1, Carol 2, Dave 3; Alice writes a removal of Bob, forged as `forgery` says.
    @Test(
        "a forged removal: the members who open its body reject it; the removed member is never shown a roster the members accept differently",
        arguments: Forgery.allCases)
    func forgedRemoval(forgery: Forgery) throws {
        var scene = RemovalScene(people: 4)
        let genesis = try scene.create(members: [1, 2, 3])
        for person in 0..<4 { scene.see(person) }
        let key = SymmetricKey.generate()
        let bob = scene.sealedTo([1])
        let recordHeader = scene.header(0, .commit, epoch: genesis)
        let payload = try { () throws -> [UInt8] in
            let header = RecordCodec.encodeHeader(recordHeader)
            let parents = [(genesis, scene.keys[genesis]!)]
            switch forgery {
            case .foreignNoticeKey:
                return try Self.forged(
                    .remove(members: [scene.id(1)]), key: key, noticeKey: .generate(), parents: parents,
                    slotOwners: scene.sealedTo([0, 2, 3]), notify: bob, header: header)
            case .slotsDisagree:  // the notice removes Bob and Dave; the slots still seal to Dave
                return try Self.forged(
                    .remove(members: [scene.id(1), scene.id(3)]), key: key, parents: parents,
                    slotOwners: scene.sealedTo([0, 2, 3]), notify: scene.sealedTo([1, 3]), header: header)
            case .garbageNoticeSlot:
                return try Self.forged(
                    .remove(members: [scene.id(1)]), key: key, parents: parents, slotOwners: scene.sealedTo([0, 2, 3]),
                    notify: bob, garbageFor: scene.id(1), header: header)
            case .noNotice:
                return try Self.forged(
                    .remove(members: [scene.id(1)]), key: key, form: 3, parents: parents,
                    slotOwners: scene.sealedTo([0, 2, 3]), notify: [], header: header)
            case .noticeOnRekey:
                return try Self.forged(
                    .rekey, key: key, parents: parents, slotOwners: scene.sealedTo([0, 2, 3]), notify: bob, header: header)
            case .slotCountOff:  // two notice slots for one member removed
                return try Self.forged(
                    .remove(members: [scene.id(1)]), key: key, parents: parents, slotOwners: scene.sealedTo([0, 2, 3]),
                    notify: scene.sealedTo([1, 3]), header: header)
            }
        }()
        let record = scene.append(0, recordHeader, payload)
        let everyone = [scene.id(0), scene.id(1), scene.id(2), scene.id(3)].sorted()
        let carol = scene.view(2).state
        let bobsView = scene.view(1)
        switch forgery {
        case .garbageNoticeSlot:
            // The members cannot see a notice slot is wrong (that needs Bob's key): they accept the removal. Bob cannot
            // read the notice, so he is where he was before notices: the commit unreadable, himself locked out.
            #expect(carol.change(record) == .removed([scene.id(1)]))
            #expect(bobsView.entries[record.id]?.isUnreadable == true)
            var engine = ConversationEngine(context: ConversationContext(conversation: scene.conversation))
            engine.add(Array(bobsView.entries.values))
            #expect(engine.isLockedOut)
        case .foreignNoticeKey, .slotsDisagree:
            // Every member who opens the body rejects it, and stays with the roster before it.
            let reason = forgery == .foreignNoticeKey
                ? "malformed: \(ConversationPayload.Failure.malformed("the removal notice's check does not match the key"))"
                : "keys sealed to the wrong members"
            for person in [0, 2, 3] {
                let state = scene.view(person).state
                #expect(state.rejected[record.id] == reason, "person \(person)")
                #expect(state.sortedMembers == everyone)
            }
            // Bob cannot check slots sealed to others: he takes the removal at its word — the limit decision 0010
            // states. What he is shown is only ever a removal its author was permitted to make.
            #expect(bobsView.state.change(record) == .removed(forgery == .slotsDisagree ? [scene.id(1), scene.id(3)] : [scene.id(1)]))
        case .noNotice, .noticeOnRekey, .slotCountOff:
            let reason = [
                Forgery.noNotice: "a removal must carry its notice",
                .noticeOnRekey: "only a removal carries a notice",
                .slotCountOff:
                    "malformed: \(ConversationPayload.Failure.malformed("the removal notice has not one slot per member removed"))",
            ][forgery]!
            for person in [0, 2] {
                let state = scene.view(person).state
                #expect(state.rejected[record.id] == reason, "person \(person)")
                #expect(state.sortedMembers == everyone)
            }
            // Bob: nothing to read, or the same rejection (he counts the notice slots too).
            #expect(bobsView.state.change(record) == nil)
        }
    }

    @Test("a removal its author may not make is rejected by the removed member as by the members")
    func unpermittedRemovalRejectedByTheRemoved() throws {
        var scene = RemovalScene(people: 3)
        let genesis = try scene.create(members: [1, 2])
        for person in 0..<3 { scene.see(person) }
        // Carol, a plain member without the right, removes Bob.
        let removal = try scene.remove(by: 2, [1], roster: [0, 2], parents: [genesis])
        for person in 0..<3 {
            let state = scene.view(person).state
            #expect(state.rejected[removal.id] == "not allowed to remove this member", "person \(person)")
            #expect(state.members[scene.id(1)] != nil)
        }
    }

    @Test("the largest possible removal fits a record: 256 members, 255 parents, 512 dependencies, any split")
    func largestRemovalFits() throws {
        let people = (0..<Limits.groupMembersMax).map { index in
            (AuthorID(bytes: Blake2b.hash([UInt8(index & 0xFF), UInt8(index >> 8)], outputBytes: 32)),
                EncryptionKeyPair.generate().publicKey)
        }
        let author = Fixtures.identities[0]
        let parents = (0..<255).map { (EpochID(bytes: Blake2b.hash([UInt8($0)], outputBytes: 32)), SymmetricKey.generate()) }
        let dependencies = VectorClock(
            Dictionary(uniqueKeysWithValues: (0..<Limits.dependenciesMax).map { index in
                (AuthorID(bytes: Blake2b.hash([UInt8(index & 0xFF), UInt8(index >> 8), 9], outputBytes: 32)), UInt64(1))
            }))
        let header = RecordHeader(
            kind: .commit, conversation: ConversationID(raw: Fixtures.bytes32("big")), author: AuthorID(author.publicKey),
            sequence: 1, previous: .none, epoch: parents[0].0, lamport: 2, createdAtMillis: 1, dependencies: dependencies)
        var largest = 0
        // The payload grows by 64 bytes per member who stays (slot and tag) and 72 per member removed (notice slot and
        // name): the extremes bound every split of the 256.
        for removed in [1, 255] {
            let payload = try ConversationPayload.sealOpeningCommit(
                .remove(members: people.prefix(removed).map(\.0)), newKey: .generate(), parents: parents,
                roster: Array(people.dropFirst(removed)), notify: Array(people.prefix(removed)),
                header: RecordCodec.encodeHeader(header))
            let size = try Record.sign(header: header, payload: payload, by: author).bytes.count
            print("removal of \(removed), \(Limits.groupMembersMax - removed) staying: \(size) bytes of \(Limits.recordBytesMax)")
            largest = max(largest, size)
        }
        #expect(largest == 55_578, "docs/protocol.md §10.2 gives this figure")
        #expect(largest <= Limits.recordBytesMax)
    }
}

