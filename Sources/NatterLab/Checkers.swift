import NatterCrypto
import NatterModel
import NatterStore

/// The checkers that run on the final state, after the heal, and the metrics read from the same state.
///
/// During the run the simulator already checks the bounds (degree cap, causal buffer) after every input and spot
/// checks applied records; here the final state must show convergence: equal log digests on every live node, equal
/// conversation digests on every member, and every acknowledged record on every live node.
extension Simulation {
    func finalChecks() -> [String] {
        var found = [String]()
        if let firstBlame {
            found.append("links failed for something other than a timeout: \(honestPeersBlamed) (first: \(firstBlame))")
        }
        if let firstCausalViolation {
            found.append(
                "records applied before a dependency: \(causalViolations) (first: \(firstCausalViolation))")
        }
        let live = nodes.filter(\.isUp)
        // Equal log digests on every live node.
        var digests = [(node: SimNode, digest: [UInt8])]()
        for node in live {
            do {
                digests.append((node, try node.store.logDigest()))
            } catch {
                found.append("\(node.name): log digest failed: \(error)")
            }
        }
        found += disagreements(digests.map { ($0.node.name, $0.digest) }, what: "log digests")

        // Equal conversation digests among the members (as the creator's commits made them), each of which sees
        // itself as one; a removed member is locked out (it cannot read the commit that removed it, so its own
        // state cannot be compared). Of a node's latest add and latest removal, the later one that reached the
        // network decides: a change stranded on a creator that crashed for good (no live node holds it) never
        // happened for the network.
        if let group {
            var states = [(String, [UInt8])]()
            for node in live {
                guard let core = node.core else { continue }
                let added = membership[node.index].flatMap { reachedNetwork($0) ? $0 : nil }
                let removal = removed[node.index].flatMap { reachedNetwork($0) ? $0 : nil }
                do {
                    let snapshot = try core.conversations.snapshot(of: group)
                    if let added, added > removal ?? -1 {
                        states.append((node.name, try shownState(of: node.index, in: group).digest()))
                        if snapshot.state.members[node.author] == nil || snapshot.lockedOut {
                            found.append("\(node.name) should be a member of the group but its state says otherwise")
                        }
                    } else if let removal, removal > added ?? -1, !snapshot.lockedOut {
                        found.append("\(node.name) was removed from the group but is not locked out")
                    }
                } catch {
                    found.append("\(node.name): conversation snapshot failed: \(error)")
                }
            }
            found += disagreements(states, what: "conversation digests")
        }

        // No acknowledged record lost: what a live node holds (or a live author wrote) is on every live store.
        var lost = 0
        var example: String?
        for position in 0..<ledger.count {
            let entry = ledger[position]
            guard entry.mustReach || nodes[entry.author].isUp, !ledger.isBeyondFork(position) else { continue }
            // `try?`: a store that cannot be read counts as not holding the record, so the run fails with it as lost
            // rather than passing over it.
            for node in live where (try? node.store.holds(entry.ref)) != true {
                lost += 1
                example = example ?? "\(entry.kind) \(entry.id) by \(nodes[entry.author].name) missing on \(node.name)"
            }
        }
        if lost > 0 { found.append("\(lost) acknowledged record copies lost (first: \(example!))") }
        return found
    }

    /// Whether the network learned of the ledger entry at `position`: a live node holds it, or its author lives.
    private func reachedNetwork(_ position: Int) -> Bool {
        ledger[position].mustReach || nodes[ledger[position].author].isUp
    }

    /// Groups values and reports the nodes outside the largest group.
    private func disagreements(_ values: [(String, [UInt8])], what: String) -> [String] {
        var groups = [[UInt8]: [String]]()
        for (name, value) in values { groups[value, default: []].append(name) }
        guard groups.count > 1 else { return [] }
        let ordered = groups.sorted { ($0.value.count, Hex.encode($1.key)) > ($1.value.count, Hex.encode($0.key)) }
        let others = ordered.dropFirst().map { "{\($0.value.joined(separator: " ")): \(Hex.encode($0.key).prefix(8))}" }
        return [
            "\(what) differ: \(ordered[0].value.count) nodes agree on \(Hex.encode(ordered[0].key).prefix(8)), "
                + others.joined(separator: ", ")
        ]
    }

    // MARK: - Report

    func makeReport(extraFailures: [String]) -> LabReport {
        let live = nodes.filter(\.isUp)
        let operationPositions = (0..<ledger.count).filter { ledger[$0].kind.isOperation }
        var kinds = [OperationKind: Int]()
        for position in operationPositions { kinds[ledger[position].kind, default: 0] += 1 }

        var latencies = [Duration]()
        var undelivered = 0
        for position in operationPositions {
            let entry = ledger[position]
            // A stranded operation (its only holders crashed for good) cannot arrive anywhere.
            if healAt != nil, !entry.mustReach { continue }
            for node in live where node.index != entry.author {
                guard let started = node.startedAt, started <= entry.publishedAt else { continue }
                if let applied = entry.appliedAt[node.index] {
                    latencies.append(applied - entry.publishedAt)
                } else {
                    undelivered += 1
                }
            }
        }

        let partitionConvergence: [Duration?] = partitionHeals.map { heal in
            let recipients = live.filter { !$0.everCrashed && ($0.startedAt ?? heal) < heal }
            var latest = heal
            for position in 0..<ledger.count where ledger[position].mustReach && ledger[position].publishedAt < heal {
                for node in recipients {
                    guard let applied = ledger[position].appliedAt[node.index] else { return nil }
                    latest = max(latest, applied)
                }
            }
            return latest - heal
        }

        let measured = nodes.indices.map {
            nodes[$0].framesSent - (framesByNodeAtStart.isEmpty ? nodes[$0].framesSent : framesByNodeAtStart[$0])
        }
        let busiest = measured.indices.max { (measured[$0], $1) < (measured[$1], $0) } ?? 0
        let delivered = nodes.map(\.recordsDelivered).reduce(0, +) - deliveredAtStart
        let new = nodes.map(\.recordsNew).reduce(0, +) - newAtStart
        let operations = operationPositions.count
        let kindsNow = framesByKind()
        let framesByKind = kindsNow.keys.sorted().compactMap { kind -> LabReport.Count? in
            let count = kindsNow[kind]! - (framesByKindAtStart[kind] ?? 0)
            return count > 0 ? LabReport.Count(name: kind, count: count) : nil
        }
        var stranded = 0
        var frozen = 0
        for position in 0..<ledger.count where !ledger[position].mustReach {
            if ledger.isBeyondFork(position) {
                frozen += 1
            } else if !nodes[ledger[position].author].isUp {
                stranded += 1
            }
        }
        countRaces()

        let stride = max(
            1, (operationPositions.count + LabLimits.pictureOperationsMax - 1) / LabLimits.pictureOperationsMax)
        let spreads = Swift.stride(from: 0, to: operationPositions.count, by: stride).map { offset in
            let entry = ledger[operationPositions[offset]]
            return LabReport.Spread(
                kind: entry.kind.rawValue, publishedAt: entry.publishedAt,
                appliedAt: live.compactMap { entry.appliedAt[$0.index] }.sorted())
        }

        let first = live.first
        let digest = (try? first?.store.logDigest()).flatMap { $0 }.map(Hex.encode) ?? "-"
        let held = (try? first?.store.statistics().recordsHeld).flatMap { $0 } ?? 0

        return LabReport(
            configuration: configuration, failures: failures + extraFailures, faultTrace: faultTrace,
            workloadStart: workloadStart, healAt: healAt, endedAt: now, events: eventsProcessed,
            convergence: convergedAt.flatMap { at in healAt.map { at - $0 } },
            partitionConvergence: partitionConvergence,
            operations: kinds.keys.sorted().map { LabReport.Count(name: $0.rawValue, count: kinds[$0]!) },
            operationCount: operations,
            refused: refused.keys.sorted().map { LabReport.Count(name: $0, count: refused[$0]!) },
            frames: framesMeasured, bytes: bytesMeasured, setupFrames: framesSetup,
            framesPerOperation: operations > 0 ? Double(framesMeasured) / Double(operations) : 0,
            bytesPerOperation: operations > 0 ? Double(bytesMeasured) / Double(operations) : 0,
            framesByKind: framesByKind,
            recordsDelivered: delivered, recordsNew: new,
            redundancy: new > 0 ? Double(delivered - new) / Double(new) : 0,
            latency: LabReport.Quantiles(latencies), undelivered: undelivered,
            busiestNode: nodes[busiest].name,
            busiestShare: framesMeasured > 0 ? Double(measured[busiest]) / Double(framesMeasured) : 0,
            overlayAtStart: overlayAtStart, overlayAtEnd: overlayAtEnd ?? overlayShape(),
            liveNodes: live.count, deadNodes: nodes[..<configuration.nodes].filter { $0.phase == .dead }.count,
            stranded: stranded, frozenByForks: frozen,
            maxDegree: maxDegreeSeen, maxCausalBuffer: maxCausalBufferSeen, spotChecks: spotChecks,
            dialsRefusedAtCap: dialsRefusedAtCap, resetsInjected: resetsInjected,
            rotations: rotations,
            logDigest: digest, recordsHeld: held, spreads: spreads, partitionSpans: partitionSpans,
            crashTimes: crashTimes,
            nodes: configuration.nodes, coverage: coverage, plan: plan.materialized(configuration),
            sequence: sequence, slow: slow)
    }
}

extension Simulation {
    /// Every frame every node sent so far, by kind: the cores' application messages by type, and the rest of
    /// the frames (handshake messages, goodbyes) as "handshake".
    func framesByKind() -> [String: Int] {
        var kinds = [String: Int]()
        var application = 0
        for node in nodes {
            for (kind, count) in node.messagesByKind {
                kinds[kind, default: 0] += count
                application += count
            }
        }
        let others = nodes.map(\.framesSent).reduce(0, +) - application
        if others > 0 { kinds["handshake", default: 0] += others }
        return kinds
    }
}
