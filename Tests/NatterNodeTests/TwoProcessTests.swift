// Goal: two real natter processes on loopback, joined only by a named peer, deliver messages both ways, survive a
// SIGKILL of either side without losing or duplicating anything, and reconnect by themselves. Method: the built
// `natter` binary driven through its line interface on pipes, bounded waits on its output, digests compared at
// the end (every process is stopped by PID).
import Foundation
import NatterTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

/// A running `natter run` whose standard input we write and whose standard output we watch.
final class NatterProcess: @unchecked Sendable {
    let process = Process()
    private let input = Pipe()
    private let output = Pipe()
    private let buffer = LineBuffer()

    init(_ binary: URL, _ arguments: [String]) throws {
        process.executableURL = binary
        process.arguments = arguments
        process.standardInput = input
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let handle = output.fileHandleForReading
        let store = buffer
        Thread.detachNewThread {
            var pending = Data()
            while true {
                let chunk = handle.availableData
                if chunk.isEmpty { break }
                pending += chunk
                while let newline = pending.firstIndex(of: 10) {
                    let line = String(decoding: pending[pending.startIndex..<newline], as: UTF8.self)
                    store.lines.withLock { $0.append(line) }
                    pending.removeSubrange(pending.startIndex...newline)
                }
            }
        }
    }

    func send(_ line: String) {
        input.fileHandleForWriting.write(Data((line + "\n").utf8))
    }

    /// Waits (bounded) for an output line containing `text`; returns it.
    @discardableResult
    func waitFor(_ text: String, seconds: Double = 15) async throws -> String {
        var found: String?
        do {
            try await NatterTestSupport.waitFor(text, deadline: seconds, interval: .milliseconds(20)) {
                found = buffer.lines.withLock { $0.first { $0.contains(text) } }
                return found != nil
            }
        } catch {
            throw ProcessFailure(
                "no line containing \"\(text)\" within \(seconds) s; saw: \(buffer.lines.withLock { $0 })")
        }
        return found!
    }

    var printed: [String] { buffer.lines.withLock { $0 } }

    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Ends input and waits (bounded) for a clean exit.
    func finish() async throws {
        input.fileHandleForWriting.closeFile()
        if try await !waitForExit(process, seconds: 15) {
            kill()
            throw ProcessFailure("natter did not exit at end of input")
        }
    }
}

/// Output lines shared between the reading thread and the test.
final class LineBuffer: Sendable {
    let lines = Mutex<[String]>([])
}

struct ProcessFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

@Suite("Two natter processes on loopback", .serialized)
struct TwoProcessTests {
    @Test("messages cross both ways, a SIGKILLed side catches up after restart, links come back, digests agree")
    func namedPeersSurviveRestarts() async throws {
        let natter = try builtExecutable("natter")
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-2p-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try await runProcess(natter, ["init", "--data", "\(root)/a", "--name", "Alice"])
        _ = try await runProcess(natter, ["init", "--data", "\(root)/b", "--name", "Bob"])

        let alice = try NatterProcess(
            natter, ["run", "--data", "\(root)/a", "--listen", "127.0.0.1:0", "--no-discovery"])
        defer { alice.kill() }
        let banner = try await alice.waitFor("listening on port")
        let port = try #require(banner.split(separator: " ").last.flatMap { Int($0) })
        let peerArguments = [
            "run", "--data", "\(root)/b", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:\(port)",
            "--no-discovery",
        ]
        var bob = try NatterProcess(natter, peerArguments)
        defer { bob.kill() }

        alice.send("/wait peer Bob 15")
        alice.send("/msg Bob first from Alice")
        try await bob.waitFor("Alice: first from Alice")
        bob.send("/msg Alice first from Bob")
        try await alice.waitFor("Bob: first from Bob")

        // Bob dies; Alice keeps writing; Bob comes back and dials Alice by himself.
        bob.kill()
        alice.send("/msg Bob while you were away")
        // Restarted without --peer: Bob remembers Alice's address.
        bob = try NatterProcess(
            natter, ["run", "--data", "\(root)/b", "--listen", "127.0.0.1:0", "--no-discovery"])
        try await bob.waitFor("Alice: while you were away")
        // Alice dies and comes back (on the same port): Bob redials with backoff.
        alice.kill()
        let alice2 = try NatterProcess(
            natter, ["run", "--data", "\(root)/a", "--listen", "127.0.0.1:\(port)", "--no-discovery"])
        defer { alice2.kill() }
        try await alice2.waitFor("listening on port \(port)")
        bob.send("/wait peer Alice 15")
        bob.send("/msg Alice back again")
        try await alice2.waitFor("Bob: back again")

        alice2.send("/wait synced 15")
        bob.send("/wait synced 15")
        try await alice2.finish()
        try await bob.finish()
        let digestA = try await runProcess(natter, ["digest", "--data", "\(root)/a"]).stdout
        let digestB = try await runProcess(natter, ["digest", "--data", "\(root)/b"]).stdout
        #expect(digestA.split(separator: "\n").first == digestB.split(separator: "\n").first)
        #expect(
            digestA.contains("conversation")
                && digestA.split(separator: "\n").filter { $0.hasPrefix("conversation") }
                    == digestB.split(separator: "\n").filter { $0.hasPrefix("conversation") }
        )
        // Nothing duplicated: each message appears once in Bob's history.
        #expect(digestA.split(separator: "\n").dropFirst().first == digestB.split(separator: "\n").dropFirst().first)
    }
}
