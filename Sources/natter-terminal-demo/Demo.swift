import Foundation
import NatterTerminal

/// A tiny program around `LineEditor`, for the pseudo-terminal test (Tests/NatterTerminalTests) and for trying
/// the editor by hand:
///
///     natter-terminal-demo [--history FILE] [--fifo FIFO] [--buffer-log FILE]
///
/// Each entered line is echoed above the prompt as `you said: LINE`; lines starting with `/` go to the history;
/// `/prompt TEXT` sets the prompt; `/quit` or Ctrl-D ends. Each line written to FIFO is printed above the prompt
/// as `[msg] LINE`, except `prompt:TEXT`, which sets the prompt (escape sequences allowed). Each change of the edit buffer is appended to the buffer log as `buffer: TEXT`.
@main
struct Demo {
    static let commands = ["/help", "/hello", "/join", "/msg", "/prompt", "/quit"]
    static let names = ["alice", "albert", "bob", "Book Club"]

    static func main() async {
        var options: [String: String] = [:]
        var arguments = CommandLine.arguments.dropFirst().makeIterator()
        while let name = arguments.next() {
            guard name.hasPrefix("--"), let value = arguments.next() else {
                FileHandle.standardError.write(Data("usage: natter-terminal-demo [--history FILE] [--fifo FIFO] [--buffer-log FILE]\n".utf8))
                exit(2)
            }
            options[String(name.dropFirst(2))] = value
        }
        let editor: LineEditor
        do {
            editor = try LineEditor(
                prompt: "demo> ", historyFile: options["history"].map { URL(fileURLWithPath: $0) }, historyLimit: 5
            ) { line, word in
                line == word && word.hasPrefix("/") ? commands : names
            }
        } catch {
            FileHandle.standardError.write(Data("natter-terminal-demo: \(error)\n".utf8))
            exit(1)
        }
        if let fifo = options["fifo"] {
            let thread = Thread { relay(fifo: fifo, to: editor) }
            thread.start()
        }
        if let log = options["buffer-log"] {
            _ = FileManager.default.createFile(atPath: log, contents: nil)
            Task.detached {
                guard let handle = FileHandle(forWritingAtPath: log) else { return }
                for await buffer in editor.bufferChanges {
                    handle.write(Data("buffer: \(buffer)\n".utf8))
                }
            }
        }
        for await line in editor.lines {
            if line == "/quit" { break }
            if line.hasPrefix("/") { editor.addHistory(line) }
            if line.hasPrefix("/prompt ") { editor.setPrompt(String(line.dropFirst("/prompt ".count))) }
            editor.printAbove("you said: \(line)")
        }
        editor.close()
        print("bye")
    }

    /// Prints each line written to the FIFO above the prompt, reopening it after each writer closes it.
    static func relay(fifo: String, to editor: LineEditor) {
        while let file = fopen(fifo, "r") {
            var line: UnsafeMutablePointer<CChar>?
            var capacity = 0
            while getline(&line, &capacity, file) > 0, let line {
                let text = String(cString: line).trimmingCharacters(in: .newlines)
                if text.hasPrefix("prompt:") {
                    editor.setPrompt(String(text.dropFirst("prompt:".count)))
                } else {
                    editor.printAbove("[msg] " + text)
                }
            }
            free(line)
            fclose(file)
        }
    }
}
