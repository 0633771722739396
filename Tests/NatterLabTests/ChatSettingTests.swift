// Goal: the lab's chat setting runs the receipts the shipped node writes, not a workload's imitation of them: each
// node's own receipt timing (NodeCore's AutomaticWrites, ReceiptConfiguration at its shipped defaults) decides, and
// the ledger learns those records from the node's store so they are delivered, timed and checked like the rest.
// Method: the same seed with and without the setting, compared.
import NatterLab
import NatterNode
import Testing

@Suite("Chat setting")
struct ChatSettingTests {
    @Test("with node receipts every node writes receipts on its own, bounded by the shipped interval, and all converge")
    func nodeReceipts() throws {
        // 100 ms links and a brisk workload: messages still arrive after the heal, and so do the receipts they call
        // for, which must reach every node before the run may count as converged.
        var configuration = smallConfiguration(seed: 5, nodes: 6, duration: .seconds(2))
        configuration.latency = .milliseconds(100)
        configuration.jitter = .zero
        configuration.rate = 40
        configuration.receiptShare = 0
        let maelstrom = try Lab.run(configuration)
        #expect(maelstrom.failures == [])
        #expect(!maelstrom.operations.contains { $0.name == "receipt" }, "the nodes write nothing on their own")

        configuration.nodeReceipts = true
        let chat = try Lab.run(configuration)
        #expect(chat.failures == [])
        #expect(chat.undelivered == 0)
        let receipts = try #require(chat.operations.first { $0.name == "receipt" }).count
        let messages = try #require(chat.operations.first { $0.name == "message" }).count
        // Every node reads the others' messages, so each writes receipts; one per interval and conversation at most.
        let shipped = ReceiptConfiguration()
        let intervals = Int((configuration.duration + .seconds(1)) / shipped.interval) + 1
        #expect(receipts >= configuration.nodes, "\(receipts) receipts for \(messages) messages")
        #expect(receipts <= configuration.nodes * intervals, "\(receipts) receipts: more than one per interval")
        #expect(chat.configuration.commandLine.contains("--node-receipts"))
    }
}
