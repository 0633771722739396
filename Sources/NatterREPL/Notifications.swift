import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// When a message or reaction earns a notice (SPEC F15): in a conversation the person is not viewing, from someone
/// else, not hidden, not muted. Pure, so tests can state the rules.
struct NoticePolicy: Sendable, Equatable {
    /// The terminal bell: only in a terminal, unless turned off (`--no-bell`).
    var bell: Bool
    /// A desktop notification: asked for (`--notify`) and `notify-send` present.
    var desktop: Bool

    /// nil: no notice at all. Otherwise what comes with the one-line notice.
    static func decide(
        viewing: Bool, fromMe: Bool, hidden: Bool, muted: Bool, interactive: Bool, bellAllowed: Bool,
        desktopAllowed: Bool
    ) -> NoticePolicy? {
        guard !viewing, !fromMe, !hidden, !muted else { return nil }
        return NoticePolicy(bell: interactive && bellAllowed, desktop: desktopAllowed)
    }
}

/// Desktop notifications through `notify-send` (libnotify), when it is on the PATH and the person asked for them
/// (`natter run --notify`). Never required: without it, nothing happens. The program is run directly with its
/// arguments — never through a shell — and the text is made safe first: control characters and bidirectional
/// overrides escaped (`Safe.preview`), markup characters replaced (some notification servers read a subset of
/// HTML), and cut to `bodyCharactersMax`.
final class DesktopNotifier: Sendable {
    /// Notifications being shown at once; more are dropped (the terminal notice still shows).
    static let inFlightMax = 2
    /// A `notify-send` that has not finished by then is terminated.
    static let timeout: Duration = .seconds(5)
    /// Characters of a notification's title and body.
    static let titleCharactersMax = 80
    static let bodyCharactersMax = 200

    /// The `notify-send` found, or nil.
    let executable: String?
    /// Process ids of the notifications showing now (removed when the child is reaped, so a pid here is never
    /// another program's).
    private let running = Mutex(Set<Int32>())

    /// Looks for `notify-send` in `path` (the `PATH` environment variable's form).
    init(path: String? = ProcessInfo.processInfo.environment["PATH"]) {
        executable = Self.find("notify-send", in: path ?? "")
    }

    static func find(_ program: String, in path: String) -> String? {
        for directory in path.split(separator: ":") where directory.hasPrefix("/") {
            let candidate = "\(directory)/\(program)"
            if access(candidate, X_OK) == 0 { return candidate }
        }
        return nil
    }

    /// The arguments `notify-send` gets: options, `--`, then the cleaned title and body (so neither can pass for
    /// an option).
    static func arguments(title: String, body: String) -> [String] {
        ["--app-name=natter", "--", clean(title, Self.titleCharactersMax), clean(body, Self.bodyCharactersMax)]
    }

    static func clean(_ text: String, _ limit: Int) -> String {
        var safe = Safe.preview(text)
        for (character, replacement) in [("&", "＆"), ("<", "‹"), (">", "›")] {
            safe = safe.replacingOccurrences(of: character, with: replacement)
        }
        return safe.count > limit ? String(safe.prefix(limit - 1)) + "…" : safe
    }

    /// Shows one notification unless `inFlightMax` are showing or there is no `notify-send`. Does not wait.
    func notify(title: String, body: String) {
        guard let executable, showing < Self.inFlightMax else { return }
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = Self.arguments(title: title, body: body)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle.nullDevice
        process.terminationHandler = { [self] finished in
            let pid = finished.processIdentifier
            running.withLock { _ = $0.remove(pid) }
        }
        let pid: Int32 = running.withLock { set in
            guard (try? process.run()) != nil else { return 0 }
            set.insert(process.processIdentifier)
            return process.processIdentifier
        }
        guard pid > 0 else { return }
        Task.detached { [self] in
            try? await Task.sleep(for: Self.timeout)
            running.withLock { set in
                if set.contains(pid) { kill(pid, SIGTERM) }
            }
        }
    }

    /// Notifications showing now.
    var showing: Int { running.withLock { $0.count } }
}

/// Mute durations as people type them (`/mute 30m`, `1h30m`, `2d`, `1w`).
enum MuteDuration {
    /// The longest mute with an end; longer is "for ever" (no argument).
    static let maxMillis: Int64 = 365 * 86_400_000

    static let units: [Character: Int64] = ["s": 1_000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000]

    /// Milliseconds, or a one-line error a person can act on.
    static func parse(_ text: String) -> Result<Int64, ReplError> {
        let failure = ReplError(
            "\(Safe.line(text)) is not a duration: use e.g. 30m, 1h, 1h30m, 2d, 1w (or nothing, to mute for ever)")
        var total: Int64 = 0
        var number: Int64?
        for character in text.lowercased() {
            if let digit = character.wholeNumberValue, character.isASCII {
                number = (number ?? 0) * 10 + Int64(digit)
                if number! > maxMillis { return .failure(failure) }
            } else if let unit = units[character], let value = number {
                total += value * unit
                number = nil
            } else {
                return .failure(failure)
            }
        }
        guard number == nil, total > 0 else { return .failure(failure) }
        guard total <= maxMillis else {
            return .failure(ReplError("mute for at most 365 days (or give no duration to mute for ever)"))
        }
        return .success(total)
    }
}

/// The REPL's send rate (SPEC F16): record-writing commands (messages, replies, edits, reactions, membership) per
/// second, with a burst. Beyond it a command fails with "Please slow down"; `natter run --send-rate N` raises it
/// for scripts and benchmarks (`0`: no limit).
public struct SendRate: Sendable, Equatable {
    public var perSecond: Double
    public var burst: Int

    public init(perSecond: Double, burst: Int) {
        self.perSecond = perSecond
        self.burst = burst
    }

    /// A person sends far less than one line a second; a paste of up to 20 lines goes through at once; a runaway
    /// paste or script is stopped after 20 and then allowed 4 a second.
    public static let interactiveDefault = SendRate(perSecond: 4, burst: 20)

    /// `--send-rate N`: N a second with a burst of N (at least the default burst); 0 is no limit (nil).
    public static func fromOption(_ perSecond: Double) -> SendRate? {
        perSecond == 0 ? nil : SendRate(perSecond: perSecond, burst: max(interactiveDefault.burst, Int(perSecond)))
    }
}
