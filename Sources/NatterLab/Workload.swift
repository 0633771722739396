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
        let end = now + configuration.duration
        planFaults(end: end)
        push(.operation, at: now + nextArrival())
        if !lateJoiners.isEmpty || configuration.churn { push(.membershipProbe, at: now + .milliseconds(100)) }
        if configuration.churn { push(.churnRemove, at: now + uniform(.seconds(1), .seconds(3))) }
        push(.heal, at: end)
    }

    /// Schedules the faults: as configured, or drawn from the seed (`randomFaults`).
    private func planFaults(end: Duration) {
        let start = now
        var partitions = configuration.partitions
        var crashes = configuration.crashes
        var crashRestarts = configuration.crashRestarts
        var stalls = configuration.stalls
        resetRate = configuration.resetRate
        duplicateDials = configuration.duplicateDials
        let initial = nodes.indices.filter { !lateJoiners.contains($0) }
        if configuration.randomFaults {
            resetRate = unit() * 0.3
            duplicateDials = unit() * 0.3
            // Up to two partitions of at most 3 s each, one after the other, healed before the workload ends.
            partitions = []
            var earliest = Duration.zero
            for _ in 0..<Int.random(in: 0...2, using: &rng) {
                let latest = configuration.duration * 7 / 10
                guard earliest < latest else { break }
                let at = uniformMillis(earliest, latest)
                let longest = min(.seconds(3), configuration.duration - at)
                let window = LabWindow(start: at, length: uniformMillis(longest / 10, longest))
                partitions.append(window)
                earliest = window.start + window.length + .milliseconds(200)
            }
            crashRestarts = min(Int.random(in: 0...2, using: &rng), initial.count - 2)
            crashes = initial.count >= 4 && unit() < 0.2 ? 1 : 0
            stalls = Int.random(in: 0...3, using: &rng)
        }
        if resetRate > 0 || duplicateDials > 0 {
            faultTrace.append(
                "during the workload: \(String(format: "%.1f", resetRate * 100))% of chunks reset their link, "
                    + "\(String(format: "%.1f", duplicateDials * 100))% of dials duplicated")
        }
        plannedPartitions = partitions
        for (number, window) in partitions.enumerated() {
            push(.partitionStart(number), at: start + window.start)
            push(.partitionEnd(number), at: start + window.start + window.length)
        }
        var victims = initial.shuffled(using: &rng)
        for count in 0..<(crashes + crashRestarts) where !victims.isEmpty {
            let victim = victims.removeFirst()
            let at = start + uniformMillis(configuration.duration / 10, configuration.duration * 9 / 10)
            let restartAfter: Duration? = count < crashes ? nil : uniformMillis(.milliseconds(500), .seconds(3))
            push(.crash(victim, restartAfter: restartAfter), at: at)
        }
        for _ in 0..<stalls { push(.stall, at: start + uniformMillis(.zero, configuration.duration)) }
        for joiner in lateJoiners.sorted() {
            push(.start(joiner), at: start + uniformMillis(.zero, configuration.duration / 2))
        }
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
        } else if draw < configuration.reactionShare + configuration.receiptShare {
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
            let position = ledger.add(record.ref, author: author, kind: kind, at: now)
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
        for index in nodes.indices where nodes[index].isUp && membership[index] == nil {
            if let due = readmitAt[index], due > now { continue }
            guard (try? core.conversations.profile(of: nodes[index].author)) != nil else { continue }
            do {
                let record = try core.conversations.add([nodes[index].author], to: group, now: millis(now))
                membership[index] = ledger.add(record.ref, author: 0, kind: .add, at: now)
                removed.remove(index)
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
            ledger.add(record.ref, author: 0, kind: .remove, at: now)
            membership[victim] = nil
            removed.insert(victim)
            readmitAt[victim] = now + uniform(.seconds(1), .seconds(2))
            faultTrace.append("\(formatSeconds(now)) remove \(nodes[victim].name)")
            perform(0, core.published([record], now: now))
        } catch {
            refused["remove: \(error)", default: 0] += 1
        }
    }

    // MARK: - Faults

    func partitionStart(_ number: Int) {
        var order = nodes.indices.shuffled(using: &rng)
        var side = [Int](repeating: 0, count: nodes.count)
        for index in order.prefix(nodes.count / 2) { side[index] = 1 }
        order.removeAll()
        partitionSide = side
        activePartition = number
        let window = plannedPartitions[number]
        partitionSpans.append(LabWindow(start: now, length: window.length))
        let names = nodes.indices.filter { side[$0] == 1 }.map { nodes[$0].name }
        faultTrace.append(
            "\(formatSeconds(now)) partition for \(formatDuration(window.length)): "
                + "{\(names.joined(separator: " "))} apart"
        )
        for id in connections.keys.sorted() {
            guard let connection = connections[id], partitioned(connection.nodes[0], connection.nodes[1]) else {
                continue
            }
            endConnection(connection, notify: [0: .zero, 1: .zero])
        }
    }

    func partitionEnd(_ number: Int) {
        guard let side = partitionSide, activePartition == number else { return }
        partitionSide = nil
        partitionHeals.append(now)
        if let last = partitionSpans.indices.last { partitionSpans[last].length = now - partitionSpans[last].start }
        faultTrace.append("\(formatSeconds(now)) partition healed")
        // Discovery: the other side's beacons are heard again, and every node with room dials one of them.
        for index in nodes.indices where nodes[index].isUp && nodes[index].ends.count < configuration.degreeMax {
            let across = dialCandidates(index).filter { side[$0] != side[index] }
            if !across.isEmpty { dial(index, across[Int.random(in: 0..<across.count, using: &rng)]) }
        }
    }

    func stall() {
        guard faultsActive else { return }
        let open = connections.keys.sorted().filter { connections[$0]!.ends == [.open, .open] }
        guard !open.isEmpty else { return }
        let connection = connections[open[Int.random(in: 0..<open.count, using: &rng)]]!
        let length = uniformMillis(.milliseconds(500), .seconds(4))
        faultTrace.append(
            "\(formatSeconds(now)) stall \(nodes[connection.nodes[0]].name)–\(nodes[connection.nodes[1]].name) "
                + "for \(formatDuration(length))")
        for side in 0..<2 {
            connection.directions[side].stalledUntil = max(connection.directions[side].stalledUntil, now + length)
        }
    }

    /// The end of the workload: every fault ends, crashed nodes that restart do so now, and the run waits for
    /// convergence.
    func heal() {
        phase = .settle
        faultsActive = false
        healAt = now
        if let activePartition, partitionSide != nil { partitionEnd(activePartition) }
        for node in nodes where node.phase == .crashed { restart(node.index) }
        for connection in connections.values {
            for side in 0..<2 { connection.directions[side].stalledUntil = .zero }
        }
        // What must reach every live node: each record a live node holds.
        let live = nodes.filter(\.isUp).map(\.index)
        pendingCopies = 0
        for position in 0..<ledger.count {
            let entry = ledger[position]
            let held = live.contains { entry.appliedAt[$0] != nil }
            ledger.setMustReach(position, held)
            if held { pendingCopies += live.filter { entry.appliedAt[$0] == nil }.count }
        }
        if pendingCopies == 0 { converged() }
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
