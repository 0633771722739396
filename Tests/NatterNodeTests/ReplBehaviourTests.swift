// Goal: what a new user trying three machines saw (issue 17, point 6), each as a test through the REPL on real
// nodes. Method: `ReplNode`s on loopback (ReplSessionTests.swift); absence is asserted only once the event that could
// have caused it is known to have happened (the node reported it), never after a sleep.
import Foundation
import NatterModel
import NatterNode
import NatterTestSupport
import Synchronization
import Testing

@testable import NatterREPL

@Suite("REPL: what a new user saw", .serialized)
struct ReplBehaviourTests {
    @Test("a link replaced by another to the same person is not 'offline': no flap is printed")
    func replacedLinkIsNoFlap() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port])
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        let ups = Mutex(0)
        await alice.node.observeEvents { event, _ in
            if case .peerUp = event { ups.withLock { $0 += 1 } }
        }
        await alice.succeeds("/wait peer Bob 30")
        await bob.succeeds("/wait peer Alice 30")
        let before = ups.withLock { $0 }
        // Bob dials Alice again: the new link (same initiator) replaces the old one on both ends.
        await bob.succeeds("/connect 127.0.0.1:\(alice.node.port)")
        try await waitFor("the second link", deadline: 30) { ups.withLock { $0 } > before }
        // The replacement is done once Alice holds one link to Bob again and Bob's REPL has seen the new one.
        try await waitFor("one link each", deadline: 30) { await alice.node.connectedPeers.count == 1 }
        await bob.succeeds("/wait peer Alice 30")
        for node in [alice, bob] {
            #expect(!node.console.output.contains { $0.contains("went offline") }, "\(node.console.output)")
            #expect(node.console.output.filter { $0.contains("is online") }.count == 1, "\(node.console.output)")
        }
    }

    @Test("after /open, the prompt's unread count goes as soon as the node has read the conversation")
    func openClearsUnread() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port]) { $0.interactive = true }
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        await bob.succeeds("/wait known Alice 30")
        await alice.succeeds("/wait known Bob 30")
        await alice.succeeds("/msg Bob are you there?")
        try await waitFor("Bob's prompt to count it", deadline: 30) {
            bob.console.prompts.withLock { $0.last?.contains("1 unread") == true }
        }
        await bob.succeeds("/open Alice")
        // Nothing else is sent: the node's own read receipt alone must clear the count.
        try await waitFor("the unread count to go", deadline: 30) {
            bob.console.prompts.withLock { $0.last.map { !$0.contains("unread") && $0.hasPrefix("[Alice") } ?? false }
        }
    }

    @Test("--json: a profile event carries a person's name when it arrives, even after their link came up")
    func profileEventCarriesTheName() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port]) { $0.json = true }
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        let fingerprint = await alice.node.identity.author.publicKey.fingerprint
        try await waitFor("a profile event naming Alice", deadline: 30) {
            bob.console.output.contains {
                $0.hasPrefix("{\"type\":\"profile\",\"name\":\"Alice\",\"fingerprint\":\"\(fingerprint)\"")
            }
        }
        // Renamed later: the new name comes the same way.
        await alice.succeeds("/nick Alice Liddell")
        try await waitFor("a profile event with the new name", deadline: 30) {
            bob.console.output.contains { $0.hasPrefix("{\"type\":\"profile\",\"name\":\"Alice Liddell\"") }
        }
    }

    @Test("/receipts says when each recipient read the message, once, without an unexplained second time")
    func receiptsSayWhenOnce() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port])
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        await alice.succeeds("/wait known Bob 30")
        await bob.succeeds("/wait known Alice 30")
        await alice.succeeds("/msg Bob read me")
        await bob.succeeds("/wait known Alice 30")
        try await waitFor("Bob's notice", deadline: 30) { bob.console.output.contains { $0.contains("read me") } }
        await bob.succeeds("/open Alice")
        await alice.succeeds("/wait read last 10")
        let lines = await alice.succeeds("/receipts last")
        let read = try #require(lines.first { $0.hasPrefix("  Bob read it at ") })
        #expect(read.wholeMatch(of: #/\s\sBob read it at \d\d:\d\d/#) != nil, "\(read)")
    }

    @Test("a removed member sees who removed it and a roster without it; it cannot send, and reads nothing after")
    func removedMemberSeesItsRemoval() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port])
        let carol = try await ReplNode(root: root, name: "Carol", peers: [alice.node.port])
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        defer { Task { await carol.stop() } }
        await alice.succeeds("/wait known Bob 30")
        await alice.succeeds("/wait known Carol 30")
        await alice.succeeds("/group create Lab Bob Carol")
        await carol.sees("Alice created the group")
        await bob.sees("Alice created the group")  // Bob opens the group later: it must have reached him too
        await carol.succeeds("/open Lab")
        await alice.succeeds("/kick Carol")
        // The line is the removal applied on Carol's node: everything below is asserted after it.
        await carol.sees("Alice removed you")
        let members = await carol.succeeds("/members")
        #expect(members.contains { $0.hasPrefix("Alice ") && $0.hasSuffix(" creator") }, "\(members)")
        #expect(members.contains { $0.hasPrefix("Bob ") }, "\(members)")
        let rows = members.dropLast()  // one row per member, then the notice
        #expect(rows.count == 2 && !rows.contains { $0.hasPrefix("you ") }, "\(members)")
        #expect(members.last == "you are no longer a member of this conversation", "\(members)")
        await carol.fails("are you still there?", with: "you are no longer a member")
        // Bob writes after the removal; once Carol's node holds everything Bob's does, she has applied it unread.
        await bob.succeeds("/open Lab")
        let canary = "after-\(UUID().uuidString)"
        await bob.succeeds(canary)
        try await waitFor("Carol to hold Bob's line", deadline: 30) {
            let (mine, bobs) = (try await carol.node.read { try $0.digests().log }, try await bob.node.read { try $0.digests().log })
            return mine == bobs
        }
        #expect(!carol.console.output.contains { $0.contains(canary) })
        let id = try #require(try await carol.node.read { try $0.conversationList(includeArchived: true) }.first?.id)
        let lines = try await carol.node.read { try $0.lines(of: id, 0..<(try $0.lineCount(of: id))) }
        #expect(lines.count >= 2 && !lines.contains { line in
            if case .message(let message) = line.item { return message.text.contains(canary) }
            return false
        })
    }
}
