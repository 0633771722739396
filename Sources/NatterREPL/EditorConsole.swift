public import Foundation
public import NatterTerminal
import Synchronization

/// The interactive console: libedit's line editor (`NatterTerminal.LineEditor`) — line editing, history across
/// restarts, Tab completion, and output printed above the prompt without disturbing a half-typed line.
public final class EditorConsole: Console {
    private let editor: LineEditor
    /// The REPL session answers completions and typing reports; it exists only after the console (it reads from it).
    private let completer = CompleterSlot()

    public var lines: AsyncStream<String> { editor.lines }
    /// The edit buffer whenever it changes (only the newest is kept; "" after Enter): for typing indicators.
    public var drafts: AsyncStream<String> { editor.bufferChanges }

    /// Opens the editor on the terminal; `historyFile` keeps commands only (the session decides what goes in).
    public init(historyFile: URL) throws(LineEditorError) {
        let slot = completer
        editor = try LineEditor(prompt: "> ", historyFile: historyFile, historyLimit: Self.historyLimit) {
            line, word in
            slot.complete.withLock { $0 }?(line, word) ?? []
        }
    }

    /// Commands kept in the history file: enough for weeks of use, small enough to load instantly.
    static let historyLimit = 1_000

    /// Connects Tab completion to the session once it exists.
    public func setCompleter(_ complete: @escaping @Sendable (String, String) -> [String]) {
        completer.complete.withLock { $0 = complete }
    }

    public func show(_ line: String) { editor.printAbove(line) }
    public func showError(_ line: String) { editor.printAbove(line) }
    public func setPrompt(_ prompt: String) { editor.setPrompt(prompt) }
    public func addHistory(_ line: String) { editor.addHistory(line) }

    /// Restores the terminal.
    public func close() {
        editor.close()
    }
}

/// Where the completion function lives: set after the editor opens, read on the editor's thread.
private final class CompleterSlot: Sendable {
    let complete = Mutex<(@Sendable (String, String) -> [String])?>(nil)
}
