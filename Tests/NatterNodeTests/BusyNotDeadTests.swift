// Goal: a node whose process is busy is not a dead node (issue 18, "busy is not dead"): while other nodes in the
// same process are stuck in long turns and every thread of Swift's shared cooperative pool is held by other work,
// for longer than the silence timeout, two linked nodes in that process keep their link: each node runs on a thread
// of its own (`NodeThreads`) and its timers fire there, so heartbeats still go out. (With a fixed set of eight
// threads taken round-robin, the ninth node shared Alice's thread, Bob declared the silent link dead, and CI saw
// a REPL test's link fail so. Seven bystanders make this test fail on that design: only Alice's thread is shared,
// and Bob, free, times her out.)
// Method: two `Node` actors over loopback TCP (Bob dials Alice) and seven bystander nodes; once Alice and Bob are
// linked, each bystander's actor is blocked in a read and as many blocking jobs as the pool has threads hold it, all
// for `Limits.syncSilenceTimeout` + 2 s; then no link may have failed or gone down, and the link carries a message.
// Runs alone in CI (scripts/test.sh): it stalls every other test's tasks.
import Foundation
import NatterModel
@testable import NatterNode
import NatterSync
import NatterTestSupport
import Synchronization
import Testing

@Suite("A busy process is not a dead node", .serialized)
struct BusyNotDeadTests {
    @Test("a cooperative pool held longer than the silence timeout: the link stays up, heartbeats flowed")
    func heldPoolKeepsLinks() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-busy-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }  // a leftover temporary directory is harmless
        let alice = try await RecordedNode(root: root, name: "Alice", peers: [])
        let bob = try await RecordedNode(root: root, name: "Bob", peers: [alice.node.port])
        var bystanders = [RecordedNode]()
        for index in 0..<7 { bystanders.append(try await RecordedNode(root: root, name: "Bystander\(index)", peers: [])) }
        defer { Task { [bystanders] in for node in [alice, bob] + bystanders { await node.stop() } } }
        let (aliceID, bobID) = (await alice.author, await bob.author)
        let aliceNode = alice.node
        #expect(try await eventually(seconds: 30) { try await aliceNode.read { try $0.hasProfile(bobID) } })
        #expect(try await eventually(seconds: 30) { linked(bob, to: aliceID) && linked(alice, to: bobID) })

        // Link failures as each node emits them, on its actor (the recorded event streams run on the pool held).
        let failures = Mutex<[String]>([])
        for (name, node) in [("Alice", alice), ("Bob", bob)] {
            await node.node.observeEvents { event, _ in
                switch event {
                case .linkFailed(_, let reason): failures.withLock { $0.append("\(name): link failed: \(reason)") }
                case .peerDown: failures.withLock { $0.append("\(name): peer down") }
                default: break
                }
            }
        }

        // Hold every thread of the pool (its width is the number of active processors) with blocking sleeps.
        let hold = NatterSync.Limits.syncSilenceTimeout + .seconds(2)
        let threads = ProcessInfo.processInfo.activeProcessorCount
        let started = ContinuousClock.now
        try await withThrowingTaskGroup(of: Void.self) { group in
            for bystander in bystanders {
                let node = bystander.node
                group.addTask { try await node.read { _ in blockThisThread(for: hold) } }
            }
            for _ in 0..<threads {
                group.addTask { blockThisThread(for: hold) }
            }
            try await group.waitForAll()  // a bystander that could not be held fails the test
        }
        let held = ContinuousClock.now - started
        print(
            "busy-not-dead: \(bystanders.count) nodes and the pool (\(threads) blocking jobs) held \(held); silence "
                + "timeout \(NatterSync.Limits.syncSilenceTimeout); node threads \(NodeThreads.shared.usage)")

        // The link is still usable: a message crosses it. Then no link failed (any failure from the hold was emitted by
        // the first ticks after it, before this message's turns).
        let record = try await alice.node.author(.sendDirect("still here", to: bobID)).record
        let bobNode = bob.node
        #expect(
            try await eventually(seconds: 20) {
                try await bobNode.read { try $0.lineIDs(of: $0.directConversationID(with: aliceID)).contains(record.id) }
            })
        #expect(failures.withLock { $0 }.isEmpty, "\(failures.withLock { $0 })")
    }

    /// Blocks the calling thread (a pool thread here): synchronous work that never yields.
    func blockThisThread(for duration: Duration) {
        Thread.sleep(forTimeInterval: Double(duration.components.seconds))
    }

    /// Whether `node` reported a link up to `peer` (a `peerUp` event).
    func linked(_ node: RecordedNode, to peer: AuthorID) -> Bool {
        node.events.withLock { list in
            list.contains { if case .peerUp(let author, _) = $0.event { author == peer } else { false } }
        }
    }
}
