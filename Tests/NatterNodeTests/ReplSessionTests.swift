// Goal: every REPL command does what docs/cli.md says on real nodes, and every error path prints exactly one line
// and leaves the node running. Method: real `Node`s on loopback in this process (named peers, no discovery), each
// with a `ReplSession` writing to a recording console; commands go in through `execute`, and the test waits
// (bounded) for the lines a person would see.
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import NatterREPL
@testable import natter

/// A console that keeps what the session prints.
final class RecordingConsole: Console {
    let lines: AsyncStream<String>
    private let shown = Mutex<[String]>([])
    private let errors = Mutex<[String]>([])
    let history = Mutex<[String]>([])
    /// Every prompt set (interactive sessions only).
    let prompts = Mutex<[String]>([])

    init() {
        lines = AsyncStream { $0.finish() }
    }

    func show(_ line: String) { shown.withLock { $0.append(line) } }
    func showError(_ line: String) { errors.withLock { $0.append(line) } }
    func setPrompt(_ prompt: String) { prompts.withLock { $0.append(prompt) } }
    func addHistory(_ line: String) { history.withLock { $0.append(line) } }

    var output: [String] { shown.withLock { $0 } }
    var errorLines: [String] { errors.withLock { $0 } }
}

/// One node with its REPL, running until `stop`.
final class ReplNode: Sendable {
    let node: Node
    let session: ReplSession
    let console = RecordingConsole()
    let tasks: Mutex<[Task<Void, Never>]> = Mutex([])
    let name: String

    /// Receipts written sooner than a person's node would: tests wait for them.
    static var receipts: ReceiptConfiguration {
        var receipts = ReceiptConfiguration()
        receipts.delay = .milliseconds(20)
        receipts.interval = .milliseconds(20)
        return receipts
    }

    /// `configure` adjusts the session's options (tests of notices, typing and rates); sends are not rate-limited
    /// unless it sets a rate.
    init(
        root: String, name: String, peers: [Int] = [], configure: (inout ReplSession.Options) -> Void = { _ in }
    ) async throws {
        self.name = name
        let handle = DataDirectoryHandle(explicit: "\(root)/\(name)")
        let (identity, store) = try handle.initialise(name: name, network: nil)
        node = try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0),
            peers: peers.map { PeerAddress(host: "127.0.0.1", port: $0) }, discovery: nil, receipts: Self.receipts)
        var options = ReplSession.Options()
        options.timeZone = TimeZone(identifier: "UTC")!
        options.sendRate = nil
        configure(&options)
        session = await ReplSession(
            node: node, console: console, options: options, ignoreFile: "\(root)/\(name)/ignored")
        await session.start()
        let (node, session) = (node, session)
        tasks.withLock {
            $0 = [Task { await node.run() }, Task { await session.watch() }]
        }
    }

    /// Runs one line; returns the lines printed and the error lines it caused.
    @discardableResult
    func run(_ line: String) async -> (output: [String], errors: [String]) {
        let (out, err) = (console.output.count, console.errorLines.count)
        await session.execute(line)
        return (Array(console.output.dropFirst(out)), Array(console.errorLines.dropFirst(err)))
    }

    /// Runs a line that must fail with exactly one error line containing `text`.
    func fails(_ line: String, with text: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        let result = await run(line)
        #expect(result.errors.count == 1, "\(line) → \(result.errors)", sourceLocation: sourceLocation)
        #expect(
            result.errors.first?.contains(text) == true, "\(line) → \(result.errors)", sourceLocation: sourceLocation)
    }

    /// Runs a line that must succeed; returns its output.
    @discardableResult
    func succeeds(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) async -> [String] {
        let result = await run(line)
        #expect(result.errors.isEmpty, "\(line) → \(result.errors)", sourceLocation: sourceLocation)
        return result.output
    }

    /// Waits (bounded) until a printed line contains `text`; returns it.
    @discardableResult
    func sees(_ text: String, seconds: Double = 10, sourceLocation: SourceLocation = #_sourceLocation) async -> String?
    {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = console.output.last(where: { $0.contains(text) }) { return line }
            try? await Task.sleep(for: .milliseconds(20))
        }
        Issue.record(
            "\(name) never printed \"\(text)\"; printed: \(console.output.suffix(15))", sourceLocation: sourceLocation)
        return nil
    }

    /// The label printed beside the last line containing `text`.
    func ref(of text: String, sourceLocation: SourceLocation = #_sourceLocation) async -> String {
        guard let line = await sees(text, sourceLocation: sourceLocation) else { return "none" }
        return line.split(separator: " ").dropFirst().first.map(String.init) ?? "none"
    }

    /// Whether the node has applied a message containing `text`, in any conversation, whatever the session showed.
    func holds(_ text: String) async throws -> Bool {
        try await node.read { queries in
            try queries.allDetails().keys.contains { conversation in
                try queries.lines(of: conversation, 0..<queries.lineCount(of: conversation)).contains { line in
                    if case .message(let message) = line.item { message.text.contains(text) } else { false }
                }
            }
        }
    }

    /// Returns once the session has handled every event the node emitted before this call: writes `text` in the
    /// conversation being viewed and waits (bounded) until it is printed — the node emits its events in order and
    /// the session renders them in order. What was not printed by then was hidden, not late.
    func handledEverything(writing text: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        await succeeds(text, sourceLocation: sourceLocation)
        await sees("you: \(text)", sourceLocation: sourceLocation)
    }

    func stop() async {
        for task in tasks.withLock({ $0 }) { task.cancel() }
        await node.shutdown()
    }
}

func temporaryRoot() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("natter-repl-\(UUID().uuidString)").path
}

@Suite("REPL commands on real nodes", .serialized)
struct ReplSessionTests {
    @Test("alone: help, identity, status, lists, and every error path is one line that leaves the node running")
    func aloneAndErrors() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        defer { Task { await alice.stop() } }

        let help = await alice.succeeds("/help")
        #expect(help.count == ReplRoot.commands.count + 1)
        #expect(await alice.succeeds("/help react").first == "usage: /react <ref> <reaction>")
        #expect(await alice.succeeds("/whoami") == ["Alice \(await alice.node.identity.author.publicKey.fingerprint)"])
        #expect(await alice.succeeds("/peers").first?.hasPrefix("no peers connected") == true)
        #expect(await alice.succeeds("/who").first?.hasPrefix("nobody known yet") == true)
        #expect(await alice.succeeds("/list") == ["No conversations yet — /msg NAME TEXT starts one"])
        let status = await alice.succeeds("/status")
        #expect(status.contains { $0.contains("listening on port \(alice.node.port)") })
        #expect(status.contains("conversations: 0, unread: 0"))
        #expect(await alice.succeeds("/nick Alice Liddell") == ["you are now Alice Liddell"])
        #expect(await alice.succeeds("/whoami").first?.hasPrefix("Alice Liddell ") == true)
        await alice.fails("/whois Alice Liddell", with: "Unexpected argument")  // one word, or quoted
        #expect(await alice.succeeds("/whois \"Alice Liddell\"").contains("this is you"))
        let digest = await alice.succeeds("/digest")
        #expect(digest.count == 1 && digest[0].hasPrefix("log "))
        #expect(await alice.succeeds("/connect 127.0.0.1:9") == ["dialling 127.0.0.1:9"])
        #expect(alice.console.history.withLock { $0 }.contains("/nick Alice Liddell"))

        await alice.fails("/bogus", with: "unknown command /bogus")
        await alice.fails("/msg", with: "usage: /msg <name> <text>")
        await alice.fails("hello", with: "no conversation open")
        await alice.fails("/history", with: "no conversation open")
        await alice.fails("/more", with: "no conversation open")
        await alice.fails("/members", with: "no conversation open")
        await alice.fails("/leave", with: "no conversation open")
        await alice.fails("/invite Bob", with: "no conversation open")
        await alice.fails("/kick Bob", with: "no conversation open")
        await alice.fails("/rename Lab", with: "no conversation open")
        await alice.fails("/role Bob admin", with: "no conversation open")
        await alice.fails("/grant Bob add", with: "no conversation open")
        await alice.fails("/revoke Bob add", with: "no conversation open")
        await alice.fails("/open Bob", with: "no one called Bob")
        await alice.fails("/open #3", with: "run /list first")
        await alice.fails("/msg Bob hi", with: "no one called Bob")
        await alice.fails("/group create Lab Bob", with: "no one called Bob")
        await alice.fails("/whois Bob", with: "no one called Bob")
        await alice.fails("/ignore Bob", with: "no one called Bob")
        await alice.fails("/block Bob", with: "no one called Bob")
        await alice.fails("/react zz12 love", with: "not a message label")
        await alice.fails("/react abcd love", with: "no line labelled abcd")
        await alice.fails("/unreact abcd", with: "no line labelled abcd")
        await alice.fails("/reply abcd hi", with: "no line labelled abcd")
        await alice.fails("/edit abcd hi", with: "no line labelled abcd")
        await alice.fails("/delete abcd", with: "no line labelled abcd")
        await alice.fails("/receipts last", with: "no message yet")
        await alice.fails("/connect nowhere", with: "is not HOST:PORT")
        await alice.fails("/nick  ", with: "usage: /nick")
        await alice.fails("/wait synced 0.1", with: "timed out after 0.1 s waiting for synced 0.1")
        await alice.fails("/wait peer Bob 0.1", with: "timed out")
        await alice.fails("/wait sometime", with: "sometime is not a condition")
        await alice.fails("/wait read", with: "usage: /wait")
        await alice.fails("/help nope", with: "no command /nope")
        await alice.fails("/send-file /etc/hostname", with: "no conversation open")
        await alice.fails("/save abcd /tmp/x", with: "no line labelled abcd")
        #expect(await alice.succeeds("/search probe") == ["no messages in all conversations match \"probe\""])
        await alice.fails("/search ???", with: "search matches words")
        await alice.fails("/search --all", with: "Type one or more words")
        await alice.fails("/mute 1h", with: "no conversation open")
        await alice.fails("/unmute", with: "no conversation open")
        await alice.fails("/archive", with: "no conversation open")
        // Still running, still answering.
        #expect(await alice.succeeds("/whoami").first?.hasPrefix("Alice Liddell") == true)
        #expect(await alice.session.failed)
    }

    @Test("two people: direct chat, statuses, receipts, reactions, reply, edit, delete, history, presence, ignore")
    func directChat() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port])
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }

        await alice.succeeds("/wait peer Bob 10")
        await bob.succeeds("/wait known Alice 10")
        await alice.succeeds("/open Bob")
        #expect(await alice.sees("No messages yet — say hello") != nil)
        await alice.succeeds("hello -1 ok")
        let hello = await alice.ref(of: "you: hello -1 ok")
        // Bob is not viewing it: a notice, then a delivered receipt.
        await bob.sees("[Alice] \(hello) Alice: hello -1 ok")
        await alice.succeeds("/wait delivered \(hello) 10")
        // The list's first entry (a notice or status line may print among a command's lines once messages flow).
        func firstEntry(_ lines: [String]) -> String? { lines.first { $0.hasPrefix("#") } }
        let list = await bob.succeeds("/list")
        #expect(firstEntry(list)?.hasPrefix("#1 Alice (1 unread)") == true, "\(list)")
        #expect(firstEntry(list)?.hasSuffix("hello -1 ok") == true, "\(list)")
        let opened = await bob.succeeds("/open #1")
        #expect(opened.first == "── Alice ──")
        #expect(opened.contains("── Today ──"))
        #expect(opened.contains { $0.contains("Alice: hello -1 ok") })
        await alice.succeeds("/wait read \(hello) 10")
        await alice.sees("\(hello) read ✓✓")
        let receipts = await alice.succeeds("/receipts \(hello)")
        #expect(receipts.first == "\(hello): read ✓✓")
        #expect(receipts.contains { $0.hasPrefix("  Bob read it at ") })
        #expect(firstEntry(await bob.succeeds("/list"))?.hasPrefix("#1 Alice  ") == true)  // no unread any more

        // Reactions: set, replaced, removed; the author sees them.
        await bob.succeeds("/react \(hello) love")
        await alice.sees("Bob reacted ❤️ to \(hello)")
        await bob.succeeds("/react \(hello) 👍")
        await alice.sees("Bob reacted 👍 to \(hello)")
        await bob.fails("/react \(hello) meh", with: "meh is not a reaction")
        await bob.succeeds("/unreact \(hello)")
        await alice.sees("Bob removed their reaction from \(hello)")
        await bob.fails("/unreact \(hello)", with: "you have not reacted")

        // Reply, edit, delete; only the author edits or deletes.
        await bob.succeeds("/reply \(hello) -2 fine")
        await alice.sees("┌ you: hello -1 ok")
        let answer = await alice.ref(of: "Bob: -2 fine")
        await bob.fails("/edit \(hello) mine now", with: "not yours")
        await bob.fails("/delete \(hello)", with: "not yours")
        await bob.fails("/receipts \(hello)", with: "not yours")
        await bob.succeeds("/edit \(answer) -2 fine, thanks")
        await alice.sees("Bob: -2 fine, thanks (edited)")
        await bob.succeeds("/delete \(answer)")
        await alice.sees("Bob: message deleted")
        await bob.fails("/edit \(answer) again", with: "message deleted")
        await bob.fails("/msg Alice  ", with: "usage: /msg")
        await bob.fails("\t", with: "Message cannot be empty")
        await bob.fails(
            "/msg Alice " + String(repeating: "x", count: 10_001), with: "Message is too long (max 10000 characters)")

        // History and paging.
        for number in 1...55 { await alice.succeeds("line \(number)") }
        await bob.sees("Alice: line 55")
        let two = await bob.succeeds("/history 2")
        #expect(two.filter { $0.contains("Alice: line") }.count == 2)
        #expect(two.last?.contains("line 55") == true)
        let more = await bob.succeeds("/more")
        #expect(more.contains { $0.contains("Alice: line 5") } && !more.contains { $0.contains("line 54") })
        await bob.succeeds("/history")
        await bob.succeeds("/more")
        await bob.fails("/more", with: "no older lines")

        // Presence and identity.
        let peersLines = await alice.succeeds("/peers")
        // (Status lines of earlier messages may print meanwhile: look for the answer among the lines.)
        #expect(peersLines.contains { $0.hasPrefix("peer Bob ") }, "\(peersLines)")
        #expect(await alice.succeeds("/who").contains { $0.hasPrefix("Bob ") && $0.hasSuffix("online") })
        let whois = await alice.succeeds("/whois Bob")
        #expect(whois.contains("online") && whois.contains("conversations: Bob"))
        let fingerprint = await bob.node.identity.author.publicKey.fingerprint
        let byPrefix = await alice.succeeds("/whois \(fingerprint.prefix(9))")
        #expect(byPrefix.contains("Bob \(fingerprint)"), "\(byPrefix)")

        // Ignore hides their lines; again shows them. Block likewise.
        #expect(await alice.succeeds("/ignore Bob").contains { $0.hasPrefix("ignoring Bob") })
        await bob.succeeds("/msg Alice you cannot see this")
        await bob.succeeds("/msg Alice marker")
        // Absent only once it is known to be handled: Alice's node holds Bob's marker (and so, his feed applied in
        // order, the line before it), and her session printed a line of hers written after that.
        #expect(try await eventually { try await alice.holds("marker") })
        #expect(try await alice.holds("you cannot see this"))
        await alice.handledEverything(writing: "after the marker")
        #expect(!alice.console.output.contains { $0.contains("you cannot see this") })
        #expect(await alice.succeeds("/whois Bob").contains("ignored"))
        #expect(await alice.succeeds("/ignore Bob") == ["no longer ignoring Bob"])
        await bob.succeeds("/msg Alice visible again")
        await alice.sees("Bob: visible again")
        // Bob's links to Alice that went down (he dials her: each redial that Alice turns away comes up on his side,
        // once his handshake is done, and goes down when she closes it).
        let aliceID = await alice.node.identity.author
        let bobLinksDown = Mutex(0)
        await bob.node.observeEvents { event, _ in
            if case .peerDown(aliceID, _) = event { bobLinksDown.withLock { $0 += 1 } }
        }
        #expect(await alice.succeeds("/block Bob").contains { $0.hasPrefix("blocked Bob") })
        #expect(await alice.succeeds("/whois Bob").contains("blocked"))
        #expect(try String(contentsOfFile: "\(root)/Alice/ignored", encoding: .utf8).hasPrefix("block "))
        // Blocking refuses the link: Bob's redials are turned away while he stays blocked. Checked once Bob has
        // redialled (twice, after the link the block closed), not after a sleep that may not have seen one.
        let bobID = await bob.node.identity.author
        #expect(
            try await eventually(seconds: 30) { bobLinksDown.withLock { $0 } >= 3 }, "Bob redials and is turned away")
        #expect(await !alice.node.connectedPeers.contains(bobID))
        await bob.node.observeEvents(nil)
        #expect(await alice.succeeds("/block Bob") == ["unblocked Bob"])
        await alice.succeeds("/wait peer Bob 15")

        // Both hold the same conversation state.
        await alice.succeeds("/wait synced 10")
        await bob.succeeds("/wait synced 10")
        var agree = false
        for _ in 0..<100 where !agree {
            agree = await alice.succeeds("/digest").dropFirst() == bob.succeeds("/digest").dropFirst()
            if !agree { try await Task.sleep(for: .milliseconds(50)) }
        }
        #expect(agree)
    }

    @Test("a group of three: create, members, rename, roles, rights, kick, leave, invite, ambiguous names")
    func group() async throws {
        let root = temporaryRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        let alice = try await ReplNode(root: root, name: "Alice")
        let bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port])
        let carol = try await ReplNode(root: root, name: "Carol", peers: [alice.node.port])
        defer { Task { await alice.stop() } }
        defer { Task { await bob.stop() } }
        defer { Task { await carol.stop() } }

        await alice.succeeds("/wait peer Bob 10")
        await alice.succeeds("/wait peer Carol 10")
        let created = await alice.succeeds("/group create \"Lab team\" Bob Carol")
        #expect(created.contains { $0.contains("you created the group \"Lab team\" with") })
        #expect(created.last == "created Lab team; it is now the current conversation")
        await bob.sees("[Lab team] ")
        await carol.sees("[Lab team] ")
        let members = await alice.succeeds("/members")
        #expect(members.count == 3)
        #expect(members.contains { $0.hasPrefix("you ") && $0.hasSuffix(" creator") })
        #expect(members.contains { $0.hasPrefix("Bob ") && $0.hasSuffix(" member") })

        await alice.succeeds("hello lab")
        let hello = await alice.ref(of: "you: hello lab")
        await bob.succeeds("/open \"Lab team\"")
        await alice.sees("\(hello) ✓✓ read by 1 of 2")
        await carol.fails("/open #1", with: "run /list first")
        await carol.succeeds("/list")
        await carol.succeeds("/open #1")
        await alice.succeeds("/wait read \(hello) 10")

        await alice.succeeds("/rename The Lab")
        await bob.sees("Alice renamed the group to The Lab")
        await bob.fails("/role Carol admin", with: "only the creator sets roles")  // the rules say why
        await alice.succeeds("/role Bob admin")
        await carol.sees("Alice made Bob an admin")
        await alice.fails("/role Bob boss", with: "boss is not a role: admin or member")
        await alice.succeeds("/grant Carol rename")
        await carol.sees("Alice set what you may do: rename")
        #expect(
            await alice.succeeds("/members").contains { $0.hasPrefix("Carol ") && $0.hasSuffix("member (may rename)") })
        await carol.succeeds("/rename Carol's lab")
        await alice.sees("Carol renamed the group to Carol's lab")
        await alice.succeeds("/revoke Carol rename")
        await carol.sees("Alice set what you may do: nothing extra")
        await alice.fails("/grant Carol fly", with: "fly is not a right")
        await carol.fails("/kick Bob", with: "not allowed to remove this member")

        let lab = try #require(
            try await carol.node.read { try $0.allDetails().first { $0.value.ownTitle == "Carol's lab" }?.key })
        await alice.succeeds("/kick Carol")
        await bob.sees("Alice removed Carol")
        // Refused once her node has applied the removal — a commit sealed without her, which locks her out — known
        // from its records, not from a sleep.
        #expect(
            try await eventually(seconds: 30) {
                try await carol.node.read { try $0.details(of: lab).map { $0.lockedOut || !$0.isMember } == true }
            }, "Carol's node applied her removal")
        await carol.fails("still here?", with: "no longer a member")
        await bob.succeeds("/leave")
        await alice.sees("Bob left")
        // Someone re-keys after a leave (the rules name who); then the group talks again.
        await alice.sees("renewed the group key")
        await alice.succeeds("/invite Carol")
        await carol.sees("Alice added you")
        await alice.succeeds("welcome back")
        await carol.sees("Alice: welcome back")

        // Two people called Bob: a name is ambiguous, the error lists fingerprints; a prefix settles it.
        await carol.succeeds("/nick Bob")
        let carolFingerprint = await carol.node.identity.author.publicKey.fingerprint
        let bobFingerprint = await bob.node.identity.author.publicKey.fingerprint
        await alice.succeeds("/wait known \(carolFingerprint.prefix(4)) 10")
        var ambiguous = false
        for _ in 0..<100 where !ambiguous {
            let result = await alice.run("/whois Bob")
            ambiguous = result.errors.first?.contains("is ambiguous") == true
            if ambiguous {
                #expect(result.errors.count == 1)
                #expect(result.errors[0].contains(carolFingerprint) && result.errors[0].contains(bobFingerprint))
            } else {
                try await Task.sleep(for: .milliseconds(50))
            }
        }
        #expect(ambiguous)
        #expect(await alice.succeeds("/members").contains { $0.hasPrefix("Bob (\(carolFingerprint))") })
    }
}
