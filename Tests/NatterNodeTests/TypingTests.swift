// Goal: typing indicators (SPEC F12) start at the first keystroke, repeat every 2 s while typing, end 3 s after the
// last keystroke or on send, reach members through nodes that cannot read them, never reach a non-member as an
// event, arrive once however many paths they take, and expire on their own when the "stopped" frame is lost.
// Method: the pure `TypingTracker` with explicit times; then real NodeCores over in-process pipes with virtual
// time (PipeNetwork).
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

@Suite("Typing indicators")
struct TypingTests {
    let here = ConversationID(raw: Bytes32([UInt8](repeating: 1, count: 32)))
    let bob = AuthorID(raw: Bytes32([UInt8](repeating: 2, count: 32)))
    let carol = AuthorID(raw: Bytes32([UInt8](repeating: 3, count: 32)))

    @Test("own typing: a frame at once, again every 2 s while typing, stopped 3 s after the last keystroke or on send")
    func ownTiming() {
        var tracker = TypingTracker()
        let first = tracker.keystroke(in: here, now: .seconds(10))
        let soon = tracker.keystroke(in: here, now: .milliseconds(10_500))
        #expect(first && !soon)
        let early = tracker.tick(now: .milliseconds(11_999))
        #expect(early == TypingTracker.Due() && tracker.nextDeadline() == .seconds(12))
        let refresh = tracker.tick(now: .seconds(12))
        #expect(refresh.refresh == [here] && refresh.stopped.isEmpty)
        let later = tracker.keystroke(in: here, now: .seconds(13))
        let notYet = tracker.tick(now: .milliseconds(15_999))
        let idle = tracker.tick(now: .seconds(16))  // 3 s after the keystroke at 13 s
        #expect(!later && notYet.stopped.isEmpty && idle.stopped == [here])
        #expect(tracker.typingHere.isEmpty && tracker.nextDeadline() == nil)
        // Sending ends it at once; a second stop sends nothing.
        let again = tracker.keystroke(in: here, now: .seconds(20))
        let stopped = tracker.stop(in: here)
        let twice = tracker.stop(in: here)
        #expect(again && stopped && !twice)
    }

    @Test("others: shown until stopped or 4 s after their last frame; copies and replays are dropped; bounded")
    func othersAndCopies() {
        var tracker = TypingTracker()
        let key = TypingTracker.Key(conversation: here, author: bob)
        #expect(tracker.isNew(key, sequence: 5))
        let remembered = tracker.remember(key, sequence: 5, now: .seconds(1))
        #expect(remembered && !tracker.isNew(key, sequence: 5) && !tracker.isNew(key, sequence: 4))
        let started = tracker.received(key, typing: true, now: .seconds(1))
        let refreshed = tracker.received(key, typing: true, now: .seconds(2))  // changes nothing
        #expect(started && !refreshed && tracker.people(in: here) == [bob])
        let notYet = tracker.tick(now: .milliseconds(5_999))
        let expired = tracker.tick(now: .seconds(6))  // 4 s after the refresh at 2 s
        #expect(notYet.changed.isEmpty && expired.changed == [here] && tracker.people(in: here).isEmpty)
        let carolKey = TypingTracker.Key(conversation: here, author: carol)
        let carolStarts = tracker.received(carolKey, typing: true, now: .seconds(6))
        let carolStops = tracker.received(carolKey, typing: false, now: .seconds(7))
        #expect(carolStarts && carolStops && tracker.people(in: here).isEmpty)
        // Own sequences are remembered, so own frames that come back are copies; they never go backwards.
        let first = tracker.nextSequence(clockMillis: 1_000, conversation: here, author: carol, now: .seconds(8))
        let second = tracker.nextSequence(clockMillis: 900, conversation: here, author: carol, now: .seconds(8))
        #expect(first == 1_000 && second == 1_001 && !tracker.isNew(carolKey, sequence: 1_001))
        // A flood of identities fills the table; new ones are refused until old entries can be forgotten.
        var flooded = TypingTracker()
        for index in 0..<TypingTracker.feedsTrackedMax {
            let author = AuthorID(raw: Bytes32((0..<32).map { UInt8(truncatingIfNeeded: index >> ($0 % 4 * 8)) }))
            _ = flooded.remember(.init(conversation: here, author: author), sequence: 1, now: .seconds(1))
        }
        let refused = flooded.remember(key, sequence: 1, now: .seconds(2))
        let admitted = flooded.remember(key, sequence: 1, now: .seconds(1) + TypingTracker.sequenceMemory)
        #expect(!refused && admitted)
    }

    /// Alice and Carol in a group; Relay and Dave are not members. Links: Alice–Relay–Carol and Alice–Dave–Carol,
    /// so every frame reaches Carol by two paths, and only through nodes that cannot read it.
    func groupOverRelays() throws -> (PipeNetwork, NodeCore, NodeCore, ConversationID) {
        let net = PipeNetwork()
        let alice = try net.add("Alice", seed: 21)
        let relay = try net.add("Relay", seed: 22)
        let carol = try net.add("Carol", seed: 23)
        let dave = try net.add("Dave", seed: 24)
        net.connect(alice, relay)
        net.connect(relay, carol)
        net.connect(alice, dave)
        net.connect(dave, carol)
        net.run()
        let group = try alice.conversations.createGroup(title: "Lab", members: [carol.identity.author], now: 10)
        net.perform(0, alice.published(try alice.store.appliedRecords(of: group), now: net.now))
        net.run()
        #expect(try carol.conversations.snapshot(of: group).state.members[alice.identity.author] != nil)
        return (net, alice, carol, group)
    }

    func typingEvents(_ net: PipeNetwork, node: Int) -> [(ConversationID, [AuthorID])] {
        net.events.compactMap { entry in
            guard entry.node == node, case .typing(let conversation, let people) = entry.event else { return nil }
            return (conversation, people)
        }
    }

    @Test("through relays that cannot read it: shown to the member once, to no one else; ends 3 s after typing")
    func overRelays() throws {
        let (net, alice, carol, group) = try groupOverRelays()
        let me = alice.identity.author
        net.perform(0, alice.handle(.tick, now: net.now))
        net.perform(0, alice.userTyping(in: group, now: net.now))
        net.run()
        var seen = typingEvents(net, node: 2)
        #expect(seen.count == 1 && seen.first?.0 == group && seen.first?.1 == [me])
        #expect(carol.typingPeople(in: group) == [me])
        #expect(typingEvents(net, node: 0).isEmpty && typingEvents(net, node: 1).isEmpty)
        #expect(typingEvents(net, node: 3).isEmpty)
        // Typing on: keystrokes every second for 4 s; refreshes change nothing for Carol.
        for _ in 0..<4 {
            net.advance(.seconds(1))
            net.perform(0, alice.userTyping(in: group, now: net.now))
            net.run()
        }
        #expect(typingEvents(net, node: 2).count == 1)
        // Then nothing: 3 s after the last keystroke Alice's node says so, and Carol's indicator clears.
        net.advance(.milliseconds(2_900))
        #expect(carol.typingPeople(in: group) == [me])
        net.advance(.milliseconds(100))
        seen = typingEvents(net, node: 2)
        #expect(seen.count == 2 && seen.last?.1 == [])
        // Sending ends it at once.
        net.perform(0, alice.userTyping(in: group, now: net.now))
        net.run()
        net.perform(0, alice.userStoppedTyping(in: group, now: net.now))
        net.run()
        seen = typingEvents(net, node: 2)
        #expect(seen.count == 4 && seen[2].1 == [me] && seen[3].1 == [])
        #expect(typingEvents(net, node: 1).isEmpty && typingEvents(net, node: 3).isEmpty)
    }

    @Test("a lost stopped frame: the indicator expires 4 s after the last frame")
    func expiresWithoutStop() throws {
        let (net, alice, carol, group) = try groupOverRelays()
        net.perform(0, alice.userTyping(in: group, now: net.now))
        net.run()
        #expect(carol.typingPeople(in: group) == [alice.identity.author])
        // Alice's node goes silent (its stop never comes): only Carol's clock moves.
        net.now += .milliseconds(3_999)
        net.perform(2, carol.handle(.tick, now: net.now))
        #expect(carol.typingPeople(in: group) == [alice.identity.author])
        net.now += .milliseconds(1)
        net.perform(2, carol.handle(.tick, now: net.now))
        #expect(carol.typingPeople(in: group).isEmpty)
        #expect(typingEvents(net, node: 2).last?.1 == [])
    }

    @Test("a non-member cannot announce typing; nothing is sent where this node is not a member")
    func nonMember() throws {
        let (net, _, carol, group) = try groupOverRelays()
        let dave = net.nodes[3]
        let sent = net.framesSent
        net.perform(3, dave.userTyping(in: group, now: net.now))
        net.run()
        #expect(net.framesSent == sent)
        #expect(typingEvents(net, node: 2).isEmpty && carol.typingPeople(in: group).isEmpty)
    }

    @Test("a malformed typing frame closes the link and scores the peer, like a malformed sync message")
    func malformedFrame() throws {
        let (net, alice, _, _) = try groupOverRelays()
        let relay = net.nodes[1]
        let link = try #require(alice.connectedPeers[relay.identity.author])
        net.perform(0, alice.sendApplicationMessage([16, 0] + [UInt8](repeating: 0, count: 209), on: link))
        net.run()
        #expect(relay.connectedPeers[alice.identity.author] == nil)
        #expect(
            net.events.contains {
                if $0.node == 1, case .misbehaved = $0.event { true } else { false }
            })
    }
}
