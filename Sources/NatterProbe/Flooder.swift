import Foundation
public import NatterCrypto
public import NatterModel
public import NatterNode
public import NatterStore

/// A flooding node (`natter debug flood`), for measuring what a flood does to other nodes (SPEC F16). It writes
/// signed records from throwaway identities — into conversations nobody else is in, and as junk feeds into the
/// conversations given — paced at a rate, and offers them to its peer as any node offers what it writes. In a
/// process of its own (run it under `nice`, as if on another machine) its own work — checking every record it
/// stores, sealing every frame it sends — does not share the measured nodes' process or their priority.
public struct Flooder: Sendable {
    /// How long the flooder waits for its link before giving up.
    public static let linkWait: Duration = .seconds(30)
    /// Pacing: each step writes the records due so far.
    static let step: Duration = .milliseconds(20)

    /// Why a flood stopped before it was written.
    public struct NoLink: Error, CustomStringConvertible {
        public let description: String
    }

    /// Records written per second.
    public var rate: Int
    /// How long to write (the flood is rate × seconds records, generated before it starts).
    public var seconds: Double
    /// Conversations nobody else is in, each with its share of the flood.
    public var nobody: Int
    /// Conversations to put junk feeds into, with a share each.
    public var into: [ConversationID]
    /// Throwaway authors per conversation.
    public var authors: Int
    /// Seed of the throwaway identities and payloads (the same seed writes the same records).
    public var seed: UInt64

    public init(rate: Int, seconds: Double, nobody: Int, into: [ConversationID], authors: Int, seed: UInt64) {
        self.rate = rate
        self.seconds = seconds
        self.nobody = nobody
        self.into = into
        self.authors = authors
        self.seed = seed
    }

    /// The flood, in the order it is written: conversation after conversation, each author's chain in order.
    public func records() throws -> [Record] {
        let conversations = (0..<nobody).map { floodConversation("nobody-\($0)") } + into
        let total = Int(Double(rate) * seconds)
        let perAuthor = max(1, total / conversations.count / authors)
        return try conversations.enumerated().flatMap { index, conversation in
            try floodRecords(
                conversation: conversation, authors: authors, perAuthor: perAuthor, seed: seed + UInt64(index))
        }
    }

    /// Runs a node of `identity` on `store` that dials `peer` (no discovery), says `linked: N records, largest M
    /// bytes` once its link is up, writes the flood at its rate, says `written N records in S s (R records/s)`, then
    /// stays up (serving sync) until the process is stopped.
    public func run(
        identity: LocalIdentity, store: RecordStore, networkKey: NetworkKey, peer: PeerAddress,
        say: @Sendable (String) -> Void
    ) async throws {
        let flood = try records()
        let node = try await Node(
            store: store, identity: identity, networkKey: networkKey,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [peer], discovery: nil)
        let running = Task { await node.run() }
        let deadline = ContinuousClock.now + Self.linkWait
        while await node.connectedPeers.isEmpty {
            guard ContinuousClock.now < deadline else {
                throw NoLink(description: "no link to \(peer) within \(Self.linkWait)")
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        say("linked: \(flood.count) records, largest \(flood.map(\.bytes.count).max() ?? 0) bytes")

        let start = ContinuousClock.now
        var written = 0
        while written < flood.count {
            let elapsed = (ContinuousClock.now - start) / .seconds(1)
            let due = min(flood.count, Int((Double(rate) * elapsed).rounded(.up)))
            if due > written {
                let batch = Array(flood[written..<due])
                try await node.inject(batch)
                written = due
            }
            try await Task.sleep(for: Self.step)
        }
        let took = (ContinuousClock.now - start) / .seconds(1)
        say("written \(written) records in \(took) s (\(Int(Double(written) / max(took, 0.001))) records/s)")
        // Stay up: the peer keeps pulling what its quotas did not take yet. The caller stops this process.
        await running.value
    }
}
