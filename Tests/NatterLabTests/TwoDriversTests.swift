// Goal: the lab runs the policy that ships (issue 20: one policy, two drivers). The same small scenario — three
// members, node receipts on, a few messages well apart — run by the lab's simulated nodes and by real `Node` actors
// on loopback (named peers, no discovery) leaves the same records in every node's own feed of the group: the group's
// commit, the messages, and the delivered receipts each node wrote on its own (the core's `AutomaticWrites`, reviewed
// at the refreshes `RefreshPacing` calls for). And in both drivers, every turn of every node carries out its steps in
// `TurnPlan`'s order: no byte is sent after an event of the turn before the turn's durability sync.
// Method: the lab runs first and its ledger gives the scenario (who wrote which message, when); the real nodes then
// write the same messages in the same order, each once the previous one's receipts reached its author, so the
// comparison does not depend on how loaded the machine is. Frame kinds are not compared: on real nodes they depend
// on timers (the push interval's batching, keepalives) and the scheduler.
import Foundation
import NatterModel
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import NatterLab
@testable import NatterNode
@testable import natter

@Suite("One policy, two drivers", .serialized)
struct TwoDriversTests {
    /// Three members on 20 ms links, only messages (at seed 47: four, by two authors, 0.9–3.6 s apart, the last 1.4 s
    /// before the heal), each node writing its receipts.
    static var scenario: LabConfiguration {
        var configuration = LabConfiguration()
        configuration.seed = 47
        configuration.nodes = 3
        configuration.latency = .milliseconds(20)
        configuration.jitter = .zero
        configuration.rate = 0.5
        configuration.duration = .seconds(10)
        configuration.reactionShare = 0
        configuration.receiptShare = 0
        configuration.nodeReceipts = true
        return configuration
    }

    /// One message of the scenario: its author (node index) and when it was written after the first one.
    struct Message: Equatable {
        let author: Int
        let offset: Duration
    }

    /// What a node wrote in the group, in its feed's order: `commit`, `message K` (K: the scenario's K-th message),
    /// `receipt` (any other content: the scenario writes no reaction or read receipt of its own).
    static func tokens(of store: RecordStore, author: AuthorID, in group: ConversationID, messages: [RecordID])
        throws -> [String]
    {
        try store.records(conversation: group, author: author, from: 1, limit: 1_000).map { record in
            if record.header.kind == .commit { return "commit" }
            if let index = messages.firstIndex(of: record.id) { return "message \(index)" }
            return "receipt"
        }
    }

    /// A step as a letter: `e`vent, `d`urability sync, `s`end, `c`lose.
    static func letter(_ step: TurnPlan.Step) -> Character {
        switch step {
        case .event: "e"
        case .makeDurable: "d"
        case .send: "s"
        case .close: "c"
        }
    }

    /// Whether every send or close of `steps` (one node's, in order, as letters) follows a durability sync that
    /// follows the turn's last event: `TurnPlan`'s order, checked on the stream of a node's turns (each turn has
    /// exactly one sync).
    static func inTurnOrder(_ steps: String) -> Bool {
        var eventSinceSync = false
        for step in steps {
            switch step {
            case "e": eventSinceSync = true
            case "d": eventSinceSync = false
            default: if eventSinceSync { return false }
            }
        }
        return true
    }

    /// A node's turn steps (as letters), recorded as they happen.
    final class Steps: Sendable {
        let list = Mutex<String>("")
        func append(_ step: TurnPlan.Step) { list.withLock { $0.append(TwoDriversTests.letter(step)) } }
        var all: String { list.withLock { $0 } }
    }

    @Test("the lab's nodes and real nodes write the same records, and carry out their turns in the same order")
    func sameRecordsBothWays() async throws {
        // The lab.
        let lab = try LabSimulation(Self.scenario)
        var labSteps = [String](repeating: "", count: Self.scenario.nodes)
        lab.simulation.turnObserver = { labSteps[$0].append(Self.letter($1)) }
        lab.run()
        let report = lab.report()
        #expect(report.failures == [])
        let simulation = lab.simulation
        let group = try #require(simulation.group)
        let written = simulation.ledger.entries.filter { $0.kind == .message }.sorted { $0.publishedAt < $1.publishedAt }
        try #require(!written.isEmpty, "the lab wrote no message")
        let messages = written.map { Message(author: $0.author, offset: $0.publishedAt - written[0].publishedAt) }
        // A meaningful scenario: several messages, from more than one author, each well after the one before (so
        // each one's receipts are written before the next arrives, in the lab as on a loaded machine).
        #expect(messages.count >= 3 && Set(messages.map(\.author)).count >= 2, "scenario: \(messages)")
        for (earlier, later) in zip(messages, messages.dropFirst()) {
            #expect(later.offset - earlier.offset >= .milliseconds(500), "messages too close: \(messages)")
        }
        // The lab ends once every record reached every node after the heal: the last message's receipts (150 ms
        // after it arrives) are written before then only if it came a while before the heal.
        let heal = try #require(simulation.workloadStart) + Self.scenario.duration
        #expect(heal - written[written.count - 1].publishedAt >= .seconds(1), "the last message comes too late")
        let labTokens = try simulation.nodes.map { node in
            try Self.tokens(of: node.store, author: node.author, in: group, messages: written.map(\.id))
        }
        print("two drivers: the lab's nodes wrote \(labTokens)")
        for (index, steps) in labSteps.enumerated() {
            let ordered = Self.inTurnOrder(steps)
            #expect(ordered, "n\(index): a send before its turn's durability sync (lab)")
        }

        // Real nodes.
        let nodeTokens = try await Self.runRealNodes(messages)
        print("two drivers: the real nodes wrote \(nodeTokens.tokens)")
        #expect(nodeTokens.tokens == labTokens)
        for (index, steps) in nodeTokens.steps.enumerated() {
            let (ordered, sent) = (Self.inTurnOrder(steps), steps.contains("s"))
            #expect(ordered, "node \(index): a send before its turn's durability sync (Node)")
            #expect(sent, "node \(index): no send observed")
        }
    }

    /// Runs the scenario's messages on three real nodes: node 0 founds the group once it holds the others' profiles,
    /// then each message is written by its author once the previous one's receipts reached that message's author.
    /// Returns each node's own records in the group (as `tokens`), once the three logs agree, and its turn steps.
    static func runRealNodes(_ messages: [Message]) async throws -> (tokens: [[String]], steps: [String]) {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-drivers-\(UUID().uuidString)")
            .path
        // `try?`: a temporary directory left behind is harmless.
        defer { try? FileManager.default.removeItem(atPath: root) }
        var nodes = [Node]()
        let steps = (0..<3).map { _ in Steps() }
        for index in 0..<3 {
            let (identity, store) = try DataDirectoryHandle(explicit: "\(root)/n\(index)")
                .initialise(name: "n\(index)", network: nil)
            let node = try await Node(
                store: store, identity: identity, networkKey: .defaultNetwork,
                listen: PeerAddress(host: "127.0.0.1", port: 0),
                peers: nodes.map { PeerAddress(host: "127.0.0.1", port: $0.port) }, discovery: nil)
            let recorder = steps[index]
            await node.observeTurns { recorder.append($0) }
            nodes.append(node)
        }
        let runs = nodes.map { node in Task { await node.run() } }
        defer {
            for run in runs { run.cancel() }
        }
        var authors = [AuthorID]()
        for node in nodes { authors.append(await node.identity.author) }

        // Setup (not a timing target: generous for a loaded machine).
        let creator = nodes[0]
        let others = Array(authors.dropFirst())
        #expect(
            try await eventually(seconds: 60) {
                try await creator.read { queries in try others.allSatisfy { try queries.hasProfile($0) } }
            })
        let group = try await creator.author(.createGroup(title: "lab", members: others)).conversation
        for node in nodes {
            #expect(try await eventually(seconds: 60) { try await node.read { try $0.details(of: group) != nil } })
        }

        var ids = [RecordID]()
        for (index, message) in messages.enumerated() {
            let author = nodes[message.author]
            let written = try await author.author(.send("message \(index)", in: group))
            ids.append(written.id)
            // Every other member's delivered receipt reaches the author before the next message is written.
            let readers = authors.indices.filter { $0 != message.author }.map { authors[$0] }
            #expect(
                try await eventually(seconds: 60) {
                    let receipts = try await author.read { try $0.receipts(of: written.id, in: group) }
                    return readers.allSatisfy { reader in
                        receipts.contains { $0.member == reader && $0.state != .pending }
                    }
                })
        }
        // The three logs agree (every record written reached every node), then each node's own feed is read.
        #expect(
            try await eventually(seconds: 60) {
                var logs = Set<[UInt8]>()
                for node in nodes { logs.insert(try await node.read { try $0.digests().log }) }
                return logs.count == 1
            })
        var tokens = [[String]]()
        for (index, node) in nodes.enumerated() {
            let (author, written) = (authors[index], ids)
            tokens.append(try await node.inspectStore { try Self.tokens(of: $0, author: author, in: group, messages: written) })
        }
        for node in nodes { await node.shutdown() }
        return (tokens, steps.map(\.all))
    }
}
