// Goal: what the store acknowledges survives a crash, a data directory has one user at a time, and durability is
// really configured. Method: real files in temporary directories, the real `natter` binary as a child process
// killed with SIGKILL at seeded random moments, and SQLite's own integrity check after every restart.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import NatterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("Durability and locking")
struct DurabilityTests {
    func temporaryDirectory() throws -> String {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("natter-test-\(UUID().uuidString)")
            .path
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    @Test("the writer runs with synchronous=FULL (GRDB resets it to NORMAL unless set after opening)")
    func synchronousIsFull() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let store = try RecordStore.open(directory: directory)
        #expect(try store.synchronousMode() == 2)
        let mode = try store.writer.read { db in try String.fetchOne(db, sql: "PRAGMA journal_mode") }
        #expect(mode == "wal")
    }

    @Test("a second opener of a data directory fails with a clear message naming the holder")
    func secondOpenerIsRefused() throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        withExtendedLifetime(try RecordStore.open(directory: directory)) {
            do {
                _ = try RecordStore.open(directory: directory)
                Issue.record("a second store opened the same directory")
            } catch {
                #expect(String(describing: error).contains("in use by natter process \(getpid())"))
            }
        }
        // Released with the first store: a new opener succeeds.
        _ = try RecordStore.open(directory: directory)
    }

    @Test("a second natter process on the same directory exits non-zero with one clear line")
    func secondProcessIsRefused() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let natter = try builtExecutable("natter")
        #expect(try await runProcess(natter, ["init", "--data", directory, "--name", "Lock Test"]).status == 0)
        let holder = try RecordStore.open(directory: directory)
        let second = try await runProcess(natter, ["digest", "--data", directory])
        #expect(second.status != 0)
        #expect(second.stderr.hasPrefix("error: data directory \(directory) is in use by natter process"))
        #expect(second.stderr.split(separator: "\n").count == 1)
        withExtendedLifetime(holder) {}  // the lock is held until the second process has been refused
    }

    @Test("SIGKILL at 50 random moments loses no durable record and never reuses a sequence number")
    func crashLosesNothingAcknowledged() async throws {
        let directory = try temporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let natter = try builtExecutable("natter")
        #expect(try await runProcess(natter, ["init", "--data", directory, "--name", "Crash Test"]).status == 0)
        var rng = SeededGenerator(seed: 2026)
        var acknowledged = [UInt64: String]()  // sequence → record id, as the child reported them
        var killedWhileWriting = 0
        for round in 0..<50 {
            let lines = try await runUntilReadyThenKill(
                natter, ["debug", "append-loop", "--data", directory],
                afterMilliseconds: Int.random(in: 0...200, using: &rng))
            var reportedThisRound = 0
            for line in lines {
                let parts = line.split(separator: " ")
                guard parts.count == 3, parts[0] == "durable", let sequence = UInt64(parts[1]) else { continue }
                if let earlier = acknowledged[sequence] {
                    #expect(earlier == String(parts[2]), "round \(round): sequence \(sequence) was reused")
                }
                acknowledged[sequence] = String(parts[2])
                reportedThisRound += 1
            }
            if reportedThisRound > 0 { killedWhileWriting += 1 }
            // Restart: the store opens (the lock died with the child), is sound, and holds everything reported.
            let store = try RecordStore.open(directory: directory)
            #expect(try store.integrityCheck() == "ok")
            let conversation = ConversationID(bytes: Blake2b.hash(Array("natter/debug/append-loop".utf8)))
            guard let feed = try store.feeds(of: conversation).first else {
                #expect(acknowledged.isEmpty, "round \(round): records were acknowledged but the feed is missing")
                continue
            }
            #expect(feed.applied == feed.stored)
            let held = try store.records(
                conversation: conversation, author: feed.author, from: 1, limit: Int(feed.stored) + 1)
            #expect(held.count == Int(feed.stored), "round \(round): the feed has a gap")
            let heldIDs = Dictionary(uniqueKeysWithValues: held.map { ($0.header.sequence, $0.id.hex) })
            for (sequence, id) in acknowledged {
                #expect(heldIDs[sequence] == id, "round \(round): acknowledged record \(sequence) lost or changed")
            }
        }
        #expect(acknowledged.count >= 50)
        #expect(killedWhileWriting >= 25, "the child was killed mid-write in only \(killedWhileWriting) rounds")
    }
}

// MARK: - Child processes

struct TestFailure: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}
