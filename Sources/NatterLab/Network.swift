import NatterNode

/// One simulated TCP connection: two ends, and per direction an ordered queue of chunks.
///
/// A connection is a reliable ordered byte stream, as TCP + Noise is: chunks are never dropped, duplicated or
/// reordered inside a direction. A chunk sent at `t` becomes ready at `max(previous ready time, t + latency +
/// jitter)`, and only the head of a direction is ever scheduled, so a stall (which holds the head) cannot reorder
/// anything either. Faults act on the whole connection: a reset ends both ends, and whatever was in flight is lost
/// with it, exactly as with a real RST.
final class Connection {
    /// What one end of the connection is, from its node's point of view.
    enum End: Equatable {
        /// The dialler before the connection is accepted.
        case dialling
        case open
        /// Ended by the network (reset, crash of the peer, FIN); the node has not been told yet.
        case closing
        case gone
    }

    enum Chunk {
        /// Bytes the sender's core sent, with the kind of message they carry (`SyncFrameKind` names, or
        /// "handshake" for handshake messages and goodbyes) and when.
        case data([UInt8], kind: String, sentAt: Duration)
        /// The sender closed its end: after the data before it, the receiver sees the connection end.
        case fin
    }

    struct Direction {
        var chunks: [(ready: Duration, chunk: Chunk)] = []
        var head = 0
        var lastReady = Duration.zero
        var stalledUntil = Duration.zero
        var scheduled = false

        var isEmpty: Bool { head == chunks.count }

        mutating func popFirst() -> Chunk {
            let chunk = chunks[head].chunk
            head += 1
            if head == chunks.count {
                chunks.removeAll(keepingCapacity: true)
                head = 0
            }
            return chunk
        }

        mutating func clear() {
            chunks.removeAll()
            head = 0
        }

        /// The chunks still to be delivered, oldest first.
        var pending: ArraySlice<(ready: Duration, chunk: Chunk)> { chunks[head...] }

        /// Whether a batch of records is still to be delivered.
        var carriesRecords: Bool {
            pending.contains { entry in
                if case .data(_, let kind, _) = entry.chunk { return kind == "records" || kind == "priority-records" }
                return false
            }
        }
    }

    let id: UInt64
    /// The dialler (side 0) and the acceptor (side 1).
    let nodes: [Int]
    let dialledAt: Duration
    /// Each side's end, and whether its node was ever told the link opened.
    var ends: [End] = [.dialling, .gone]
    var opened = [false, false]
    /// Direction `side` carries what `nodes[side]` sends.
    var directions = [Direction(), Direction()]
    /// The acceptor refused it because it was at its degree cap.
    var refusedAtCap = false

    init(id: UInt64, dialler: Int, acceptor: Int, at time: Duration) {
        self.id = id
        nodes = [dialler, acceptor]
        dialledAt = time
    }

    /// The link id the node on `side` knows this connection by (unique across the simulation).
    func link(_ side: Int) -> LinkID { LinkID(id * 2 + UInt64(side)) }

    static func side(of link: LinkID) -> Int { Int(link.raw & 1) }
    static func connection(of link: LinkID) -> UInt64 { link.raw / 2 }

    /// Whether no end is held by a node any more.
    var isFinished: Bool { ends.allSatisfy { $0 == .gone } }
}
