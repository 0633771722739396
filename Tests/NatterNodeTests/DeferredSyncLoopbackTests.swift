// Goal: a running node commits received records without waiting for the disk (`IngestDurability.deferred`), shows
// them at once, and makes them durable before anything leaves it in the same turn (DESIGN §6: no acknowledgement
// precedes durability). Method: two `Node` actors over loopback TCP with SQLite files (Bob dials Alice); Alice
// sends a run of direct messages; Bob's applied events and store syncs are timed on his actor (`observeEvents`,
// `observeSyncs`), and his store's count of syncs is read through the actor. The store-level guarantee (a sync
// covers every earlier commit, a cut takes back only unsynced ones) is PowerCutTests' deferred scenario.
import Foundation
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import natter

@Suite("Deferred ingest durability on real nodes")
struct DeferredSyncLoopbackTests {
    @Test("received records are synced in the turn that stored them, and durable writes still run at synchronous=FULL")
    func receivedRecordsAreSyncedEachTurn() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-sync-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await RecordedNode(root: root, name: "Alice", peers: [])
        let bob = try await RecordedNode(root: root, name: "Bob", peers: [alice.node.port])
        defer { Task { for node in [alice, bob] { await node.stop() } } }
        let applied = Mutex<[(at: ContinuousClock.Instant, ids: [RecordID])]>([])
        let syncs = Mutex<[ContinuousClock.Instant]>([])
        await bob.node.observeEvents { event, at in
            if case .applied(let refs) = event { applied.withLock { $0.append((at, refs.map(\.id))) } }
        }
        await bob.node.observeSyncs { at in syncs.withLock { $0.append(at) } }
        let bobID = await bob.author
        let aliceNode = alice.node
        #expect(try await eventually(seconds: 30) { try await aliceNode.read { try $0.hasProfile(bobID) } })
        let syncsBefore = try await bob.node.durability().syncs

        var sent = [RecordID]()
        for index in 0..<10 {
            let record = try await alice.node.author(.sendDirect("durable \(index)", to: bobID)).record
            sent.append(record.id)
            #expect(
                try await eventually(seconds: 20) {
                    applied.withLock { $0.contains { $0.ids.contains(record.id) } }
                })
            try await Task.sleep(for: .milliseconds(30))
        }
        // Every message Bob applied was followed by a sync of his store, and none waits for one now.
        let appliedAt = applied.withLock { list in sent.map { id in list.first { $0.ids.contains(id) }!.at } }
        let syncTimes = syncs.withLock { $0 }
        for (index, at) in appliedAt.enumerated() {
            #expect(syncTimes.contains { $0 >= at }, "message \(index) was applied but never synced")
        }
        let durability = try await bob.node.durability()
        #expect(!durability.deferredCommits)
        // The deferred path was taken (a sync per turn that stored), and a durable write finds the writer at FULL.
        #expect(durability.syncs - syncsBefore >= 10, "syncs \(syncsBefore) → \(durability.syncs)")
        #expect(durability.synchronousMode == 2)
    }
}
