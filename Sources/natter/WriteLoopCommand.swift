import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterStore

extension DebugCommand {
    /// Writes every kind of thing a node writes, in a seeded random mix, until killed: own appends, messages, read
    /// receipts, in-epoch commits (renames), epoch-opening commits (adds, removes, re-keys: a fresh key sealed to the
    /// roster) and refreshes of the derived tables (epoch keys among them). Prints `ready` once the store is open,
    /// then `durable WHAT CONVERSATION SEQUENCE ID` after each write returns (WHAT: message, receipt, rename, add,
    /// remove, rekey, append, create) and `refreshed` after each refresh. The
    /// SIGKILL campaign (CrashCampaignTests) kills it at random moments and checks that every line it printed is
    /// still true after a restart.
    struct WriteLoop: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "write-loop", abstract: "Write records of every kind in a seeded mix, reporting each durable one.")

        @OptionGroup var data: DataOption

        @Option(help: "Seed of the mix of writes.")
        var seed: UInt64 = 1

        @Option(help: "Stop after this many writes (default: run until killed).")
        var count: Int?

        /// People the group is made of: fixed identities whose profiles the loop writes into the store itself.
        static let peopleCount = 4

        func run() throws {
            do {
                let (identity, store) = try data.dataDirectory.open()
                let conversations = Conversations(store: store, identity: identity)
                let people = try Self.introducePeople(into: store)
                let group = try Self.group(in: conversations, store: store, with: people)
                var rng = SeededGenerator(seed: seed)
                print("ready")
                fflush(nil)
                var done = 0
                while count.map({ done < $0 }) ?? true {
                    done += 1
                    let state = try conversations.snapshot(of: group).state
                    let absent = people.filter { state.members[$0] == nil }
                    let present = people.filter { state.members[$0] != nil }
                    let written: (String, Record)?
                    switch Int.random(in: 0..<20, using: &rng) {
                    case 0..<6: written = ("message", try conversations.send("line \(done)", in: group, now: nowMillis()))
                    case 6..<8: written = ("receipt", try conversations.markRead(group, now: nowMillis()))
                    case 8..<10: written = ("rename", try conversations.rename(group, to: "Crash \(done)", now: nowMillis()))
                    case 10..<12 where !absent.isEmpty:
                        let person = absent.randomElement(using: &rng)!
                        written = ("add", try conversations.add([person], to: group, now: nowMillis()))
                    case 12..<14 where present.count > 1:
                        let person = present.randomElement(using: &rng)!
                        written = ("remove", try conversations.remove([person], from: group, now: nowMillis()))
                    case 14: written = ("rekey", try conversations.rekey(group, now: nowMillis()))
                    case 15..<17: written = ("append", try Self.plainAppend(store, identity))
                    default:
                        try conversations.refresh(group)
                        written = nil
                        print("refreshed")
                    }
                    if let (what, record) = written {
                        print("durable \(what) \(record.header.conversation.hex) \(record.header.sequence) \(record.id.hex)")
                    }
                    fflush(nil)
                }
            } catch {
                throw fail(error)
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
                    name: "Person \(index)", certificate: EncryptionKeyCertificate(certifying: encryption.publicKey, by: signing))
                let header = RecordHeader(
                    kind: .plain, conversation: .profileFeed(of: author), author: author, sequence: 1, previous: .none,
                    epoch: .none, lamport: 1, createdAtMillis: 1, dependencies: VectorClock())
                let record = try Record.sign(header: header, payload: profile.encoded(), by: signing)
                _ = try store.ingest([record], receivedAtMillis: 1)  // held already after the first run: a duplicate
                return author
            }
        }

        /// The group this identity founded, founding it first (a durable commit of its own) if there is none.
        static func group(in conversations: Conversations, store: RecordStore, with people: [AuthorID]) throws
            -> ConversationID
        {
            for id in try store.conversationIDs() where try conversations.snapshot(of: id).state.creator == conversations.identity.author {
                return id
            }
            let id = try conversations.createGroup(title: "Crash", members: Array(people.prefix(2)), now: nowMillis())
            let genesis = try store.appliedRecords(of: id)[0]
            print("durable create \(id.hex) 1 \(genesis.id.hex)")
            return id
        }

        /// An own append outside any conversation's rules, as `append-loop` writes.
        static func plainAppend(_ store: RecordStore, _ identity: LocalIdentity) throws -> Record {
            let conversation = ConversationID(bytes: Blake2b.hash(Array("natter/debug/append-loop".utf8)))
            let epoch = EpochID(bytes: Blake2b.hash(Array("natter/debug/epoch".utf8)))
            return try store.appendOwn(
                conversation: conversation, kind: .content, epoch: epoch, createdAtMillis: nowMillis(),
                identity: identity.signing
            ) { header in Array("write-loop record \(header.sequence)".utf8) }
        }
    }
}
