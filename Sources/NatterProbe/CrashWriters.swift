import Foundation
import NatterCrypto
import NatterModel
public import NatterStore
import NatterNode

/// The writers the crash tests kill at random moments (`natter debug append-loop`, `natter debug write-loop`): each
/// says `ready` once its store is open, then a `durable …` line after each write returns; after a restart the tests
/// check that every line said is still true.
public enum CrashWriters {
    /// Appends own records until `count` (nil: until killed), saying `durable SEQ ID` after each commit returns.
    public static func appendLoop(
        identity: LocalIdentity, store: RecordStore, count: Int?, say: (String) -> Void
    ) throws {
        let conversation = ConversationID(bytes: Blake2b.hash(Array("natter/debug/append-loop".utf8)))
        let epoch = EpochID(bytes: Blake2b.hash(Array("natter/debug/epoch".utf8)))
        var written = 0
        say("ready")  // the crash tests time their kill from here, not from the process's start
        while count.map({ written < $0 }) ?? true {
            let record = try store.appendOwn(
                conversation: conversation, kind: .content, epoch: epoch, createdAtMillis: WallClock.nowMillis(),
                identity: identity.signing
            ) { header in Array("append-loop record \(header.sequence)".utf8) }
            say("durable \(record.header.sequence) \(record.id.hex)")
            written += 1
        }
    }

    /// People the write loop's group is made of: fixed identities whose profiles the loop writes into the store.
    static let peopleCount = 4

    /// Writes every kind of thing a node writes, in a mix seeded by `seed`, until `count` writes (nil: until killed):
    /// own appends, messages, read receipts, in-epoch commits (renames), epoch-opening commits (adds, removes,
    /// re-keys: a fresh key sealed to the roster) and refreshes of the derived tables (epoch keys among them). Says
    /// `ready` once the store is open, then `durable WHAT CONVERSATION SEQUENCE ID` after each write returns (WHAT:
    /// message, receipt, rename, add, remove, rekey, append, create) and `refreshed` after each refresh.
    public static func writeLoop(
        identity: LocalIdentity, store: RecordStore, seed: UInt64, count: Int?, say: (String) -> Void
    ) throws {
        let conversations = Conversations(store: store, identity: identity)
        let people = try introducePeople(into: store)
        let group = try group(in: conversations, store: store, with: people, say: say)
        var rng = SeededGenerator(seed: seed)
        say("ready")
        var done = 0
        while count.map({ done < $0 }) ?? true {
            done += 1
            let state = try conversations.snapshot(of: group).state
            let absent = people.filter { state.members[$0] == nil }
            let present = people.filter { state.members[$0] != nil }
            let written: (String, Record)?
            switch Int.random(in: 0..<20, using: &rng) {
            case 0..<6:
                written = ("message", try conversations.send("line \(done)", in: group, now: WallClock.nowMillis()))
            case 6..<8: written = ("receipt", try conversations.markRead(group, now: WallClock.nowMillis()))
            case 8..<10:
                written = ("rename", try conversations.rename(group, to: "Crash \(done)", now: WallClock.nowMillis()))
            case 10..<12 where !absent.isEmpty:
                let person = absent.randomElement(using: &rng)!
                written = ("add", try conversations.add([person], to: group, now: WallClock.nowMillis()))
            case 12..<14 where present.count > 1:
                let person = present.randomElement(using: &rng)!
                written = ("remove", try conversations.remove([person], from: group, now: WallClock.nowMillis()))
            case 14: written = ("rekey", try conversations.rekey(group, now: WallClock.nowMillis()))
            case 15..<17: written = ("append", try plainAppend(store, identity))
            default:
                try conversations.refresh(group)
                written = nil
                say("refreshed")
            }
            if let (what, record) = written {
                say("durable \(what) \(record.header.conversation.hex) \(record.header.sequence) \(record.id.hex)")
            }
        }
    }

    /// The fixed identities of the group's other members, with their profiles in the store (written once).
    static func introducePeople(into store: RecordStore) throws -> [AuthorID] {
        try (1...peopleCount).map { index in
            let signing = try IdentityKeyPair(seed: Blake2b.hash(Array("natter/debug/person-\(index)".utf8)))
            let encryption = try EncryptionKeyPair(
                secret: Blake2b.hash(Array("natter/debug/person-\(index)-encryption".utf8)))
            let author = AuthorID(signing.publicKey)
            let profile = Profile(
                name: "Person \(index)",
                certificate: EncryptionKeyCertificate(certifying: encryption.publicKey, by: signing))
            let header = RecordHeader(
                kind: .plain, conversation: .profileFeed(of: author), author: author, sequence: 1, previous: .none,
                epoch: .none, lamport: 1, createdAtMillis: 1, dependencies: VectorClock())
            let record = try Record.sign(header: header, payload: profile.encoded(), by: signing)
            _ = try store.ingest([record], receivedAtMillis: 1)  // held already after the first run: a duplicate
            return author
        }
    }

    /// The group this identity founded, founding it first (a durable commit of its own, said) if there is none.
    static func group(
        in conversations: Conversations, store: RecordStore, with people: [AuthorID], say: (String) -> Void
    ) throws -> ConversationID {
        for id in try store.conversationIDs()
        where try conversations.snapshot(of: id).state.creator == conversations.identity.author {
            return id
        }
        let id = try conversations.createGroup(
            title: "Crash", members: Array(people.prefix(2)), now: WallClock.nowMillis())
        let genesis = try store.appliedRecords(of: id)[0]
        say("durable create \(id.hex) 1 \(genesis.id.hex)")
        return id
    }

    /// An own append outside any conversation's rules, as the append loop writes.
    static func plainAppend(_ store: RecordStore, _ identity: LocalIdentity) throws -> Record {
        let conversation = ConversationID(bytes: Blake2b.hash(Array("natter/debug/append-loop".utf8)))
        let epoch = EpochID(bytes: Blake2b.hash(Array("natter/debug/epoch".utf8)))
        return try store.appendOwn(
            conversation: conversation, kind: .content, epoch: epoch, createdAtMillis: WallClock.nowMillis(),
            identity: identity.signing
        ) { header in Array("write-loop record \(header.sequence)".utf8) }
    }
}
