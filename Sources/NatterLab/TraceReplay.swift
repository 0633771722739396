public import NatterCrypto
public import NatterModel
import NatterNode
public import NatterStore

/// What a replay of a node's trace reached.
public struct TraceReplayReport: Sendable {
    /// Entries replayed (every one, or up to where the recorder stopped).
    public var entries: Int
    /// Whether the recorder stopped at its bound: the replay ends there and no digests of the node's end exist.
    public var truncated: Bool
    /// The digests the node recorded (as it stopped) and whether the replay reached the same.
    public var recorded: TraceDigests?
    /// Where the trace's last entry was cut short (its node died while writing it): what came before was replayed.
    public var cutAt: Int?
    /// The digests the replayed core reached at the end.
    public var digests: TraceDigests
    /// The first place the replay left the trace (the core drew or wrote what the node did not, or the digests
    /// differ); nil when it followed the trace to the end.
    public var divergence: String?

    /// Whether the replay reproduced the node: no divergence, and the recorded digests reached.
    public var reproduced: Bool { divergence == nil && (recorded == nil || recorded == digests) }

    /// What `natter lab replay` prints: `replay: N entries; …` (how the trace ends, and whether the digests are the
    /// node's), the divergence if any, then the digests as `/digest` prints them.
    public var lines: [String] {
        let ending =
            truncated
            ? "the recorder stopped at its bound there; no digests of the node's end to compare"
            : recorded == nil
                ? "the trace holds no digests of the node's end (it did not stop cleanly"
                    + (cutAt.map { "; its last entry is cut at byte \($0)" } ?? "") + ")"
                : recorded == digests ? "digests equal to the node's" : "digests DIFFER from the node's"
        return ["replay: \(entries) entries; \(ending)"] + (divergence.map { ["divergence: \($0)"] } ?? [])
            + ["log \(Hex.encode(digests.log))"]
            + digests.conversations.map { "conversation \($0.id.hex) \(Hex.encode($0.digest))" }
    }
}

/// Replays a node's core against its trace (NodeTrace.swift): a core made as the node made it — same identity,
/// network key and configuration, the same draws from its generator, on an in-memory store holding what the node's
/// store held at start (taken by reference from its data directory) — is given every call of the trace at its time.
/// Where the node's core authored, the replay's is answered with the records the node wrote (they cannot be
/// written again: their encryption drew randomness the trace does not hold). Deterministic: the same trace gives
/// the same digests every time.
public enum TraceReplay {
    /// Replays `trace` as the node with `identity` on the network of `networkKey`; `held` is the node's store (its
    /// data directory), which must hold the records the trace names by reference.
    public static func run(_ trace: [UInt8], identity: LocalIdentity, networkKey: NetworkKey, held: RecordStore)
        throws -> TraceReplayReport
    {
        let (header, entries, cutAt) = try TraceCodec.decodeCut(trace)
        guard header.node == identity.author else {
            throw TraceError(
                "the trace was recorded by \(header.node.publicKey.fingerprint), not by this data directory's "
                    + "identity \(identity.author.publicKey.fingerprint)")
        }
        var configuration = try TraceSettings.configuration(header.settings)
        configuration.clockOriginMillis = header.startMillis
        let store = try RecordStore.inMemory()
        let resolver = RecordResolver(held: held)
        _ = try store.ingest(
            try header.initialRecords.map { try resolver.record(.held($0)) }, receivedAtMillis: header.startMillis)
        guard try store.logDigest() == header.initialLogDigest else {
            throw TraceError(
                "the records of the data directory named by the trace do not give the log digest the node started "
                    + "from (\(Hex.encode(header.initialLogDigest).prefix(16))): not the node's data directory?")
        }
        let playback = TracePlayback(draws: header.initialDraws)
        // libsodium's randomness, should the core draw any, from a fixed seed: the replay stays deterministic.
        return try LabEntropy.bind(LabEntropy.Source(seed: 0x7ACE)) {
            let core = NodeCore(
                store: store, identity: identity, networkKey: networkKey, configuration: configuration,
                random: PlaybackGenerator(playback: playback))
            var divergence = playback.check(after: "making the core")
            try core.conversations.refreshChanged()
            core.writer = { intents, nowMillis in
                playback.write(intents.count) { record in
                    let record = try resolver.record(record)
                    _ = try store.ingest(
                        [record], receivedAtMillis: nowMillis, durability: configuration.ingestDurability)
                    return record
                }
            }
            var replayed = 0
            var truncated = false
            var recorded: TraceDigests?
            for (index, entry) in entries.enumerated() {
                if case .truncated = entry.call {
                    truncated = true
                    break
                }
                playback.begin(entry)
                let now = Duration.nanoseconds(entry.at)
                switch entry.call {
                case .digests(let digests):
                    recorded = digests.normalized
                    let reached = try core.digests()
                    if divergence == nil, let recorded, reached != recorded {
                        divergence = "entry \(index): " + difference(reached, recorded)
                    }
                default:
                    try replay(entry.call, core, store: store, resolver: resolver, now: now)
                }
                if store.hasDeferredCommits { try store.syncDeferred() }
                if divergence == nil {
                    divergence = playback.check(after: "entry \(index) (\(name(of: entry.call)) at \(entry.at) ns)")
                }
                replayed += 1
            }
            _ = core.refreshPending(now: .nanoseconds(entries.last?.at ?? 0))
            return TraceReplayReport(
                entries: replayed, truncated: truncated, recorded: recorded, cutAt: cutAt, digests: try core.digests(),
                divergence: divergence)
        }
    }

    /// Gives the core one call of the trace (what it answers is for the network, which the trace stands for).
    private static func replay(
        _ call: TraceCall, _ core: NodeCore, store: RecordStore, resolver: RecordResolver, now: Duration
    ) throws {
        switch call {
        case .linkOpened(let link, let initiator):
            _ = core.handle(.linkOpened(LinkID(link), initiator: initiator), now: now)
        case .received(let link, let bytes): _ = core.handle(.bytesReceived(LinkID(link), bytes), now: now)
        case .linkClosed(let link): _ = core.handle(.linkClosed(LinkID(link)), now: now)
        case .writable(let link, let writable): _ = core.handle(.linkWritable(LinkID(link), writable), now: now)
        case .tick: _ = core.handle(.tick, now: now)
        case .heard(let link): core.heard(LinkID(link), at: now)
        case .refresh: _ = core.refreshPending(now: now)
        case .refused(let peers): core.refusedPeers = Set(peers)
        case .published(let records):
            let records = try records.map(resolver.record)
            _ = try store.ingest(records, receivedAtMillis: core.configuration.clockOriginMillis + now.milliseconds)
            _ = core.published(records, now: now)
        case .author(let marks):
            // Only whether each intent marks read matters once the writes are given (`NodeCore.author`).
            let anywhere = ConversationID(raw: .zero)
            _ = core.author(marks.map { $0 ? .markRead(anywhere) : .markDelivered(anywhere) }, now: now)
        case .view(let conversation): _ = core.view(conversation, now: now)
        case .review: _ = core.reviewConversations(now: now)
        case .writePending: _ = core.writePending(now: now)
        case .closeAll: _ = core.closeAllLinks()
        case .retire(let link): _ = core.retire(LinkID(link), now: now)
        case .fetchFile(let message, let conversation):
            do {
                _ = try core.fetchFile(message, in: conversation, now: now)
            } catch {
                // The node's call failed the same way (the same store), and a failed fetch changes nothing.
            }
        case .cancelFetch(let message): _ = core.cancelFetch(message, now: now)
        case .typing(let conversation): _ = core.userTyping(in: conversation, now: now)
        case .stoppedTyping(let conversation): _ = core.userStoppedTyping(in: conversation, now: now)
        case .forceWrite:
            do {
                _ = try core.forceWrite(now: now)
            } catch {
                // As for a fetch: the node's store refused the same, and nothing changed.
            }
        case .digests, .truncated: break
        }
    }

    /// Where the digests reached differ from the node's, in a line.
    private static func difference(_ reached: TraceDigests, _ recorded: TraceDigests) -> String {
        if reached.log != recorded.log {
            return "the log digest is \(Hex.encode(reached.log).prefix(16)) here, "
                + "\(Hex.encode(recorded.log).prefix(16)) on the node"
        }
        let here = Dictionary(reached.conversations.map { ($0.id, $0.digest) }, uniquingKeysWith: { first, _ in first })
        let there = Dictionary(
            recorded.conversations.map { ($0.id, $0.digest) }, uniquingKeysWith: { first, _ in first })
        let differing = Set(here.keys).union(there.keys).sorted().filter { here[$0] != there[$0] }
        return "the log digests agree; conversations differ: "
            + differing.prefix(3).map { id in
                "\(id.shortHex) (\(here[id].map { Hex.encode($0).prefix(16) } ?? "absent") here, "
                    + "\(there[id].map { Hex.encode($0).prefix(16) } ?? "absent") on the node)"
            }.joined(separator: ", ")
    }

    private static func name(of call: TraceCall) -> String {
        String(describing: call).prefix { $0 != "(" }.description
    }
}

extension Duration {
    fileprivate var milliseconds: Int64 { components.seconds * 1_000 + components.attoseconds / 1_000_000_000_000_000 }
}

/// Records the trace names: decoded from their bytes, or read from the node's data directory by reference.
private struct RecordResolver {
    let held: RecordStore

    func record(_ record: TraceRecord) throws -> Record {
        switch record {
        case .bytes(let bytes): return try Record.decode(bytes)
        case .held(let ref):
            guard let record = try held.record(ref), record.id == ref.id else {
                throw TraceError(
                    "the data directory does not hold record \(ref.position) (\(ref.id.shortHex)), which the trace "
                        + "names: not the node's data directory, or the record was dropped since")
            }
            return record
        }
    }
}
