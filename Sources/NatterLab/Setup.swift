import NatterModel
import NatterNode

/// Setup: the initial nodes start, exchange profiles, and the creator founds the group once it holds every profile;
/// the workload starts when every initial node applied it and the overlay is formed.
extension Simulation {
    // MARK: - Setup

    func setupProbe() {
        guard phase == .setup else { return }
        let creator = nodes[0]
        let initial = nodes[..<configuration.nodes].filter { !lateJoiners.contains($0.index) }
        if group == nil, let core = creator.core {
            let others = initial.dropFirst().map(\.author)
            // `try?`: a profile the store cannot read now counts as not held yet; setup waits and asks again, and a
            // setup that never completes is reported (`setupProblem`).
            let holdsAll = others.allSatisfy { (try? core.conversations.profile(of: $0)) != nil }
            if holdsAll {
                do {
                    let id = try core.conversations.createGroup(title: "lab", members: others, now: millis(now))
                    let records = try creator.store.appliedRecords(of: id)
                    group = id
                    for record in records {
                        createPosition = ledger.add(record, author: 0, kind: .create, at: now)
                    }
                    for node in initial { membership[node.index] = createPosition }
                    perform(0, core.published(records, now: now))
                } catch {
                    fail("the creator could not found the group: \(error)")
                    phase = .done
                    return
                }
            }
        }
        let formed = initial.allSatisfy { node in
            (node.core?.connectedPeers.count ?? 0) >= min(configuration.degreeTarget, initial.count - 1)
        }
        if let createPosition, initial.allSatisfy({ ledger[createPosition].appliedAt[$0.index] != nil }),
            formed || now >= LabLimits.overlayFormationMax
        {
            beginWorkload()
        } else {
            push(.setupProbe, at: now + LabLimits.setupProbeInterval)
        }
    }

    func setupProblem() -> String {
        guard let createPosition else {
            let core = nodes[0].core
            let missing = nodes[1..<configuration.nodes].filter { node in
                // `try?`: an unreadable profile is one the creator lacks, which is what this message reports.
                !lateJoiners.contains(node.index) && (try? core?.conversations.profile(of: node.author)) == nil
            }
            return "the creator lacks the profiles of \(missing.map(\.name).joined(separator: " "))"
        }
        let missing = nodes[..<configuration.nodes].filter {
            !lateJoiners.contains($0.index) && ledger[createPosition].appliedAt[$0.index] == nil
        }
        return "the group has not reached \(missing.map(\.name).joined(separator: " "))"
    }
}
