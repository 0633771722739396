internal import CEditLine
import Foundation

/// Facts about the terminal natter runs in, and the decisions that follow from them.
public enum Terminal {
    /// True when both standard input and standard output are terminals: the REPL then edits lines with
    /// `LineEditor`; otherwise it reads commands line by line without prompts or colours (SPEC F22).
    public static var isInteractive: Bool {
        isatty(STDIN_FILENO) == 1 && isatty(STDOUT_FILENO) == 1
    }

    /// Whether to colour standard output, from this process's environment and whether stdout is a terminal.
    public static var usesColor: Bool {
        usesColor(environment: ProcessInfo.processInfo.environment, outputIsTerminal: isatty(STDOUT_FILENO) == 1)
    }

    /// The colour rule: no colour when `NO_COLOR` is set to anything non-empty (no-color.org), when `TERM` is
    /// `dumb` or unset, or when output is not a terminal.
    public static func usesColor(environment: [String: String], outputIsTerminal: Bool) -> Bool {
        if let noColor = environment["NO_COLOR"], !noColor.isEmpty { return false }
        guard let term = environment["TERM"], !term.isEmpty, term != "dumb" else { return false }
        return outputIsTerminal
    }

    /// The width of standard output in columns: the terminal's, else `COLUMNS`, else 80.
    public static var width: Int {
        let columns = Int(natter_terminal_columns(STDOUT_FILENO))
        if columns > 0 { return columns }
        if let fromEnvironment = ProcessInfo.processInfo.environment["COLUMNS"].flatMap(Int.init),
            fromEnvironment > 0
        {
            return fromEnvironment
        }
        return 80
    }

    /// How many columns `text` takes on a terminal: escape sequences (`ESC [ … final`) take none, wide
    /// characters two, combining marks none, other control characters two (libedit shows them as `^X`).
    /// Non-ASCII widths need a UTF-8 `LC_CTYPE`, which `LineEditor` sets (see `useUTF8Locale()`).
    public static func displayWidth(_ text: String) -> Int {
        var width = 0
        for part in PromptMarkup.split(text) {
            guard case .visible(let visible) = part else { continue }
            for scalar in visible.unicodeScalars {
                let columns = natter_wcwidth(scalar.value)
                width += columns >= 0 ? Int(columns) : 2
            }
        }
        return width
    }

    /// Makes `LC_CTYPE` a UTF-8 locale (the environment's if it is one, else `C.UTF-8`). libedit silently drops
    /// non-ASCII input otherwise. Process-wide; `LineEditor` calls it before libedit starts.
    public static func useUTF8Locale() {
        if setlocale(LC_CTYPE, "") != nil, let codeset = nl_langinfo(nl_item(CODESET)),
            String(cString: codeset).uppercased().replacingOccurrences(of: "-", with: "") == "UTF8"
        {
            return
        }
        _ = setlocale(LC_CTYPE, "C.UTF-8")
    }
}

/// Escape sequences in a prompt, marked the way libedit needs them so that it does not count them as columns.
enum PromptMarkup {
    enum Part: Equatable {
        case visible(String)
        case escape(String)
    }

    /// Splits `text` into visible runs and terminal escape sequences (`ESC [ params final`, or `ESC x`).
    static func split(_ text: String) -> [Part] {
        var parts: [Part] = []
        var visible = String.UnicodeScalarView()
        var scalars = text.unicodeScalars.makeIterator()
        while let scalar = scalars.next() {
            guard scalar == "\u{1B}" else {
                visible.append(scalar)
                continue
            }
            if !visible.isEmpty {
                parts.append(.visible(String(visible)))
                visible = String.UnicodeScalarView()
            }
            var escape = String.UnicodeScalarView([scalar])
            if let next = scalars.next() {
                escape.append(next)
                if next == "[" {
                    while let byte = scalars.next() {
                        escape.append(byte)
                        if (0x40...0x7E).contains(byte.value) { break }
                    }
                }
            }
            parts.append(.escape(String(escape)))
        }
        if !visible.isEmpty { parts.append(.visible(String(visible))) }
        return parts
    }

    /// The prompt for libedit: one line (line breaks become spaces), each escape sequence between `\u{1}`
    /// markers (libedit's `RL_PROMPT_START_IGNORE`), which libedit prints but does not count.
    static func forLibedit(_ prompt: String) -> String {
        let oneLine = prompt.replacingOccurrences(of: "\r\n", with: " ")
            .replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ")
        return split(oneLine).map { part in
            switch part {
            case .visible(let text): text.replacingOccurrences(of: "\u{1}", with: "")
            case .escape(let sequence): "\u{1}" + sequence + "\u{1}"
            }
        }.joined()
    }
}
