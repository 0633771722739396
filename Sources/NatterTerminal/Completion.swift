/// Tab completion's rules, apart from libedit: what the word is, which candidates count, what a Tab does.
struct Completion {
    enum Action: Equatable {
        /// No candidate: beep.
        case none
        /// Insert this at the cursor: the rest of the only candidate (and a space at the end of the line), or the
        /// rest of the candidates' common prefix.
        case insert(String)
        /// Several candidates and nothing to add: beep, and list them on the next Tab.
        case ambiguous
        /// List the candidates above the prompt.
        case list
    }

    /// The text being completed: from the last space or tab before the cursor up to the cursor.
    let word: String
    private let atEndOfLine: Bool

    init(beforeCursor: String, afterCursor: String) {
        word = String(beforeCursor.reversed().prefix { $0 != " " && $0 != "\t" }.reversed())
        atEndOfLine = afterCursor.isEmpty
    }

    /// The completer's candidates that extend `word`, without duplicates, in the completer's order.
    func candidates(from offered: [String]) -> [String] {
        var seen = Set<String>()
        return offered.filter { !$0.isEmpty && $0.hasPrefix(word) && seen.insert($0).inserted }
    }

    /// What Tab does with `candidates`; `repeated` when the previous Tab, at the same line and cursor, was
    /// ambiguous.
    func action(for candidates: [String], repeated: Bool) -> Action {
        guard let first = candidates.first else { return .none }
        if candidates.count == 1 {
            let rest = String(first.dropFirst(word.count))
            return .insert(atEndOfLine ? rest + " " : rest)
        }
        let common = candidates.dropFirst().reduce(first) { prefix, candidate in
            String(zip(prefix, candidate).prefix { $0 == $1 }.map(\.0))
        }
        if common.count > word.count { return .insert(String(common.dropFirst(word.count))) }
        return repeated ? .list : .ambiguous
    }

    /// `candidates` in columns across `width`, as lines ending in a newline.
    static func columns(_ candidates: [String], width: Int) -> String {
        let cell = (candidates.map(Terminal.displayWidth).max() ?? 0) + 2
        let perLine = max(1, width / max(cell, 1))
        var text = ""
        for (index, candidate) in candidates.enumerated() {
            let last = index % perLine == perLine - 1 || index == candidates.count - 1
            text += candidate
            text += last ? "\n" : String(repeating: " ", count: cell - Terminal.displayWidth(candidate))
        }
        return text
    }
}
