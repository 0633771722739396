// Goal: nodes built from the real core — handshake, secure channel, sync session, store and conversations — find
// each other's records and converge, relaying for conversations they cannot read. Method: NodeCores wired by an
// in-process pipe that carries bytes in order (a stand-in for TCP), driven until quiet, with virtual time.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import NatterSync
import Testing

@testable import NatterNode

/// A tiny deterministic network of NodeCores joined by ordered byte pipes.
final class PipeNetwork {
    var nodes: [NodeCore] = []
    var names: [String] = []
    var now: Duration = .zero
    private var nextLink: UInt64 = 1
    /// link id → (node index, the other end's node index and link id)
    private var ends: [UInt64: (node: Int, peerNode: Int, peerLink: UInt64)] = [:]
    private var queue: [(node: Int, input: NodeInput)] = []
    var events: [(node: Int, event: NodeEvent)] = []
    var framesSent = 0
    /// Whether bytes that queued up for a link arrive as one input, as the node's transport inbox hands over what
    /// piled up while it was busy (`TransportInbox`); otherwise each send is one input.
    var coalescesBytes = false
    /// Whether a close reaches the other end before whatever is queued (two TCP connections keep no order between
    /// them: the close of one may overtake bytes sent earlier on another).
    var closesOvertake = false

    /// Links open (both ends not yet closed).
    var openLinks: Int { ends.count / 2 }

    /// Whether link `id` (either end) is still open.
    func isOpen(_ id: LinkID) -> Bool { ends[id.raw] != nil }

    /// Drops every input queued for `node`: it stops hearing anything in flight (a peer gone silent mid-handshake).
    func dropQueued(to node: NodeCore) {
        let target = index(node)
        queue.removeAll { $0.node == target }
    }

    func add(
        _ name: String, seed: UInt64, network: NetworkKey = .defaultNetwork, pushInterval: Duration = .zero,
        quotas: QuotaConfiguration = .init(), receipts: Bool = false, refreshDelay: Duration? = .zero
    ) throws -> NodeCore {
        var rng = SeededGenerator(seed: seed)
        let identity = LocalIdentity(
            signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        let store = try RecordStore.inMemory()
        var configuration = NodeConfiguration()
        // These tests read the tables right after a delivery (nil: the test refreshes, as a driver does).
        configuration.conversationRefreshDelay = refreshDelay
        configuration.syncPushInterval = pushInterval  // .zero: run the network without advancing time
        configuration.quotas = quotas
        // These tests count records and frames of the sync itself; the node's own receipts are tested apart.
        configuration.receipts.enabled = receipts
        let node = NodeCore(
            store: store, identity: identity, networkKey: network, configuration: configuration,
            random: SeededGenerator(seed: seed ^ 1))
        try node.conversations.publishProfile(name: name, now: 1)
        nodes.append(node)
        names.append(name)
        return node
    }

    func index(_ node: NodeCore) -> Int { nodes.firstIndex { $0 === node }! }

    /// Opens a link: `a` dials `b`.
    func connect(_ a: NodeCore, _ b: NodeCore) {
        let (ia, ib) = (index(a), index(b))
        let la = nextLink
        let lb = nextLink + 1
        nextLink += 2
        ends[la] = (ia, ib, lb)
        ends[lb] = (ib, ia, la)
        queue.append((ib, .linkOpened(LinkID(lb), initiator: false)))
        queue.append((ia, .linkOpened(LinkID(la), initiator: true)))
    }

    /// Feeds actions of a node back into the network.
    func perform(_ node: Int, _ actions: [NodeAction]) {
        for action in actions {
            switch action {
            case .send(let link, let bytes):
                framesSent += 1
                if let end = ends[link.raw] {
                    let peerLink = LinkID(end.peerLink)
                    if coalescesBytes, let last = queue.indices.last,
                        case .bytesReceived(peerLink, let earlier) = queue[last].input, queue[last].node == end.peerNode
                    {
                        queue[last].input = .bytesReceived(peerLink, earlier + bytes)
                    } else {
                        queue.append((end.peerNode, .bytesReceived(peerLink, bytes)))
                    }
                }
            case .close(let link):
                if let end = ends.removeValue(forKey: link.raw) {
                    ends[end.peerLink] = nil
                    let closed = (node: end.peerNode, input: NodeInput.linkClosed(LinkID(end.peerLink)))
                    if closesOvertake { queue.insert(closed, at: 0) } else { queue.append(closed) }
                    queue.append((node, .linkClosed(link)))
                }
            case .event(let event):
                events.append((node, event))
            }
        }
    }

    /// Delivers queued inputs until none are left (bounded).
    func run(steps: Int = 100_000) {
        var remaining = steps
        while !queue.isEmpty && remaining > 0 {
            let (node, input) = queue.removeFirst()
            perform(node, nodes[node].handle(input, now: now))
            remaining -= 1
        }
        precondition(queue.isEmpty, "the network did not settle")
    }

    /// Delivers at most `count` queued inputs: the network stopped mid-flight, to cut a link there.
    func step(_ count: Int) {
        for _ in 0..<count where !queue.isEmpty {
            let (node, input) = queue.removeFirst()
            perform(node, nodes[node].handle(input, now: now))
        }
    }

    /// Delivers queued inputs one at a time, `delay` after each other (a link with that much latency), until quiet.
    func runSlowly(delay: Duration, steps: Int = 10_000) {
        for _ in 0..<steps where !queue.isEmpty {
            now += delay
            step(1)
        }
        precondition(queue.isEmpty, "the network did not settle")
    }

    /// Advances virtual time by `step` and ticks every node; what the ticks send is delivered at once, or, with
    /// `slowly`, each input that long after the one before.
    func advance(_ step: Duration, slowly delay: Duration? = nil) {
        now += step
        for (index, node) in nodes.enumerated() { perform(index, node.handle(.tick, now: now)) }
        if let delay { runSlowly(delay: delay) } else { run() }
    }

    func publish(_ node: NodeCore, _ record: Record) {
        perform(index(node), node.published([record], now: now))
        run()
    }
}

@Suite("Node core over pipes")
struct NodeCoreTests {
    @Test("two nodes handshake, exchange profiles, chat in a group and converge")
    func twoNodesChat() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 1)
        let bob = try net.add("Bob", seed: 2)
        net.connect(alice, bob)
        net.run()
        #expect(alice.connectedPeers.keys.contains(bob.identity.author))
        #expect(net.events.contains { if case .caughtUp = $0.event { true } else { false } })
        // Profiles crossed during the initial exchange: Alice can seal keys to Bob.
        let group = try alice.conversations.createGroup(title: "Pipes", members: [bob.identity.author], now: 10)
        let genesis = try alice.store.appliedRecords(of: group)
        net.perform(net.index(alice), alice.published(genesis, now: net.now))
        net.run()
        let hello = try alice.conversations.send("hello over the pipe", in: group, now: 11)
        net.publish(alice, hello)
        #expect(try bob.conversations.history(group).last?.text == "hello over the pipe")
        let reply = try bob.conversations.send("loud and clear", in: group, now: 12)
        net.publish(bob, reply)
        #expect(try alice.conversations.history(group).last?.text == "loud and clear")
        #expect(try alice.store.logDigest() == bob.store.logDigest())
        #expect(
            try alice.conversations.snapshot(of: group).state.digest()
                == bob.conversations.snapshot(of: group).state.digest())
        #expect(
            net.events.contains {
                $0.node == 1 && { if case .conversation(let delta) = $0.event { delta.conversation == group } else { false } }($0)
            })
    }

    @Test(
        "a link's push interval scales with its round trip: a quick one sends every record at once, a slow one gathers",
        arguments: [false, true])
    func pushIntervalFollowsHandshake(slowLink: Bool) throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 1, pushInterval: .milliseconds(50))
        let bob = try net.add("Bob", seed: 2, pushInterval: .milliseconds(50))
        net.connect(alice, bob)
        // A slow link: every input arrives 100 ms after the one before, so the handshake takes a few hundred ms,
        // and so does every round trip after it (DONE, credits), which confirm the interval the handshake set. A
        // link that answers at once brings the interval down (SyncPushIntervalTests).
        let delay: Duration? = slowLink ? .milliseconds(100) : nil
        if let delay { net.runSlowly(delay: delay) } else { net.run() }
        #expect(alice.connectedPeers.keys.contains(bob.identity.author))
        let group = try alice.conversations.createGroup(title: "Hold", members: [bob.identity.author], now: 10)
        net.advance(.seconds(1), slowly: delay)  // past any hold of the initial exchange
        net.perform(net.index(alice), alice.published(try alice.store.appliedRecords(of: group), now: net.now))
        if let delay { net.runSlowly(delay: delay) } else { net.run() }
        net.advance(.seconds(1), slowly: delay)
        // Two messages a millisecond apart. The quick link (handshake in zero virtual time) holds nothing; the slow
        // one holds the first until it has waited the interval, and the second shares its frame.
        net.publish(alice, try alice.conversations.send("first", in: group, now: 11))
        #expect(try (bob.conversations.history(group).last?.text == "first") == !slowLink)
        net.now += .milliseconds(1)
        net.publish(alice, try alice.conversations.send("second", in: group, now: 12))
        #expect(try (bob.conversations.history(group).last?.text == "second") == !slowLink)
        net.advance(.milliseconds(49))
        #expect(try bob.conversations.history(group).suffix(2).map(\.text) == ["first", "second"])
    }

    @Test("a node that is not a member relays a conversation it cannot read (store and forward)")
    func relayThroughNonMember() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 11)
        let relay = try net.add("Relay", seed: 12)
        let carol = try net.add("Carol", seed: 13)
        net.connect(alice, relay)
        net.connect(relay, carol)
        net.run()
        let group = try alice.conversations.createGroup(title: nil, members: [carol.identity.author], now: 10)
        net.perform(0, alice.published(try alice.store.appliedRecords(of: group), now: net.now))
        let canary = "canary-\(UUID().uuidString)"
        net.publish(alice, try alice.conversations.send(canary, in: group, now: 11))
        #expect(try carol.conversations.history(group).last?.text == canary)
        // The relay holds every record but cannot read them.
        #expect(try relay.store.logDigest() == carol.store.logDigest())
        #expect(try relay.conversations.snapshot(of: group).state.exists == false)
        #expect(try relay.conversations.conversationList().isEmpty)
    }

    @Test("when both sides dial at once, both keep the same single link")
    func simultaneousDials() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 21)
        let bob = try net.add("Bob", seed: 22)
        net.connect(alice, bob)
        net.connect(bob, alice)
        net.run()
        #expect(alice.connectedPeers.count == 1 && bob.connectedPeers.count == 1)
        #expect(
            alice.connectedPeers.values.first.map { $0.raw % 2 } != bob.connectedPeers.values.first.map { $0.raw % 2 })
        let hello = try alice.conversations.sendDirect("still one link", to: bob.identity.author, now: 5)
        net.publish(alice, hello)
        #expect(try bob.conversations.conversationList().first?.preview == "still one link")
    }

    @Test("a redial replaces the link and the peer never looks offline, even when a close overtakes the handshake")
    func redialReplacesWithoutFlap() throws {
        let net = PipeNetwork()
        net.closesOvertake = true
        let alice = try net.add("Alice", seed: 41)
        let bob = try net.add("Bob", seed: 42)
        net.connect(bob, alice)
        net.run()
        let first = try #require(alice.connectedPeers[bob.identity.author])
        // Bob dials again: the new link (same initiator) replaces the old one on both ends.
        net.connect(bob, alice)
        net.run()
        #expect(alice.connectedPeers.count == 1 && bob.connectedPeers.count == 1)
        #expect(alice.connectedPeers[bob.identity.author] != first)
        // Each node's link events, in order: from its first peerUp on, it always holds a link to the other.
        for node in [0, 1] {
            var up = Set<LinkID>()
            for (_, event) in net.events.filter({ $0.node == node }) {
                switch event {
                case .peerUp(_, let id): up.insert(id)
                case .peerDown(_, let id):
                    up.remove(id)
                    #expect(!up.isEmpty, "\(net.names[node]) saw the other go offline")
                default: break
                }
            }
            #expect(up.count == 1)
        }
        // The old link is closed: by Alice, the new link's responder, once she held the new one.
        #expect(net.openLinks == 1)
    }

    @Test("a replaced link whose peer never completes the new handshake is closed by the initiator after the timeout")
    func replacedLinkClosedAfterGrace() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 43)
        let bob = try net.add("Bob", seed: 44)
        net.connect(bob, alice)
        net.run()
        let old = try #require(bob.connectedPeers[alice.identity.author])
        net.connect(bob, alice)
        for _ in 0..<100 where bob.connectedPeers[alice.identity.author] == old { net.step(1) }
        #expect(bob.connectedPeers[alice.identity.author] != old, "Bob's side of the new link is up")
        net.dropQueued(to: alice)  // message 3 never reaches Alice
        net.run()
        #expect(net.isOpen(old), "Bob waits for Alice to close the old link")
        net.advance(NodeConfiguration().handshakeTimeout)
        #expect(!net.isOpen(old), "then closes it himself")
    }

    @Test("a node with another network key is refused at the first handshake message")
    func wrongNetworkKey() throws {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 31)
        let stranger = try net.add("Stranger", seed: 32, network: .generate())
        net.connect(stranger, alice)
        net.run()
        #expect(alice.connectedPeers.isEmpty && stranger.connectedPeers.isEmpty)
        #expect(
            net.events.contains { event in
                if case .linkFailed(_, let reason) = event.event { reason.contains("network") } else { false }
            })
    }
}

@Suite("Recent own records (live push without reading back)")
struct RecentOwnRecordsTests {
    func stored(_ feed: FeedKey, _ sequence: UInt64) -> StoredRecord {
        StoredRecord(
            conversation: feed.conversation, author: feed.author, sequence: sequence,
            bytes: [UInt8(sequence % 251), 1, 2])
    }

    @Test("a run ending at the head answers from any of its records; anything else goes to the store")
    func runsAnswerWhatTheyHold() {
        let recent = RecentOwnRecords()
        let feed = FeedKey(conversation: ConversationID(bytes: [UInt8](repeating: 1, count: 32)), author: AuthorID(bytes: [UInt8](repeating: 2, count: 32)))
        recent.noteStored([stored(feed, 5), stored(feed, 6)])
        recent.noteStored([stored(feed, 7)])
        #expect(recent.records(feed, from: 5, limit: 10) == [stored(feed, 5), stored(feed, 6), stored(feed, 7)].map(\.bytes))
        #expect(recent.records(feed, from: 6, limit: 1) == [stored(feed, 6).bytes])
        #expect(recent.records(feed, from: 4, limit: 10) == nil, "before the run: the store has it")
        #expect(recent.records(feed, from: 8, limit: 10) == nil, "past the head")
        // A gap (records stored some other way) starts a new run.
        recent.noteStored([stored(feed, 9)])
        #expect(recent.records(feed, from: 7, limit: 10) == nil)
        #expect(recent.records(feed, from: 9, limit: 10) == [stored(feed, 9).bytes])
        // Fork evidence is not part of the feed.
        recent.noteStored([StoredRecord(conversation: feed.conversation, author: feed.author, sequence: 10, bytes: [9], isForkEvidence: true)])
        #expect(recent.records(feed, from: 10, limit: 1) == nil)
        // Records of the feed that came from a peer: the run is dropped, the store answers.
        recent.forget([feed, feed])
        #expect(recent.records(feed, from: 9, limit: 10) == nil)
        recent.noteStored([stored(feed, 12)])
        #expect(recent.records(feed, from: 12, limit: 10) == [stored(feed, 12).bytes])
    }

    @Test("at most recordsMax records are held, the least recently written feeds' oldest records going first")
    func bounded() {
        let recent = RecentOwnRecords()
        let feeds = (0..<3).map { FeedKey(conversation: ConversationID(bytes: [UInt8](repeating: UInt8($0), count: 32)), author: AuthorID(bytes: [UInt8](repeating: 9, count: 32))) }
        let half = RecentOwnRecords.recordsMax / 2
        recent.noteStored((1...UInt64(half)).map { stored(feeds[0], $0) })
        recent.noteStored((1...UInt64(half)).map { stored(feeds[1], $0) })
        recent.noteStored((1...10).map { stored(feeds[2], $0) })
        // Ten of feed 0's oldest went; feed 0 still answers from 11 on, the others whole.
        #expect(recent.records(feeds[0], from: 10, limit: 1) == nil)
        #expect(recent.records(feeds[0], from: 11, limit: 1) == [stored(feeds[0], 11).bytes])
        #expect(recent.records(feeds[1], from: 1, limit: 1) == [stored(feeds[1], 1).bytes])
        #expect(recent.records(feeds[2], from: 1, limit: 100)?.count == 10)
    }
}
