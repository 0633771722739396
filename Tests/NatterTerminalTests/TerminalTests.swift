import Foundation
import Testing

@testable import NatterTerminal

@Suite("Terminal facts, prompt markup, completion and history", .timeLimit(.minutes(1)))
struct TerminalTests {
    @Test func coloursFollowNoColorTermAndTheOutput() {
        let term = ["TERM": "xterm-256color"]
        #expect(Terminal.usesColor(environment: term, outputIsTerminal: true))
        #expect(!Terminal.usesColor(environment: term, outputIsTerminal: false))
        #expect(!Terminal.usesColor(environment: term.merging(["NO_COLOR": "1"]) { $1 }, outputIsTerminal: true))
        #expect(Terminal.usesColor(environment: term.merging(["NO_COLOR": ""]) { $1 }, outputIsTerminal: true))
        #expect(!Terminal.usesColor(environment: ["TERM": "dumb"], outputIsTerminal: true))
        #expect(!Terminal.usesColor(environment: [:], outputIsTerminal: true))
    }

    @Test func escapeSequencesInPromptsAreMarkedAndTakeNoColumns() {
        let prompt = "\u{1B}[1;32m[#general 3]\u{1B}[0m > "
        #expect(PromptMarkup.forLibedit(prompt) == "\u{1}\u{1B}[1;32m\u{1}[#general 3]\u{1}\u{1B}[0m\u{1} > ")
        #expect(PromptMarkup.forLibedit("two\nlines\u{1} ") == "two lines ")
        #expect(Terminal.displayWidth(prompt) == 15)
        Terminal.useUTF8Locale()
        #expect(Terminal.displayWidth("你好 ✓") == 6)
        #expect(Terminal.displayWidth("e\u{301}") == 1)
    }

    @Test func completionTakesTheWordBeforeTheCursor() {
        let completion = Completion(beforeCursor: "/msg al", afterCursor: "")
        #expect(completion.word == "al")
        #expect(completion.candidates(from: ["alice", "bob", "albert", "alice", ""]) == ["alice", "albert"])
        #expect(Completion(beforeCursor: "/msg\tbo", afterCursor: "").word == "bo")
        #expect(Completion(beforeCursor: "/msg ", afterCursor: "").word == "")
    }

    @Test func tabCompletesListsOrBeeps() {
        let atEnd = Completion(beforeCursor: "/he", afterCursor: "")
        #expect(atEnd.action(for: [], repeated: false) == .none)
        #expect(atEnd.action(for: ["/help"], repeated: false) == .insert("lp "))
        #expect(Completion(beforeCursor: "/he", afterCursor: " bob").action(for: ["/help"], repeated: false)
            == .insert("lp"))
        #expect(atEnd.action(for: ["/help", "/hello"], repeated: false) == .insert("l"))
        let ambiguous = Completion(beforeCursor: "/hel", afterCursor: "")
        #expect(ambiguous.action(for: ["/help", "/hello"], repeated: false) == .ambiguous)
        #expect(ambiguous.action(for: ["/help", "/hello"], repeated: true) == .list)
        #expect(Completion.columns(["alice", "bob", "Book Club"], width: 24) == "alice      bob\nBook Club\n")
    }

    @Test func historyIsBoundedPrivateAndOneLinePerEntry() throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("natter-history-\(UUID().uuidString)")
        defer { try? FileManager.default.removeItem(at: directory) }
        let file = directory.appendingPathComponent("history")
        var history = History(file: file, limit: 3)
        for line in ["/join a", "/join a", " ", "two\nlines", "/help", "/msg bob", "/quit"] {
            try history.add(line)
        }
        #expect(history.entries == ["/help", "/msg bob", "/quit"])
        #expect(try String(contentsOf: file, encoding: .utf8) == "/help\n/msg bob\n/quit\n")
        let mode = try FileManager.default.attributesOfItem(atPath: file.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        var reloaded = History(file: file, limit: 2)
        reloaded.load()
        #expect(reloaded.entries == ["/msg bob", "/quit"])
        var missing = History(file: directory.appendingPathComponent("none"), limit: 2)
        missing.load()
        #expect(missing.entries.isEmpty)
    }
}
