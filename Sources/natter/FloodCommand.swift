import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterNetwork
import NatterNode
import NatterStore

/// `natter debug flood`: a flooding node, for measuring what a flood does to other nodes (SPEC F16). It writes
/// signed records from throwaway identities — into conversations nobody else is in, and as junk feeds into the
/// conversations given — paced at a rate, and offers them to its peer as any node offers what it writes. In a
/// process of its own (run it under `nice`, as if on another machine) its own work — checking every record it
/// stores, sealing every frame it sends — does not share the measured nodes' process or their priority.
///
/// Prints `linked: N records, largest M bytes` once its link is up, then `written N records in S s (R records/s)`,
/// then stays up (serving sync) until killed.
struct FloodCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flood", abstract: "Flood a peer with signed records from throwaway identities.")

    /// How long the flooder waits for its link before giving up.
    static let linkWait: Duration = .seconds(30)
    /// Pacing: each step writes the records due so far.
    static let step: Duration = .milliseconds(20)

    @OptionGroup var data: DataOption

    @Option(help: ArgumentHelp("The peer to flood (dialled; no discovery).", valueName: "HOST:PORT"))
    var peer: String

    @Option(help: "Records written per second.")
    var rate = 10_000

    @Option(help: "How long to write (the flood is rate × seconds records, generated before it starts).")
    var seconds = 2.0

    @Option(help: "Conversations nobody else is in, each with its share of the flood.")
    var nobody = 8

    @Option(
        name: .customLong("into"),
        help: ArgumentHelp(
            "A conversation (64 hex digits) to put junk feeds into, with a share each (repeatable).", valueName: "HEX"))
    var into: [String] = []

    @Option(help: "Throwaway authors per conversation.")
    var authors = 10

    @Option(help: "Seed of the throwaway identities and payloads (the same seed writes the same records).")
    var seed: UInt64 = 7_000

    func validate() throws {
        guard PeerAddress(peer) != nil else { throw ValidationError("--peer takes HOST:PORT, not \(peer)") }
        guard rate > 0, seconds > 0, seconds.isFinite, authors > 0, nobody >= 0 else {
            throw ValidationError("--rate, --seconds and --authors take positive numbers, --nobody 0 or more")
        }
        for hex in into where Hex.decode(hex)?.count != 32 {
            throw ValidationError("--into takes a conversation id of 64 hex digits, not \(hex)")
        }
        guard nobody + into.count > 0 else { throw ValidationError("nothing to flood: give --nobody or --into") }
    }

    /// The flood, in the order it is written: conversation after conversation, each author's chain in order.
    func records() throws -> [Record] {
        let conversations =
            (0..<nobody).map { floodConversation("nobody-\($0)") }
            + into.map { ConversationID(bytes: Hex.decode($0)!) }
        let total = Int(Double(rate) * seconds)
        let perAuthor = max(1, total / conversations.count / authors)
        return try conversations.enumerated().flatMap { index, conversation in
            try floodRecords(
                conversation: conversation, authors: authors, perAuthor: perAuthor, seed: seed + UInt64(index))
        }
    }

    func run() async throws {
        let node: Node
        let store: RecordStore
        let flood: [Record]
        do {
            let handle = data.dataDirectory
            if !handle.directory.isInitialised { _ = try handle.initialise(name: "Flooder", network: nil) }
            let (identity, opened) = try handle.open()
            store = opened
            flood = try records()
            node = try await Node(
                store: store, identity: identity, networkKey: try handle.directory.readNetworkKey(),
                listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [PeerAddress(peer)!], discovery: nil)
        } catch {
            throw fail(error)
        }
        let running = Task { await node.run() }
        let deadline = ContinuousClock.now + Self.linkWait
        while await node.connectedPeers.isEmpty {
            guard ContinuousClock.now < deadline else {
                throw fail(ValidationError("no link to \(peer) within \(Self.linkWait)"))
            }
            try await Task.sleep(for: .milliseconds(10))
        }
        print("linked: \(flood.count) records, largest \(flood.map(\.bytes.count).max() ?? 0) bytes")
        fflush(nil)

        let start = ContinuousClock.now
        var written = 0
        do {
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
        } catch {
            throw fail(error)
        }
        let took = (ContinuousClock.now - start) / .seconds(1)
        print("written \(written) records in \(took) s (\(Int(Double(written) / max(took, 0.001))) records/s)")
        fflush(nil)
        // Stay up: the peer keeps pulling what its quotas did not take yet. The caller stops this process.
        await running.value
    }
}
