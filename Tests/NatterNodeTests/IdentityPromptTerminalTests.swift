// Goal: a person moving an identity types the passphrase at the terminal without it ever showing: the export asks
// twice and writes nothing when the two differ, the import asks once and opens the file. Method: `natter identity
// export/import` in a real pseudo-terminal (tmux, private socket, bounded waits on the screen), no --passphrase-file.
import Foundation
import NatterTestSupport
import Testing

@Suite(
    "Identity passphrases typed at a terminal (tmux)", .serialized, .timeLimit(.minutes(2)),
    .enabled(if: Tmux.path != nil, "tmux is not installed (scripts/install-deps.sh installs it)"))
struct IdentityPromptTerminalTests {
    @Test func exportAsksTwiceWithoutEchoImportAsksOnce() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-idtty-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let created = try await runProcess(natter, ["init", "--data", "\(root)/old", "--name", "Ada"])
        try #require(created.status == 0, "\(created.stderr)")
        let secret = "tiger lily 42"

        // Two different passphrases: refused, no file.
        let mismatch = try Tmux(command: [natter.path, "identity", "export", "--data", "\(root)/old", "\(root)/a.id"])
        defer { mismatch.kill() }
        try await mismatch.waitForScreen("the first question") { $0.last == "Passphrase for the export:" }
        try mismatch.type(secret)
        try mismatch.keys("Enter")
        try await mismatch.waitForScreen("the second question") { $0.last == "The same passphrase again:" }
        try mismatch.type(secret + "!")
        try mismatch.keys("Enter")
        try await mismatch.waitForScreen("the refusal") { $0.contains { $0.contains("the two passphrases differ") } }
        #expect(!FileManager.default.fileExists(atPath: "\(root)/a.id"))

        let export = try Tmux(command: [natter.path, "identity", "export", "--data", "\(root)/old", "\(root)/a.id"])
        defer { export.kill() }
        for question in ["Passphrase for the export:", "The same passphrase again:"] {
            try await export.waitForScreen(question) { $0.last == question }
            try export.type(secret)
            try export.keys("Enter")
        }
        try await export.waitForScreen("the export") { $0.contains { $0.hasPrefix("exported ") } }
        #expect(try export.screen().allSatisfy { !$0.contains(secret) }, "the passphrase showed on the screen")
        #expect((try FileManager.default.attributesOfItem(atPath: "\(root)/a.id")[.posixPermissions] as? Int) == 0o600)

        let importing = try Tmux(command: [natter.path, "identity", "import", "--data", "\(root)/new", "\(root)/a.id"])
        defer { importing.kill() }
        try await importing.waitForScreen("the question") { $0.last == "Passphrase:" }
        try importing.type(secret)
        try importing.keys("Enter")
        try await importing.waitForScreen("the import") { $0.contains { $0.hasPrefix("imported ") } }
        #expect(try importing.screen().allSatisfy { !$0.contains(secret) }, "the passphrase showed on the screen")
        let old = try await runProcess(natter, ["id", "--data", "\(root)/old"]).stdout.split(separator: "\n").first
        let new = try await runProcess(natter, ["id", "--data", "\(root)/new"]).stdout.split(separator: "\n").first
        #expect(old != nil && old == new)
    }
}
