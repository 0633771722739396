import Foundation
import NatterCrypto
import NatterModel
import NatterStore

/// The membership benchmark (`natter bench --commits`, issue 18 point 5): what a commit costs at a group's size.
/// For each size n, a founder creates a group of n − 1, adds one member (n), removes one and re-keys; for each commit it
/// reports the time to seal and store it on the author, its size against the record cap, and the time a member
/// takes to ingest it and bring its conversation up to date (the cost every member pays once per commit).
public struct GroupCommitBench {
    let sizes: [Int]
    let rounds: Int

    public init(sizes: [Int], rounds: Int) {
        self.sizes = sizes
        self.rounds = rounds
    }

    /// One commit's figures, medians over the rounds.
    public struct Row: Sendable {
        /// The group's members once the commit applies.
        public let members: Int
        public let operation: String
        public let bytes: Int
        public let sealMillis: Double
        public let applyMillis: Double
    }

    public func run() throws -> [Row] {
        var rows = [Row]()
        for size in sizes {
            var samples = [String: (members: Int, bytes: Int, seal: [Double], apply: [Double])]()
            for round in 0..<rounds {
                for sample in try measure(members: size, seed: UInt64(size * 1_000 + round)) {
                    var entry = samples[sample.operation] ?? (sample.members, sample.bytes, [], [])
                    entry.seal.append(sample.seal)
                    entry.apply.append(sample.apply)
                    samples[sample.operation] = entry
                }
            }
            for operation in ["create", "add", "remove", "rekey"] {
                guard let entry = samples[operation] else { continue }
                rows.append(
                    Row(
                        members: entry.members, operation: operation, bytes: entry.bytes, sealMillis: median(entry.seal),
                        applyMillis: median(entry.apply)))
            }
        }
        return rows
    }

    private struct Sample {
        let operation: String
        let members: Int
        let bytes: Int
        let seal: Double
        let apply: Double
    }

    /// One round at one size: the founder's store on disk (as a node's is), one member's store receiving each commit.
    private func measure(members size: Int, seed: UInt64) throws -> [Sample] {
        var rng = SeededGenerator(seed: seed)
        func identity() throws -> LocalIdentity {
            LocalIdentity(
                signing: try IdentityKeyPair(seed: rng.bytes(32)), encryption: try EncryptionKeyPair(secret: rng.bytes(32)))
        }
        return try MachineBench.withScratchDirectory { directory in
            for name in ["founder", "member"] {
                try FileManager.default.createDirectory(atPath: directory + "/" + name, withIntermediateDirectories: false)
            }
            let founderIdentity = try identity()
            let founderStore = try RecordStore.open(directory: directory + "/founder")
            let founder = Conversations(store: founderStore, identity: founderIdentity)
            let memberIdentity = try identity()
            let memberStore = try RecordStore.open(directory: directory + "/member")
            let member = Conversations(store: memberStore, identity: memberIdentity)
            var clock: Int64 = 1_700_000_000_000
            func now() -> Int64 {
                clock += 1_000
                return clock
            }
            // Everyone's profile (their encryption key) reaches the founder; the member knows the founder's.
            var others = [memberIdentity.author]
            _ = try founderStore.ingest([try member.publishProfile(name: "member", now: now()).bytes], receivedAtMillis: clock)
            _ = try memberStore.ingest([try founder.publishProfile(name: "founder", now: now()).bytes], receivedAtMillis: clock)
            var profiles = [[UInt8]]()
            for index in 0..<(size - 2) {
                let person = try identity()
                let scratch = Conversations(store: try RecordStore.inMemory(), identity: person)
                profiles.append(try scratch.publishProfile(name: "p\(index)", now: now()).bytes)
                others.append(person.author)
            }
            _ = try founderStore.ingest(profiles, receivedAtMillis: clock)
            // The group is founded one short of `size`, so that the add reaches it (`size` may be the limit).
            let initial = Array(others.prefix(size - 2))
            let later = others[size - 2]

            var samples = [Sample]()
            var group: ConversationID?
            func step(_ operation: String, _ write: () throws -> Void) throws {
                let before = try founderStore.feeds().reduce(into: [FeedKey: UInt64]()) { $0[FeedKey($1)] = $1.stored }
                let seal = try timeMillis(write)
                var written = [Record]()
                for feed in try founderStore.feeds() where feed.author == founderIdentity.author {
                    let from = (before[FeedKey(feed)] ?? 0) + 1
                    guard from <= feed.stored else { continue }
                    written += try founderStore.records(
                        conversation: feed.conversation, author: feed.author, from: from, limit: Int(feed.stored))
                }
                precondition(written.count == 1, "one commit per step")
                let conversation = written[0].header.conversation
                let apply = try timeMillis {
                    _ = try memberStore.ingest([written[0].bytes], receivedAtMillis: clock)
                    _ = try member.refresh(conversation)
                }
                let members = try member.snapshot(of: conversation).state.members.count
                samples.append(
                    Sample(
                        operation: operation, members: members, bytes: written[0].bytes.count, seal: seal, apply: apply))
            }
            try step("create") { group = try founder.createGroup(title: "Hall", members: initial, now: now()) }
            let id = group!
            let created = try member.snapshot(of: id).state.members.count
            precondition(created == size - 1, "the member holds the group")
            try step("add") { _ = try founder.add([later], to: id, now: now()) }
            try step("remove") { _ = try founder.remove([later], from: id, now: now()) }
            try step("rekey") { _ = try founder.rekey(id, now: now()) }
            let after = try member.snapshot(of: id).state.members.count
            precondition(after == size - 1, "added one, removed one")
            return samples
        }
    }

    private struct FeedKey: Hashable {
        let conversation: ConversationID
        let author: AuthorID
        init(_ feed: FeedState) {
            conversation = feed.conversation
            author = feed.author
        }
    }

    private func median(_ values: [Double]) -> Double { values.sorted()[values.count / 2] }
}
