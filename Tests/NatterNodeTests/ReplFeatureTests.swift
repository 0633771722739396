// Goal: issue 7's REPL features on real nodes do what docs/cli.md says — /search (here, --all, highlighted, /open of
// a result), /mute (for a while, for ever), /unmute, /archive and /list --all, notices with the bell and desktop
// notifications (through a fake notify-send, never a shell), typing shown to the other person, presence, and the send
// rate ("Please slow down"). Method: `ReplNode`s (ReplSessionTests.swift) on loopback; bounded waits on printed lines.
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Testing

@testable import NatterREPL
@testable import natter

func featureRoot() -> String {
    FileManager.default.temporaryDirectory.appendingPathComponent("natter-repl7-\(UUID().uuidString)").path
}

/// Alice and Bob on loopback (Bob dials Alice), each holding the other's profile, in a fresh directory that `stop`
/// removes; `configure` adjusts Bob's options.
final class TwoPeople: Sendable {
    let root: String
    let alice: ReplNode
    let bob: ReplNode

    init(root: String = featureRoot(), bob configure: (inout ReplSession.Options) -> Void = { _ in }) async throws {
        self.root = root
        alice = try await ReplNode(root: root, name: "Alice")
        bob = try await ReplNode(root: root, name: "Bob", peers: [alice.node.port], configure: configure)
        // Setup, not a timing target: generous for a loaded machine running the whole suite.
        await alice.succeeds("/wait peer Bob 30")
        await alice.succeeds("/wait known Bob 30")
        await bob.succeeds("/wait known Alice 30")
    }

    func stop() async {
        await alice.stop()
        await bob.stop()
        try? FileManager.default.removeItem(atPath: root)
    }
}

extension ReplNode {
    /// Checks that no printed line contains `text`, once `marker` is printed. The marker must be causally after the
    /// line in question (a later record of the same author in the same conversation): the node applies a feed in
    /// order and the session renders its events in order, so once the marker shows, the line was handled — shown or
    /// hidden — and its absence means hidden, not late.
    func neverSees(_ text: String, after marker: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        guard await sees(marker, sourceLocation: sourceLocation) != nil else { return }
        #expect(
            !console.output.contains { $0.contains(text) }, "\(name) printed \(text)", sourceLocation: sourceLocation)
    }
}

@Suite("REPL: search, mute, archive, notices, typing, send rate", .serialized)
struct ReplFeatureTests {
    @Test("search here and everywhere, highlighted; /open of a result shows the lines around it")
    func search() async throws {
        let people = try await TwoPeople()
        defer { Task { await people.stop() } }
        let (alice, bob) = (people.alice, people.bob)
        await alice.succeeds("/group create Lab Bob")
        await alice.succeeds("the scope probe is in the second drawer")
        for number in 1...30 { await alice.succeeds("filler \(number)") }
        await alice.succeeds("/msg Bob probe \u{202E}reversed")
        await bob.sees("filler 30")
        await bob.sees("reversed")
        try await Task.sleep(for: .milliseconds(200))  // receipts and status lines settle before output is compared

        let everywhere = await bob.succeeds("/search probe")
        #expect(everywhere.first?.contains("2 messages in all conversations, newest first") == true)
        #expect(everywhere.count == 3)
        #expect(everywhere[1].hasPrefix("[Alice] ") && everywhere[1].contains("Alice: *probe* \\u{202e}reversed"))
        #expect(everywhere[2].hasPrefix("[Lab] ") && everywhere[2].contains("Alice: the scope *probe* is in the"))
        // The label is the word before the author; the time before it is one word today and two ("Yesterday 23:58")
        // when the run crosses midnight.
        let words = everywhere[2].split(separator: " ").map(String.init)
        let ref = try #require(words.firstIndex(of: "Alice:").flatMap { $0 > 0 ? words[$0 - 1] : nil })
        let opened = await bob.succeeds("/open \(ref)")
        #expect(opened.first == "── Lab ── around \(ref)")
        #expect(opened.contains { $0.contains("\(ref) Alice: the scope probe is in the second drawer") })
        #expect(opened.contains { $0.contains("filler 25") } && !opened.contains { $0.contains("filler 26") })
        #expect(opened.last?.contains("newer lines (/history shows the latest)") == true)
        // Now Lab is open: a search looks here only, unless --all.
        let here = await bob.succeeds("/search probe")
        #expect(here.count == 2 && here[0].contains("1 message in Lab"))
        #expect(await bob.succeeds("/search --all probe").count == 3)
        #expect(await bob.succeeds("/search drawer*").count == 2)
        #expect(
            await bob.succeeds("/search reversed").contains(
                "no messages in Lab match \"reversed\" (/search --all looks everywhere)"))
        await bob.fails("/search !!", with: "search matches words")
        // After an edit, the old words are gone.
        let probeRef = await alice.ref(of: "you: the scope probe")
        await alice.succeeds("/open Lab")
        await alice.succeeds("/edit \(probeRef) the scope lives in the cupboard")
        await bob.sees("the scope lives in the cupboard (edited)")
        #expect(await bob.succeeds("/search probe").contains { $0.hasPrefix("no messages in Lab") })
        // Any line's label still opens the conversation around it.
        #expect(await bob.succeeds("/open \(ref)").contains { $0.contains("the scope lives in the cupboard (edited)") })
    }

    @Test("notices: bell and desktop notification for messages and reactions elsewhere; silent while muted")
    func noticesAndMute() async throws {
        let root = featureRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // A fake notify-send that records each call on one line, its arguments separated by U+001F.
        let bin = "\(root)/bin"
        try FileManager.default.createDirectory(atPath: bin, withIntermediateDirectories: true)
        let calls = "\(root)/notify-calls"
        try "#!/bin/sh\n{ printf '%s\\037' \"$@\"; echo; } >> \(calls)\n".write(
            toFile: "\(bin)/notify-send", atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: "\(bin)/notify-send")
        // Bob's wall clock moves only when the test moves it: a mute ends when the test says, never by waiting.
        let bobClock = ManualClock()
        let people = try await TwoPeople(root: root) { options in
            options.interactive = true
            options.desktopNotifications = true
            options.notifyPath = "/nonexistent:\(bin)"
            options.wallClockMillis = { bobClock.nowMillis }
        }
        defer { Task { await people.stop() } }
        let (alice, bob) = (people.alice, people.bob)
        await alice.succeeds("/group create Lab Bob")
        await alice.succeeds("first")
        await bob.sees("[Lab] ")
        await alice.succeeds("/msg Bob hi Bob")
        await bob.sees("Alice: hi Bob")
        await bob.succeeds("/open Alice")

        // A message in Lab, which Bob is not viewing: a notice with the bell, and a desktop notification whose
        // text reached notify-send as plain arguments (no shell ran it).
        let pwned = "\(root)/pwned"
        await alice.succeeds("/msg Lab look $(touch \(pwned)) <b>")
        let notice = try #require(await bob.sees("Alice: look"))
        #expect(notice.hasPrefix("[Lab] ") && notice.hasSuffix("Alice: look $(touch \(pwned)) <b>\u{7}"))
        func lastCall(containing text: String) async throws -> [String] {
            guard
                try await eventually(seconds: 5, {
                    (try? String(contentsOfFile: calls, encoding: .utf8))?.contains(text) == true
                })
            else { return [] }
            let line = try String(contentsOfFile: calls, encoding: .utf8).split(separator: "\n").last { $0.contains(text) }
            return (line ?? "").split(separator: "\u{1F}", omittingEmptySubsequences: false).dropLast().map(String.init)
        }
        let arguments = try await lastCall(containing: "look")
        #expect(arguments.count == 4)
        #expect(arguments.prefix(3) == ["--app-name=natter", "--", "natter · Lab"])
        #expect(arguments.last?.hasSuffix("Alice: look $(touch \(pwned)) ‹b›") == true)
        #expect(!FileManager.default.fileExists(atPath: pwned))

        // A reaction to Bob's message in Lab: a notice too.
        await bob.succeeds("/msg Lab mine")
        let mine = await alice.ref(of: "Bob: mine")
        await alice.succeeds("/react \(mine) love")
        #expect(await bob.sees("[Lab] Alice reacted ❤️ to \(mine)")?.hasSuffix("\u{7}") == true)
        #expect(try await lastCall(containing: "reacted").last?.hasSuffix("Alice reacted ❤️ to \(mine)") == true)

        // Muted for ever: nothing; unmuted: notices again; muted for a while: notices after it ends.
        await bob.succeeds("/open Lab")
        // (Status lines of Bob's own message may print while a command runs: look for the answer among the lines.)
        #expect(await bob.succeeds("/mute").contains("muted Lab for ever (/unmute to hear it again)"))
        await bob.fails("/mute 5x", with: "5x is not a duration")
        await bob.fails("/mute 400d", with: "at most 365 days")
        await bob.succeeds("/open Alice")
        let callsBefore = try String(contentsOfFile: calls, encoding: .utf8)
        // Each quiet line is followed by a marker causally after it: Alice's next record in Lab, a change of Bob's
        // rights, whose system line shows in Lab's notices even while it is muted (mutes silence messages and
        // reactions, SPEC F15).
        await alice.succeeds("/open Lab")
        await alice.succeeds("/msg Lab quiet please")
        await alice.succeeds("/grant Bob rename")
        await bob.neverSees("quiet please", after: "[Lab] Alice set what you may do: rename")
        #expect(try String(contentsOfFile: calls, encoding: .utf8) == callsBefore)
        let list = await bob.succeeds("/list")
        #expect(list.contains { $0.contains("Lab") && $0.contains("(muted)") })
        await bob.succeeds("/open Lab")
        #expect(await bob.succeeds("/unmute").contains("Lab is no longer muted"))
        #expect(await bob.succeeds("/unmute").contains("Lab is not muted"))
        #expect(await bob.succeeds("/mute 2s").contains { $0.hasPrefix("muted Lab until ") })
        await bob.succeeds("/open Alice")
        await alice.succeeds("/msg Lab still quiet")
        await alice.succeeds("/revoke Bob rename")
        await bob.neverSees("still quiet", after: "[Lab] Alice set what you may do: nothing extra")
        // Two seconds later on Bob's clock (and a little more), the mute is over.
        bobClock.advance(by: .milliseconds(2_001))
        #expect(await bob.succeeds("/list").contains { $0.contains("Lab") && !$0.contains("(muted)") })
        await alice.succeeds("/msg Lab loud again")
        #expect(await bob.sees("Alice: loud again")?.hasPrefix("[Lab] ") == true)
    }

    @Test("archive hides a conversation from /list until something new arrives; /list --all shows it")
    func archive() async throws {
        let people = try await TwoPeople()
        defer { Task { await people.stop() } }
        let (alice, bob) = (people.alice, people.bob)
        await alice.succeeds("/group create Lab Bob")
        await bob.sees("[Lab] ")
        await bob.succeeds("/list")
        await bob.succeeds("/open #1")
        #expect(
            await bob.succeeds("/archive")
                == ["archived Lab: hidden from /list until something new arrives (/list --all shows it)"])
        #expect(await bob.succeeds("/list").contains("no conversations here: 1 archived (/list --all shows them)"))
        #expect(await bob.succeeds("/list --all").contains { $0.hasPrefix("#1 Lab") && $0.contains("(archived)") })
        await bob.succeeds("/open Lab")  // an archived group still opens by its title
        await alice.succeeds("back to work")
        await bob.sees("Alice: back to work")
        #expect(try await eventually { await bob.succeeds("/list").contains { $0.hasPrefix("#1 Lab") } })
    }

    @Test("typing: shown to the other person while a line is edited, cleared on send; presence online")
    func typing() async throws {
        let people = try await TwoPeople { $0.json = true }
        defer { Task { await people.stop() } }
        let (alice, bob) = (people.alice, people.bob)
        await alice.succeeds("/msg Bob hello")
        await bob.sees("\"text\":\"hello\"")
        await bob.succeeds("/open Alice")
        await alice.succeeds("/open Bob")
        await alice.session.userIsTyping(draft: "/who")  // a command is not typing
        await alice.session.userIsTyping(draft: "how are")
        let typing = try #require(await bob.sees("\"type\":\"typing\""))
        #expect(typing.contains("\"people\":[{\"name\":\"Alice\""))
        #expect(await bob.session.typingLine() == "Alice is typing…")
        await alice.succeeds("how are you?")
        #expect(try await eventually { await bob.session.typingLine() == nil })
        #expect(bob.console.output.last { $0.contains("\"type\":\"typing\"") }?.contains("\"people\":[]") == true)
        let who = await bob.succeeds("/who")
        #expect(who.contains { $0.contains("\"type\":\"output\"") && $0.contains("Alice") && $0.hasSuffix("online\"}") })
    }

    @Test("send rate: a burst, then Please slow down, one line; other commands still work; it refills")
    func sendRate() async throws {
        let root = featureRoot()
        defer { try? FileManager.default.removeItem(atPath: root) }
        // The send rate's time moves only when the test moves it: the refill is reached by `advance`, not by sleeping.
        let clock = ManualClock()
        let alice = try await ReplNode(root: root, name: "Alice") {
            $0.sendRate = SendRate(perSecond: 2, burst: 3)
            $0.clock = { clock.now }
        }
        defer { Task { await alice.stop() } }
        for number in 1...3 { await alice.succeeds("/nick Alice \(number)") }
        await alice.fails("/nick Alice 4", with: "Please slow down")
        await alice.succeeds("/whoami")
        // Two a second: after 400 ms not one token yet (0.8); after 550 ms one (1.1), and only one.
        clock.advance(by: .milliseconds(400))
        await alice.fails("/nick Alice 5", with: "Please slow down")
        clock.advance(by: .milliseconds(150))
        await alice.succeeds("/nick Alice 5")
        await alice.fails("/nick Alice 6", with: "Please slow down")
        #expect(SendRate.fromOption(0) == nil)
        #expect(SendRate.fromOption(1000) == SendRate(perSecond: 1000, burst: 1000))
        #expect(SendRate.fromOption(1) == SendRate(perSecond: 1, burst: SendRate.interactiveDefault.burst))
    }

    @Test("notice policy and the text handed to notify-send")
    func policyAndCleaning() {
        #expect(
            NoticePolicy.decide(
                viewing: false, fromMe: false, hidden: false, muted: false, interactive: true, bellAllowed: true,
                desktopAllowed: true) == NoticePolicy(bell: true, desktop: true))
        for (viewing, fromMe, hidden, muted) in [
            (true, false, false, false), (false, true, false, false), (false, false, true, false),
            (false, false, false, true),
        ] {
            #expect(
                NoticePolicy.decide(
                    viewing: viewing, fromMe: fromMe, hidden: hidden, muted: muted, interactive: true,
                    bellAllowed: true, desktopAllowed: true) == nil)
        }
        #expect(
            NoticePolicy.decide(
                viewing: false, fromMe: false, hidden: false, muted: false, interactive: false, bellAllowed: true,
                desktopAllowed: false) == NoticePolicy(bell: false, desktop: false))
        let arguments = DesktopNotifier.arguments(
            title: "-x Lab", body: "a\u{1B}[31m <i>&\u{202E}" + String(repeating: "z", count: 300))
        #expect(arguments[0...2] == ["--app-name=natter", "--", "-x Lab"])
        #expect(arguments[3].hasPrefix("a\\u{1b}[31m ‹i›＆\\u{202e}zz") && arguments[3].count == 200)
        #expect(arguments[3].hasSuffix("…"))
        #expect(DesktopNotifier.find("sh", in: "relative:/bin") == "/bin/sh")
        #expect(DesktopNotifier(path: "/nonexistent").executable == nil)
        #expect(MuteDuration.parse("1h30m") == .success(5_400_000))
        #expect(MuteDuration.parse("2d") == .success(172_800_000))
        #expect((try? MuteDuration.parse("h").get()) == nil)
        #expect((try? MuteDuration.parse("30").get()) == nil)
        #expect((try? MuteDuration.parse("0m").get()) == nil)
    }
}
