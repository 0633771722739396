// Goal: two real natter processes on loopback, joined only by a named peer, deliver messages both ways, survive a
// SIGKILL of either side without losing or duplicating anything, and reconnect by themselves. Method: the built
// `natter` binary driven through its line interface on pipes, bounded waits on its output, digests compared at
// the end (every process is stopped by PID).
import Foundation
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
    func waitFor(_ text: String, seconds: Double = 15) throws -> String {
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if let line = buffer.lines.withLock({ $0.first { $0.contains(text) } }) { return line }
            usleep(20_000)
        }
        throw ProcessFailure("no line containing \"\(text)\" within \(seconds) s; saw: \(buffer.lines.withLock { $0 })")
    }

    var printed: [String] { buffer.lines.withLock { $0 } }

    func kill() {
        if process.isRunning { Glibc.kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }

    /// Ends input and waits (bounded) for a clean exit.
    func finish() throws {
        input.fileHandleForWriting.closeFile()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(20_000) }
        if process.isRunning {
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

func natterExecutable() throws -> URL {
    let beside = URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent(
        "natter")
    guard FileManager.default.isExecutableFile(atPath: beside.path) else {
        throw ProcessFailure("natter binary not found at \(beside.path)")
    }
    return beside
}

func runToEnd(_ binary: URL, _ arguments: [String]) throws -> String {
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    try process.run()
    process.waitUntilExit()
    return String(decoding: out.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
}

@Suite("Two natter processes on loopback", .serialized)
struct TwoProcessTests {
    @Test("messages cross both ways, a SIGKILLed side catches up after restart, links come back, digests agree")
    func namedPeersSurviveRestarts() throws {
        let natter = try natterExecutable()
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-2p-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        _ = try runToEnd(natter, ["init", "--data", "\(root)/a", "--name", "Alice"])
        _ = try runToEnd(natter, ["init", "--data", "\(root)/b", "--name", "Bob"])

        let alice = try NatterProcess(
            natter, ["run", "--data", "\(root)/a", "--listen", "127.0.0.1:0", "--no-discovery"])
        defer { alice.kill() }
        let banner = try alice.waitFor("listening on port")
        let port = try #require(banner.split(separator: " ").last.flatMap { Int($0) })
        let peerArguments = [
            "run", "--data", "\(root)/b", "--listen", "127.0.0.1:0", "--peer", "127.0.0.1:\(port)",
            "--no-discovery",
        ]
        var bob = try NatterProcess(natter, peerArguments)
        defer { bob.kill() }

        alice.send("/wait peer Bob 15")
        alice.send("/msg Bob first from Alice")
        try bob.waitFor("Alice: first from Alice")
        bob.send("/msg Alice first from Bob")
        try alice.waitFor("Bob: first from Bob")

        // Bob dies; Alice keeps writing; Bob comes back and dials Alice by himself.
        bob.kill()
        alice.send("/msg Bob while you were away")
        // Restarted without --peer: Bob remembers Alice's address.
        bob = try NatterProcess(
            natter, ["run", "--data", "\(root)/b", "--listen", "127.0.0.1:0", "--no-discovery"])
        try bob.waitFor("Alice: while you were away")
        // Alice dies and comes back (on the same port): Bob redials with backoff.
        alice.kill()
        let alice2 = try NatterProcess(
            natter, ["run", "--data", "\(root)/a", "--listen", "127.0.0.1:\(port)", "--no-discovery"])
        defer { alice2.kill() }
        try alice2.waitFor("listening on port \(port)")
        bob.send("/wait peer Alice 15")
        bob.send("/msg Alice back again")
        try alice2.waitFor("Bob: back again")

        alice2.send("/wait synced 15")
        bob.send("/wait synced 15")
        try alice2.finish()
        try bob.finish()
        let digestA = try runToEnd(natter, ["digest", "--data", "\(root)/a"])
        let digestB = try runToEnd(natter, ["digest", "--data", "\(root)/b"])
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
