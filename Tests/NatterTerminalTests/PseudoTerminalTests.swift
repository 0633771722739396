import Foundation
import NatterTestSupport
import Testing

/// Drives `natter-terminal-demo` (a `LineEditor` with a fixed completer) in a real pseudo-terminal through tmux:
/// keys go in with `send-keys`, the screen comes out with `capture-pane`. Each check waits (bounded) for the
/// screen to show what a person would see. The tmux server has a socket of its own and is killed at the end.
@Suite(
    "LineEditor in a pseudo-terminal (tmux)", .serialized, .timeLimit(.minutes(1)),
    .enabled(if: Tmux.path != nil, "tmux is not installed (scripts/install-deps.sh installs it)"))
struct PseudoTerminalTests {
    @Test func promptPrintAboveCompletionHistoryAndEndOfInput() async throws {
        let directory = FileManager.default.temporaryDirectory
            .appendingPathComponent("natter-terminal-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: directory) }
        let fifo = directory.appendingPathComponent("messages").path
        #expect(mkfifo(fifo, 0o600) == 0)
        let history = directory.appendingPathComponent("state/history")
        let bufferLog = directory.appendingPathComponent("buffer.log")
        let command = [
            try builtExecutable("natter-terminal-demo").path, "--history", history.path, "--fifo", fifo, "--buffer-log",
            bufferLog.path,
        ]

        let tmux = try Tmux(command: command)
        defer { tmux.kill() }
        try await tmux.waitForScreen("the prompt") { $0.last(where: { !$0.isEmpty }) == "demo>" }

        // A line arriving while a half-typed line sits at the prompt prints above it; the line stays intact.
        try tmux.type("hello wor")
        try await tmux.waitForScreen("the half-typed line") { $0.contains("demo> hello wor") }
        try await write(fifo: fifo, "incoming one\n")
        try await tmux.waitForScreen("the message above the intact line") { screen in
            guard let index = screen.firstIndex(of: "[msg] incoming one") else { return false }
            return index + 1 < screen.count && screen[index + 1] == "demo> hello wor"
        }
        #expect(try tmux.cursor().column == "demo> hello wor".count)

        // Enter delivers the line; the demo echoes it above the next prompt.
        try tmux.type("ld")
        try tmux.keys("Enter")
        try await tmux.waitForScreen("the echo") { $0.contains("you said: hello world") && $0.last == "demo>" }

        // Tab: the common prefix, then the list, then the only candidate and a space.
        try tmux.type("/he")
        try tmux.keys("Tab")
        try await tmux.waitForScreen("the common prefix") { $0.last == "demo> /hel" }
        try tmux.keys("Tab")
        try await tmux.waitForScreen("the candidates") { $0.contains("/help   /hello") && $0.last == "demo> /hel" }
        try tmux.type("l")
        try tmux.keys("Tab")
        try tmux.type("x")
        try await tmux.waitForScreen("the completed command") { $0.last == "demo> /hello x" }
        try tmux.keys("Enter")
        try await tmux.waitForScreen("the command's echo") { $0.contains("you said: /hello x") }
        try await waitFor("the buffer reports", deadline: 10) {
            let log = (try? String(contentsOf: bufferLog, encoding: .utf8)) ?? ""
            return log.contains("buffer: hello wor\n") && log.contains("buffer: /hello x\n")
        }

        // The prompt may change, with colours that take no columns.
        try await write(fifo: fifo, "prompt:\u{1B}[32m[#general 3]\u{1B}[0m > \n")
        try await tmux.waitForScreen("the new prompt") { $0.last == "[#general 3] >" }
        try tmux.type("hi")
        #expect(try tmux.cursor().column == "[#general 3] > hi".count)

        // Ctrl-D on an empty line ends input; the history file holds the command only, mode 0600.
        try tmux.keys("C-u", "C-d")
        try await tmux.waitForScreen("the demo's exit") {
            $0.contains("bye") && !$0.contains(where: { $0.contains("^D") })
        }
        #expect(try String(contentsOf: history, encoding: .utf8) == "/hello x\n")
        let mode = try FileManager.default.attributesOfItem(atPath: history.path)[.posixPermissions] as? Int
        #expect(mode == 0o600)

        // History across restarts: Up recalls the command from the file.
        let again = try Tmux(command: command)
        defer { again.kill() }
        try await again.waitForScreen("the prompt again") { $0.last == "demo>" }
        try again.keys("Up")
        try await again.waitForScreen("the recalled command") { $0.last == "demo> /hello x" }
    }

    /// Writes to the FIFO once the demo has it open for reading (bounded).
    private func write(fifo: String, _ text: String) async throws {
        var descriptor: Int32 = -1
        try await waitFor("the demo to open the FIFO", deadline: 10) {
            descriptor = open(fifo, O_WRONLY | O_NONBLOCK)
            return descriptor >= 0
        }
        defer { close(descriptor) }
        let bytes = Array(text.utf8)
        #expect(Glibc.write(descriptor, bytes, bytes.count) == bytes.count)
    }
}
