// Goal: a trace recorded by a real node (`Node` with `TraceOptions`) replays in the lab to the digests the node
// reached, every time; a trace with one input taken away or altered does not; a trace at its bound stops recording
// and the node runs on; the trace holds nothing a person typed.
// Method: two `Node` actors in this process over loopback TCP (named peers, no discovery): A traces, B does not. They
// form a group, write messages both ways (with the nodes' own receipts), converge, stop. A's trace is replayed with
// A's identity and store (`TraceReplay.run`) twice; then replayed with a received input removed, and with one byte
// of one flipped. Bounded waits only; nothing asserts a wall-clock bound.
import Foundation
import NatterCrypto
import NatterLab
import NatterModel
import NatterNode
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import natter

@Suite("Trace and replay", .serialized)
struct TraceReplayTests {
    /// A's trace, A's identity and store, and the digests A reached, after two nodes talked over loopback.
    struct Recorded {
        let trace: [UInt8]
        let identity: LocalIdentity
        let store: RecordStore
        let digests: TraceDigests
        let notices: [String]
        /// Whether A's messages still reached B after the trace stopped (the node ran on).
        let deliveredAfter: Bool
    }

    static let secret = "a canary only the users typed"

    /// Runs A (tracing, bound `bytesMax`) and B, a group between them with messages both ways, until their logs agree.
    static func record(bytesMax: Int = TraceLimits.bytesDefault) async throws -> Recorded {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-trace-\(UUID().uuidString)")
            .path
        // `try?`: a temporary directory left behind is harmless.
        defer { try? FileManager.default.removeItem(atPath: root) }
        let tracePath = "\(root)/a.trace"
        let (identityA, storeA) = try DataDirectoryHandle(explicit: "\(root)/a").initialise(name: "alice", network: nil)
        let (identityB, storeB) = try DataDirectoryHandle(explicit: "\(root)/b").initialise(name: "bob", network: nil)
        let a = try await Node(
            store: storeA, identity: identityA, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [], discovery: nil,
            trace: TraceOptions(path: tracePath, bytesMax: bytesMax))
        let b = try await Node(
            store: storeB, identity: identityB, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [PeerAddress(host: "127.0.0.1", port: a.port)],
            discovery: nil)
        let notices = NoticeLog()
        let listen = Task { for await event in a.events { if case .notice(let line) = event { notices.append(line) } } }
        let runs = [Task { await a.run() }, Task { await b.run() }]
        defer {
            for run in runs { run.cancel() }
            listen.cancel()
        }
        let bob = identityB.author
        // Setup (not a timing target: generous for a loaded machine).
        #expect(try await eventually(seconds: 60) { try await a.read { try $0.hasProfile(bob) } })
        let group = try await a.author(.createGroup(title: "a title typed", members: [bob])).conversation
        #expect(try await eventually(seconds: 60) { try await b.read { try $0.details(of: group) != nil } })
        for round in 0..<3 {
            try await a.author(.send("\(secret) \(round) from a", in: group))
            try await b.author(.send("\(secret) \(round) from b", in: group))
        }
        func agree() async throws -> Bool {
            try await a.read { try $0.digests().log } == b.read { try $0.digests().log }
        }
        #expect(try await eventually(seconds: 60) { try await agree() })
        // The node's own receipts settle: the logs agree twice, 500 ms apart, on the same digest.
        var settled = try await a.read { try $0.digests().log }
        for _ in 0..<40 {
            try await Task.sleep(for: .milliseconds(500))
            let now = try await a.read { try $0.digests().log }
            if now == settled, try await agree() { break }
            settled = now
        }
        let written = try await a.author(.send("after", in: group)).id
        let deliveredAfter = try await eventually(seconds: 60) {
            try await b.read { try $0.lineIDs(of: group).contains(written) }
        }
        await a.shutdown()
        await b.shutdown()
        let digests = try await a.read { queries in
            let (log, conversations) = try queries.digests()
            let sorted = conversations.sorted { $0.0 < $1.0 }
            return TraceDigests(log: log, conversations: sorted.map { .init(id: $0.0, digest: $0.1) })
        }
        let trace = try #require(FileManager.default.contents(atPath: tracePath))
        return Recorded(
            trace: Array(trace), identity: identityA, store: storeA, digests: digests, notices: notices.all,
            deliveredAfter: deliveredAfter)
    }

    static func replay(_ recorded: Recorded, _ trace: [UInt8]? = nil) throws -> TraceReplayReport {
        try TraceReplay.run(
            trace ?? recorded.trace, identity: recorded.identity, networkKey: .defaultNetwork, held: recorded.store)
    }

    @Test("a node's trace replays to the node's digests, every time; an input removed or altered does not")
    func replaysToTheNodesDigests() async throws {
        let recorded = try await Self.record()
        let first = try Self.replay(recorded)
        #expect(first.divergence == nil)
        #expect(first.recorded == recorded.digests)
        #expect(first.digests == recorded.digests)
        #expect(!first.digests.conversations.isEmpty)
        #expect(first.reproduced)
        let second = try Self.replay(recorded)
        #expect(second.digests == first.digests && second.entries == first.entries && second.divergence == nil)

        // No plaintext: the messages, the title and the names are nowhere in the trace.
        for typed in [Self.secret, "a title typed", "alice", "bob"] {
            #expect(!Self.contains(recorded.trace, Array(typed.utf8)), "\(typed) is in the trace")
        }

        let (header, entries) = try TraceCodec.decode(recorded.trace)
        // The received inputs that carried most bytes: after the handshake, sync traffic.
        let received = entries.indices.filter { if case .received = entries[$0].call { true } else { false } }
        let victim = try #require(received.dropFirst(3).max { Self.size(entries[$0]) < Self.size(entries[$1]) })
        var removed = entries
        removed.remove(at: victim)
        let withoutOne = try Self.replay(recorded, Self.encode(header, removed))
        #expect(!withoutOne.reproduced, "a trace without input \(victim) replayed to the node's digests")

        var altered = entries
        if case .received(let link, var bytes) = altered[victim].call {
            bytes[bytes.count / 2] ^= 0x01
            altered[victim].call = .received(link, bytes)
        }
        let flipped = try Self.replay(recorded, Self.encode(header, altered))
        #expect(!flipped.reproduced, "a trace with input \(victim) altered replayed to the node's digests")
    }

    @Test("a trace at its bound stops recording, says so once, and the node runs on")
    func boundStopsRecording() async throws {
        let bound = 3_000
        let recorded = try await Self.record(bytesMax: bound)
        #expect(recorded.trace.count <= bound)
        #expect(recorded.notices.filter { $0.contains("reached its bound") }.count == 1)
        #expect(recorded.deliveredAfter)
        let (_, entries) = try TraceCodec.decode(recorded.trace)
        #expect(entries.last?.call == .truncated)
        let report = try Self.replay(recorded)
        #expect(report.truncated && report.recorded == nil && report.divergence == nil)
    }

    @Test("a trace that cannot be written, or whose header is over the bound, is reported and the node runs on")
    func failuresAreReported() async throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-trace-\(UUID().uuidString)").path
        // `try?`: a temporary directory left behind is harmless.
        defer { try? FileManager.default.removeItem(atPath: root) }
        // /dev/full takes the file's creation and refuses every write (ENOSPC); 100 bytes hold no header.
        for (name, options, expected) in [
            ("full", TraceOptions(path: "/dev/full"), "cannot write the trace"),
            ("small", TraceOptions(path: "\(root)/small.trace", bytesMax: 100), "is over its bound"),
        ] {
            let (identity, store) = try DataDirectoryHandle(explicit: "\(root)/\(name)").initialise(
                name: name, network: nil)
            let node = try await Node(
                store: store, identity: identity, networkKey: .defaultNetwork,
                listen: PeerAddress(host: "127.0.0.1", port: 0), peers: [], discovery: nil, trace: options)
            let notices = NoticeLog()
            let listen = Task {
                for await event in node.events { if case .notice(let line) = event { notices.append(line) } }
            }
            let run = Task { await node.run() }
            // The first batch is written a second after the start, on a tick (the node ticks every 500 ms at most).
            let said = try await eventually(seconds: 30) { notices.all.contains { $0.contains(expected) } }
            #expect(said, "\(name): \(notices.all)")
            #expect(notices.all.filter { $0.hasPrefix("trace:") }.count == 1, "\(name): \(notices.all)")
            // Still running: it writes and reads.
            try await node.author(.nick("\(name) again"))
            #expect(try await node.read { try $0.digests().log }.count == 32)
            await node.shutdown()
            run.cancel()
            listen.cancel()
        }
    }

    static func size(_ entry: TraceEntry) -> Int {
        if case .received(_, let bytes) = entry.call { return bytes.count }
        return 0
    }

    static func encode(_ header: TraceHeader, _ entries: [TraceEntry]) -> [UInt8] {
        entries.reduce(TraceCodec.encode(header)) { $0 + TraceCodec.encode($1) }
    }

    static func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard needle.count <= haystack.count else { return false }
        return (0...(haystack.count - needle.count)).contains {
            haystack[$0..<($0 + needle.count)].elementsEqual(needle)
        }
    }
}

/// Notices a node reported, collected from its event stream.
final class NoticeLog: Sendable {
    private let lines = Mutex<[String]>([])
    func append(_ line: String) { lines.withLock { $0.append(line) } }
    var all: [String] { lines.withLock { $0 } }
}
