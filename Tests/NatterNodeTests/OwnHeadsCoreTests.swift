// Goal: a node never forks its own feeds (SPEC F20, docs/protocol.md §9.2). A node whose store may be behind what other
// nodes hold of its identity (imported, copied, rolled back) writes nothing until a peer that knows the identity has
// completed an initial exchange with it — then it writes on from the learned heads and nobody sees a fork — or until
// the user forces it; a peer that never met the identity does not release it. Method: real NodeCores over the
// in-process pipes of NodeCoreTests, a second core with the same identity standing for the imported or copied node,
// fork evidence and digests compared on every node afterwards.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

extension PipeNetwork {
    /// A second node with `original`'s identity on `store` (an import: empty; a copy: what the original held).
    func addTwin(of original: NodeCore, named name: String, store: RecordStore, receipts: Bool = false) -> NodeCore {
        var configuration = NodeConfiguration()
        configuration.conversationRefreshDelay = .zero
        configuration.syncPushInterval = .zero
        configuration.receipts.enabled = receipts  // as `add`: off unless a test is about them
        let twin = NodeCore(
            store: store, identity: original.identity, networkKey: .defaultNetwork, configuration: configuration,
            random: SeededGenerator(seed: UInt64(nodes.count) << 8 | 0x7))
        nodes.append(twin)
        names.append(name)
        return twin
    }

    /// The notices node `node` emitted.
    func notices(of node: NodeCore) -> [String] {
        let index = index(node)
        return events.compactMap {
            $0.node == index ? { if case .notice(let line) = $0 { line } else { nil } }($0.event) : nil
        }
    }
}

@Suite("Own feed heads on node cores")
struct OwnHeadsCoreTests {
    /// Alice and Bob share a group and a direct chat, with messages from both.
    private func chattingPair(_ net: PipeNetwork) throws -> (alice: NodeCore, bob: NodeCore, group: ConversationID) {
        let alice = try net.add("Alice", seed: 41)
        let bob = try net.add("Bob", seed: 42)
        net.connect(alice, bob)
        net.run()
        let group = try alice.conversations.createGroup(title: "Heads", members: [bob.identity.author], now: 10)
        net.perform(net.index(alice), alice.published(try alice.store.appliedRecords(of: group), now: net.now))
        net.run()
        for n in 1...3 {
            net.publish(alice, try alice.conversations.send("from alice \(n)", in: group, now: 10 + Int64(n)))
        }
        net.publish(bob, try bob.conversations.send("from bob", in: group, now: 20))
        net.publish(alice, try alice.conversations.sendDirect("just us", to: bob.identity.author, now: 21))
        return (alice, bob, group)
    }

    /// Every own feed of `identity` as (conversation, stored head) on `node`.
    private func ownHeads(_ node: NodeCore, _ author: AuthorID) throws -> [String] {
        try node.store.feeds().filter { $0.author == author }.map { "\($0.conversation.shortHex) \($0.stored)" }
    }

    /// A store holding what `node` holds now: a copy of its data directory, or a backup of it.
    private func snapshot(of node: NodeCore) throws -> RecordStore {
        let store = try RecordStore.inMemory()
        _ = try store.ingest(try node.store.allRecords(), receivedAtMillis: 0)
        return store
    }

    private func isWaiting(_ error: any Error) -> Bool {
        if case StoreError.ownHeadsUnconfirmed = error { true } else { false }
    }

    @Test("an imported identity writes nothing until a peer that knows it synced; then it writes on and nothing forks")
    func importedIdentityLearnsItsHeads() throws {
        let net = PipeNetwork()
        let (alice, bob, group) = try chattingPair(net)
        let store = try RecordStore.inMemory()
        try store.doubtOwnHeads(.imported)
        let imported = net.addTwin(of: alice, named: "Alice (imported)", store: store)

        do {
            try imported.conversations.publishProfile(name: "Alice", now: 30)
            Issue.record("an imported identity wrote before it learned its heads")
        } catch {
            #expect(isWaiting(error))
        }
        // A peer that never met this identity teaches it nothing: still waiting.
        let carol = try net.add("Carol", seed: 43)
        net.connect(imported, carol)
        net.run()
        #expect(imported.store.ownHeadsDoubt == .imported)
        #expect(net.notices(of: imported).contains { $0.contains("holds no record of this identity") })

        net.connect(imported, bob)
        net.run()
        #expect(imported.store.ownHeadsDoubt == nil)
        #expect(net.notices(of: imported).contains { $0.contains("own feeds learned from") })
        #expect(try ownHeads(imported, alice.identity.author) == ownHeads(alice, alice.identity.author))
        // Its conversations are back: the group and the direct chat, with the same shared state as Alice's.
        #expect(
            try Set(imported.conversations.conversationList().map(\.id))
                == Set(alice.conversations.conversationList().map(\.id)))
        #expect(try alice.conversations.conversationList().count == 2)
        #expect(
            try imported.conversations.snapshot(of: group).state.digest()
                == alice.conversations.snapshot(of: group).state.digest())

        net.publish(imported, try imported.conversations.send("from the new laptop", in: group, now: 40))
        #expect(try bob.conversations.history(group).last?.text == "from the new laptop")
        for node in [bob, imported, carol] {
            #expect(try node.store.statistics().forkedFeeds == 0, "fork evidence on \(net.names[net.index(node)])")
        }
        #expect(try bob.store.logDigest() == imported.store.logDigest())
    }

    @Test("own records a peer brings in the initial exchange hold writes until it completes (a rollback in place)")
    func peerAheadHoldsWritesUntilCaughtUp() throws {
        let net = PipeNetwork()
        let (alice, bob, group) = try chattingPair(net)
        // A snapshot of Alice's store, taken now and restored later where the home marker cannot tell.
        let rolledBack = try snapshot(of: alice)
        for n in 4...6 {
            net.publish(alice, try alice.conversations.send("from alice \(n)", in: group, now: 30 + Int64(n)))
        }
        let restored = net.addTwin(of: alice, named: "Alice (rolled back)", store: rolledBack)
        #expect(restored.store.ownHeadsDoubt == nil, "nothing local tells a rollback in place")

        net.connect(restored, bob)
        var refusedMidway = false
        for _ in 0..<10_000 {
            net.step(1)
            if restored.store.ownHeadsDoubt == .peerAhead {
                refusedMidway = (try? restored.conversations.send("too early", in: group, now: 40)) == nil
                break
            }
        }
        #expect(refusedMidway, "the node wrote while its own records were still arriving")
        #expect(net.notices(of: restored).contains { $0.contains("holds records of this identity") })
        net.run()
        #expect(restored.store.ownHeadsDoubt == nil)
        #expect(try ownHeads(restored, alice.identity.author) == ownHeads(alice, alice.identity.author))
        net.publish(restored, try restored.conversations.send("after the rollback", in: group, now: 50))
        #expect(try bob.conversations.history(group).last?.text == "after the rollback")
        #expect(try bob.store.statistics().forkedFeeds == 0)
    }

    @Test("own records arriving after the initial exchange: one notice that another node writes as this identity")
    func anotherWriterIsNamedOnce() throws {
        let net = PipeNetwork()
        let (alice, bob, group) = try chattingPair(net)
        let copy = try snapshot(of: alice)
        let twin = net.addTwin(of: alice, named: "Alice (copy)", store: copy)
        // Two nodes of one identity cannot both link to one peer (it keeps one link per identity): a relay between.
        let carol = try net.add("Carol", seed: 43)
        net.connect(bob, carol)
        net.connect(twin, carol)
        net.run()
        #expect(net.notices(of: twin).allSatisfy { !$0.contains("writing as this identity") })
        for n in 4...5 {
            net.publish(alice, try alice.conversations.send("still here \(n)", in: group, now: 30 + Int64(n)))
        }
        #expect(try twin.conversations.history(group).last?.text == "still here 5")
        #expect(net.notices(of: twin).filter { $0.contains("another node is writing as this identity") }.count == 1)
        #expect(twin.store.ownHeadsDoubt == nil, "live records of a twin only warn: waiting would not stop the other")
    }

    @Test("receipts the node owes while it waits are not written (nor reported one by one); after, they are")
    func receiptsWaitWithTheNode() throws {
        let net = PipeNetwork()
        let (alice, _, group) = try chattingPair(net)
        let copy = try snapshot(of: alice)
        try copy.doubtOwnHeads(.copied)
        let twin = net.addTwin(of: alice, named: "Alice (copy)", store: copy, receipts: true)
        let ownRecords = { try twin.store.feeds(of: group).first { $0.author == alice.identity.author }?.stored ?? 0 }
        let before = try ownRecords()
        // Bob's message is past Alice's marks (her receipts were off): a delivered receipt is owed, and comes due.
        net.perform(net.index(twin), twin.reviewConversations(now: net.now))
        net.advance(.seconds(5))
        #expect(try ownRecords() == before, "a receipt was written while the heads were in doubt")
        #expect(net.notices(of: twin).allSatisfy { !$0.contains("could not write") })
        let (lifted, actions) = try twin.forceWrite(now: net.now)
        #expect(lifted == .copied)
        net.perform(net.index(twin), actions)
        net.advance(.seconds(5))
        #expect(try ownRecords() == before + 1, "the receipt owed was not written once the node could write")
    }

    @Test("with no peer, only the user's word lets a doubted node write")
    func forceWrite() throws {
        let net = PipeNetwork()
        let (alice, _, group) = try chattingPair(net)
        let copy = try snapshot(of: alice)
        try copy.doubtOwnHeads(.copied)
        let twin = net.addTwin(of: alice, named: "Alice (copy)", store: copy)
        do {
            _ = try twin.conversations.send("refused", in: group, now: 30)
            Issue.record("a doubted node wrote")
        } catch {
            #expect(isWaiting(error))
        }
        #expect(try twin.forceWrite(now: net.now).lifted == .copied)
        #expect(try twin.forceWrite(now: net.now).lifted == nil)
        _ = try twin.conversations.send("forced", in: group, now: 31)
    }
}
