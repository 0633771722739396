// Goal: a crash at any moment of any kind of write loses nothing acknowledged and corrupts nothing (SPEC F20; issue 19,
// "SIGKILL at ≥ 200 random moments across own appends, group commits, epoch key writes and receipts"). Method: the
// real `natter` binary runs `debug write-loop`, a seeded mix of every write a node makes — own appends, messages,
// read receipts, renames, adds, removes and re-keys (fresh epoch keys sealed to the roster), refreshes of the derived
// tables (epoch keys among them) — and is killed with SIGKILL at a random moment after it is ready; a new seed each
// round. After every kill the store is reopened and checked: SQLite's integrity check, every own feed gapless,
// every write the child reported durable held with the same id (so no sequence number was ever reused), and the
// derived tables, once the restart's refresh has run, equal to a rebuild from the log. Every process is stopped by
// PID; each wait is bounded.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("SIGKILL campaign", .serialized)
struct CrashCampaignTests {
    /// Rounds of the campaign: each is one SIGKILL at a random moment. 200 (issue 19's figure, about 6 minutes here)
    /// unless `NATTER_CRASH_ROUNDS` says otherwise: `scripts/test.sh` (CI) runs 60 to keep its time, and
    /// `NATTER_CRASH_ROUNDS=200 swift test --filter CrashCampaignTests` is the full campaign.
    static let rounds =
        ProcessInfo.processInfo.environment["NATTER_CRASH_ROUNDS"].flatMap(Int.init).map { max(20, $0) } ?? 200

    @Test("SIGKILL at 200 random moments (NATTER_CRASH_ROUNDS) of a mix of writes: store sound, nothing lost or reused")
    func campaign() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("natter-crash-\(UUID().uuidString)")
            .path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let natter = try builtExecutable("natter")
        #expect(try await runProcess(natter, ["init", "--data", directory, "--name", "Crash Test"]).status == 0)
        let identity = try DataDirectory(path: directory).readIdentity()
        var rng = SeededGenerator(seed: 19)
        var ledger = DurableLedger()
        var killedMidWrite = 0
        for round in 0..<Self.rounds {
            let lines = try await runUntilReadyThenKill(
                natter, ["debug", "write-loop", "--data", directory, "--seed", "\(1_000 + round)"],
                afterMilliseconds: Int.random(in: 0...120, using: &rng))
            let reported = ledger.note(lines, round: round)
            if reported > 0 { killedMidWrite += 1 }
            try check(directory: directory, identity: identity, ledger: ledger, round: round)
        }
        let counts = ledger.countsByKind
        print("crash campaign: \(Self.rounds) kills, \(killedMidWrite) after some write of the round; durable writes by kind: \(counts)")
        #expect(killedMidWrite >= Self.rounds / 2, "the kills must land among the writes, not before them")
        for kind in ["message", "receipt", "rename", "add", "remove", "rekey", "append", "refreshed"] {
            #expect(counts[kind, default: 0] >= Self.rounds / 20, "too few \(kind) writes to call the campaign a mix: \(counts)")
        }
    }

    /// The store after a kill: sound, gapless, holding every acknowledged write, its derived tables a rebuild's.
    func check(directory: String, identity: LocalIdentity, ledger: DurableLedger, round: Int) throws {
        let store = try RecordStore.open(directory: directory)
        #expect(try store.integrityCheck() == "ok", "round \(round)")
        for feed in try store.feeds() where feed.author == identity.author {
            #expect(feed.applied == feed.stored, "round \(round): own feed not wholly applied")
            let held = try store.records(
                conversation: feed.conversation, author: feed.author, from: 1, limit: Int(feed.stored) + 1)
            #expect(held.count == Int(feed.stored), "round \(round): an own feed has a gap")
        }
        for (position, id) in ledger.acknowledged {
            let record = try store.record(
                at: RecordPosition(conversation: position.conversation, author: identity.author, sequence: position.sequence))
            #expect(record?.id.hex == id, "round \(round): acknowledged \(position) lost or changed")
        }
        // What the restart's refresh leaves in the derived tables (epoch keys, members, timeline …) is what a
        // rebuild from the log gives.
        let restarted = Conversations(store: store, identity: identity)
        _ = try restarted.refreshChanged()
        let tables = try ConversationTableTests().dump(store)
        try store.writer.write { db in
            for table in ["timeline", "timeline_file", "reaction", "conversation_member", "conversation", "epoch_key"] {
                try db.execute(sql: "DELETE FROM \(table)")
            }
        }
        let rebuilt = Conversations(store: store, identity: identity)
        for conversation in try store.conversationIDs() { try rebuilt.refresh(conversation) }
        #expect(try ConversationTableTests().dump(store) == tables, "round \(round): derived tables differ from a rebuild")
        let lockedOut = try store.conversationIDs().contains { try rebuilt.snapshot(of: $0).lockedOut }
        #expect(!lockedOut, "round \(round): the node's own group locked it out")
    }
}

/// Every write a child reported durable, by (conversation, sequence) of the node's own feeds.
struct DurableLedger {
    struct Position: Hashable, CustomStringConvertible {
        let conversation: ConversationID
        let sequence: UInt64
        var description: String { "\(conversation.shortHex)#\(sequence)" }
    }

    private(set) var acknowledged: [Position: String] = [:]
    private(set) var countsByKind: [String: Int] = [:]

    /// Takes in a round's complete lines (`durable WHAT CONVERSATION SEQUENCE ID`, `refreshed`); a position reported
    /// again with another id is a reused sequence number. Returns how many writes the round reported.
    mutating func note(_ lines: [String], round: Int) -> Int {
        var reported = 0
        for line in lines {
            if line == "refreshed" {
                countsByKind[line, default: 0] += 1
                reported += 1
            }
            let parts = line.split(separator: " ").map(String.init)
            guard parts.count == 5, parts[0] == "durable", let bytes = Hex.decode(parts[2]), bytes.count == 32,
                let sequence = UInt64(parts[3])
            else { continue }
            let position = Position(conversation: ConversationID(bytes: bytes), sequence: sequence)
            if let earlier = acknowledged[position] {
                #expect(earlier == parts[4], "round \(round): sequence \(position) was reused")
            }
            acknowledged[position] = parts[4]
            countsByKind[parts[1], default: 0] += 1
            reported += 1
        }
        return reported
    }
}

/// Starts `binary`, waits (at most 60 s) for its `ready` line, kills it with SIGKILL `milliseconds` later, and returns
/// the complete lines it printed. Timing the kill from `ready` rather than from the start keeps the moments among the
/// writes however slow the process is to start (a loaded machine took more than 250 ms).
func runUntilReadyThenKill(_ binary: URL, _ arguments: [String], afterMilliseconds milliseconds: Int) async throws
    -> [String]
{
    let process = Process()
    process.executableURL = binary
    process.arguments = arguments
    let out = Pipe()
    process.standardOutput = out
    process.standardError = FileHandle.nullDevice
    process.standardInput = FileHandle.nullDevice
    let printed = OutputBytes()
    try process.run()
    let handle = out.fileHandleForReading
    let reader = Thread {
        while true {
            let chunk = handle.availableData
            if chunk.isEmpty { break }
            printed.bytes.withLock { $0 += chunk }
        }
    }
    reader.start()
    defer {
        if process.isRunning { kill(process.processIdentifier, SIGKILL) }
        process.waitUntilExit()
    }
    try await waitFor("ready", deadline: 60, interval: .milliseconds(5)) {
        printed.bytes.withLock { String(decoding: $0, as: UTF8.self).contains("ready\n") } || !process.isRunning
    }
    try await Task.sleep(for: .milliseconds(milliseconds))
    kill(process.processIdentifier, SIGKILL)
    process.waitUntilExit()
    // The pipe ends when the child is gone: wait (bounded) until the reader has drained it.
    try await waitFor("the output", deadline: 10, interval: .milliseconds(5)) { reader.isFinished }
    let text = printed.bytes.withLock { String(decoding: $0, as: UTF8.self) }
    // A line cut by the kill has no newline: only complete lines count as reported.
    var lines = text.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
    lines.removeLast()
    return lines
}

/// What a child printed so far, shared between its reading thread and the test.
final class OutputBytes: Sendable {
    let bytes = Mutex(Data())
}
