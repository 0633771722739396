// Goal: every member of a conversation derives the same state from the same records, whatever happened on the
// way — concurrent adds, removes, renames, role changes, messages, edits, deletes, reactions and receipts, with
// partial exchanges in between. Method: seeded random scenarios over 3–8 replicas with real stores and keys; after
// a full exchange (and the re-keys the rules ask for), every current member's digest and timeline must match, and
// a second copy of each member, fed the same records in a random order and random batches, must match too.
import Foundation
import NatterCrypto
import NatterModel
import NatterStore
import Testing

@Suite("Conversation convergence")
struct ConversationConvergenceTests {
    /// What a scenario did, so that "converged" can never mean "nothing happened": if every action were refused,
    /// every seed would converge on empty states.
    struct Work: Sendable {
        /// User actions tried, and those the rules let through (each wrote a record).
        var attempted = 0
        var written = 0
        /// Messages in the converged timelines (the reference member's, summed over the conversations).
        var messages = 0
    }

    /// One random scenario; returns a description of any divergence (nil when every check holds), and counts what it
    /// did in `work`.
    static func run(seed: UInt64, work: inout Work) throws -> String? {
        var rng = SeededGenerator(seed: seed)
        let count = Int.random(in: 3...8, using: &rng)
        let replicas = try (0..<count).map { try Replica("P\($0)", seed: seed &* 1_000 &+ UInt64($0)) }
        try introduce(replicas)
        var conversations = [ConversationID]()
        let founder = replicas[0]
        let founding = replicas.dropFirst().filter { _ in Bool.random(using: &rng) }.map(\.id)
        conversations.append(
            try founder.conversations.createGroup(
                title: "g\(seed)", members: founding.isEmpty ? [replicas[1].id] : founding, now: founder.tick()))
        conversations.append(
            try replicas[1].conversations.sendDirect("hi", to: replicas[2].id, now: 1).header.conversation)

        for _ in 0..<Int.random(in: 20...45, using: &rng) {
            // Mostly a member acts (so most actions are written); sometimes anyone (so refusals are exercised too).
            let conversation = conversations.randomElement(using: &rng)!
            let members = try replicas.filter { try $0.isMember(of: conversation) }
            let actor =
                (Int.random(in: 0..<4, using: &rng) > 0 ? members.randomElement(using: &rng) : nil)
                ?? replicas.randomElement(using: &rng)!
            if Int.random(in: 0..<4, using: &rng) == 0 {
                // A partial exchange: the actor pulls a random subset of what someone else holds.
                let source = replicas.randomElement(using: &rng)!
                let records = try source.store.allRecords().filter { _ in Int.random(in: 0..<3, using: &rng) > 0 }
                _ = try deliver(records, to: actor.store, batchSizes: 1...8, rng: &rng)
                continue
            }
            work.attempted += 1
            if try act(actor, in: conversation, replicas: replicas, rng: &rng) { work.written += 1 }
        }
        // Heal: exchange everything, let the duty members re-key, exchange again.
        try syncAll(replicas)
        for _ in 0..<4 {
            var rekeyed = false
            for conversation in conversations {
                for replica in replicas {
                    let snapshot = try replica.conversations.snapshot(of: conversation)
                    if snapshot.state.rekeyDuty == replica.id, snapshot.state.members[replica.id] != nil,
                        !snapshot.lockedOut
                    {
                        if (try? replica.conversations.rekey(conversation, now: replica.tick())) != nil {
                            rekeyed = true
                        }
                    }
                }
            }
            if !rekeyed { break }
            try syncAll(replicas)
        }
        for conversation in conversations {
            let states = try replicas.map { try $0.conversations.snapshot(of: conversation) }
            let members = replicas.indices.filter { index in
                states[index].state.members[replicas[index].id] != nil && !states[index].lockedOut
            }
            guard let first = members.first else { continue }
            let reference = states[first].state
            work.messages += reference.timeline.filter { if case .message = $0 { true } else { false } }.count
            for index in members.dropFirst() where states[index].state.digest() != reference.digest() {
                return
                    "seed \(seed): \(replicas[index].name) and \(replicas[first].name) differ in \(conversation.shortHex)"
                    + "\n  members \(states[index].state.sortedMembers) vs \(reference.sortedMembers)"
                    + "\n  timeline \(states[index].state.timeline.count) vs \(reference.timeline.count)"
                    + "\n  rejected \(states[index].state.rejected) vs \(reference.rejected)"
                    + "\n  unreadable \(states[index].state.unreadable.count) vs \(reference.unreadable.count)"
            }
            // The incremental state every snapshot used equals a derivation from scratch, for every member.
            for index in members {
                let records = try replicas[index].store.appliedRecords(of: conversation)
                let reader = ConversationReader(
                    member: replicas[index].id, keyPair: replicas[index].identity.encryption)
                let scratch = ConversationRules.derive(reader.read(records).entries, context: states[index].context)
                if scratch != states[index].state {
                    return "seed \(seed): \(replicas[index].name)'s incremental state differs from a rebuild"
                }
            }
            // Step by step: an engine fed the records in a random causal order and random batches equals a
            // rebuild after every step.
            if let problem = try checkIncrementalSteps(
                replicas[members[0]], conversation, context: states[members[0]].context,
                rng: &rng)
            {
                return "seed \(seed): \(problem)"
            }
            // Order independence: a second copy of one member, fed everything in a random order.
            let member = replicas[members.randomElement(using: &rng)!]
            let twin = Replica(cloneOf: member)
            _ = try deliver(try member.store.allRecords(), to: twin.store, batchSizes: 1...16, rng: &rng)
            let twinState = try twin.conversations.snapshot(of: conversation).state
            if twinState.digest() != reference.digest() {
                return "seed \(seed): order changed the state of \(conversation.shortHex)"
            }
            if twinState.timeline.map(\.id) != reference.timeline.map(\.id) { return "seed \(seed): timelines differ" }
        }
        return nil
    }

    /// Feeds `member`'s applied records of `conversation` to a fresh engine in a random causal order, in random
    /// batches, comparing with a derivation from scratch after every batch.
    static func checkIncrementalSteps(
        _ member: Replica, _ conversation: ConversationID, context: ConversationContext,
        rng: inout SeededGenerator
    ) throws -> String? {
        let records = try member.store.appliedRecords(of: conversation)
        let reader = ConversationReader(member: member.id, keyPair: member.identity.encryption)
        let entries = reader.read(records).entries
        /// Feeds `all` in a random causal order, in random batches, checking against a derivation from scratch.
        func feedInCausalOrder(_ all: [ConversationEntry], _ engine: inout ConversationEngine) -> String? {
            var remaining = all
            var included = [AuthorID: UInt64]()
            var fed = [ConversationEntry]()
            while !remaining.isEmpty {
                var batch = [ConversationEntry]()
                for _ in 0..<Int.random(in: 1...5, using: &rng) {
                    let eligible = remaining.indices.filter { index in
                        let header = remaining[index].header
                        return included[header.author, default: 0] == header.sequence - 1
                            && header.dependencies.allSatisfy { included[$0.author, default: 0] >= $0.sequence }
                    }
                    guard let pick = eligible.randomElement(using: &rng) else { break }
                    let entry = remaining.remove(at: pick)
                    included[entry.author] = entry.header.sequence
                    batch.append(entry)
                }
                if batch.isEmpty { return "no causal order for the remaining \(remaining.count) records" }
                fed += batch
                engine.add(batch)
                if engine.state != ConversationRules.derive(fed, context: context) {
                    return "incremental state differs from a rebuild after \(fed.count) of \(all.count) records"
                }
            }
            return nil
        }
        var engine = ConversationEngine(context: context)
        if let problem = feedInCausalOrder(entries, &engine) { return problem }
        // The same with a fifth of the content unreadable here (records without their key, or a flood's junk):
        // those that arrive after later-sorting entries are taken in without a re-derivation (`absorbLate`).
        let partlyUnreadable = entries.map { entry -> ConversationEntry in
            guard case .content = entry.body, Int.random(in: 0..<5, using: &rng) == 0 else { return entry }
            return ConversationEntry(id: entry.id, header: entry.header, body: .unreadable)
        }
        var unreadableEngine = ConversationEngine(context: context)
        if let problem = feedInCausalOrder(partlyUnreadable, &unreadableEngine) { return "partly unreadable: \(problem)" }
        // In display order (how new records usually arrive) the engine only appends: it re-derives solely when a
        // removal retracts lines already accepted.
        var ordered = ConversationEngine(context: context)
        let sorted = entries.sorted { $0.position < $1.position }
        var index = 0
        while index < sorted.count {
            let size = Int.random(in: 1...4, using: &rng)
            ordered.add(Array(sorted[index..<min(index + size, sorted.count)]))
            index += size
        }
        let removals = sorted.filter { entry in
            if case .control(let operation, _) = entry.body {
                switch operation {
                case .remove, .leave: return true
                default: return false
                }
            }
            return false
        }.count
        if ordered.rebuilds > removals {
            return "\(ordered.rebuilds) rebuilds in display order with \(removals) removals"
        }
        if ordered.state != engine.state { return "display-order engine differs from the causal-order one" }
        return nil
    }

    /// One random user action; returns whether it wrote a record. A refusal the rules give (`ConversationError`:
    /// not a member, not allowed, waiting for a re-key) is skipped and answers false; any other error is a failure.
    static func act(
        _ actor: Replica, in conversation: ConversationID, replicas: [Replica],
        rng: inout SeededGenerator
    ) throws -> Bool {
        do {
            return try attempt(actor, in: conversation, replicas: replicas, rng: &rng)
        } catch is ConversationError {
            return false
        }
    }

    /// One random user action; false when there was nothing to act on (no message of one's own to edit...).
    static func attempt(
        _ actor: Replica, in conversation: ConversationID, replicas: [Replica],
        rng: inout SeededGenerator
    ) throws -> Bool {
        let service = actor.conversations
        let state = try actor.state(conversation)
        let now = actor.tick()
        let messages = state.timeline.compactMap { item -> TimelineMessage? in
            if case .message(let message) = item { return message }
            return nil
        }
        let own = messages.filter { $0.author == actor.id && !$0.deleted }
        let others = replicas.map(\.id).filter { $0 != actor.id }
        switch Int.random(in: 0..<14, using: &rng) {
        case 0...3:
            try service.send(
                "m\(rng.next() % 1000)", in: conversation, replyTo: messages.randomElement(using: &rng)?.id, now: now)
        case 4:
            guard let target = own.randomElement(using: &rng) else { return false }
            try service.edit(target.id, to: "e\(rng.next() % 100)", in: conversation, now: now)
        case 5:
            guard let target = own.randomElement(using: &rng) else { return false }
            try service.delete(target.id, in: conversation, now: now)
        case 6:
            guard let target = messages.randomElement(using: &rng) else { return false }
            try service.react(Reaction.allCases.randomElement(using: &rng)!, to: target.id, in: conversation, now: now)
        case 7:
            guard let target = messages.randomElement(using: &rng) else { return false }
            try service.unreact(target.id, in: conversation, now: now)
        case 8: try service.markRead(conversation, now: now)
        case 9:
            guard let who = others.filter({ state.members[$0] == nil }).randomElement(using: &rng) else { return false }
            try service.add([who], to: conversation, now: now)
        case 10:
            guard let who = others.filter({ state.members[$0] != nil }).randomElement(using: &rng) else { return false }
            try service.remove([who], from: conversation, now: now)
        case 11: try service.rename(conversation, to: "t\(rng.next() % 100)", now: now)
        case 12:
            guard let who = others.filter({ state.members[$0] != nil }).randomElement(using: &rng) else { return false }
            if Bool.random(using: &rng) {
                try service.setRole(Bool.random(using: &rng) ? .admin : .member, of: who, in: conversation, now: now)
            } else {
                try service.setFlags(
                    MemberFlags(rawValue: UInt8.random(in: 0...7, using: &rng)), of: who, in: conversation, now: now)
            }
        default:
            if Int.random(in: 0..<4, using: &rng) == 0 {
                try service.leave(conversation, now: now)
            } else {
                try service.rekey(conversation, now: now)
            }
        }
        return true
    }

    @Test("a reaction that sorts before a concurrent delete of its message, arriving after it, re-derives")
    func lateReactionToDeletedMessage() throws {
        // Alice's message, then two more records of hers and her delete of it; Bob reacts to it meanwhile, so his
        // reaction sorts before the delete. A derivation over everything accepts the reaction and then the delete
        // wipes it; an engine that took the reaction in after the delete must not refuse it as "message deleted".
        let alice = try Replica("Alice", seed: 71)
        let bob = try Replica("Bob", seed: 72)
        try introduce([alice, bob])
        let group = try alice.conversations.createGroup(title: "g", members: [bob.id], now: alice.tick())
        let message = try alice.conversations.send("hello", in: group, now: alice.tick())
        try bob.pull(from: alice)
        let reaction = try bob.conversations.react(.like, to: message.id, in: group, now: bob.tick())
        _ = try alice.conversations.send("one", in: group, now: alice.tick())
        _ = try alice.conversations.send("two", in: group, now: alice.tick())
        let delete = try alice.conversations.delete(message.id, in: group, now: alice.tick())
        #expect(reaction.header.lamport < delete.header.lamport, "the reaction sorts before the delete")
        let reader = ConversationReader(member: alice.id, keyPair: alice.identity.encryption)
        let entries = reader.read(try alice.store.appliedRecords(of: group) + [reaction]).entries
        let context = try alice.conversations.context(for: group)
        var engine = ConversationEngine(context: context)
        engine.add(entries.filter { $0.id != reaction.id })
        engine.add(entries.filter { $0.id == reaction.id })
        #expect(engine.state == ConversationRules.derive(entries, context: context))
        #expect(engine.state.rejected[reaction.id] == nil)
    }

    /// Every seed does real work: some of its actions are written, and its converged timelines hold messages.
    @Test("members converge in every seeded scenario", arguments: 0..<500)
    func converge(seed: UInt64) throws {
        var work = Work()
        let divergence = try Self.run(seed: seed, work: &work)
        if let known = Self.knownDivergences[seed] {
            withKnownIssue(Comment(rawValue: known)) {
                if let divergence { Issue.record(Comment(rawValue: divergence)) }
            }
        } else if let divergence {
            Issue.record(Comment(rawValue: divergence))
        }
        #expect(work.written >= Self.writtenPerSeedMin, "seed \(seed): \(work)")
        #expect(work.messages >= Self.messagesPerSeedMin, "seed \(seed): \(work)")
    }

    /// Seeds that find a divergence not mended yet, and what it is. (A seed listed here that no longer diverges fails
    /// the test: take it out.)
    static let knownDivergences: [UInt64: String] = [:]

    /// Floors of real work per seed: over seeds 0..<500 the fewest records written by one seed is 2, and every seed's
    /// timelines hold a message (the direct conversation's first "hi" at least).
    static let writtenPerSeedMin = 2
    static let messagesPerSeedMin = 1

    /// On average over a sample of seeds, most actions are written and the timelines hold several messages: a change
    /// that made most actions fail (or most messages vanish) fails here even if every seed kept a little. Measured over
    /// seeds 0..<40: 561 of 952 actions written (59 %), 6.65 messages a seed.
    @Test("the scenarios do real work on average")
    func workOnAverage() throws {
        let seeds: Range<UInt64> = 0..<40
        var total = Work()
        for seed in seeds {
            var work = Work()
            _ = try Self.run(seed: seed, work: &work)
            total.attempted += work.attempted
            total.written += work.written
            total.messages += work.messages
        }
        let count = Double(seeds.count)
        print("convergence scenarios, \(seeds.count) seeds: \(total)")
        #expect(Double(total.written) / Double(total.attempted) >= Self.writtenShareMin, "\(total)")
        #expect(Double(total.messages) / count >= Self.messagesPerSeedAverageMin, "\(total)")
    }

    static let writtenShareMin = 0.45
    static let messagesPerSeedAverageMin = 5.0
}

extension Replica {
    /// Whether this replica holds `conversation` and is a member of it (false while it has not heard of it).
    func isMember(of conversation: ConversationID) throws -> Bool {
        do {
            return try state(conversation).members[id] != nil
        } catch is ConversationError {
            return false
        }
    }

    /// A second node with the same identity and an empty store (its own copy of a member).
    convenience init(cloneOf other: Replica) {
        self.init(name: other.name + "'", identity: other.identity)
    }
}
