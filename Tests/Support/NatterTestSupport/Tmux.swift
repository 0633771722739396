// Test support shared by test targets: a tmux-driven pseudo-terminal and a bounded wait.
public import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// A test-support failure with a message that says what was awaited and what was seen.
public struct TerminalTestFailure: Error, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// Polls `condition` every `interval` (50 ms unless told) until it holds or `deadline` seconds pass, and once more at
/// the deadline: a test that was not scheduled for a while (the whole suite shares one pool thread per core) fails
/// only if the condition is still false then. It suspends between polls rather than sleeping the thread: a test
/// that blocks a pool thread for seconds stalls every other test running beside it.
public func waitFor(
    _ what: String, deadline: TimeInterval, interval: Duration = .milliseconds(50),
    _ condition: () async throws -> Bool
) async throws {
    guard try await eventually(seconds: deadline, interval: interval, condition) else {
        throw TerminalTestFailure("timed out waiting for \(what)")
    }
}

/// Whether `condition` came to hold within `seconds`, polled every `interval` and checked once more at the deadline
/// (as `waitFor`, for tests that assert on the answer instead of throwing).
public func eventually(
    seconds: Double = 10, interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async throws -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try await condition() { return true }
        try await Task.sleep(for: interval)
    }
    return try await condition()  // once more: a starved test task may wake up only after the deadline
}

/// One tmux server (a private socket) running one command in a window (80×24 unless told) that stays after the
/// command ends.
public struct Tmux {
    public static let path = ["/usr/bin/tmux", "/usr/local/bin/tmux"].first {
        FileManager.default.isExecutableFile(atPath: $0)
    }

    public let socket = "natter-test-\(getpid())-\(UUID().uuidString.prefix(8))"

    public init(command: [String], width: Int = 80, height: Int = 24) throws {
        let shellCommand = command.map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(
            separator: " ")
        try run([
            "new-session", "-d", "-x", "\(width)", "-y", "\(height)", "-e", "LC_ALL=C.UTF-8",
            "exec " + shellCommand, ";", "set-option", "remain-on-exit", "on",
        ])
    }

    /// Ends the server and the command in it (SIGHUP), and removes the socket.
    public func kill() {
        _ = try? run(["kill-server"])
        let directory = ProcessInfo.processInfo.environment["TMUX_TMPDIR"] ?? "/tmp"
        unlink("\(directory)/tmux-\(getuid())/\(socket)")
    }

    /// Types `text` literally.
    public func type(_ text: String) throws { try run(["send-keys", "-l", text]) }

    /// Presses keys by tmux name: "Enter", "Tab", "Up", "C-d".
    public func keys(_ names: String...) throws { try run(["send-keys"] + names) }

    /// The visible screen, one string per row, trailing spaces and trailing empty rows removed.
    public func screen() throws -> [String] {
        var rows = try run(["capture-pane", "-p"]).split(separator: "\n", omittingEmptySubsequences: false)
            .map { String($0.reversed().drop { $0 == " " }.reversed()) }
        while rows.last == "" { rows.removeLast() }
        return rows
    }

    public func cursor() throws -> (column: Int, row: Int) {
        let parts = try run(["display-message", "-p", "#{cursor_x} #{cursor_y}"])
            .split(separator: " ").compactMap { Int($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
        guard parts.count == 2 else { throw TerminalTestFailure("no cursor position from tmux") }
        return (parts[0], parts[1])
    }

    /// Waits (at most 10 s) until the screen satisfies `condition`; on timeout the error shows the screen.
    public func waitForScreen(_ what: String, _ condition: ([String]) -> Bool) async throws {
        var last: [String] = []
        do {
            try await waitFor(what, deadline: 10) {
                last = try screen()
                return condition(last)
            }
        } catch {
            throw TerminalTestFailure("timed out waiting for \(what); the screen:\n" + last.joined(separator: "\n"))
        }
    }

    /// Runs a tmux client (bounded: 10 s) and returns its standard output. Not through Foundation's `Process`:
    /// the server that `new-session` forks inherits the descriptor `Process` watches for the child's exit, so
    /// `waitUntilExit` would wait for the server. And with an empty signal mask: a test runs on a thread that
    /// blocks most signals, and a server inheriting that mask ignores `kill-server` (which is SIGTERM to itself).
    @discardableResult
    private func run(_ arguments: [String]) throws -> String {
        let outputPath = FileManager.default.temporaryDirectory.appendingPathComponent("tmux-\(UUID().uuidString)").path
        defer { unlink(outputPath) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o600)
        posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0)
        // Nothing else is inherited: a tmux server holding the write end of another process's stdin pipe (a test's
        // scripted node) would keep that process from ever seeing the end of its input.
        // (glibc ≥ 2.34 has `posix_spawn_file_actions_addclosefrom_np`; Swift's Glibc module does not import it.)
        if let closeFrom = dlsym(UnsafeMutableRawPointer(bitPattern: 0), "posix_spawn_file_actions_addclosefrom_np") {
            typealias CloseFrom = @convention(c) (UnsafeMutablePointer<posix_spawn_file_actions_t>, Int32) -> Int32
            _ = unsafeBitCast(closeFrom, to: CloseFrom.self)(&actions, 3)
        }
        let executable = Self.path ?? "/usr/bin/tmux"
        let argv = ([executable, "-L", socket, "-f", "/dev/null"] + arguments).map { strdup($0) } + [nil]
        let environment = ProcessInfo.processInfo.environment.map { strdup("\($0.key)=\($0.value)") } + [nil]
        defer { (argv + environment).forEach { free($0) } }
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var signals = sigset_t()
        sigemptyset(&signals)
        posix_spawnattr_setsigmask(&attributes, &signals)
        for signal in [SIGHUP, SIGINT, SIGTERM, SIGPIPE, SIGCHLD] { sigaddset(&signals, signal) }
        posix_spawnattr_setsigdefault(&attributes, &signals)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, executable, &actions, &attributes, argv, environment)
        guard spawned == 0 else { throw TerminalTestFailure("cannot run tmux: error \(spawned)") }
        // A tmux client exits within milliseconds, so this short wait may block its thread (`kill()` runs in
        // `defer`, where nothing can be awaited); bounded all the same.
        var status: Int32 = 0
        let end = Date().addingTimeInterval(10)
        while waitpid(pid, &status, WNOHANG) != pid {
            guard Date() < end else {
                throw TerminalTestFailure("tmux \(arguments.first ?? "") did not exit within 10 s")
            }
            usleep(2_000)
        }
        guard status == 0 else {
            throw TerminalTestFailure("tmux \(arguments.joined(separator: " ")) failed (status \(status))")
        }
        return (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
    }
}
