internal import CEditLine
public import Foundation
import Synchronization

/// Why a `LineEditor` could not start.
public enum LineEditorError: Error, Equatable {
    /// Standard input is not a terminal: read commands line by line instead (scripting mode).
    case notATerminal
    /// Another `LineEditor` is open in this process (libedit's readline interface is one per process).
    case alreadyOpen
    /// The wake-up pipe could not be made (errno).
    case pipe(Int32)
}

/// An interactive line editor on the terminal: libedit's line editing, history and Tab completion, with a
/// prompt that stays at the bottom while other output prints above it.
///
/// libedit is not thread-safe, so every libedit call happens on the editor's own thread, which polls standard
/// input and a wake-up pipe. The methods below may be called from any thread or task: they queue their work and
/// wake that thread. Write everything meant for the screen through `printAbove(_:)` while the editor is open;
/// anything written to stdout directly lands in the middle of the user's line.
///
/// Only one editor may be open in a process at a time; open it only when `Terminal.isInteractive`.
public final class LineEditor: Sendable {
    /// The lines the user enters (without the newline), in order. Ends at end of input (Ctrl-D on an empty
    /// line, or the terminal going away) and after `close()`.
    public let lines: AsyncStream<String>

    /// The edit buffer, each time it changes (after each key that changes it; `""` once a line is entered).
    /// Keeps only the newest value when nobody reads: meant for typing indicators.
    public let bufferChanges: AsyncStream<String>

    private let core: EditorCore

    /// Opens the editor on standard input and output and shows `prompt`.
    ///
    /// - Parameters:
    ///   - prompt: the prompt; it may contain ANSI escape sequences (colour), which take no columns. One line.
    ///   - historyFile: where history is kept across runs (loaded now, rewritten by `addHistory`, mode 0600);
    ///     `nil` keeps history in memory only.
    ///   - historyLimit: the most entries kept, in memory and in the file; the oldest go first.
    ///   - completer: called on Tab, on the editor thread, so it must be quick and must not call back into the
    ///     editor synchronously: `line` is the buffer up to the cursor (ending with `word`), `word` the text being
    ///     completed (from the last space or tab). Return the candidates for `word`; those not starting with it
    ///     are dropped. One candidate replaces the word (plus a space at the end of the line); several insert their
    ///     common prefix, and the next Tab lists them above the prompt. Candidates may contain spaces.
    /// - Throws: `LineEditorError`.
    public init(
        prompt: String,
        historyFile: URL?,
        historyLimit: Int = 500,
        completer: @escaping @Sendable (_ line: String, _ word: String) -> [String]
    ) throws(LineEditorError) {
        guard isatty(STDIN_FILENO) == 1 else { throw .notATerminal }
        let (lines, linesContinuation) = AsyncStream.makeStream(of: String.self, bufferingPolicy: .unbounded)
        let (changes, changesContinuation) = AsyncStream.makeStream(
            of: String.self, bufferingPolicy: .bufferingNewest(1))
        self.lines = lines
        self.bufferChanges = changes
        core = try EditorCore(lines: linesContinuation, bufferChanges: changesContinuation)
        let claimed = lineEditorOpen.withLock { open in
            defer { open = true }
            return !open
        }
        guard claimed else { throw .alreadyOpen }
        let core = self.core
        var history = History(file: historyFile, limit: historyLimit)
        history.load()
        let setup = EditorSetup(prompt: prompt, history: history, completer: completer)
        Terminal.useUTF8Locale()
        let thread = Thread { EditorLoop(core: core, setup: setup).run() }
        thread.name = "natter-line-editor"
        thread.start()
    }

    deinit {
        core.close(wait: false)
    }

    /// Prints `text` above the prompt, keeping what the user has typed and where the cursor is. A newline is
    /// added unless `text` ends with one; `text` may hold several lines. After the editor ends, it just prints.
    public func printAbove(_ text: String) {
        core.send(.print(text.hasSuffix("\n") ? text : text + "\n"))
    }

    /// Replaces the prompt (for example to show the conversation, unread count, peers or sync progress) and
    /// redraws it with the user's input. ANSI escape sequences in it take no columns.
    public func setPrompt(_ prompt: String) {
        core.send(.prompt(prompt))
    }

    /// Adds `line` to the history (Up/Down, Ctrl-R) and rewrites the history file. The caller decides what
    /// belongs there (commands, never message text). Blank lines, multi-line text and a repeat of the newest
    /// entry are ignored.
    public func addHistory(_ line: String) {
        core.send(.history(line))
    }

    /// Erases the prompt, restores the terminal's mode and ends `lines` and `bufferChanges`. Waits for the editor
    /// thread to finish (unless called on it). Idempotent.
    public func close() {
        core.close(wait: true)
    }
}

/// What the editor thread starts with.
struct EditorSetup: Sendable {
    var prompt: String
    var history: History
    var completer: @Sendable (_ line: String, _ word: String) -> [String]
}

/// Work for the editor thread.
enum EditorCommand: Sendable {
    case print(String)
    case prompt(String)
    case history(String)
    case close
}

/// The part of the editor shared between threads: a queue of commands, the pipe that wakes the editor thread,
/// and the streams' continuations.
final class EditorCore: Sendable {
    private struct Queue {
        var commands: [EditorCommand] = []
        /// Set when the editor thread has ended: commands are then carried out on the caller's thread.
        var ended = false
    }

    private let queue = Mutex(Queue())
    let wakeRead: Int32
    private let wakeWrite: Int32
    let lines: AsyncStream<String>.Continuation
    let bufferChanges: AsyncStream<String>.Continuation
    private let finished = DispatchSemaphore(value: 0)
    private let editorThreadID = Mutex<pthread_t?>(nil)

    init(lines: AsyncStream<String>.Continuation, bufferChanges: AsyncStream<String>.Continuation)
        throws(LineEditorError)
    {
        var fds: [Int32] = [0, 0]
        guard natter_wake_pipe(&fds) == 0 else { throw .pipe(errno) }
        wakeRead = fds[0]
        wakeWrite = fds[1]
        self.lines = lines
        self.bufferChanges = bufferChanges
    }

    deinit {
        Glibc.close(wakeRead)
        Glibc.close(wakeWrite)
    }

    /// Queues `command` for the editor thread and wakes it, or, once the editor has ended, prints directly.
    func send(_ command: EditorCommand) {
        let queued = queue.withLock { queue in
            guard !queue.ended else { return false }
            queue.commands.append(command)
            return true
        }
        if queued {
            var byte: UInt8 = 1
            _ = write(wakeWrite, &byte, 1)  // A full pipe already means "wake up".
        } else if case .print(let text) = command {
            writeToStandardOutput(text)
        }
    }

    /// Called on the editor thread: the commands queued so far.
    func takeCommands() -> [EditorCommand] {
        var byte: UInt8 = 0
        while read(wakeRead, &byte, 1) > 0 {}
        return queue.withLock { queue in
            defer { queue.commands.removeAll() }
            return queue.commands
        }
    }

    func editorThreadStarted() {
        editorThreadID.withLock { $0 = pthread_self() }
    }

    /// Called on the editor thread as it ends: later commands run on their caller's thread.
    func editorThreadEnded() {
        let leftover = queue.withLock { queue in
            queue.ended = true
            defer { queue.commands.removeAll() }
            return queue.commands
        }
        for case .print(let text) in leftover { writeToStandardOutput(text) }
        lines.finish()
        bufferChanges.finish()
        finished.signal()
    }

    func close(wait: Bool) {
        send(.close)
        let onEditorThread = editorThreadID.withLock { id in id.map { pthread_equal($0, pthread_self()) != 0 } }
        guard wait, onEditorThread != true else { return }
        finished.wait()
        finished.signal()  // Later close() calls return at once.
    }
}

/// Writes `text` to standard output (the C `stdout`, which libedit shares) and flushes it.
func writeToStandardOutput(_ text: String) {
    fputs(text, standardOutput)
    fflush(standardOutput)
}
