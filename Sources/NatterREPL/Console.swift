import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// The REPL's terminal: where command lines come from and where output goes. `PlainConsole` reads standard input
/// and writes standard output (scripts, pipes, and terminals where the line editor cannot open); `EditorConsole`
/// (the libedit line editor of `NatterTerminal`) plugs in here for interactive use (printing above a half-typed
/// line, history, completion, typing detection).
public protocol Console: Sendable {
    /// Command lines as the person (or script) enters them; finishes at end of input.
    var lines: AsyncStream<String> { get }
    /// Prints one line of output (above the prompt when interactive).
    func show(_ line: String)
    /// Prints one error or notice line (standard error when scripted).
    func showError(_ line: String)
    /// The prompt (interactive only): current conversation, unread count, peers, sync progress.
    func setPrompt(_ prompt: String)
    /// Remembers a command line for history (commands only, never message text).
    func addHistory(_ line: String)
}

/// Standard input line by line, standard output and error as they are. Used for scripts, and in a terminal where
/// the line editor cannot open (with a plain prompt).
public final class PlainConsole: Console {
    public let lines: AsyncStream<String>
    private let interactive: Bool

    public init(interactive: Bool) {
        self.interactive = interactive
        // A plain read(2) loop on its own thread: each line is handed over as soon as it arrives.
        lines = AsyncStream<String> { continuation in
            Thread.detachNewThread {
                var pending = [UInt8]()
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    pending += chunk[0..<count]
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                        pending.removeSubrange(...newline)
                    }
                }
                if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
                continuation.finish()
            }
        }
    }

    public func show(_ line: String) {
        Self.write(1, line + "\n")
    }

    public func showError(_ line: String) {
        Self.write(interactive ? 1 : 2, line + "\n")
    }

    public func setPrompt(_ prompt: String) {
        guard interactive else { return }
        Self.write(1, prompt)
    }

    public func addHistory(_ line: String) {}

    private static func write(_ descriptor: Int32, _ text: String) {
        var bytes = Array(text.utf8)
        var offset = 0
        while offset < bytes.count {
            let written = bytes.withUnsafeMutableBytes {
                Glibc.write(descriptor, $0.baseAddress! + offset, $0.count - offset)
            }
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
