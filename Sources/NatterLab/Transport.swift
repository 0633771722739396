import NatterNode

/// The simulated network and the overlay the lab drives in place of the node's own (the core has none yet): each
/// node dials random known nodes while below `degreeTarget`, redials with backoff after a failure or a lost link,
/// now and then dials one more while below `degreeMax`, and refuses connections beyond `degreeMax`.
extension Simulation {
    // MARK: - Dialling

    func scheduleDialCheck(_ index: Int, after delay: Duration) {
        let node = nodes[index]
        let at = now + delay
        if let scheduled = node.dialCheckAt, scheduled <= at { return }
        node.dialCheckAt = at
        node.dialCheckGeneration += 1
        push(.dialCheck(index, incarnation: node.incarnation, generation: node.dialCheckGeneration), at: at)
    }

    /// A redial wait of the node's `RedialBackoff`, times a random factor in [0.5, 1): the lab's model of the timing
    /// noise of real hosts, so nodes that failed together (a partition's heal, a crash) do not redial in lockstep on
    /// the simulated clock. The backoff's growth is the node's own.
    func spread(_ wait: Duration) -> Duration {
        .nanoseconds(Int64(Double(nanoseconds(wait)) * (0.5 + unit() / 2)))
    }

    /// Nodes `index` may dial: every started node it holds no connection with (it cannot know who crashed), but a
    /// node with its own identity (a twin and its original never link: each would be the other's self).
    func dialCandidates(_ index: Int) -> [Int] {
        var linked = Set<Int>()
        for id in nodes[index].ends.values {
            if let connection = connections[id] { linked.formUnion(connection.nodes) }
        }
        let me = identityOf(index)
        return nodes.indices.filter {
            $0 != index && nodes[$0].phase != .waiting && !linked.contains($0) && identityOf($0) != me
        }
    }

    /// The node whose identity `index` runs (itself, or the original of a twin).
    func identityOf(_ index: Int) -> Int { twinOf[index] ?? index }

    func dialCheck(_ index: Int) {
        let node = nodes[index]
        guard node.isUp else { return }
        var deficit = configuration.degreeTarget - node.ends.count
        var candidates = dialCandidates(index)
        while deficit > 0, !candidates.isEmpty {
            let target = candidates.remove(at: Int.random(in: 0..<candidates.count, using: &rng))
            dial(index, target)
            deficit -= 1
        }
    }

    /// Every `exploreInterval` on average, a node below the cap dials one more random node; a node at the cap
    /// drops a random link one time in `rotationOdds`, so the graph keeps mixing and no group of full nodes stays
    /// cut off from the rest for good.
    func explore(_ index: Int) {
        let node = nodes[index]
        if node.ends.count < configuration.degreeMax {
            let candidates = dialCandidates(index)
            if !candidates.isEmpty { dial(index, candidates[Int.random(in: 0..<candidates.count, using: &rng)]) }
        } else if Int.random(in: 0..<LabLimits.rotationOdds, using: &rng) == 0 {
            let open = node.ends.keys.sorted().filter { link in
                !retiring.contains(node.ends[link]!)
                    && (connections[node.ends[link]!].map { $0.ends == [.open, .open] } ?? false)
            }
            // The node drops the link its dissemination trees use least (a random one of those), so the trees
            // lose as little as possible; a link still in its handshake is kept (a newcomer the rotation makes room for).
            let loads = open.map { node.core?.treeLoad(of: $0) ?? Int.max }
            let least = open.indices.filter { loads[$0] == loads.min() }.map { open[$0] }
            if !least.isEmpty {
                let link = least[Int.random(in: 0..<least.count, using: &rng)]
                let connection = connections[node.ends[link]!]!
                rotations += 1
                retiring.insert(connection.id)
                if let actions = node.core?.retire(link, now: now) {
                    // The node leaves the link gracefully: LEAVING, grafts elsewhere, the close a grace period later.
                    perform(index, actions)
                } else {
                    let side = Connection.side(of: link)
                    endConnection(connection, notify: [side: .zero, 1 - side: oneWay()])
                }
            }
        }
        scheduleExplore(index)
    }

    func scheduleExplore(_ index: Int) {
        let interval = LabLimits.exploreInterval
        push(.explore(index, incarnation: nodes[index].incarnation), at: now + uniform(interval / 2, interval * 3 / 2))
    }

    func dial(_ from: Int, _ to: Int) {
        let node = nodes[from]
        guard node.ends.count < configuration.degreeMax else { return }
        let connection = Connection(id: nextConnection, dialler: from, acceptor: to, at: now)
        nextConnection += 1
        connections[connection.id] = connection
        node.ends[connection.link(0)] = connection.id
        maxDegreeSeen = max(maxDegreeSeen, node.ends.count)
        push(.connectArrive(connection.id), at: now + oneWay())
        // Duplication as TCP knows it: the same dial twice, or the peer dialling back at the same moment.
        if faultsActive, duplicateDials > 0, unit() < duplicateDials {
            if unit() < 0.5 {
                if node.ends.count < configuration.degreeMax {
                    let again = Connection(id: nextConnection, dialler: from, acceptor: to, at: now)
                    nextConnection += 1
                    connections[again.id] = again
                    node.ends[again.link(0)] = again.id
                    push(.connectArrive(again.id), at: now + oneWay())
                }
            } else if nodes[to].isUp, nodes[to].ends.count < configuration.degreeMax {
                let back = Connection(id: nextConnection, dialler: to, acceptor: from, at: now)
                nextConnection += 1
                connections[back.id] = back
                nodes[to].ends[back.link(0)] = back.id
                push(.connectArrive(back.id), at: now + oneWay())
            }
        }
    }

    /// The SYN reaches the acceptor: refused (down, or at its cap), lost (partition), or accepted.
    func connectArrive(_ id: UInt64) {
        guard let connection = connections[id], connection.ends[0] == .dialling else { return }
        let (dialler, acceptor) = (connection.nodes[0], connection.nodes[1])
        if partitioned(dialler, acceptor) {
            push(.dialFailed(id), at: max(now, connection.dialledAt + LabLimits.connectTimeout))
            return
        }
        let node = nodes[acceptor]
        guard node.isUp, node.ends.count < configuration.degreeMax else {
            if node.isUp {
                dialsRefusedAtCap += 1
                connection.refusedAtCap = true
            }
            push(.dialFailed(id), at: now + oneWay())
            return
        }
        connection.ends[1] = .open
        connection.opened[1] = true
        node.ends[connection.link(1)] = id
        maxDegreeSeen = max(maxDegreeSeen, node.ends.count)
        push(.connectEstablished(id), at: now + oneWay())
        feed(acceptor, .linkOpened(connection.link(1), initiator: false))
    }

    func connectEstablished(_ id: UInt64) {
        guard let connection = connections[id], connection.ends[0] == .dialling else { return }
        connection.ends[0] = .open
        connection.opened[0] = true
        feed(connection.nodes[0], .linkOpened(connection.link(0), initiator: true))
        scheduleHead(connection, side: 1)
    }

    func dialFailed(_ id: UInt64) {
        guard let connection = connections[id], connection.ends[0] == .dialling else { return }
        connection.ends[0] = .gone
        let index = connection.nodes[0]
        nodes[index].ends[connection.link(0)] = nil
        if connection.isFinished { connections[id] = nil }
        if connection.refusedAtCap {
            // A full node is no failure of the network: try another one soon, without growing the backoff.
            if nodes[index].isUp { scheduleDialCheck(index, after: spread(nodes[index].backoff.min)) }
        } else {
            lostLink(index)
        }
    }

    /// A node lost a link or a dial: dial again after the backoff, which grows.
    func lostLink(_ index: Int) {
        let node = nodes[index]
        guard node.isUp else { return }
        let wait = node.backoff.delay
        node.backoff.attempted()
        scheduleDialCheck(index, after: spread(wait))
    }

    func partitioned(_ a: Int, _ b: Int) -> Bool {
        guard let side = partitionSide else { return false }
        return side[a] != side[b]
    }

    // MARK: - Bytes

    func send(_ index: Int, _ link: LinkID, _ bytes: [UInt8], kind: String) {
        guard let connection = connections[Connection.connection(of: link)] else { return }
        let side = Connection.side(of: link)
        guard connection.ends[side] == .open, connection.ends[1 - side] != .gone else { return }
        if faultsActive, resetRate > 0, unit() < resetRate {
            // Loss, as TCP + Noise sees it: the connection dies (a lost segment that never arrives ends in a
            // reset), never a missing chunk inside a stream.
            resetsInjected += 1
            noteFrame(
                index, connection.nodes[1 - side], kind: kind, bytes: bytes.count, sentAt: now,
                arrivesAt: now + configuration.latency, lost: true)
            endConnection(connection, notify: [side: .zero, 1 - side: oneWay()])
            return
        }
        var bytes = bytes
        if phase != .setup, let target = corruptChunk {
            chunksSinceWorkload += 1
            if chunksSinceWorkload == target, !bytes.isEmpty {
                bytes[bytes.count / 2] ^= 0x01  // a planted fault (CheckerTests): the lab never does this itself
            }
        }
        enqueue(connection, side: side, .data(bytes, kind: kind, sentAt: now))
    }

    func enqueue(_ connection: Connection, side: Int, _ chunk: Connection.Chunk) {
        let ready = max(connection.directions[side].lastReady, now + oneWay())
        connection.directions[side].lastReady = ready
        connection.directions[side].chunks.append((ready, chunk))
        scheduleHead(connection, side: side)
    }

    /// Schedules the delivery of the head chunk of direction `side`, unless one is scheduled already.
    func scheduleHead(_ connection: Connection, side: Int) {
        var direction = connection.directions[side]
        guard !direction.scheduled, !direction.isEmpty else { return }
        // The receiving end must be open (a dialler's end opens one way after the acceptor's).
        guard connection.ends[1 - side] != .dialling else { return }
        let at = max(now, direction.chunks[direction.head].ready, direction.stalledUntil)
        direction.scheduled = true
        connection.directions[side] = direction
        push(.deliver(connection.id, side: side), at: at)
    }

    func deliver(_ id: UInt64, side: Int) {
        guard let connection = connections[id] else { return }
        connection.directions[side].scheduled = false
        if connection.directions[side].stalledUntil > now {
            scheduleHead(connection, side: side)
            return
        }
        guard !connection.directions[side].isEmpty else { return }
        let chunk = connection.directions[side].popFirst()
        let receiver = 1 - side
        let index = connection.nodes[receiver]
        guard connection.ends[receiver] == .open else {
            connection.directions[side].clear()
            return
        }
        switch chunk {
        case .data(let bytes, let kind, let sentAt):
            noteFrame(
                connection.nodes[side], index, kind: kind, bytes: bytes.count, sentAt: sentAt, arrivesAt: now,
                lost: false)
            feed(index, .bytesReceived(connection.link(receiver), bytes))
        case .fin:
            connection.ends[receiver] = .gone
            nodes[index].ends[connection.link(receiver)] = nil
            if connection.isFinished { connections[id] = nil }
            feed(index, .linkClosed(connection.link(receiver)))
            lostLink(index)
        }
        if connections[id] != nil { scheduleHead(connection, side: side) }
    }

    /// The core closed a link: its end is released now, the peer sees the end after the data already sent.
    func close(_ index: Int, _ link: LinkID) {
        guard let connection = connections[Connection.connection(of: link)] else { return }
        let side = Connection.side(of: link)
        guard connection.ends[side] == .open else { return }
        connection.ends[side] = .gone
        nodes[index].ends[link] = nil
        // The core forgot the link already; telling it the link closed lets it drop what it keeps per link.
        push(.notify(index, incarnation: nodes[index].incarnation, link: link), at: now)
        switch connection.ends[1 - side] {
        case .open, .dialling:
            enqueue(connection, side: side, .fin)
        case .closing, .gone:
            break
        }
        if connection.isFinished { connections[connection.id] = nil }
        scheduleDialCheck(index, after: spread(nodes[index].backoff.min))
    }

    /// Ends a connection at once (reset, partition, crash): in-flight chunks are lost, and each listed side's
    /// node is told after the given delay.
    func endConnection(_ connection: Connection, notify: [Int: Duration]) {
        noteCut(connection)
        if sequence != nil {
            for side in 0..<2 {
                for (ready, chunk) in connection.directions[side].pending {
                    guard case .data(let bytes, let kind, let sentAt) = chunk else { continue }
                    noteFrame(
                        connection.nodes[side], connection.nodes[1 - side], kind: kind, bytes: bytes.count,
                        sentAt: sentAt, arrivesAt: ready, lost: true)
                }
            }
        }
        connection.directions[0].clear()
        connection.directions[1].clear()
        for side in 0..<2 {
            switch connection.ends[side] {
            case .open, .dialling:
                connection.ends[side] = .closing
                let index = connection.nodes[side]
                push(
                    .notify(index, incarnation: nodes[index].incarnation, link: connection.link(side)),
                    at: now + (notify[side] ?? .zero))
            case .closing, .gone:
                break
            }
        }
        if connection.isFinished { connections[connection.id] = nil }
    }

    /// A node learns that one of its connections ended.
    func notifyClosed(_ index: Int, _ link: LinkID) {
        let id = Connection.connection(of: link)
        let side = Connection.side(of: link)
        if let connection = connections[id] {
            guard connection.ends[side] == .closing else {
                // The node closed it itself: only its core needs telling.
                if connection.ends[side] == .gone { feed(index, .linkClosed(link)) }
                return
            }
            connection.ends[side] = .gone
            if connection.isFinished { connections[id] = nil }
            nodes[index].ends[link] = nil
            if connection.opened[side] { feed(index, .linkClosed(link)) }
            lostLink(index)
        } else {
            nodes[index].ends[link] = nil
            feed(index, .linkClosed(link))
        }
    }
}
