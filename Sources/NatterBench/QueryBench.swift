import Foundation
import NatterCrypto
import NatterModel
import NatterStore

/// The conversation-query benchmark (`natter bench --queries`): a store holding `messages` messages across
/// `conversations` groups of two writers, then the time to list conversations and to open one (its last 50 lines).
public struct QueryBench {
    let conversations: Int
    let messages: Int

    public init(conversations: Int, messages: Int) {
        self.conversations = conversations
        self.messages = messages
    }

    public struct Result {
        public let populateSeconds: Double
        public let listMillis: [Double]
        public let openMillis: [Double]
        public let filterMillis: [Double]
    }

    /// A store filled with the workload, derived into the conversation tables.
    struct Populated {
        let conversations: Conversations
        let ids: [ConversationID]
        let perConversation: Int
        let seconds: Double
    }

    func populate(in directory: String) throws -> Populated {
        var rng = SeededGenerator(seed: 7)
        let me = LocalIdentity(
            signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        let peer = LocalIdentity(
            signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        let store = try RecordStore.open(directory: directory)
        let service = Conversations(store: store, identity: me)
        let started = ContinuousClock.now
        try service.publishProfile(name: "Me", now: 1)
        let peerStore = try RecordStore.inMemory()
        let peerService = Conversations(store: peerStore, identity: peer)
        let peerProfile = try peerService.publishProfile(name: "Peer", now: 1)
        _ = try store.ingest([peerProfile.bytes], receivedAtMillis: 1)

        let perConversation = max(1, messages / conversations)
        var ids = [ConversationID]()
        for index in 0..<conversations {
            let id = try service.createGroup(title: "group \(index)", members: [peer.author], now: 1_000)
            ids.append(id)
            let snapshot = try service.snapshot(of: id)
            let epoch = snapshot.state.currentEpoch!
            let key = snapshot.keys[epoch]!
            let genesis = try store.feeds(of: id).first { $0.author == me.author }!
            // Both people take turns; every record depends on everything before it.
            var heads: [AuthorID: (UInt64, RecordID)] = [me.author: (genesis.stored, genesis.storedHead)]
            var lamport: UInt64 = 1
            var batch = [[UInt8]]()
            for number in 0..<perConversation {
                let writer = number % 2 == 0 ? peer : me
                let author = writer.author
                let (sequence, previous) = heads[author].map { ($0.0 + 1, $0.1) } ?? (1, RecordID.none)
                var clock = [AuthorID: UInt64]()
                for (who, head) in heads { clock[who] = head.0 }
                let header = RecordHeader(
                    kind: .content, conversation: id, author: author, sequence: sequence, previous: previous,
                    epoch: epoch, lamport: lamport + 1, createdAtMillis: 1_000 + Int64(number) * 1_000,
                    dependencies: VectorClock(clock))
                let payload = ConversationPayload.sealContent(
                    .message(text: "message \(number) in conversation \(index): the quick brown fox", replyTo: nil),
                    key: key, header: RecordCodec.encodeHeader(header))
                let record = try Record.sign(header: header, payload: payload, by: writer.signing)
                heads[author] = (sequence, record.id)
                lamport += 1
                batch.append(record.bytes)
            }
            _ = try store.ingest(batch, receivedAtMillis: 1_000 + Int64(index))
            try service.refresh(id)
        }
        let populated = ContinuousClock.now - started
        return Populated(
            conversations: service, ids: ids, perConversation: perConversation,
            seconds: Double(populated.components.seconds) + Double(populated.components.attoseconds) * 1e-18)
    }

    public func run(in directory: String) throws -> Result {
        let populated = try populate(in: directory)
        let (service, ids, perConversation) = (populated.conversations, populated.ids, populated.perConversation)
        var list = [Double]()
        var open = [Double]()
        var filter = [Double]()
        for round in 0..<50 {
            list.append(
                try timeMillis {
                    let rows = try service.conversationList()
                    precondition(rows.count == conversations)
                })
            let id = ids[round % ids.count]
            open.append(
                try timeMillis {
                    let lines = try service.history(id)
                    precondition(lines.count == min(50, perConversation + 1))
                })
            filter.append(try timeMillis { _ = try service.conversationList(filter: "group 4") })
        }
        return Result(
            populateSeconds: populated.seconds, listMillis: list.sorted(), openMillis: open.sorted(),
            filterMillis: filter.sorted())
    }
}

/// Milliseconds that `body` takes.
func timeMillis(_ body: () throws -> Void) rethrows -> Double {
    let elapsed = try ContinuousClock().measure(body)
    return Double(elapsed.components.seconds) * 1e3 + Double(elapsed.components.attoseconds) * 1e-15
}
