// Goal: the real `natter run` stops gracefully on SIGTERM and SIGINT — exit status 0 — and every record it
// acknowledged is in its store when it starts again. Method: two processes on loopback (named peer, no discovery),
// messages written through the REPL and acknowledged by a `/digest` printed after them, the signal sent by PID,
// then each node restarted and its conversation opened; every wait is bounded, every process stopped by PID.
import Foundation
import NatterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Graceful shutdown of natter run", .serialized, .timeLimit(.minutes(2)))
struct GracefulShutdownTests {
    /// Sends `signal` to the process by PID and waits (bounded) for it to exit; returns its exit status.
    static func stop(_ node: NatterProcess, with signal: Int32) async throws -> Int32 {
        kill(node.process.processIdentifier, signal)
        guard try await waitForExit(node.process, seconds: 10) else {
            node.kill()
            throw ProcessFailure("natter did not stop within 10 s of signal \(signal)")
        }
        #expect(node.process.terminationReason == .exit, "exited by itself, not killed by the signal")
        return node.process.terminationStatus
    }

    @Test("SIGTERM (line interface) and SIGINT (headless) exit 0; acknowledged records are there on restart")
    func signalsStopGracefully() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-stop-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try await runProcess(natter, ["init", "--data", "\(root)/a", "--name", "Alice"])
        _ = try await runProcess(natter, ["init", "--data", "\(root)/b", "--name", "Bob"])
        let alice = try NatterProcess(
            natter, ["run", "--data", "\(root)/a", "--listen", "127.0.0.1:0", "--no-discovery"])
        defer { alice.kill() }
        let port = try #require(
            try await alice.waitFor("listening on port").split(separator: " ").last.flatMap { Int($0) })
        let bob = try NatterProcess(
            natter,
            [
                "run", "--data", "\(root)/b", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:\(port)",
                "--no-discovery",
                "--headless",
            ])
        defer { bob.kill() }

        alice.send("/wait peer Bob 15")
        for index in 1...5 { alice.send("/msg Bob message \(index)") }
        alice.send("/digest")
        // The digest is printed after the five commands completed: all five are acknowledged.
        try await alice.waitFor("log ")
        try await bob.waitFor("Alice: message 5")

        await #expect(try Self.stop(alice, with: SIGTERM) == 0)
        await #expect(try Self.stop(bob, with: SIGINT) == 0)

        // Restarted, each holds all five messages (the REPL shows them when the conversation is opened).
        for (data, other) in [("a", "Bob"), ("b", "Alice")] {
            let again = try NatterProcess(
                natter, ["run", "--data", "\(root)/\(data)", "--listen", "127.0.0.1:0", "--no-discovery"])
            defer { again.kill() }
            again.send("/open \(other)")
            for index in 1...5 { try await again.waitFor("message \(index)") }
            try await again.finish()
        }
    }
}
