/// The text rules of SPEC F6, shared by authoring (which cleans and refuses) and ingest (which rejects records
/// whose text is not already clean, so every replica shows the same bytes).
public enum MessageText {
    /// Why a text was refused; the descriptions are the SPEC's error texts.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong

        public var description: String {
            switch self {
            case .empty: "Message cannot be empty"
            case .tooLong: "Message is too long (max \(ConversationLimits.messageCharactersMax) characters)"
            }
        }
    }

    /// Trims, removes control characters other than newline and tab, and checks the length limits.
    public static func clean(_ raw: String) throws(Problem) -> String {
        let kept = raw.unicodeScalars.filter { scalar in
            scalar == "\n" || scalar == "\t" || scalar.properties.generalCategory != .control
        }
        let text = String(String.UnicodeScalarView(kept)).trimmingSpaces()
        guard !text.isEmpty else { throw .empty }
        guard text.utf8.count <= ConversationLimits.messageBytesMax,
            text.count <= ConversationLimits.messageCharactersMax
        else { throw .tooLong }
        return text
    }

    /// Whether `text` is exactly what `clean` would produce (what a valid record must carry).
    public static func isClean(_ text: String) -> Bool {
        if let ascii = isCleanASCII(text) { return ascii }
        return (try? clean(text)).map { $0.utf8.elementsEqual(text.utf8) } ?? false
    }

    /// `isClean` for text of printable ASCII, tabs and newlines (nil for any other text): `clean` removes none of
    /// those, every one is a character of its own, and only space, tab and newline are trimmed, so the text is clean
    /// when it does not start or end with one and is within the limits. Every replica checks every message at each
    /// derivation, and the Unicode property lookups of `clean` were a sixth of a lab run (perf, 2026-11-27).
    static func isCleanASCII(_ text: String) -> Bool? {
        text.utf8.withContiguousStorageIfAvailable { bytes -> Bool? in
            for byte in bytes where !(0x20...0x7E).contains(byte) && byte != 0x09 && byte != 0x0A { return nil }
            guard let first = bytes.first, let last = bytes.last else { return false }
            let trimmed: (UInt8) -> Bool = { $0 == 0x20 || $0 == 0x09 || $0 == 0x0A }
            return !trimmed(first) && !trimmed(last)
                && bytes.count <= min(ConversationLimits.messageBytesMax, ConversationLimits.messageCharactersMax)
        } ?? nil
    }
}

/// Rules for group titles: cleaned like a name, up to 100 characters; nil or empty means untitled.
public enum GroupTitle {
    public static func clean(_ raw: String?) -> String?? {
        guard let raw else { return .some(nil) }
        let kept = raw.unicodeScalars.filter { $0.properties.generalCategory != .control }
        let title = String(String.UnicodeScalarView(kept)).trimmingSpaces()
        if title.isEmpty { return .some(nil) }
        guard title.count <= ConversationLimits.titleCharactersMax, title.utf8.count <= ConversationLimits.titleBytesMax
        else { return nil }
        return .some(title)
    }
}
