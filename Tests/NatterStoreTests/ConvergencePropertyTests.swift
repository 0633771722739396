// Goal: the applied state of the log is a function of the set of records held, never of their arrival order.
// Method: seeded scenarios where writers with their own stores write, exchange records and sometimes fork their
// feeds; every record is then delivered to several fresh observers in different random orders and batch sizes,
// and the observers' digests, applied clocks and causal apply order are compared.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@Suite("Log convergence")
struct ConvergencePropertyTests {
    /// Builds one scenario: 2–5 writers in 1–2 conversations writing and gossiping, optionally with a forking twin.
    static func scenario(seed: UInt64, withFork: Bool) throws -> (records: [Record], writers: [Writer]) {
        var rng = SeededGenerator(seed: seed)
        let writers = try (0..<Int.random(in: 2...5, using: &rng)).map { try Writer(seed: seed &* 100 &+ UInt64($0)) }
        var everyone = writers
        if withFork { everyone.append(try Writer(twinOf: writers[0])) }
        let conversations = (0..<Int.random(in: 1...2, using: &rng)).map { conversationID("c\($0)") }
        var written = [Record]()
        for _ in 0..<Int.random(in: 10...40, using: &rng) {
            let writer = everyone.randomElement(using: &rng)!
            let conversation = conversations.randomElement(using: &rng)!
            if Bool.random(using: &rng) {
                do {
                    written.append(try writer.write(conversation, "m\(written.count)"))
                } catch StoreError.ownFeedFrozen {
                    // A writer that has seen its twin's records refuses to extend the fork: expected.
                }
            } else {
                // Learn what another writer wrote (all of it, in a random order, through the causal buffer).
                let source = everyone.randomElement(using: &rng)!
                let theirs = written.filter { $0.header.author == source.author }
                _ = try deliver(theirs, to: writer.store, batchSizes: 1...4, rng: &rng)
            }
        }
        return (written, writers)
    }

    /// Checks that every applied record's dependencies were applied before it (cut at fork points).
    static func checkCausalOrder(_ order: [RecordID], records: [RecordID: Record], forks: [AuthorID: UInt64]) {
        var applied = Set<String>()
        for id in order {
            let header = records[id]!.header
            for dependency in header.dependencies {
                var sequence = dependency.sequence
                if let fork = forks[dependency.author], sequence >= fork { sequence = fork - 1 }
                if sequence > 0 {
                    #expect(
                        applied.contains("\(header.conversation.hex)/\(dependency.author.hex)/\(sequence)"),
                        "record \(id) applied before its dependency \(dependency.author.shortHex)#\(sequence)")
                }
            }
            applied.insert("\(header.conversation.hex)/\(header.author.hex)/\(header.sequence)")
        }
    }

    @Test("honest scenarios: every order and batching gives the same digest and applies everything", arguments: 0..<60)
    func honestConvergence(seed: UInt64) throws {
        try converge(seed: seed, withFork: false)
    }

    @Test("forking scenarios: every order gives the same digest, fork points and applied clocks", arguments: 0..<40)
    func forkConvergence(seed: UInt64) throws {
        try converge(seed: 10_000 + seed, withFork: true)
    }

    func converge(seed: UInt64, withFork: Bool) throws {
        let (records, _) = try Self.scenario(seed: seed, withFork: withFork)
        let byID = Dictionary(records.map { ($0.id, $0) }, uniquingKeysWith: { first, _ in first })
        var rng = SeededGenerator(seed: seed ^ 0xA5A5)
        var digests = Set<[UInt8]>()
        var states = Set<String>()
        for _ in 0..<4 {
            let observer = try RecordStore.inMemory()
            let delivery = try deliver(records, to: observer, batchSizes: 1...12, rng: &rng)
            let feeds = try observer.feeds()
            let forks = Dictionary(
                feeds.compactMap { feed in feed.forkSequence.map { (feed.author, $0) } }, uniquingKeysWith: min)
            if !withFork {
                #expect(delivery.leftOutOfOrder.isEmpty)
                #expect(try observer.statistics().recordsApplied == records.count)
                #expect(forks.isEmpty)
            }
            // Apply order is only meaningful without rebuilds (a rebuild re-applies from scratch).
            if forks.isEmpty { Self.checkCausalOrder(delivery.appliedOrder, records: byID, forks: forks) }
            digests.insert(try observer.logDigest())
            states.insert(
                feeds.map { "\($0.conversation.hex)/\($0.author.hex) \($0.applied) \($0.forkSequence ?? 0)" }
                    .joined(separator: "\n"))
            #expect(feeds.allSatisfy { $0.applied <= $0.stored })
            // Every record applied in the end was reported applied by some ingest, a fork's rebuild included.
            let reported = Set(delivery.appliedOrder.compactMap { byID[$0].map { "\($0.header.position)" } })
            for feed in feeds where feed.applied > 0 {
                for sequence in 1...feed.applied {
                    let position = RecordPosition(conversation: feed.conversation, author: feed.author, sequence: sequence)
                    #expect(reported.contains("\(position)"), "applied but never reported: \(position), seed \(seed)")
                }
            }
        }
        #expect(digests.count == 1, "observers disagree for seed \(seed)")
        #expect(states.count == 1, "applied states differ for seed \(seed): \(states)")
    }
}

extension ConvergencePropertyTests {
    @Test("the forking scenarios really fork (so the property above is not vacuous)")
    func forkScenariosFork() throws {
        var forked = 0
        for seed in 0..<40 as Range<UInt64> {
            let (records, _) = try Self.scenario(seed: 10_000 + seed, withFork: true)
            let observer = try RecordStore.inMemory()
            var rng = SeededGenerator(seed: seed)
            _ = try deliver(records, to: observer, batchSizes: 1...12, rng: &rng)
            if try observer.statistics().forkedFeeds > 0 { forked += 1 }
        }
        #expect(forked >= 10, "only \(forked) of 40 fork scenarios forked")
    }
}
