// Goal: SPEC F16's ingest and relay quotas. The pure bucket logic is checked on its own; then NodeCores over pipes
// (the real handshake, sync, store and conversations, virtual time) show that a flooding link is slowed — its
// deliveries held unverified while the sender waits for credit — yet everything arrives in the end, that a relay
// evicts whole conversations it is not in and does not fetch them again, and that an invitation into an evicted
// conversation brings it back.
import Foundation
import NatterModel
import NatterStore
import NatterSync
import NatterTestSupport
import Testing

@testable import NatterNode
@testable import natter

@Suite("Ingest quotas (pure)")
struct IngestQuotaUnitTests {
    let link = LinkID(1)
    let other = LinkID(2)
    let alice = AuthorID(bytes: [UInt8](repeating: 1, count: 32))
    let bob = AuthorID(bytes: [UInt8](repeating: 2, count: 32))

    func configuration(peer: Double = 100, peerBurst: Int = 100, author: Double = 1_000, authorBurst: Int = 1_000)
        -> QuotaConfiguration
    {
        var configuration = QuotaConfiguration()
        configuration.peerRecordsPerSecond = peer
        configuration.peerRecordsBurst = peerBurst
        configuration.authorRecordsPerSecond = author
        configuration.authorRecordsBurst = authorBurst
        return configuration
    }

    @Test("a link within its burst goes at once; past it, the wait is what the rate needs to pay the debt")
    func linkBudget() {
        var quotas = IngestQuotas(configuration: configuration())
        #expect(quotas.wait(link: link, authors: [alice], now: .zero) == nil)
        quotas.charge(link: link, records: 99, byAuthor: [alice: 99], now: .zero)
        #expect(quotas.wait(link: link, authors: [alice], now: .zero) == nil)
        quotas.charge(link: link, records: 150, byAuthor: [alice: 150], now: .zero)
        // 100 - 249 = -149 tokens: 1.5 s at 100/s until the balance is positive again.
        #expect(quotas.wait(link: link, authors: [], now: .zero) == .milliseconds(1_500))
        #expect(quotas.wait(link: link, authors: [], now: .seconds(1)) == .milliseconds(500))
        #expect(quotas.wait(link: link, authors: [], now: .milliseconds(1_500)) == nil)
        // Another link is not held by this one's debt.
        #expect(quotas.wait(link: other, authors: [bob], now: .zero) == nil)
        // A closed link's debt goes with it.
        quotas.forget(link: link)
        #expect(quotas.wait(link: link, authors: [], now: .zero) == nil)
    }

    @Test("an author in debt holds a delivery on any link that carries its records")
    func authorBudget() {
        var quotas = IngestQuotas(configuration: configuration(peer: 1e6, peerBurst: 1_000_000, author: 10, authorBurst: 10))
        quotas.charge(link: link, records: 30, byAuthor: [alice: 30], now: .zero)
        #expect(quotas.wait(link: other, authors: [alice, bob], now: .zero) == .milliseconds(2_100))
        #expect(quotas.wait(link: other, authors: [bob], now: .zero) == nil)
    }

    @Test("a link's priority lane has its own bucket; the authors' buckets are shared by both lanes")
    func priorityBucket() {
        var settings = configuration(author: 10, authorBurst: 10)
        settings.peerPriorityRecordsPerSecond = 20
        settings.peerPriorityRecordsBurst = 20
        var quotas = IngestQuotas(configuration: settings)
        // Bulk debt (the link's bucket run 150 below zero) does not hold the priority lane, nor the other way round.
        quotas.charge(link: link, records: 250, byAuthor: [bob: 5], now: .zero)
        #expect(quotas.wait(link: link, authors: [], now: .zero) == .milliseconds(1_510))
        #expect(quotas.wait(link: link, lane: .priority, authors: [alice], now: .zero) == nil)
        quotas.charge(link: link, lane: .priority, records: 30, byAuthor: [alice: 3], now: .zero)
        #expect(quotas.wait(link: link, lane: .priority, authors: [], now: .zero) == .milliseconds(550))
        #expect(quotas.wait(link: link, lane: .priority, authors: [], now: .milliseconds(550)) == nil)
        #expect(quotas.wait(link: link, authors: [], now: .milliseconds(1_510)) == nil)
        // An author in debt holds its records on either lane.
        quotas.charge(link: other, lane: .priority, records: 10, byAuthor: [alice: 10], now: .zero)
        #expect(quotas.wait(link: other, lane: .priority, authors: [alice], now: .zero) == .milliseconds(400))
        #expect(quotas.wait(link: other, authors: [alice], now: .zero) == .milliseconds(400))
        // A closed link's priority debt goes with it.
        quotas.forget(link: link)
        #expect(quotas.wait(link: link, lane: .priority, authors: [], now: .zero) == nil)
    }

    @Test("author buckets stay bounded: refilled ones are forgotten first, then the least recently used")
    func authorsBounded() {
        var settings = configuration(author: 1, authorBurst: 1)
        settings.authorsTrackedMax = 100
        var quotas = IngestQuotas(configuration: settings)
        for index in 0..<1_000 {
            let author = AuthorID(bytes: [UInt8](repeating: UInt8(index % 256), count: 31) + [UInt8(index / 256)])
            quotas.charge(link: link, records: 1, byAuthor: [author: 1], now: .milliseconds(Int64(index)))
            #expect(quotas.authorsTracked <= 100)
        }
    }

    @Test("a flood is noticed once per peer, then at most once per interval, with a count")
    func floodNoticedOnce() {
        var notices = FloodNotices()
        #expect(notices.held(alice, now: .zero) != nil)
        for second in 1..<100 { #expect(notices.held(alice, now: .seconds(second)) == nil) }
        #expect(notices.held(bob, now: .seconds(5)) != nil)
        let again = notices.held(alice, now: FloodNotices.interval + .seconds(1))
        #expect(again?.contains("(100 deliveries held since the last notice)") == true)
    }
}

@Suite("Quotas on node cores over pipes")
struct QuotaCoreTests {
    /// Records of `conversation` the node's store holds.
    func held(_ node: NodeCore, _ conversation: ConversationID) throws -> Int {
        try node.store.feeds(of: conversation).reduce(0) { $0 + Int($1.stored) }
    }

    @Test("a link over its quota is slowed, not cut: deliveries wait unverified, and everything arrives in the end")
    func floodSlowedNotDropped() throws {
        let (net, flooder, victim, conversation, flood) = try heldFlood(seed: 41, "slowed")
        // At once: the burst, plus at most the one sync window that ran the bucket into debt.
        let first = try held(victim, conversation)
        #expect(first >= 1_000 && first <= 1_000 + 8 * 256, "\(first)")
        var seconds = 0
        while try held(victim, conversation) < flood.count, seconds < 30 {
            net.advance(.seconds(1))
            seconds += 1
            // Never faster than the rate allows (plus one window in flight).
            #expect(try held(victim, conversation) <= 1_000 + 1_000 * seconds + 8 * 256)
        }
        #expect(try held(victim, conversation) == flood.count)
        #expect(seconds >= 3 && seconds <= 10, "6,000 records at 1,000/s after a burst of 1,000: about 5 s, took \(seconds)")
        #expect(try victim.store.logDigest() == flooder.store.logDigest())
        #expect(victim.connectedPeers.keys.contains(flooder.identity.author), "slowed, not disconnected")
        let notices = net.events.filter {
            if $0.node == 1, case .notice(let line) = $0.event { line.contains("ingest quota") } else { false }
        }
        #expect(notices.count == 1, "one line for the flooding peer, not one per record or delivery")
    }

    @Test("records held for a later turn are checked ahead only as far as the link's quota would let them in")
    func verifiedAheadWithinQuota() throws {
        // Bytes that pile up arrive as one input (as in the node), so a window runs past the per-turn cap.
        let (net, _, victim, conversation, flood) = try heldFlood(seed: 47, "ahead", coalescing: true)
        // The first window ran past the per-turn cap: part of it was checked ahead, within the 1,000-record burst.
        let started = victim.store.verifiedAhead.started
        #expect(started > 0, "held records were checked ahead")
        #expect(started <= 1_000, "never more than the bucket held: \(started)")
        var seconds = 0
        while try held(victim, conversation) < flood.count, seconds < 30 {
            net.advance(.seconds(1))
            seconds += 1
            // Whatever was checked ahead was let in by the quota: never ahead of what the link may bring.
            #expect(victim.store.verifiedAhead.started <= 1_000 + 1_000 * seconds)
        }
        #expect(try held(victim, conversation) == flood.count)
        #expect(victim.store.verifiedAhead.waiting == 0, "every record checked ahead was ingested")
    }

    @Test("a run longer than one turn is checked from its first turn on, that turn's records included")
    func runCheckedWhole() throws {
        let net = PipeNetwork()
        net.coalescesBytes = true  // a window's bytes arrive as one input, as in the node: one run of 8 batches
        let sender = try net.add("Sender", seed: 61)
        let fresh = try net.add("Fresh", seed: 62)
        let conversation = floodConversation("whole")
        // One sync window (8 batches of 256): it arrives into an idle node as one run of four turns.
        let records = try floodRecords(conversation: conversation, authors: 4, perAuthor: 512, seed: 63)
        _ = try sender.store.ingest(records.map(\.bytes), receivedAtMillis: 1)
        net.connect(sender, fresh)
        net.run()
        var steps = 0
        while try held(fresh, conversation) < records.count, steps < 100 {
            net.advance(.milliseconds(10))
            steps += 1
        }
        #expect(try held(fresh, conversation) == records.count)
        // The run's first turn was handed to the workers with the rest (before: only the rest, once the first
        // turn was stored — a quarter of the window checked by the node's thread alone, the workers idle).
        let ahead = fresh.store.verifiedAhead
        #expect(ahead.started >= records.count, "\(ahead)")
        #expect(ahead.waiting == 0, "every record checked ahead was ingested")
    }

    @Test("records of an evicted conversation, refused unchecked, are not checked ahead either")
    func evictedNotCheckedAhead() throws {
        // Default rates (a burst of 20,000, above the whole flood): only the rule keeps the refused from checks ahead.
        var quotas = QuotaConfiguration()
        quotas.relayConversationsMax = 0  // every conversation this node is not in is evicted once it arrives
        // Windows arrive as runs longer than a turn: their rest is checked ahead.
        let (net, _, relay, conversation, flood) = try heldFlood(
            seed: 91, "evicted-ahead", quotas: quotas, coalescing: true)
        for _ in 0..<100 { net.advance(.milliseconds(10)) }
        #expect(try held(relay, conversation) == 0, "evicted whole")
        #expect(relay.recordsDelivered >= flood.count, "the flood was delivered: \(relay.recordsDelivered)")
        // The run that arrived before the eviction was checked ahead whole (`runCheckedWhole`); what came after it
        // is refused without a check, so checking it ahead would verify most of the flood for nothing.
        let ahead = relay.store.verifiedAhead
        #expect(ahead.started <= Limits.syncWindowBatches * Limits.syncBatchRecordsMax, "\(ahead)")
    }

    @Test("records refused unchecked count against the link's rate: a flood into an evicted conversation is slowed")
    func refusedChargedToLink() throws {
        var quotas = heldFloodQuotas
        quotas.relayConversationsMax = 0  // evicted once it arrives; the rest of the flood is refused unchecked
        let (net, _, relay, conversation, flood) = try heldFlood(seed: 95, "refused-charged", quotas: quotas)
        // Time stands still: the burst, plus at most the window that ran the bucket into debt (before: all 6,000 at
        // once, since refused records cost the bucket nothing and it never emptied).
        let window = Limits.syncWindowBatches * Limits.syncBatchRecordsMax
        #expect(relay.recordsDelivered <= 1_000 + window + 10, "\(relay.recordsDelivered)")
        var seconds = 0
        while relay.recordsDelivered < flood.count, seconds < 30 {
            net.advance(.seconds(1))
            seconds += 1
            #expect(relay.recordsDelivered <= 1_000 + 1_000 * seconds + window + 10)
        }
        #expect(relay.recordsDelivered >= flood.count, "slowed, not cut")
        #expect(try held(relay, conversation) == 0, "and refused whole")
    }

    @Test("while the node's chat is live, a bulk run is taken a sync batch a turn instead of two")
    func liveTurnsShorter() throws {
        var firstTurn = [Bool: Int]()
        for live in [false, true] {
            let net = PipeNetwork()
            net.coalescesBytes = true  // the window arrives as one input: one run, taken a turn at a time
            let sender = try net.add("Sender", seed: 81)
            let node = try net.add("Node", seed: 82)
            if live {
                // The node's user just wrote: its chat is live for `liveChatWindow`.
                let group = try node.conversations.createGroup(title: "Live", members: [], now: 1)
                net.perform(net.index(node), node.published(try node.store.appliedRecords(of: group), now: net.now))
            }
            let conversation = floodConversation("live-\(live)")
            let records = try floodRecords(conversation: conversation, authors: 4, perAuthor: 512, seed: 83)
            _ = try sender.store.ingest(records.map(\.bytes), receivedAtMillis: 1)
            net.connect(sender, node)
            net.run()  // no tick yet: the run's first turn only
            firstTurn[live] = try held(node, conversation)
            // The rest follows on the next ticks, and nothing is lost either way.
            var steps = 0
            while try held(node, conversation) < records.count, steps < 200 {
                net.advance(.milliseconds(10))
                steps += 1
            }
            #expect(try held(node, conversation) == records.count)
        }
        // Whole deliveries (sync batches of 256) go into a turn; the first batch also carries the sender's profile.
        let quotas = QuotaConfiguration()
        #expect((quotas.ingestRecordsPerLiveTurnMax + 1...quotas.ingestRecordsPerTurnMax).contains(firstTurn[false]!))
        #expect((1...quotas.ingestRecordsPerLiveTurnMax).contains(firstTurn[true]!))
    }

    @Test("a relay evicts conversations it is not in, takes neighbours' feeds back once, and an invitation back")
    func evictionAndInvitation() throws {
        var quotas = QuotaConfiguration()
        quotas.relayConversationsMax = 0
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 51)
        let relay = try net.add("Relay", seed: 52, quotas: quotas)
        let bob = try net.add("Bob", seed: 53)
        net.connect(alice, relay)
        net.connect(relay, bob)
        net.run()
        let group = try alice.conversations.createGroup(title: "Behind the relay", members: [bob.identity.author], now: 10)
        net.perform(net.index(alice), alice.published(try alice.store.appliedRecords(of: group), now: net.now))
        net.run()
        // The relay's tally passes its quota (zero conversations) as the group arrives: it is evicted in that same turn,
        // after the genesis went on to Bob (records are pushed on before the check).
        #expect(try held(relay, group) == 0, "evicted whole, at once")
        #expect(relay.conversationsEvicted == 1)
        #expect(try bob.conversations.conversationList().contains { $0.id == group && $0.isMember })
        #expect(try relay.store.evictedConversations(sinceMillis: 0).keys.contains(group))
        #expect(try relay.store.feeds().allSatisfy { $0.conversation != group })
        // A neighbour's records still come in (a flood's junk must not cut the relay's neighbours off), its feed
        // whole from the start; with a quota of no conversation at all they do not fit either: evicted again, and
        // from then on nothing of the conversation is taken. "first" reached Bob on the way (pushed on before the
        // check).
        #expect(!relay.evictedAgain.contains(group))
        net.publish(alice, try alice.conversations.send("first", in: group, now: 11))
        net.advance(.seconds(2))
        #expect(try held(relay, group) == 0, "evicted again")
        #expect(relay.evictedAgain.contains(group))
        #expect(relay.conversationsEvicted == 2)
        #expect(try bob.conversations.history(group).compactMap(\.text) == ["first"])
        // Profile feeds are not relay conversations: kept.
        #expect(try relay.store.conversationIDs().contains(.profileFeed(of: alice.identity.author)))

        // New records and anti-entropy rounds do not bring it back (no fetch loop).
        net.publish(alice, try alice.conversations.send("second", in: group, now: 12))
        let frames = net.framesSent
        for _ in 0..<35 { net.advance(.seconds(2)) }  // two anti-entropy rounds; links stay up (pings)
        #expect(relay.connectedPeers.count == 2)
        #expect(try held(relay, group) == 0)
        #expect(net.framesSent - frames < 200, "quiet rounds, not a fetch loop: \(net.framesSent - frames) frames")
        #expect(try bob.conversations.history(group).compactMap(\.text) == ["first"], "Bob is reached only through the relay")

        // Alice invites the relay's owner: the commit that adds it is checked, the eviction forgotten, and the
        // whole conversation fetched.
        net.publish(alice, try alice.conversations.add([relay.identity.author], to: group, now: 13))
        net.advance(.seconds(1))
        #expect(try relay.store.evictedConversations(sinceMillis: 0).isEmpty)
        #expect(try relay.conversations.history(group).compactMap(\.text).suffix(2) == ["first", "second"])
        #expect(try relay.conversations.conversationList().contains { $0.id == group && $0.isMember })
        net.advance(.seconds(2))
        #expect(try held(relay, group) == held(alice, group), "a member conversation is never evicted")
        // Now a member, the relay serves Bob what it refused before.
        #expect(try bob.conversations.history(group).compactMap(\.text).suffix(2) == ["first", "second"])
    }
}

extension QuotaCoreTests {
    @Test("junk that gets two neighbours' chat evicted at their relay does not cut the chat; the junk stays refused")
    func floodedChatSurvivesEviction() throws {
        var quotas = QuotaConfiguration()
        quotas.relayBytesMax = 256 << 10
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 61)
        let relay = try net.add("Relay", seed: 62, quotas: quotas)
        let bob = try net.add("Bob", seed: 63)
        let flooder = try net.add("Flooder", seed: 64)
        for node in [alice, bob, flooder] { net.connect(node, relay) }
        net.run()
        let chat = try alice.conversations.createGroup(title: "Through the relay", members: [bob.identity.author], now: 10)
        net.perform(net.index(alice), alice.published(try alice.store.appliedRecords(of: chat), now: net.now))
        net.run()
        net.publish(alice, try alice.conversations.send("before", in: chat, now: 11))
        #expect(try bob.conversations.history(chat).compactMap(\.text) == ["before"])
        // Junk feeds in the chat, from throwaway authors behind the flooder: 600 KiB, past the relay's byte quota.
        let junk = try floodRecords(conversation: chat, authors: 10, perAuthor: 300, seed: 65)
        _ = try flooder.store.ingest(junk.map(\.bytes), receivedAtMillis: 1)
        net.perform(net.index(flooder), flooder.published(junk, now: net.now))
        net.run()
        for _ in 0..<3 { net.advance(.seconds(1)) }
        #expect(relay.conversationsEvicted >= 1)
        #expect(try relay.store.evictedConversations(sinceMillis: 0).keys.contains(chat))
        #expect(!relay.evictedAgain.contains(chat))
        // The chat goes on through the relay: Alice's and Bob's feeds come back whole, the junk does not.
        net.publish(alice, try alice.conversations.send("after", in: chat, now: 12))
        net.advance(.seconds(1))
        #expect(try bob.conversations.history(chat).compactMap(\.text) == ["before", "after"])
        net.publish(bob, try bob.conversations.send("reply", in: chat, now: 13))
        net.advance(.seconds(1))
        #expect(try alice.conversations.history(chat).compactMap(\.text) == ["before", "after", "reply"])
        let junkAuthors = Set(junk.map(\.header.author))
        let held = try relay.store.feeds(of: chat)
        #expect(held.allSatisfy { !junkAuthors.contains($0.author) }, "no junk feed came back")
        #expect(held.contains { $0.author == alice.identity.author && $0.stored >= 3 }, "Alice's feed, whole")
        #expect(try relay.store.relayUsage(member: relay.identity.author).reduce(0) { $0 + $1.bytes } <= quotas.relayBytesMax)
        // More junk is refused unchecked, and the chat stays.
        let more = try floodRecords(conversation: chat, authors: 10, perAuthor: 20, seed: 66)
        _ = try flooder.store.ingest(more.map(\.bytes), receivedAtMillis: 1)
        net.perform(net.index(flooder), flooder.published(more, now: net.now))
        for _ in 0..<3 { net.advance(.seconds(1)) }
        #expect(try relay.store.feeds(of: chat).allSatisfy { !junkAuthors.contains($0.author) })
        #expect(!relay.evictedAgain.contains(chat))
    }
}

@Suite("Quota options of natter run")
struct QuotaOptionTests {
    @Test("the options set the quotas (burst ten times the rate); defaults otherwise; nonsense is refused")
    func options() throws {
        let defaults = try RunCommand.parse([]).quotas
        #expect(defaults == QuotaConfiguration())
        let quotas = try RunCommand.parse([
            "--peer-record-rate", "100", "--author-record-rate", "7", "--relay-conversations", "3", "--relay-mib", "5",
            "--peer-priority-rate", "40",
        ]).quotas
        #expect(quotas.peerRecordsPerSecond == 100 && quotas.peerRecordsBurst == 1_000)
        #expect(quotas.authorRecordsPerSecond == 7 && quotas.authorRecordsBurst == 70)
        #expect(quotas.relayConversationsMax == 3 && quotas.relayBytesMax == 5 << 20)
        #expect(quotas.peerPriorityRecordsPerSecond == 40 && quotas.peerPriorityRecordsBurst == 200)
        #expect(throws: (any Error).self) { try RunCommand.parse(["--peer-record-rate", "0"]) }
        #expect(throws: (any Error).self) { try RunCommand.parse(["--peer-priority-rate", "-3"]) }
        #expect(throws: (any Error).self) { try RunCommand.parse(["--relay-mib", "-1"]) }
    }
}

/// `heldFlood`'s victim quotas: a link quota of 1,000 records a second (burst 1,000), no eviction.
var heldFloodQuotas: QuotaConfiguration {
    var quotas = QuotaConfiguration()
    quotas.peerRecordsPerSecond = 1_000
    quotas.peerRecordsBurst = 1_000
    quotas.relayConversationsMax = 10  // no eviction here
    return quotas
}

/// A flooder whose store holds 6,000 records of 20 throwaway authors in one conversation, linked to a victim with
/// `quotas` (by default `heldFloodQuotas`), and run until quiet (virtual time stands still): the victim holds the
/// burst and the next window, the rest of the flood is held or unsent. Seeds `seed`, `seed + 1` and `seed + 2` make
/// the flooder, the victim and the flood.
func heldFlood(seed: UInt64, _ name: String, quotas: QuotaConfiguration = heldFloodQuotas, coalescing: Bool = false)
    throws -> (net: PipeNetwork, flooder: NodeCore, victim: NodeCore, conversation: ConversationID, flood: [Record])
{
    let net = PipeNetwork()
    net.coalescesBytes = coalescing
    let flooder = try net.add("Flooder", seed: seed)
    let victim = try net.add("Victim", seed: seed + 1, quotas: quotas)
    let conversation = floodConversation(name)
    let flood = try floodRecords(conversation: conversation, authors: 20, perAuthor: 300, seed: seed + 2)
    _ = try flooder.store.ingest(flood.map(\.bytes), receivedAtMillis: 1)
    net.connect(flooder, victim)
    net.run()
    return (net, flooder, victim, conversation, flood)
}
