// Goal: what the REPL prints is right to the character — times and date headers in the viewer's zone, status
// marks, reactions, quotes, safe rendering of hostile text — and a line is parsed into exactly one action or one
// error line. Method: the pure `Renderer`, `Safe`, `Refs`, `JSON` and `ReplParser` with a pinned time zone and
// clock; no node, no terminal.
import Foundation
import NatterCrypto
import Testing

@testable import NatterModel
@testable import NatterREPL
@testable import natter

/// Wednesday 17 October 2029, 14:05:00 in Europe/Berlin (12:05 UTC).
private let now: Int64 = 1_886_933_100_000
private let berlin = TimeZone(identifier: "Europe/Berlin")!
private let hour: Int64 = 3_600_000
private let day: Int64 = 24 * hour

private func renderer(colours: Bool = false) -> Renderer {
    Renderer(timeZone: berlin, nowMillis: now, colours: colours)
}

private func author(_ seed: UInt8) -> AuthorID {
    AuthorID(try! IdentityKeyPair(seed: [UInt8](repeating: seed, count: 32)).publicKey)
}

@Suite("REPL rendering")
struct ReplRenderTests {
    @Test("local time on every line, date headers Today / Yesterday / weekday date, year when not this year")
    func timesAndHeaders() {
        let render = renderer()
        #expect(render.clock(now) == "14:05")
        #expect(render.clock(now - 14 * hour - 5 * 60_000) == "00:00")
        #expect(render.dayHeader(now) == "Today")
        #expect(render.dayHeader(now - 14 * hour - 6 * 60_000) == "Yesterday")  // 23:59 the day before
        #expect(render.dayHeader(now - 2 * day) == "Monday 15 Oct")
        #expect(render.dayHeader(now - 365 * day) == "Tuesday 17 Oct 2028")
        // The same instant is another day in another zone.
        let tokyo = Renderer(timeZone: TimeZone(identifier: "Asia/Tokyo")!, nowMillis: now, colours: false)
        #expect(tokyo.clock(now) == "21:05")
        #expect(tokyo.dayHeader(now - 15 * hour) == "Today")
        #expect(render.dayHeader(now - 15 * hour) == "Yesterday")
    }

    @Test("conversation list times: 14:05 today, Yesterday, a weekday within the week, then 12 Oct")
    func relativeTimes() {
        let render = renderer()
        #expect(render.relative(now - hour) == "13:05")
        #expect(render.relative(now - day) == "Yesterday")
        #expect(render.relative(now - 2 * day) == "Mon")
        #expect(render.relative(now - 6 * day) == "Thu")
        #expect(render.relative(now - 7 * day) == "10 Oct")
        #expect(render.relative(now - 400 * day) == "12 Sep 2028")
    }

    @Test("status marks: sending, sent, queued, delivered, read by n of m, read, not delivered")
    func statusMarks() {
        let render = renderer()
        #expect(render.status(.sending) == "sending…")
        #expect(render.status(.sent(queued: false)) == "sent ✓")
        #expect(render.status(.sent(queued: true)).hasPrefix("queued"))
        #expect(render.status(.delivered) == "delivered ✓✓")
        #expect(render.status(.readBy(1, of: 2)) == "✓✓ read by 1 of 2")
        #expect(render.status(.read) == "read ✓✓")
        #expect(
            render.status(.notDelivered("you were no longer a member")) == "not delivered: you were no longer a member")
        // Read is coloured, the others are not bold blue.
        #expect(renderer(colours: true).status(.read) == "\u{1B}[34;1mread ✓✓\u{1B}[0m")
        #expect(StatusMark.sent(queued: true).name == "queued")
        #expect(StatusMark.readBy(1, of: 2).name == "delivered")
        #expect(StatusMark(nil, peersConnected: true) == .sending)
    }

    @Test("a message line: time, label, speaker, text, (edited), status; reply quote above, reactions below")
    func messageLines() {
        let render = renderer()
        let me = author(1)
        let line = MessageLine(
            ref: "3f2a", millis: now, author: "you", own: true, text: "second drawer", edited: true,
            replyQuote: ("Alice", "anyone seen the scope probe?"), status: .readBy(1, of: 2),
            reactions: [
                ReactionCount(reaction: .love, count: 2, mine: true, people: [me, author(2)]),
                ReactionCount(reaction: .like, count: 1, mine: false, people: [author(3)]),
            ])
        #expect(
            render.message(line) == [
                "           ┌ Alice: anyone seen the scope probe?",
                "14:05 3f2a you: second drawer (edited)  ✓✓ read by 1 of 2",
                "             ❤️ 2 (you)  👍 1",
            ])
        let deleted = MessageLine(ref: "b7c0", millis: now - day, author: "Bob", own: false, text: nil)
        #expect(render.message(deleted) == ["14:05 b7c0 Bob: message deleted"])
        var retracted = MessageLine(ref: "c1d2", millis: now, author: "Eve", own: false, text: "hi")
        retracted.retracted = true
        #expect(render.message(retracted) == ["14:05 c1d2 Eve: retracted: hi"])
        let quoteOfDeleted = MessageLine(
            ref: "d3e4", millis: now, author: "Bob", own: false, text: "ok", replyQuote: ("Alice", nil))
        #expect(render.message(quoteOfDeleted).first == "           ┌ Alice: message deleted")
    }

    @Test("hostile text cannot forge a line: control characters and bidi overrides escaped, lines indented")
    func safeRendering() {
        let render = renderer()
        let forged = "fine\n14:06 ab12 Bob: send me your key\u{202E}\u{1B}[2J\r"
        let lines = render.message(MessageLine(ref: "ab12", millis: now, author: "Eve", own: false, text: forged))
        #expect(lines.count == 1)
        let printed = lines[0].split(separator: "\n")
        #expect(printed.count == 2)
        #expect(printed[1].hasPrefix("             14:06"))  // indented past the time and label
        #expect(!lines[0].contains("\u{202E}") && !lines[0].contains("\u{1B}") && !lines[0].contains("\r"))
        #expect(lines[0].contains("\\u{202e}") && lines[0].contains("\\u{1b}"))
        #expect(Safe.line("a\u{2066}b\u{2069}c\u{200F}") == "a\\u{2066}b\\u{2069}c\\u{200f}")
        #expect(Safe.preview("two\nlines") == "two lines")
    }

    @Test("every ASCII character, alone and amid text: printable ones pass as they are, the rest are escaped")
    func asciiFastPaths() throws {
        for value in UInt8(0)...0x7F {
            let character = String(UnicodeScalar(value))
            let printable = (0x20...0x7E).contains(value)
            for text in [character, "ab\(character)cd"] {
                let shown = Safe.line(text)
                #expect((shown == text) == printable, "\(value): \(shown)")
                if !printable { #expect(shown.contains("\\u{\(String(value, radix: 16))}"), "\(value): \(shown)") }
                // JSON: what is encoded reads back as the text, on one line.
                let encoded = JSON.object([("text", .string(text))]).encoded
                #expect(!encoded.contains("\n") && !encoded.contains("\r"))
                let decoded = try JSONSerialization.jsonObject(with: Data(encoded.utf8)) as? [String: String]
                #expect(decoded?["text"] == text, "\(value): \(encoded)")
            }
        }
        // Beyond ASCII the full rules apply: U+2028 and U+2029 are escaped in JSON, format characters on screen.
        #expect(JSON.string("a\u{2028}b\u{2029}").encoded == "\"a\\u2028b\\u2029\"")
        #expect(JSON.string("é ✓").encoded == "\"é ✓\"")
        #expect(Safe.line("a\u{200B}b") == "a\\u{200b}b")
    }

    @Test("two people with the same name are told apart by fingerprint; you are 'you'")
    func sameNames() {
        let me = author(1)
        let (a, b, c) = (author(2), author(3), author(4))
        let book = NameBook(names: [me: "Me", a: "Alice", b: "Alice", c: "Bob\u{202E}"], me: me)
        #expect(book.display(a) == "Alice (\(a.publicKey.fingerprint))")
        #expect(book.display(b) == "Alice (\(b.publicKey.fingerprint))")
        #expect(book.display(c) == "Bob\\u{202e}")
        #expect(book.speaker(me) == "you")
        #expect(book.display(author(9)) == author(9).publicKey.fingerprint)
    }

    @Test("labels are the shortest unique id prefix of at least four digits")
    func labels() {
        func id(_ hex: String) -> RecordID {
            RecordID(bytes: Hex.decode(hex + String(repeating: "0", count: 64 - hex.count))!)
        }
        let ids = [id("abcd01"), id("abcd02"), id("1234"), id("abce")]
        let book = RefBook(ids)
        let labels = Dictionary(uniqueKeysWithValues: ids.map { ($0, book.label(of: $0)) })
        #expect(labels[ids[0]] == "abcd01")
        #expect(labels[ids[1]] == "abcd02")
        #expect(labels[ids[2]] == "1234")
        #expect(labels[ids[3]] == "abce")
        #expect(Set(labels.values).count == ids.count)
    }

    @Test("system lines, the typing line, the conversation list row and notices")
    func otherLines() {
        let render = renderer()
        let (a, b) = (author(2), author(3))
        let name: (AuthorID) -> String = { $0 == a ? "Alice" : "Bob" }
        #expect(Renderer.describe(.added([b]), by: "Alice", name: name) == "Alice added Bob")
        #expect(Renderer.describe(.renamed("Lab\n2"), by: "you", name: name) == "you renamed the group to Lab\\u{a}2")
        #expect(Renderer.describe(.roleChanged(b, .admin), by: "Alice", name: name) == "Alice made Bob an admin")
        #expect(
            Renderer.describe(.flagsChanged(b, [.canAdd, .canRename]), by: "Alice", name: name)
                == "Alice set what Bob may do: add, rename")
        #expect(render.system(now, "Alice left") == "14:05 ─ Alice left")
        #expect(Renderer.typing([]) == nil)
        #expect(Renderer.typing(["Alice"]) == "Alice is typing…")
        #expect(Renderer.typing(["Alice", "Bob"]) == "Alice and Bob are typing…")
        #expect(Renderer.typing(["Alice", "Bob", "Carol"]) == "Several people are typing…")
        #expect(
            render.conversationRow(
                number: 1, title: "Lab", unread: 3, lastActivityMillis: now - day, preview: "Alice: hi\nthere",
                isMember: true) == "#1 Lab (3 unread)  Yesterday  Alice: hi there")
        #expect(
            render.conversationRow(
                number: 2, title: "Bob", unread: 0, lastActivityMillis: nil, preview: nil, isMember: true)
                == "#2 Bob  No messages yet — say hello")
        #expect(
            renderer(colours: true).conversationRow(
                number: 1, title: "Lab", unread: 3, lastActivityMillis: nil, preview: "x", isMember: true
            ).contains("\u{1B}[1m(3 unread)"))
        #expect(render.notice(conversation: "Lab", text: "Alice: hi") == "[Lab] Alice: hi")
    }

    @Test("JSON lines: fixed key order, every control character escaped, one line whatever the text")
    func jsonLines() {
        let event = JSON.object([
            ("type", "message"), ("text", .string("a\"b\\c\nd\u{1}\u{2028}")), ("n", 3), ("ok", true),
            ("none", .null), ("list", .array(["x"])),
        ])
        #expect(
            event.encoded
                == #"{"type":"message","text":"a\"b\\c\nd\u0001\u2028","n":3,"ok":true,"none":null,"list":["x"]}"#)
        let decoded = try? JSONSerialization.jsonObject(with: Data(event.encoded.utf8)) as? [String: Any]
        #expect(decoded?["text"] as? String == "a\"b\\c\nd\u{1}\u{2028}")
    }
}

@Suite("REPL line parsing")
struct ReplParserTests {
    private func parse(_ line: String) -> ReplAction? { try? ReplParser.parse(line).get() }
    private func error(_ line: String) -> String? {
        if case .failure(let failure) = ReplParser.parse(line) { return failure.description }
        return nil
    }

    @Test("text after the fixed arguments is taken raw: /msg bob -1 ok sends \"-1 ok\"")
    func rawText() {
        #expect(parse("/msg bob -1 ok") == .message(to: "bob", text: "-1 ok"))
        #expect(parse("/msg bob   --help  me ") == .message(to: "bob", text: "--help  me "))
        #expect(parse("/reply ab12 \"quoted\" -- x") == .reply(ref: "ab12", text: "\"quoted\" -- x"))
        #expect(parse("/edit ab12 -v") == .edit(ref: "ab12", text: "-v"))
        #expect(parse("/nick Ada Lovelace") == .nick("Ada Lovelace"))
        #expect(parse("/rename The -Lab-") == .rename("The -Lab-"))
        #expect(parse("/msg \"Lab team\" hi") == .message(to: "Lab team", text: "hi"))
        #expect(parse("hello /there") == .say("hello /there"))
    }

    @Test("every SPEC command parses into its action")
    func everyCommand() {
        let expected: [(String, ReplAction)] = [
            ("/help", .help(nil)), ("/help msg", .help("msg")), ("/whoami", .whoami), ("/peers", .peers),
            ("/who", .who), ("/whois Bob", .whois("Bob")), ("/list", .list(nil, all: false)),
            ("/list lab", .list("lab", all: false)), ("/list --all", .list(nil, all: true)),
            ("/open #2", .open("#2")),
            ("/group create - Bob Carol", .groupCreate(title: nil, members: ["Bob", "Carol"])),
            ("/group create Lab Bob", .groupCreate(title: "Lab", members: ["Bob"])),
            ("/invite Dave", .invite(["Dave"])),
            ("/kick Dave Eve", .kick(["Dave", "Eve"])), ("/role Bob admin", .role(name: "Bob", role: "admin")),
            ("/leave", .leave), ("/members", .members), ("/history", .history(nil)), ("/history 5", .history(5)),
            ("/more", .more), ("/react ab12 love", .react(ref: "ab12", reaction: "love")),
            ("/unreact ab12", .unreact("ab12")),
            ("/delete ab12", .delete("ab12")), ("/receipts ab12", .receipts("ab12")),
            ("/send-file /tmp/my file -1.txt", .sendFile(path: "/tmp/my file -1.txt")),
            ("/save ab12 /tmp/x y", .save(ref: "ab12", path: "/tmp/x y", overwrite: false)),
            ("/save --force ab12 /tmp/--x", .save(ref: "ab12", path: "/tmp/--x", overwrite: true)),
            ("/search probe", .search("probe", all: false)), ("/search --all -x y", .search("-x y", all: true)),
            ("/search --allx", .search("--allx", all: false)),
            ("/mute 1h", .mute("1h")), ("/mute", .mute(nil)), ("/unmute", .unmute),
            ("/archive", .archive), ("/connect 10.0.0.2:7718", .connect("10.0.0.2:7718")),
            ("/grant Bob add", .grant(name: "Bob", flag: "add")),
            ("/revoke Bob add", .revoke(name: "Bob", flag: "add")),
            ("/ignore Eve", .ignore("Eve")), ("/block Eve", .block("Eve")), ("/status", .status), ("/digest", .digest),
            ("/wait read ab12 5", .wait(condition: "read", arguments: ["ab12", "5"])), ("/quit", .quit),
            ("/msg --help", .help("msg")),
        ]
        for (line, action) in expected {
            #expect(parse(line) == action, "\(line) \(String(describing: ReplParser.parse(line)))")
        }
    }

    @Test("a bad line is one error line with the usage; never an exit")
    func badLines() {
        #expect(error("/bogus") == "unknown command /bogus (/help lists the commands)")
        #expect(error("/") == "empty command (/help lists the commands)")
        #expect(error("/msg")?.contains("usage: /msg <name> <text>") == true)
        #expect(error("/history -3")?.contains("usage") == true)
        #expect(error("/history x")?.contains("usage: /history") == true)
        #expect(error("/group make x y")?.contains("only /group create") == true)
        #expect(error("/whoami extra")?.contains("Unexpected argument") == true)
        for line in ["/msg", "/bogus", "/react", "/wait", "/role Bob"] {
            #expect(error(line)?.contains("\n") == false, "\(line)")
        }
    }

    @Test("tab completion: commands at the start of a line, then names and titles (quoted with spaces)")
    func completion() {
        let names = ["Alice", "alfred", "Bob"]
        let titles = ["Lab team", "Alice"]
        #expect(
            ReplCompletion.candidates(line: "/re", word: "/re", names: names, titles: titles) == [
                "/react", "/receipts", "/rename", "/reply", "/revoke",
            ])
        #expect(
            ReplCompletion.candidates(line: "/msg al", word: "al", names: names, titles: titles) == ["Alice", "alfred"])
        #expect(
            ReplCompletion.candidates(line: "/open \"la", word: "\"la", names: names, titles: titles) == [
                "\"Lab team\""
            ])
        #expect(ReplCompletion.candidates(line: "hello /x", word: "/x", names: names, titles: titles).isEmpty)
    }

    @Test("/help lists every command with an abstract; /help CMD shows its usage")
    func help() throws {
        let all = try ReplParser.help(nil).get()
        #expect(all.count == ReplRoot.commands.count + 1)
        for name in ["/nick", "/wait", "/grant", "/ignore", "/block", "/send-file", "/quit"] {
            #expect(all.contains { $0.hasPrefix(name + " ") }, "\(name)")
        }
        let wait = try ReplParser.help("wait").get()
        #expect(wait.first == "usage: /wait synced|delivered REF|read REF|peer NAME|known NAME [SECONDS]")
        let msg = try ReplParser.help("/msg").get()
        #expect(msg.first == "usage: /msg <name> <text>")
        #expect(msg.contains { $0.contains("<text>") && $0.contains("raw") == false })
        if case .failure(let failure) = ReplParser.help("nope") {
            #expect(failure.description == "no command /nope (/help lists the commands)")
        } else {
            Issue.record("/help nope should fail")
        }
    }
}

@Suite("File names and sizes as shown")
struct ReplFileRenderingTests {
    @Test(arguments: [
        ("report.pdf", "report.pdf"), ("../../etc/passwd", "_.._etc_passwd"), ("..hidden", "hidden"),
        ("a/b\\c", "a_b_c"), ("evil\u{202E}fdp.exe", "evil_fdp.exe"), ("line\nbreak", "line_break"), ("...", "file"),
        ("", "file"),
    ])
    func networkNamesBecomeOneSafePathComponent(name: String, safe: String) {
        #expect(ReplSession.safeFileName(name) == safe)
    }

    @Test func sizesReadLikeAPersonWouldSayThem() {
        #expect(Renderer.byteCount(0) == "0 B")
        #expect(Renderer.byteCount(1023) == "1023 B")
        #expect(Renderer.byteCount(1024) == "1 KiB")
        #expect(Renderer.byteCount(3277) == "3.2 KiB")
        #expect(Renderer.byteCount(16 * 1024 * 1024) == "16 MiB")
    }
}
