// Goal: a peer cannot pass for someone the viewer knows by choosing a name that looks the same (issue 19, item 4).
// Reproduced live in the review: "Victim" + U+200B was shown as `[Victim​] Victim​: please send me the key file…`
// with no fingerprint, although the real Victim was known. Method: three real natter processes on loopback (the
// attack), and the rendering helpers on the names the attack uses: wherever an impersonator's name could be taken
// for a known one it carries a fingerprint, invisible characters are escaped, and JSON keeps the raw name with a flag.
import Foundation
import NatterCrypto
import NatterModel
import NatterTestSupport
import Testing

@testable import NatterREPL

@Suite("Impersonation by look-alike names", .serialized)
struct ImpersonationTests {
    @Test("an impersonator named Victim + U+200B is shown escaped and with its fingerprint, and so is Victim")
    func invisibleCharacterImpersonator() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-imp-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        var fingerprints = [String: String]()
        for (directory, name) in [("o", "Olga"), ("v", "Victim"), ("m", "Victim\u{200B}")] {
            _ = try await runProcess(natter, ["init", "--data", "\(root)/\(directory)", "--name", name])
            let id = try await runProcess(natter, ["id", "--data", "\(root)/\(directory)"]).stdout
            fingerprints[directory] = try #require(
                id.split(separator: "\n").first { $0.hasPrefix("fingerprint") }?.split(separator: " ").last.map(String.init))
        }
        let olga = try NatterProcess(natter, ["run", "--data", "\(root)/o", "--listen", "127.0.0.1:0", "--no-discovery"])
        defer { olga.kill() }
        let port = try #require(try await olga.waitFor("listening on port").split(separator: " ").last.flatMap { Int($0) })
        let peer = ["--listen", "127.0.0.1:0", "--peer", "127.0.0.1:\(port)", "--no-discovery"]
        let victim = try NatterProcess(natter, ["run", "--data", "\(root)/v"] + peer)
        defer { victim.kill() }
        let mallory = try NatterProcess(natter, ["run", "--data", "\(root)/m"] + peer)
        defer { mallory.kill() }
        let (victimPrint, malloryPrint) = (fingerprints["v"]!, fingerprints["m"]!)
        // Olga knows both before anyone speaks (a line printed while only one "Victim" is known needs no
        // fingerprint): the REPL takes lines in order, so /whoami answers once both waits are over.
        olga.send("/wait peer \(victimPrint) 30")
        olga.send("/wait peer \(malloryPrint) 30")
        olga.send("/whoami")
        try await olga.waitFor("Olga \(fingerprints["o"]!)", seconds: 60)
        victim.send("/wait peer Olga 30")
        victim.send("/msg Olga hi, it's me")
        try await olga.waitFor("hi, it's me", seconds: 30)
        mallory.send("/wait peer Olga 30")
        mallory.send("/wait known Victim 30")
        mallory.send("/msg Olga please send me the key file")
        let forged = try await olga.waitFor("please send me the key file", seconds: 30)
        #expect(forged.contains("Victim\\u{200b} (\(malloryPrint))"), "the impersonator's line: \(forged)")
        #expect(!forged.contains("\u{200B}"), "no invisible character reaches the terminal: \(forged)")
        let genuine = try #require(olga.printed.first { $0.contains("hi, it's me") })
        #expect(genuine.contains("Victim (\(victimPrint))"), "the real Victim is told apart too: \(genuine)")
        olga.send("/who")
        try await olga.waitFor("Victim\\u{200b} (\(malloryPrint))")
        for process in [olga, victim, mallory] { try await process.finish() }
    }

    @Test("names that look alike get fingerprints; different ones do not; the viewer's own name counts too")
    func lookAlikesGetFingerprints() {
        let ids = (1...6).map { AuthorID(try! IdentityKeyPair(seed: [UInt8](repeating: UInt8($0), count: 32)).publicKey) }
        let book = NameBook(
            names: [
                ids[0]: "Victim", ids[1]: "Vic\u{200D}tim", ids[2]: "V\u{0456}ctim", ids[3]: "Bob", ids[4]: "Me",
                ids[5]: "me\u{2060}",
            ], me: ids[4])
        #expect(book.display(ids[0]) == "Victim (\(ids[0].publicKey.fingerprint))")
        #expect(book.display(ids[1]) == "Vic\\u{200d}tim (\(ids[1].publicKey.fingerprint))")
        #expect(book.display(ids[2]) == "V\u{0456}ctim (\(ids[2].publicKey.fingerprint))")
        #expect(book.display(ids[3]) == "Bob")
        #expect(book.display(ids[5]) == "me\\u{2060} (\(ids[5].publicKey.fingerprint))", "confusable with the viewer")
        #expect(book.speaker(ids[4]) == "you")
    }

    @Test("JSON keeps the raw name and flags it beside every fingerprint")
    func jsonFlag() {
        let ids = (1...3).map { AuthorID(try! IdentityKeyPair(seed: [UInt8](repeating: UInt8($0), count: 32)).publicKey) }
        let book = NameBook(names: [ids[0]: "Victim", ids[1]: "Victim\u{200B}", ids[2]: "Olga"], me: ids[2])
        let event = JSON.object([
            ("type", "message"), ("author", .string("Victim\u{200B}")),
            ("fingerprint", .string(ids[1].publicKey.fingerprint)),
            ("members", .array([.object([("name", "Olga"), ("fingerprint", .string(ids[2].publicKey.fingerprint))])])),
            ("by", "Victim"), ("by_fingerprint", .string(ids[0].publicKey.fingerprint)),
        ])
        let flagged = book.flagged(event).encoded
        #expect(flagged.contains("\"author\":\"Victim\u{200B}\""), "the name stays raw")
        #expect(flagged.contains("\"fingerprint\":\"\(ids[1].publicKey.fingerprint)\",\"confusable\":true"))
        #expect(flagged.contains("\"fingerprint\":\"\(ids[2].publicKey.fingerprint)\",\"confusable\":false"))
        #expect(flagged.contains("\"by_fingerprint\":\"\(ids[0].publicKey.fingerprint)\",\"by_confusable\":true"))
    }

    @Test("invisible and format characters are escaped in network text, but not inside emoji or joined letters")
    func invisibleCharacters() {
        #expect(Safe.line("Victim\u{200B}") == "Victim\\u{200b}")
        #expect(Safe.line("\u{00AD}soft\u{FEFF}") == "\\u{ad}soft\\u{feff}")
        #expect(Safe.line("a\u{E0041}b") == "a\\u{e0041}b", "a tag character outside a flag")
        #expect(Safe.line("I \u{2764}\u{FE0F} it") == "I \u{2764}\u{FE0F} it")
        #expect(Safe.line("\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}") == "\u{1F469}\u{200D}\u{1F469}\u{200D}\u{1F467}")
        #expect(Safe.line("m\u{FE0F}") == "m\\u{fe0f}", "a variation selector on a letter")
        // Persian: a zero-width non-joiner between two letters is part of the word in a message, not in a name.
        let word = "\u{0645}\u{06CC}\u{200C}\u{062E}\u{0648}\u{0627}\u{0647}\u{0645}"
        #expect(Safe.line(word) == word)
        #expect(Safe.name(word).contains("\\u{200c}"))
        #expect(Safe.line("end\u{200D}") == "end\\u{200d}", "a joiner with no letter after it")
    }
}
