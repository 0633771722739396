// Goal: what a person sees in a terminal — the prompt, a message from another node printed above a half-typed
// line that stays intact, Tab completion of commands and names, `/help`, and one error line for a bad command,
// with the node still answering afterwards. Method: `natter run` in a real pseudo-terminal (tmux, private socket,
// bounded waits on the screen), a second node scripted on pipes with `--json`; both stopped by PID or by tmux.
import Foundation
import NatterTestSupport
import Testing

@Suite(
    "The REPL in a pseudo-terminal (tmux)", .serialized, .timeLimit(.minutes(2)),
    .enabled(if: Tmux.path != nil, "tmux is not installed (scripts/install-deps.sh installs it)"))
struct ReplTerminalTests {
    @Test func promptIncomingLineAboveHalfTypedInputCompletionHelpAndErrors() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-tty-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }

        let bob = try NatterProcess(
            natter,
            [
                "run", "--data", "\(root)/bob", "--name", "Bob", "--listen", "127.0.0.1:0", "--no-discovery",
                "--json",
            ])
        defer { bob.kill() }
        let port = try #require(try await bob.waitForEvent("started")["port"] as? Int)

        let alice = try Tmux(
            command: [
                natter.path, "run", "--data", "\(root)/alice", "--name", "Alice", "--listen", "127.0.0.1:0",
                "--no-discovery", "--peer", "127.0.0.1:\(port)",
            ], width: 100, height: 30)
        defer { alice.kill() }

        // The prompt shows the connected peer once the link is up.
        try await alice.waitForScreen("the prompt with one peer") { $0.last == "[1 peer] >" }

        // /help lists the commands; a bad command is one error line and the prompt comes back.
        try alice.type("/help")
        try alice.keys("Enter")
        try await alice.waitForScreen("the command list") { screen in
            screen.contains { $0.hasPrefix("/react ") } && screen.contains { $0.hasPrefix("/quit ") }
        }
        try alice.type("/frobnicate now")
        try alice.keys("Enter")
        try await alice.waitForScreen("one error line") { screen in
            screen.filter { $0.hasPrefix("error:") }.count == 1
                && screen.contains { $0.hasPrefix("error:") && $0.contains("/frobnicate") }
                && screen.last == "[1 peer] >"
        }

        // Tab completes a command, then a person's name.
        try alice.type("/whoa")
        try alice.keys("Tab")
        try await alice.waitForScreen("the completed command") { $0.last == "[1 peer] > /whoami" }
        try alice.keys("C-u")
        bob.send("/wait peer Alice 20")
        try await bob.waitForEvent("peer", ["state": "up"])
        try alice.type("/msg Bo")
        try alice.keys("Tab")
        try await alice.waitForScreen("the completed name") { $0.last == "[1 peer] > /msg Bob" }
        try alice.keys("C-u")

        // A message arrives while a line is half typed: it prints above, and the line and cursor stay.
        try alice.type("half typed wor")
        try await alice.waitForScreen("the half-typed line") { $0.last == "[1 peer] > half typed wor" }
        bob.send("/msg Alice canary-7d1f from Bob")
        try await alice.waitForScreen("the message above the intact line") { screen in
            guard let index = screen.lastIndex(where: { $0.contains("Bob: canary-7d1f from Bob") }) else {
                return false
            }
            return screen.last?.hasSuffix("> half typed wor") == true && index < screen.count - 1
        }
        #expect(try alice.cursor().column == (try alice.screen().last ?? "").count)

        // The node still answers: the half-typed line is sent as a command after clearing it.
        try alice.keys("C-u")
        try alice.type("/whoami")
        try alice.keys("Enter")
        try await alice.waitForScreen("whoami's answer") { $0.contains { $0.contains("Alice") && $0.contains("-") } }
        try await bob.finish()
    }
}
