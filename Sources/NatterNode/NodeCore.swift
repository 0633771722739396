public import NatterCrypto
public import NatterModel
public import NatterStore
import NatterSync

/// A link between this node and a peer, named by whoever carries its bytes (a TCP connection, a simulated pipe).
public struct LinkID: Hashable, Comparable, Sendable, CustomStringConvertible {
    public let raw: UInt64
    public init(_ raw: UInt64) { self.raw = raw }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.raw < rhs.raw }
    public var description: String { "link \(raw)" }
}

/// What happens to a node: everything the transport and the clock tell it.
public enum NodeInput: Sendable {
    /// A connection is up; `initiator` when this node dialled it.
    case linkOpened(LinkID, initiator: Bool)
    case bytesReceived(LinkID, [UInt8])
    /// The connection ended (closed, reset, or cut).
    case linkClosed(LinkID)
    /// Time passed (the caller calls at `nextDeadline()` at the latest).
    case tick
}

/// What the node asks its driver to do, in order.
public enum NodeAction: Equatable, Sendable {
    case send(LinkID, [UInt8])
    case close(LinkID)
    case event(NodeEvent)
}

/// What the node reports upward (to the REPL, the lab, logs).
public enum NodeEvent: Equatable, Sendable {
    /// A link finished its handshake: the peer's identity is known.
    case peerUp(AuthorID, LinkID)
    case peerDown(AuthorID, LinkID)
    /// A link failed: handshake, channel or sync error (the peer is penalised for malformed input).
    case linkFailed(LinkID, String)
    /// The initial exchange with a peer completed in both directions.
    case caughtUp(AuthorID)
    /// Initial sync progress with a peer.
    case syncProgress(AuthorID, received: Int, expected: Int)
    /// Records became applied (from any link, or authored here).
    case applied([RecordID])
    /// A conversation's derived state changed (new or retracted lines).
    case conversationChanged(ConversationID, TimelineChanges)
    /// Something a person may want to know about the node itself (discovery, ports), one line.
    case notice(String)
}

/// Bounds and timings of a node, each with its reason.
public struct NodeConfiguration: Sendable {
    /// Records held while their feed has a gap (arrived ahead of a predecessor): enough for a few sync batches.
    public var causalBufferRecordsMax = 4_096
    /// A handshake that has not finished by then is abandoned (a half-open or hostile connection).
    public var handshakeTimeout: Duration = .seconds(5)
    /// Frames per direction between rekeys (tests lower it).
    public var rekeyIntervalFrames: UInt64 = NatterSync.Limits.rekeyIntervalFrames

    public init() {}
}

/// The node's deterministic core: the store, the conversation service, and one handshake / secure channel / sync
/// session per link. Inputs in, actions out; no sockets, clocks, tasks or system randomness inside (time arrives
/// as `now`, randomness through the injected generator). The production actor and the lab both drive this class.
///
/// Not thread-safe: one driver calls it at a time.
public final class NodeCore {
    public let store: RecordStore
    public let identity: LocalIdentity
    public let conversations: Conversations
    public let configuration: NodeConfiguration
    private let linkConfiguration: LinkConfiguration
    private var random: any RandomNumberGenerator
    private var links: [LinkID: Link] = [:]
    private var roles: [LinkID: LinkHandshake.Role] = [:]
    /// Records waiting for a predecessor in their feed, per feed and sequence.
    private var causalBuffer: [FeedKey: [UInt64: [UInt8]]] = [:]
    private var bufferedCount = 0

    private enum Link {
        case handshaking(LinkHandshake, openedAt: Duration)
        case established(Established)
    }

    private struct Established {
        let peer: AuthorID
        /// Who dialled this link: decides which link survives when both sides dialled at once.
        let initiatedBy: AuthorID
        var channel: SecureChannel
        var session: SyncSession<StoreRecordSource>
    }

    public init(
        store: RecordStore, identity: LocalIdentity, networkKey: NetworkKey,
        configuration: NodeConfiguration = NodeConfiguration(), random: any RandomNumberGenerator
    ) {
        self.store = store
        self.identity = identity
        self.configuration = configuration
        self.random = random
        conversations = Conversations(store: store, identity: identity)
        // A fresh Noise static key per run: it is bound to the identity by a signature in every handshake.
        var generator = random
        let staticKey = NoiseKeyPair.generate(using: &generator)
        self.random = generator
        linkConfiguration = LinkConfiguration(
            identity: identity.signing, staticKey: staticKey, networkKey: networkKey,
            rekeyIntervalFrames: configuration.rekeyIntervalFrames)
    }

    /// Peers with an established link, and the link.
    public var connectedPeers: [AuthorID: LinkID] {
        var peers = [AuthorID: LinkID]()
        for (id, link) in links {
            if case .established(let established) = link { peers[established.peer] = id }
        }
        return peers
    }

    /// Records currently held in the causal buffer (bounded by `configuration.causalBufferRecordsMax`).
    public var causalBufferCount: Int { bufferedCount }

    /// Records the sessions delivered to this core since it started, and those among them that were new to the
    /// store (stored at once or later from the causal buffer): the difference is redundant copies (the lab's
    /// gossip-efficiency figures).
    public private(set) var recordsDelivered = 0
    public private(set) var recordsNew = 0

    // MARK: - Inputs

    public func handle(_ input: NodeInput, now: Duration) -> [NodeAction] {
        switch input {
        case .linkOpened(let id, let initiator):
            var generator = random
            let ephemeral = NoiseKeyPair.generate(using: &generator)
            random = generator
            var handshake = LinkHandshake(
                role: initiator ? .initiator : .responder, configuration: linkConfiguration, ephemeralKey: ephemeral)
            let actions = handshake.start()  // the responder's start sends nothing: it waits for message 1
            links[id] = .handshaking(handshake, openedAt: now)
            roles[id] = handshake.role
            return handshakeActions(id, actions, now: now)
        case .bytesReceived(let id, let bytes):
            return receive(id, bytes, now: now)
        case .linkClosed(let id):
            roles[id] = nil
            guard let link = links.removeValue(forKey: id) else { return [] }
            if case .established(let established) = link { return [.event(.peerDown(established.peer, id))] }
            return []
        case .tick:
            return tick(now: now)
        }
    }

    /// When `.tick` next has work (session timers, handshake timeouts).
    public func nextDeadline() -> Duration? {
        var deadlines = [Duration]()
        for link in links.values {
            switch link {
            case .handshaking(_, let openedAt): deadlines.append(openedAt + configuration.handshakeTimeout)
            case .established(let established):
                if let deadline = established.session.nextDeadline() { deadlines.append(deadline) }
            }
        }
        return deadlines.min()
    }

    // MARK: - Authoring

    /// Pushes records this node wrote (through `conversations`) to every peer, and reports what changed. Call
    /// after each authoring call.
    public func published(_ records: [Record], now: Duration) -> [NodeAction] {
        var actions = storedLocally(records.map { StoredRecord($0) }, except: nil, now: now)
        actions += refreshConversations()
        return actions
    }

    // MARK: - Links

    private func receive(_ id: LinkID, _ bytes: [UInt8], now: Duration) -> [NodeAction] {
        switch links[id] {
        case nil:
            return []
        case .handshaking(var handshake, let openedAt):
            let actions = handshake.receive(bytes)
            links[id] = .handshaking(handshake, openedAt: openedAt)
            return handshakeActions(id, actions, now: now)
        case .established(var established):
            let events = established.channel.receive(bytes)
            links[id] = .established(established)
            return channelEvents(id, events, now: now)
        }
    }

    private func handshakeActions(_ id: LinkID, _ actions: [LinkHandshake.Action], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            switch action {
            case .send(let bytes):
                out.append(.send(id, bytes))
            case .fail(let error):
                links[id] = nil
                out += [.event(.linkFailed(id, "handshake: \(error)")), .close(id)]
                return out
            case .established(let done):
                let peer = AuthorID(done.peer)
                if peer == identity.author {
                    links[id] = nil
                    return out + [.event(.linkFailed(id, "connected to itself")), .close(id)]
                }
                // One link per peer. When both dialled, both ends keep the link dialled by the smaller identity
                // (a redial by the same side replaces the old link, which is probably dead).
                let initiatedBy = roles[id] == .initiator ? identity.author : peer
                if let existingID = connectedPeers[peer], case .established(let existing) = links[existingID] {
                    let keepNew = initiatedBy == existing.initiatedBy || initiatedBy < existing.initiatedBy
                    if !keepNew {
                        links[id] = nil
                        return out + [.close(id)]
                    }
                    links[existingID] = nil
                    out += [.event(.peerDown(peer, existingID)), .close(existingID)]
                }
                out += establish(id, done, peer, initiatedBy: initiatedBy, now: now)
            }
        }
        return out
    }

    private func establish(
        _ id: LinkID, _ done: LinkEstablished, _ peer: AuthorID, initiatedBy: AuthorID, now: Duration
    ) -> [NodeAction] {
        var session = SyncSession(source: StoreRecordSource(store: store))
        let start = session.start(now: now)
        links[id] = .established(
            Established(peer: peer, initiatedBy: initiatedBy, channel: done.channel, session: session))
        var out: [NodeAction] = [.event(.peerUp(peer, id))]
        out += syncActions(id, start, now: now)
        if !done.unreadBytes.isEmpty { out += receive(id, done.unreadBytes, now: now) }
        return out
    }

    private func channelEvents(_ id: LinkID, _ events: [SecureChannel.Event], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for event in events {
            guard case .established(var established) = links[id] else { break }
            switch event {
            case .message(let message):
                let actions = established.session.receive(message: message, now: now)
                links[id] = .established(established)
                out += syncActions(id, actions, now: now)
            case .goodbye:
                links[id] = nil
                out += [.event(.peerDown(established.peer, id)), .close(id)]
            case .failed(let error):
                links[id] = nil
                out += [
                    .event(.linkFailed(id, "channel: \(error)")), .event(.peerDown(established.peer, id)), .close(id),
                ]
            }
        }
        return out
    }

    /// Executes a session's actions in order (the session's contract: after `deliver`, report `ingested` and then
    /// what was stored, before anything else).
    private func syncActions(_ id: LinkID, _ actions: [SyncAction], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            guard case .established(var established) = links[id] else { break }
            switch action {
            case .send(let message):
                do {
                    let bytes = try established.channel.send(message)
                    links[id] = .established(established)
                    out.append(.send(id, bytes))
                } catch {
                    links[id] = nil
                    return out + [.event(.linkFailed(id, "send: \(error)")), .close(id)]
                }
            case .deliver(let records):
                out += ingest(records, from: id, now: now)
            case .caughtUp:
                out.append(.event(.caughtUp(established.peer)))
            case .progress(let received, let expected):
                out.append(.event(.syncProgress(established.peer, received: received, expected: expected)))
            case .close(let error):
                links[id] = nil
                if let goodbye = try? established.channel.sendGoodbye() { out.append(.send(id, goodbye)) }
                out += [.event(.linkFailed(id, "sync: \(error)")), .event(.peerDown(established.peer, id)), .close(id)]
            }
        }
        return out
    }

    // MARK: - Ingest

    /// Ingests records delivered by a link's session, replays buffered successors, reports outcomes to that
    /// session and pushes what was stored to every other session.
    private func ingest(_ records: [[UInt8]], from id: LinkID, now: Duration) -> [NodeAction] {
        let report: IngestReport
        do {
            report = try store.ingest(records, receivedAtMillis: Int64(now.components.seconds * 1_000))
        } catch {
            return [.event(.linkFailed(id, "store: \(error)"))]
        }
        var stored = [StoredRecord]()
        var out = [NodeAction]()
        recordsDelivered += records.count
        for (bytes, outcome) in zip(records, report.outcomes) {
            if case .stored = outcome { recordsNew += 1 }
            switch outcome {
            case .stored, .forkEvidence:
                if let record = try? Record.decode(bytes) {
                    let isEvidence = if case .forkEvidence = outcome { true } else { false }
                    stored.append(StoredRecord(record, isForkEvidence: isEvidence))
                }
            case .outOfOrder(_, let missingFrom):
                if let record = try? Record.decode(bytes) { buffer(record, missingFrom: missingFrom) }
            case .duplicate, .rejected:
                break
            }
        }
        if case .established(var established) = links[id] {
            let actions = established.session.ingested(report.outcomes.map(SyncIngestOutcome.init), now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        let drained = drainCausalBuffer()
        recordsNew += drained.stored.count
        stored += drained.stored
        out += storedLocally(stored, except: nil, now: now)
        let applied = report.applied + drained.applied
        if !applied.isEmpty { out.append(.event(.applied(applied))) }
        out += refreshConversations()
        return out
    }

    private func buffer(_ record: Record, missingFrom: UInt64) {
        let feed = FeedKey(conversation: record.header.conversation, author: record.header.author)
        guard causalBuffer[feed]?[record.header.sequence] == nil else { return }
        guard bufferedCount < configuration.causalBufferRecordsMax else { return }  // anti-entropy fetches it later
        causalBuffer[feed, default: [:]][record.header.sequence] = record.bytes
        bufferedCount += 1
    }

    /// Ingests buffered records whose predecessors have arrived; returns what was stored and what became applied.
    private func drainCausalBuffer() -> (stored: [StoredRecord], applied: [RecordID]) {
        var stored = [StoredRecord]()
        var applied = [RecordID]()
        var progress = true
        while progress && bufferedCount > 0 {
            progress = false
            for feed in causalBuffer.keys.sorted() {
                guard let state = try? store.feeds(of: feed.conversation).first(where: { $0.author == feed.author })
                else { continue }
                let next = state.stored + 1
                // Drop what the feed already holds.
                for sequence in causalBuffer[feed]!.keys where sequence < next {
                    causalBuffer[feed]![sequence] = nil
                    bufferedCount -= 1
                }
                guard let bytes = causalBuffer[feed]?[next] else { continue }
                causalBuffer[feed]![next] = nil
                bufferedCount -= 1
                if let report = try? store.ingest([bytes], receivedAtMillis: 0), case .stored = report.outcomes[0],
                    let record = try? Record.decode(bytes)
                {
                    stored.append(StoredRecord(record))
                    applied += report.applied
                    progress = true
                }
            }
            causalBuffer = causalBuffer.filter { !$0.value.isEmpty }
        }
        return (stored, applied)
    }

    /// Tells every session (but `except`) what the node stored, so they push it to their peers.
    private func storedLocally(_ records: [StoredRecord], except: LinkID?, now: Duration) -> [NodeAction] {
        guard !records.isEmpty else { return [] }
        var out = [NodeAction]()
        for id in links.keys.sorted() where id != except {
            guard case .established(var established) = links[id] else { continue }
            let actions = established.session.localRecordsStored(records, now: now)
            links[id] = .established(established)
            out += syncActions(id, actions, now: now)
        }
        return out
    }

    private func refreshConversations() -> [NodeAction] {
        guard let changes = try? conversations.refreshChanged() else { return [] }
        return changes.keys.sorted().compactMap { conversation in
            let change = changes[conversation]!
            return change.added.isEmpty && change.retracted.isEmpty
                ? nil : .event(.conversationChanged(conversation, change))
        }
    }

    // MARK: - Time

    private func tick(now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for id in links.keys.sorted() {
            switch links[id] {
            case .handshaking(_, let openedAt) where now >= openedAt + configuration.handshakeTimeout:
                links[id] = nil
                out += [.event(.linkFailed(id, "handshake timed out")), .close(id)]
            case .established(var established):
                let actions = established.session.tick(now: now)
                links[id] = .established(established)
                out += syncActions(id, actions, now: now)
            default:
                break
            }
        }
        return out
    }
}
