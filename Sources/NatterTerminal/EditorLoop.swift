internal import CEditLine
import Foundation
import Synchronization

/// The C `stdout`, through which both libedit and the editor write.
var standardOutput: UnsafeMutablePointer<FILE> { natter_stdout() }

/// Whether a `LineEditor` is open in this process (one at a time: it owns stdin, and libedit's signal handlers
/// are per process).
let lineEditorOpen = Mutex(false)

/// The editor thread: owns libedit (the native `el_*` interface) from the first call to the last.
///
/// It polls standard input and the wake-up pipe. A readable stdin means one `el_gets` in `EL_UNBUFFERED` mode:
/// libedit reads one key (one byte, or the whole of an escape sequence or UTF-8 character), edits, redraws, and
/// returns the whole line so far (ending in a newline once Enter was pressed). A readable pipe means commands:
/// text to print above the prompt, a new prompt, a history entry, or close.
///
/// Printing above the prompt: move the cursor up to the first row of the edit area (computed from the display
/// widths of the prompt and of the buffer up to the cursor, and the terminal width libedit uses), erase to the
/// end of the screen (`\r ESC[J`), print the text, then `EL_REFRESH`, which makes libedit forget what it drew
/// and draw the prompt and the line again with the cursor where it was.
final class EditorLoop {
    private let core: EditorCore
    private let completer: @Sendable (_ line: String, _ word: String) -> [String]
    private var history: History
    private var prompt: String
    /// The prompt as libedit asks for it (the prompt function returns this pointer): owned, freed when replaced.
    private var libeditPrompt: UnsafeMutablePointer<CChar>
    private var editor: OpaquePointer?
    private var historyList: OpaquePointer?
    /// The buffer and cursor (bytes) after the last key.
    private var buffer = ""
    private var pointBytes = 0
    private var running = true
    /// Whether libedit is in character mode (and so has the terminal raw and the prompt on screen).
    private var editing = false
    /// Text to print above the prompt once the current key is handled (a list of completions).
    private var pendingAbove = ""
    /// The line and cursor at the last ambiguous Tab: a second Tab there lists the candidates.
    private var ambiguousTab: (line: String, point: Int)?
    private var ambiguousAfterKey = false
    private var reportedHistoryFailure = false

    init(core: EditorCore, setup: EditorSetup) {
        self.core = core
        completer = setup.completer
        history = setup.history
        prompt = setup.prompt
        libeditPrompt = strdup(PromptMarkup.forLibedit(setup.prompt))!
    }

    deinit {
        free(libeditPrompt)
    }

    func run() {
        core.editorThreadStarted()
        if start() {
            loop()
        }
        finish()
    }

    // MARK: - Start and end

    private func start() -> Bool {
        historyList = natter_history_init(Int32(clamping: max(history.limit, 1)))
        guard let historyList else { return false }
        for entry in history.entries { natter_history_enter(historyList, entry) }
        let client = Unmanaged.passUnretained(self).toOpaque()
        editor = natter_el_init(
            client,
            { editor in EditorLoop.of(editor).libeditPrompt },
            historyList,
            { editor, _ in EditorLoop.of(editor).complete() })
        guard let editor else { return false }
        natter_el_set_unbuffered(editor, 1)
        editing = true
        return true
    }

    private static func of(_ editor: OpaquePointer?) -> EditorLoop {
        Unmanaged<EditorLoop>.fromOpaque(natter_el_client(editor)!).takeUnretainedValue()
    }

    private func loop() {
        while running {
            var fds = [
                pollfd(fd: STDIN_FILENO, events: Int16(POLLIN), revents: 0),
                pollfd(fd: core.wakeRead, events: Int16(POLLIN), revents: 0),
            ]
            if poll(&fds, 2, -1) < 0 {
                if errno == EINTR { continue }
                return
            }
            if fds[1].revents != 0 { perform(core.takeCommands()) }
            guard running else { return }
            let input = fds[0].revents
            if input & Int16(POLLIN) != 0, natter_readable_bytes(STDIN_FILENO) > 0 {
                key()
            } else if input != 0 {
                endOfInput()  // Readable with nothing to read, hang-up or error: the terminal has gone.
            }
        }
    }

    private func finish() {
        if editing { eraseEditArea() }
        fflush(standardOutput)
        if let editor {
            natter_el_set_unbuffered(editor, 0)
            el_end(editor)  // Restores the terminal's mode as it was when the editor opened.
        }
        if let historyList { history_end(historyList) }
        editor = nil
        historyList = nil
        editing = false
        lineEditorOpen.withLock { $0 = false }
        core.editorThreadEnded()
    }

    private func endOfInput() {
        eraseEditArea()  // Ctrl-D leaves "^D" after the prompt.
        editing = false
        running = false
    }

    // MARK: - Keys

    private func key() {
        var count: Int32 = 0
        let text = el_gets(editor, &count)
        // In character mode el_gets returns NULL when the line is empty after a key, not only at end of input.
        let bytes = text.map { UnsafeRawBufferPointer(start: $0, count: Int(max(count, 0))) }
        if let bytes, bytes.count == 1, bytes[0] == 0x04 {
            endOfInput()  // Ctrl-D on an empty line.
            return
        }
        if let bytes, bytes.last == UInt8(ascii: "\n") {
            let line = String(decoding: bytes.dropLast(), as: UTF8.self)
            // Character mode off and on again: a fresh, empty line under a fresh prompt.
            natter_el_set_unbuffered(editor, 0)
            natter_el_set_unbuffered(editor, 1)
            buffer = ""
            pointBytes = 0
            ambiguousTab = nil
            core.lines.yield(line)
            core.bufferChanges.yield("")
            return
        }
        let (current, point) = currentLine()
        pointBytes = point
        if ambiguousAfterKey {
            ambiguousAfterKey = false
            ambiguousTab = (current, point)
        }
        if current != buffer {
            buffer = current
            core.bufferChanges.yield(current)
        }
        if !pendingAbove.isEmpty {
            let listing = pendingAbove
            pendingAbove = ""
            redraw(printing: listing, prompt: nil)
        }
    }

    /// The edit buffer and the cursor's offset in it (bytes of UTF-8), from libedit.
    private func currentLine() -> (String, Int) {
        guard let info = el_line(editor)?.pointee, let start = info.buffer else { return ("", 0) }
        let length = info.lastchar.map { $0 - start } ?? 0
        let point = info.cursor.map { $0 - start } ?? length
        let text = String(decoding: UnsafeRawBufferPointer(start: start, count: max(length, 0)), as: UTF8.self)
        return (text, min(max(point, 0), max(length, 0)))
    }

    /// Tab: completes the word before the cursor with the completer's candidates (libedit command; returns CC_*).
    private func complete() -> UInt8 {
        let (line, point) = currentLine()
        let beforeCursor = String(decoding: line.utf8.prefix(point), as: UTF8.self)
        let completion = Completion(beforeCursor: beforeCursor, afterCursor: String(line.utf8.dropFirst(point))!)
        let candidates = completion.candidates(from: completer(beforeCursor, completion.word))
        switch completion.action(for: candidates, repeated: ambiguousTab.map { $0 == (line, point) } ?? false) {
        case .none:
            return UInt8(CC_REFRESH_BEEP)
        case .insert(let text):
            // A common prefix leaves the choice open: the next Tab lists the candidates.
            ambiguousAfterKey = candidates.count > 1
            ambiguousTab = nil
            return text.withCString { el_insertstr(editor, $0) } == 0 ? UInt8(CC_REFRESH) : UInt8(CC_ERROR)
        case .ambiguous:
            ambiguousTab = (line, point)
            return UInt8(CC_REFRESH_BEEP)
        case .list:
            pendingAbove = Completion.columns(candidates, width: terminalWidth())
            return UInt8(CC_NORM)
        }
    }

    // MARK: - Commands

    private func perform(_ commands: [EditorCommand]) {
        var text = ""
        var newPrompt: String?
        for command in commands {
            switch command {
            case .print(let printed): text += printed
            case .prompt(let prompt): newPrompt = prompt
            case .history(let line): addHistory(line)
            case .close: running = false
            }
        }
        if !text.isEmpty || newPrompt != nil { redraw(printing: text, prompt: newPrompt) }
    }

    private func addHistory(_ line: String) {
        guard history.accepts(line) else { return }
        do {
            try history.add(line)
        } catch {
            if !reportedHistoryFailure {
                reportedHistoryFailure = true
                redraw(printing: "history: cannot write \(history.file?.path ?? "the history file")\n", prompt: nil)
            }
        }
        if let historyList { natter_history_enter(historyList, line) }
    }

    // MARK: - The screen

    /// Erases the prompt and the user's input, prints `text`, and draws the prompt (the new one if given) and the
    /// input again with the cursor where it was.
    private func redraw(printing text: String, prompt newPrompt: String?) {
        eraseEditArea()
        fputs(text, standardOutput)
        if let newPrompt {
            prompt = newPrompt
            free(libeditPrompt)
            libeditPrompt = strdup(PromptMarkup.forLibedit(newPrompt))!
        }
        fflush(standardOutput)
        natter_el_refresh(editor)
    }

    /// Moves the cursor to the start of the edit area's first row and erases from there to the end of the screen.
    private func eraseEditArea() {
        let beforeCursor = String(decoding: buffer.utf8.prefix(pointBytes), as: UTF8.self)
        let row = (Terminal.displayWidth(prompt) + Terminal.displayWidth(beforeCursor)) / terminalWidth()
        fputs(row > 0 ? "\u{1B}[\(row)A\r\u{1B}[J" : "\r\u{1B}[J", standardOutput)
    }

    private func terminalWidth() -> Int {
        let columns = editor.map { Int(natter_el_columns($0)) } ?? 0
        return columns > 0 ? columns : Terminal.width
    }
}
