import NatterModel
import NatterNode
import NatterStore

/// Driving the cores: inputs in, actions carried out, the bounds and the causal order of what they apply checked
/// as it happens.
extension Simulation {
    // MARK: - Feeding the cores

    /// Hands one input to a node's core and carries out its actions: one turn of the node's driver.
    func feed(_ index: Int, _ input: NodeInput) {
        guard let core = nodes[index].core else { return }
        let turn: RefreshPacing.Turn =
            switch input {
            case .tick: .tick
            case .bytesReceived(_, let bytes): .received(bytes: bytes.count)
            default: .received(bytes: 0)
            }
        perform(index, core.handle(input, now: now), turn: turn)
    }

    /// Carries out a turn's actions as the node actor does (`TurnPlan`): events, the durability sync, then the sends
    /// and closes; then brings the conversation tables up to date if `RefreshPacing` says so after this `turn` (the
    /// lab's own writes are `.local`), and checks the core's bounds and schedules its next tick.
    func perform(_ index: Int, _ actions: [NodeAction], turn: RefreshPacing.Turn = .local) {
        let node = nodes[index]
        var linkUp = carryOut(index, actions)
        if let core = node.core, core.isRefreshPending, configuration.refreshDelay == nil,
            node.pacing.refreshesNow(after: turn, stored: core.storedSinceRefresh, now: now)
        {
            node.pacing.refreshed(at: now)
            linkUp = carryOut(index, core.refreshPending(now: now)) || linkUp
        }
        guard let core = node.core else { return }
        if configuration.nodeReceipts { learnOwnWrites(index) }
        // Only a link coming up can raise the number of established peers.
        if linkUp {
            let peers = core.connectedPeers.count
            maxDegreeSeen = max(maxDegreeSeen, peers)
            if peers > configuration.degreeMax {
                fail("\(node.name) has \(peers) established peers, above the cap of \(configuration.degreeMax)")
            }
        }
        let buffered = core.causalBufferCount
        maxCausalBufferSeen = max(maxCausalBufferSeen, buffered)
        if buffered > core.configuration.causalBufferRecordsMax {
            fail(
                "\(node.name) buffers \(buffered) records, above its bound \(core.configuration.causalBufferRecordsMax)"
            )
        }
        breakAfterInput(index)
        scheduleTick(index)
    }

    /// Carries out actions in the turn's order (`TurnPlan.steps`); whether a link came up. The durability sync is
    /// instant (the store is in memory); sends after a sync the store refused would be a bug of the lab's store.
    private func carryOut(_ index: Int, _ actions: [NodeAction]) -> Bool {
        let node = nodes[index]
        var linkUp = false
        for step in TurnPlan.steps(actions) {
            turnObserver?(index, step)
            switch step {
            case .event(let event):
                if case .peerUp = event { linkUp = true }
                observe(index, event)
            case .makeDurable:
                guard let store = node.core?.store, store.hasDeferredCommits else { continue }
                do {
                    try store.syncDeferred()
                } catch {
                    fail("\(node.name): the store cannot make its commits durable: \(error)")
                }
            case .send(let link, let bytes):
                node.framesSent += 1
                if phase == .setup {
                    framesSetup += 1
                } else {
                    framesMeasured += 1
                    bytesMeasured += bytes.count
                    node.bytesSent += bytes.count
                }
                send(index, link, bytes, kind: kind(of: bytes, on: link))
            case .close(let link):
                close(index, link)
            }
        }
        sealed.removeAll(keepingCapacity: true)
        return linkUp
    }

    /// Enters in the ledger what node `index` wrote on its own in the group (its receipts and re-keys, chat setting):
    /// the records of its feed beyond those the ledger knows. A twin's are left out (they are a fork's branch).
    private func learnOwnWrites(_ index: Int) {
        guard index < configuration.nodes, let group else { return }
        let node = nodes[index]
        do {
            guard let feed = try node.store.feeds(of: group).first(where: { $0.author == node.author }) else { return }
            let known = ledger.highestSequence(conversation: group, author: node.author)
            guard feed.stored > known else { return }
            let written = try node.store.records(
                conversation: group, author: node.author, from: known + 1, limit: Int(feed.stored - known))
            for record in written {
                let position = ledger.add(
                    record, author: index, kind: record.header.kind == .commit ? .rekey : .receipt, at: now)
                // Written after the heal (the messages that settle brings call for receipts): due everywhere too.
                if phase == .settle {
                    ledger.setMustReach(position, true)
                    pendingCopies += nodes.filter { $0.isUp && ledger[position].appliedAt[$0.index] == nil }.count
                }
            }
        } catch {
            fail("\(node.name): store read failed: \(error)")
        }
    }

    /// The kind of message `bytes` carry: the core sealed them (`sealed`), or they are a handshake message or a
    /// goodbye, which the sessions do not seal.
    private func kind(of bytes: [UInt8], on link: LinkID) -> String {
        guard let index = sealed[link]?.firstIndex(where: { $0.bytes == bytes }) else { return "handshake" }
        return sealed[link]!.remove(at: index).kind
    }

    private func scheduleTick(_ index: Int) {
        let node = nodes[index]
        guard let core = node.core else { return }
        // A refresh bulk turns put off is due on a tick of its own (the node actor's tick comes at least every
        // `Node.tickIntervalMax` and catches it up then).
        let putOff = configuration.refreshDelay == nil ? node.pacing.deadline(pending: core.isRefreshPending) : nil
        guard let deadline = [core.nextDeadline(), putOff].compactMap({ $0 }).min() else { return }
        let at = max(deadline, now)
        if let scheduled = node.tickAt, scheduled <= at { return }
        if at == now {
            node.ticksAtSameInstant += 1
            precondition(node.ticksAtSameInstant < 1_000, "\(node.name) asks for a tick at the same instant forever")
        } else {
            node.ticksAtSameInstant = 0
        }
        node.tickAt = at
        node.tickGeneration += 1
        push(.tick(index, incarnation: node.incarnation, generation: node.tickGeneration), at: at)
    }

    private func observe(_ index: Int, _ event: NodeEvent) {
        switch event {
        case .peerUp(_, let link):
            nodes[index].backoff.reset()
            nodes[index].syncing.insert(link)
        case .caughtUp(let peer):
            if let link = nodes[index].core?.connectedPeers[peer] { nodes[index].syncing.remove(link) }
        case .peerDown(_, let link):
            nodes[index].syncing.remove(link)
        case .applied(let refs):
            for ref in refs { noteApplied(ref, by: index) }
        case .linkFailed(let link, let reason):
            // Timeouts are the network's doing; anything else means a core judged an honest peer faulty (a stream
            // the lab corrupted, or a core bug).
            if reason != "handshake timed out", !reason.hasPrefix("sync: nothing heard") {
                honestPeersBlamed += 1
                firstBlame = firstBlame ?? "\(formatSeconds(now)) \(nodes[index].name) \(link): \(reason)"
            }
        case .syncProgress, .conversation, .profile, .notice, .misbehaved, .file, .typing:
            break
        case .redundantLink:
            // The overlay dials only nodes it is not linked to; the link that stays was dialled by the other side.
            break
        }
    }

    func noteApplied(_ ref: RecordRef, by index: Int) {
        let node = nodes[index]
        node.appliedEvents += 1
        if node.appliedEvents % LabLimits.spotCheckEvery == 0 { spotCheck(ref, on: index) }
        guard let position = ledger.applied(ref.id, by: index, at: now) else { return }
        noteIfSlow(position, on: index)
        checkCausalOrder(position, on: index)
        breakOnApplied(position, by: index)
        if phase == .settle, ledger[position].mustReach, node.isUp {
            pendingCopies -= 1
            if pendingCopies == 0 { settled() }
        }
    }

    /// Notes the delivery of the ledger entry at `position` to node `index` if it took longer than the run's
    /// `--slow` threshold (measured from when its author applied it), with the path its feed's tree took.
    private func noteIfSlow(_ position: Int, on index: Int) {
        guard let threshold = configuration.slowThreshold, phase == .workload,
            slow.count < LabLimits.slowDeliveriesMax
        else { return }
        let entry = ledger[position]
        guard let written = entry.appliedAt[entry.author], now - written > threshold else { return }
        let (conversation, author) = (entry.ref.position.conversation, nodes[entry.author].author)
        var path = [index]
        while path.last != entry.author, path.count <= nodes.count,
            let parent = nodes[path.last!].core?.treeParent(conversation: conversation, author: author),
            let next = nodes.firstIndex(where: { $0.author == parent })
        {
            path.append(next)
        }
        slow.append(
            LabReport.SlowDelivery(
                kind: entry.kind, author: entry.author, receiver: index, at: now, took: now - written, path: path))
    }

    /// Causal delivery, checked for every record applied: each of its dependencies (its feed predecessor and its
    /// dependency clock, as the ledger knows them) was applied on that node before it. A dependency beyond a fork
    /// of its feed is exempt: the fork rule applies what depends on it up to the fork. Where a forgotten fork left
    /// two records at one position, either counts (`Ledger.forgottenBranch`).
    private func checkCausalOrder(_ position: Int, on index: Int) {
        let entry = ledger[position]
        for dependency in entry.dependencies where ledger[dependency].appliedAt[index] == nil {
            if ledger.isBeyondFork(dependency) { continue }
            if let other = ledger.forgottenBranch(of: dependency), ledger[other].appliedAt[index] != nil { continue }
            let before = ledger[dependency]
            causalViolations += 1
            firstCausalViolation =
                firstCausalViolation
                ?? "\(formatSeconds(now)) \(nodes[index].name) applied \(entry.kind) \(entry.id) of "
                + "\(nodes[entry.author].name) before its dependency, \(before.kind) \(before.id) of "
                + "\(nodes[before.author].name)"
        }
    }

    /// The store's guarantee, checked now and then: an applied record's feed predecessor and dependencies are
    /// applied too.
    private func spotCheck(_ ref: RecordRef, on index: Int) {
        let id = ref.id
        let store = nodes[index].store
        spotChecks += 1
        do {
            guard let record = try store.record(ref) else {
                fail("\(nodes[index].name) reported \(id) applied but does not hold it")
                return
            }
            let feeds = try store.feeds(of: record.header.conversation)
            func applied(_ author: AuthorID) -> UInt64 { feeds.first { $0.author == author }?.applied ?? 0 }
            if applied(record.header.author) < record.header.sequence {
                fail("\(nodes[index].name) reported \(id) applied beyond its feed's applied prefix")
            }
            for dependency in record.header.dependencies where applied(dependency.author) < dependency.sequence {
                // A dependency beyond a fork of its feed counts up to the fork (the fork rule).
                if let fork = feeds.first(where: { $0.author == dependency.author })?.forkSequence,
                    dependency.sequence >= fork
                {
                    continue
                }
                fail(
                    "\(nodes[index].name) applied \(id) before its dependency "
                        + "\(dependency.author)#\(dependency.sequence)"
                )
            }
        } catch {
            fail("\(nodes[index].name): store read failed: \(error)")
        }
    }
}
