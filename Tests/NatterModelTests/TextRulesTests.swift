// Goal: `MessageText.isClean`'s ASCII shortcut gives exactly the answer of its definition (the text is what
// `clean` makes of it), since every replica must judge every message alike. Method: seeded random texts over an
// alphabet mixing printable ASCII with the characters the rules treat specially (space, tab, newline, other ASCII
// controls, DEL, non-ASCII whitespace and letters), short enough to hit the edges often, plus texts at the limits.
import NatterModel
import Testing

@Suite("Text rules")
struct TextRulesTests {
    /// The definition: what `clean` makes of the text is the text itself, byte for byte.
    static func definition(_ text: String) -> Bool {
        (try? MessageText.clean(text)).map { $0.utf8.elementsEqual(text.utf8) } ?? false
    }

    @Test("isClean agrees with its definition on random texts")
    func randomTexts() {
        let alphabet: [Character] = [
            "a", "Z", "0", "~", "!", " ", " ", "\t", "\n", "\r", "\u{0B}", "\u{0C}", "\u{7F}", "\u{01}", "\u{A0}",
            "é", "\u{2028}", "😀",
        ]
        var generator = SeededGenerator(seed: 20)
        var cleanSeen = 0
        for _ in 0..<20_000 {
            let length = Int.random(in: 0...6, using: &generator)
            let text = String((0..<length).map { _ in alphabet.randomElement(using: &generator)! })
            let expected = Self.definition(text)
            #expect(MessageText.isClean(text) == expected, "\(Array(text.unicodeScalars))")
            if expected { cleanSeen += 1 }
        }
        #expect(cleanSeen > 1_000, "the draw reaches clean texts too")
    }

    @Test("isClean agrees with its definition at the length limits")
    func limits() {
        for count in [ConversationLimits.messageCharactersMax, ConversationLimits.messageCharactersMax + 1] {
            let text = String(repeating: "x", count: count)
            #expect(MessageText.isClean(text) == Self.definition(text))
        }
        #expect(MessageText.isClean(String(repeating: "x", count: ConversationLimits.messageCharactersMax)))
        #expect(!MessageText.isClean(String(repeating: "x", count: ConversationLimits.messageCharactersMax + 1)))
        #expect(!MessageText.isClean("") && !MessageText.isClean(" x") && !MessageText.isClean("x\n"))
        #expect(MessageText.isClean("a\tb\nc") && !MessageText.isClean("a\rb"))
    }
}
