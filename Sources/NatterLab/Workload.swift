import Foundation
import NatterModel
import NatterNode
import NatterStore

/// The chat workload and the fault schedule.
///
/// Operations arrive as a Poisson process at the configured total rate; each picks a random member that is up and
/// has applied the commit that made it a member, and is a message, a reaction to one of the latest messages the
/// author holds, or a read receipt. Every operation's record enters the ledger when its authoring call returns.
extension Simulation {
    // MARK: - Starting the workload

    func beginWorkload() {
        phase = .workload
        workloadStart = now
        faultsActive = true
        overlayAtStart = overlayShape()
        framesByNodeAtStart = nodes.map(\.framesSent)
        deliveredAtStart = nodes.map(\.recordsDelivered).reduce(0, +)
        newAtStart = nodes.map(\.recordsNew).reduce(0, +)
        framesByKindAtStart = framesByKind()
        if sequence == nil, let window = sequenceWindow {
            sequence = SequenceLog(
                window: window, start: now,
                nodes: window.nodes ?? Array(0..<min(configuration.nodes, LabLimits.sequenceNodesMax)))
        }
        let end = now + configuration.duration
        scheduleFaults(start: now)
        // Late joiners start during the first half of the workload (their own stream, as the fault plan's).
        var joins = SeededGenerator(seed: Self.derive(configuration.seed, 0x101))
        for joiner in lateJoiners.sorted() {
            let half = nanoseconds(configuration.duration / 2) / 1_000_000
            push(.start(joiner), at: now + .milliseconds(Int64.random(in: 0...half, using: &joins)))
        }
        push(.operation, at: now + nextArrival())
        if !lateJoiners.isEmpty || plan.churn { push(.membershipProbe, at: now + .milliseconds(100)) }
        if plan.churn { push(.churnRemove, at: now + uniform(.seconds(1), .seconds(3))) }
        push(.heal, at: end)
    }

    /// Time to the next operation: exponential with mean 1 / rate.
    private func nextArrival() -> Duration {
        let gap = -log(1 - unit()) / configuration.rate
        return .nanoseconds(max(1, Int64((gap * 1e9).rounded())))
    }

    // MARK: - Operations

    func operation() {
        guard phase == .workload, let group else { return }
        push(.operation, at: now + nextArrival())
        let authors = nodes.indices.filter { index in
            guard nodes[index].isUp, let position = membership[index] else { return false }
            return ledger[position].appliedAt[index] != nil
        }
        guard !authors.isEmpty else {
            refused["no member up", default: 0] += 1
            return
        }
        let author = authors[Int.random(in: 0..<authors.count, using: &rng)]
        let node = nodes[author]
        guard let core = node.core else { return }
        let draw = unit()
        var kind = OperationKind.message
        if draw < configuration.reactionShare {
            kind = .reaction
        } else if draw < configuration.reactionShare + configuration.receiptShare, !configuration.nodeReceipts {
            kind = .receipt
        }
        var target: RecordID?
        if kind == .reaction {
            let held = recentMessages.filter { ledger[$0].appliedAt[author] != nil }
            if held.isEmpty {
                kind = .message
            } else {
                target = ledger[held[Int.random(in: 0..<held.count, using: &rng)]].id
            }
        }
        do {
            let record: Record
            switch kind {
            case .reaction:
                let reaction = Reaction.allCases[Int.random(in: 0..<Reaction.allCases.count, using: &rng)]
                record = try core.conversations.react(reaction, to: target!, in: group, now: millis(now))
            case .receipt:
                record = try core.conversations.markRead(group, now: millis(now))
            default:
                let filler = String(repeating: "lorem ipsum ", count: Int.random(in: 0...12, using: &rng))
                record = try core.conversations.send(
                    "message \(ledger.count) from \(node.name) \(filler)", in: group, now: millis(now))
            }
            let position = ledger.add(record, author: author, kind: kind, at: now)
            if kind == .message {
                recentMessages.append(position)
                if recentMessages.count > LabLimits.reactionCandidates { recentMessages.removeFirst() }
            }
            perform(author, core.published([record], now: now))
        } catch {
            refused["\(kind): \(error)", default: 0] += 1
        }
    }

    // MARK: - Membership: late joiners and churn

    /// The creator adds every started late joiner and every removed member due back whose profile it holds.
    func membershipProbe() {
        guard phase == .workload else { return }
        push(.membershipProbe, at: now + .milliseconds(100))
        guard let group, let core = nodes[0].core else { return }
        for index in 0..<configuration.nodes where nodes[index].isUp && membership[index] == nil {
            if let due = readmitAt[index], due > now { continue }
            // `try?`: a profile the creator cannot read now is not held yet; the next probe tries again.
            guard (try? core.conversations.profile(of: nodes[index].author)) != nil else { continue }
            do {
                let record = try core.conversations.add([nodes[index].author], to: group, now: millis(now))
                membership[index] = ledger.add(record, author: 0, kind: .add, at: now)
                if lateJoiners.contains(index), readmitAt[index] == nil { coverage.lateJoins += 1 }
                readmitAt[index] = nil
                faultTrace.append("\(formatSeconds(now)) add \(nodes[index].name)")
                perform(0, core.published([record], now: now))
            } catch {
                refused["add: \(error)", default: 0] += 1
            }
        }
    }

    /// Churn: the creator removes a random member; the membership probe adds it back 1–2 s later.
    func churnRemove() {
        guard phase == .workload else { return }
        push(.churnRemove, at: now + uniform(.seconds(2), .seconds(4)))
        guard let group, let core = nodes[0].core else { return }
        let members = nodes.indices.filter { $0 != 0 && membership[$0] != nil }
        guard !members.isEmpty else { return }
        let victim = members[Int.random(in: 0..<members.count, using: &rng)]
        do {
            let record = try core.conversations.remove([nodes[victim].author], from: group, now: millis(now))
            removed[victim] = ledger.add(record, author: 0, kind: .remove, at: now)
            membership[victim] = nil
            readmitAt[victim] = now + uniform(.seconds(1), .seconds(2))
            faultTrace.append("\(formatSeconds(now)) remove \(nodes[victim].name)")
            perform(0, core.published([record], now: now))
        } catch {
            refused["remove: \(error)", default: 0] += 1
            return
        }
        raceRemoval(of: victim)
    }

    /// The member just removed writes a message at the same moment, before it can know: a removal raced by a
    /// message of its member (the rules retract the message everywhere, strong removal).
    private func raceRemoval(of victim: Int) {
        guard let group, let core = nodes[victim].core else { return }
        do {
            let record = try core.conversations.send(
                "raced by its removal, from \(nodes[victim].name)", in: group, now: millis(now))
            ledger.add(record, author: victim, kind: .raced, at: now)
            coverage.racedRemovals += 1
            perform(victim, core.published([record], now: now))
        } catch {
            refused["raced: \(error)", default: 0] += 1
        }
    }

    /// The end of the workload: every fault ends, crashed nodes that restart do so now, and the run waits for
    /// convergence.
    func heal() {
        phase = .settle
        faultsActive = false
        healAt = now
        stopTwins()
        if let activePartition, partitionSide != nil { partitionEnd(activePartition) }
        for node in nodes where node.phase == .crashed { restart(node.index) }
        for connection in connections.values {
            for side in 0..<2 { connection.directions[side].stalledUntil = .zero }
        }
        // What must reach every live node: each record a live node holds, but one beyond a fork (never applied).
        let live = nodes.filter(\.isUp).map(\.index)
        pendingCopies = 0
        forgetForksThatStayedHome(live: live)
        coverage.forks = ledger.forks.count
        for position in 0..<ledger.count {
            let entry = ledger[position]
            let held = live.contains { entry.appliedAt[$0] != nil } && !ledger.isBeyondFork(position)
            ledger.setMustReach(position, held)
            if held { pendingCopies += live.filter { entry.appliedAt[$0] == nil }.count }
        }
        if pendingCopies == 0 { settled() }
    }

    /// Every record that must reach every live node did. The run has converged once every live node knows every
    /// fork too: its evidence spreads like a record, but no applied event tells when it arrived.
    func settled() {
        if forksKnownEverywhere() {
            converged()
        } else {
            push(.forkProbe, at: now + LabLimits.setupProbeInterval)
        }
    }

    func forkProbe() {
        guard phase == .settle, pendingCopies == 0 else { return }
        settled()
    }

    /// A fork one of whose branches reached no live node never happened for the network, unless a live node learned
    /// of it (it holds the evidence): the twin's record is stranded with the twin, or the original's with an original
    /// that crashed for good, and the other branch's records are due everywhere as usual.
    private func forgetForksThatStayedHome(live: [Int]) {
        for (feed, _) in ledger.forks.sorted(by: { ($0.key.conversation, $0.key.author) < ($1.key.conversation, $1.key.author) }) {
            // `try?` (here, in `bothSpread` and in `forksKnownEverywhere`): a store that cannot be read counts as not
            // knowing the fork and not holding its branch, so the run keeps the fork in its checks rather than
            // passing over it.
            let known = live.contains { index in
                ((try? nodes[index].store.feeds(of: feed.conversation))?.first { $0.author == feed.author })?
                    .forkSequence != nil
            }
            let bothSpread = ledger.branches(of: feed).allSatisfy { position in
                live.contains { (try? nodes[$0].store.holds(ledger[position].ref)) == true }
            }
            if !known && !bothSpread { ledger.dropFork(feed) }
        }
    }

    /// Whether every live node's store has frozen each forked feed at its fork.
    private func forksKnownEverywhere() -> Bool {
        for (feed, fork) in ledger.forks {
            for node in nodes where node.isUp {
                let state = (try? node.store.feeds(of: feed.conversation))?.first { $0.author == feed.author }
                guard let known = state?.forkSequence, known <= fork else { return false }
            }
        }
        return true
    }

    func converged() {
        convergedAt = now
        overlayAtEnd = overlayShape()
        phase = .done
    }

    /// One missing copy, for the failure line.
    func missingExample() -> String {
        for position in 0..<ledger.count where ledger[position].mustReach {
            let entry = ledger[position]
            if let node = nodes.first(where: { $0.isUp && entry.appliedAt[$0.index] == nil }) {
                return "first: \(entry.kind) \(entry.id) by \(nodes[entry.author].name) missing on \(node.name)"
            }
        }
        return "none recorded"
    }
}
