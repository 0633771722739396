internal import NatterModel

/// Every bound of the sync layer, each with its reason. Decoders check these before buffering or allocating.
public enum Limits {
    /// Largest Noise message: 65535 bytes, ciphertext and tag included. The Noise specification fixes it, and it
    /// is what a transport frame's u16 length prefix can express.
    public static let noiseMessageBytesMax = 65_535

    /// Largest plaintext in one transport frame: 65535 - 16 = 65519 bytes (one Noise message less its tag).
    public static let transportPlaintextBytesMax = noiseMessageBytesMax - 16

    /// Largest handshake message: 1024 bytes. Version 1's messages are at most 194 bytes; the slack lets a later
    /// version add fields to message 1 (which version 1 ignores) while a peer without the network key still cannot
    /// make a node buffer more than a kilobyte before it is refused.
    public static let handshakeMessageBytesMax = 1024

    /// Most protocol versions one node offers in handshake message 1: 16. A node supports a handful of adjacent
    /// versions during an upgrade; the bound keeps the list, and message 1, small.
    public static let versionsOfferedMax = 16

    /// Largest application message on a secure channel: 1 MiB. A sync batch holds many 64 KiB records, and the
    /// receiver buffers a whole message before handing it on, so the cap bounds that buffer; it is checked against
    /// the announced length before anything is allocated.
    public static let applicationMessageBytesMax = 1 << 20

    /// Transport frames per direction between rekeys: 2^16. Rekeying is one-way, so whoever steals a link's
    /// current keys (from a memory dump, say) reads nothing older than the last rekey. Both ends rekey after the same
    /// count of frames (the count is the implicit Noise nonce), so no signal is needed; at full 64 KiB frames that
    /// is one rekey per 4 GiB, and even at tiny frames a negligible cost.
    public static let rekeyIntervalFrames: UInt64 = 1 << 16

    // MARK: - Sync session (Sync/docs/protocol.md §3)

    /// Summary entries (conversation id and digest, 48 bytes each) per SUMMARY message: 8192, about 384 KiB, well
    /// inside `applicationMessageBytesMax`. A node with more conversations sends its summary in several parts.
    public static let syncSummaryEntriesPerMessageMax = 8192

    /// Conversation entries per HEADS message: 1024. Each costs 35 bytes before its feed heads; the bound keeps the
    /// fixed part of a message small and the per-message work of the receiver predictable.
    public static let syncHeadsConversationsPerMessageMax = 1024

    /// Feed heads (author, stored sequence, head id: 72 bytes each) per HEADS message: 8192, at most 576 KiB plus
    /// 35 KiB of conversation entries, inside `applicationMessageBytesMax`. A conversation with more feeds is sent
    /// in parts.
    public static let syncFeedHeadsPerMessageMax = 8192

    /// Records per RECORDS batch: 256. Enough that small records (a chat message is a few hundred bytes) travel
    /// in few messages, few enough that one batch is one modest store transaction on the receiving side.
    public static let syncBatchRecordsMax = 256

    /// Record bytes per RECORDS batch: 256 KiB. Four records of the largest size fit, so every record fits in a
    /// batch; with the window below it bounds what a receiver buffers for the store.
    public static let syncBatchBytesMax = 256 * 1024

    /// Batches a sender may have outstanding (sent, not yet returned as credit by the receiver after its store
    /// ingested them): 8. It is the initial credit of version 1, granted implicitly, and it bounds the receiver's
    /// pending deliveries to 8 batches (at most 2 MiB of records) while keeping a LAN link busy: a round trip of
    /// a millisecond carries 2 MiB.
    public static let syncWindowBatches = 8

    /// The receiver returns credit once it holds this many ingested batches' worth (half the window): one CREDIT
    /// message per four batches instead of one per batch, and the sender never stalls while the receiver is busy.
    public static let syncCreditReturnBatches = syncWindowBatches / 2

    /// The receiver also returns bulk credit alone once this many of the batches due were full (at least half the
    /// batch's record or byte cap): 2, one ingest turn's worth (`QuotaConfiguration.ingestRecordsPerTurnMax`). A
    /// catch-up streams full batches; with credit only after four, the sender's next batches arrived a whole turn
    /// after the receiver could have begun checking them, and the cores idled through every other turn
    /// (docs/performance.md, "Catch-up, 2026-11-26"). Live pushes are batches of a few records, so their credit
    /// still waits for four batches or rides on a batch going back. Receiver policy only: the sender adds credit up.
    public static let syncStreamCreditReturnBatches = 2

    /// Batches a sender may have outstanding on the priority lane (PRIORITY RECORDS, docs/protocol.md §3.7): 8,
    /// granted implicitly like `syncWindowBatches`. The lane carries live chat between neighbours, a few records a
    /// second, and each live push is a batch of its own: eight keep it moving while the bulk window is full of a
    /// flood, and let the lane's credit wait for a batch going the other way (`syncPriorityCreditReturnBatches`).
    /// With two batches the credit had to go alone after every batch, a frame per batch (the lab's
    /// 25 nodes: 28.6 messages per operation instead of 16.9) and stalled a third record for a round trip. What a
    /// receiver takes on this lane skips its per-link ingest queue, so it stays small (`syncPriorityBatchRecordsMax`)
    /// and the receiver's priority bucket bounds its rate: the lane must not be a second flood channel.
    public static let syncPriorityWindowBatches = 8

    /// The receiver returns priority credit on its next priority batch, or alone once this many ingested priority
    /// batches are due: half the priority window, so the sender never waits for it.
    public static let syncPriorityCreditReturnBatches = syncPriorityWindowBatches / 2

    /// Records per PRIORITY RECORDS batch: 32. A person types a few records a second and the lane's per-author rate
    /// is `syncPriorityAuthorRecordsPerSecond`, so 32 holds every burst of chat (8 split the lab's bursts and added
    /// a push interval per hop to its longest delivery); with the window it bounds what the receiver ingests ahead
    /// of its queue to 256 records per link, an eighth of the bulk window's.
    public static let syncPriorityBatchRecordsMax = 32

    /// Record bytes per PRIORITY RECORDS batch: 64 KiB, the largest record (`NatterModel.Limits.recordBytesMax`), so
    /// every record fits in a batch of its own, and the receiver buffers at most 512 KiB per link on this lane (the bulk
    /// lane: 2 MiB).
    public static let syncPriorityBatchBytesMax = NatterModel.Limits.recordBytesMax

    /// Records per second one author may send on one link's priority lane: 50. A person types a few a second (with
    /// receipts and typing-free edits, still under ten); an author above the rate is demoted to the bulk lane until
    /// its bucket refills, so a neighbour that floods under its own identity cannot take the lane.
    public static let syncPriorityAuthorRecordsPerSecond = 50.0

    /// Records one author may send on the priority lane at once before its rate applies: 200 (a burst of reactions,
    /// a pasted list, a conversation's commit with its first messages).
    public static let syncPriorityAuthorRecordsBurst = 200

    /// Longest a live push waits on a link: 40 ms. A record stored for the peer waits until it is this old, so the
    /// records stored meanwhile (one incoming batch fanned out, a busy group) share its frame, and a record the peer
    /// sends us meanwhile is not sent back; the next batch then waits at least as long after this one. Live push
    /// otherwise sends one frame per record per link. The wait is at most this much per hop, whatever the load;
    /// what a REQUEST asks for, the initial exchange and a batch after a full one are not held (catch-up and repair
    /// are not slowed). In the lab's 25-node, 100 ops/s setting 40 ms gives 16–17 frames per operation and a
    /// longest delivery of 3 hops × 140 ms; 50 ms put 4-hop tree paths at exactly 600 ms (docs/performance.md).
    public static let syncPushInterval: Duration = .milliseconds(40)

    /// A link's push interval is its handshake's duration divided by this, at most `syncPushInterval`. Holding a
    /// frame saves frames but costs latency; the cost matters only against the link's own delay. A handshake takes
    /// one to one and a half round trips (plus the key exchange's computation), so a quarter of it is at most about
    /// a third of a round trip: on a LAN or loopback (handshake ~1 ms) records go at once, on a 100 ms link (the
    /// lab's Maelstrom setting, handshake 200-300 ms) the full 50 ms applies.
    public static let syncPushIntervalHandshakeDivisor = 4

    /// Push intervals shorter than this are zero: 2 ms. Since a held record now waits until it is one interval old,
    /// a LAN or loopback link (handshake of a few ms) would hold every chat message a fraction of a millisecond for
    /// no saving worth having (its frames are cheap); links with a real delay (the lab's: 25-40 ms) are unaffected.
    public static let syncPushIntervalMin: Duration = .milliseconds(2)

    /// The push interval for a link whose handshake took `handshake`, at most `cap`; zero below
    /// `syncPushIntervalMin`.
    public static func syncPushInterval(upTo cap: Duration, handshake: Duration) -> Duration {
        let interval = max(.zero, min(cap, handshake / syncPushIntervalHandshakeDivisor))
        return interval < syncPushIntervalMin ? .zero : interval
    }

    /// Feeds per PRUNE message: 1024 (64 KiB of feed keys). A node prunes the feeds one incoming batch duplicated,
    /// rarely more than a few dozen at once; more go in several messages.
    public static let syncPruneFeedsPerMessageMax = 1024

    /// Feeds a session keeps pruned, in each direction: 16,384 (1 MiB of keys per direction). Pruning is an
    /// optimisation (docs/protocol.md §3.3, step 6): past the bound this side asks for no more prunes and honours
    /// no more of the peer's, so those feeds are pushed on every link as before, never lost.
    public static let syncPrunedFeedsMax = 16_384

    /// Feeds whose tree parent (the link that delivered their latest new record) a node remembers: 65,536 (a
    /// few MiB). A feed without a known parent is never pruned, so past the bound new feeds are simply flooded.
    public static let syncFeedParentsMax = 65_536

    /// How far a node may fall behind in a feed that other records depend on before it grafts the feed back on
    /// every link that pruned it: 3 records. A record depending on a feed's record s while the node holds less than
    /// s − 3 means the feed's tree no longer reaches it (its parent stopped receiving, say); a lag of one or two is
    /// records still on their way along the tree.
    public static let syncTreeLagMax: UInt64 = 3

    /// How long a node keeps a link it is leaving (LEAVING sent, docs/protocol.md §3.3 step 6) before it closes
    /// it: twice the link's handshake duration, i.e. two to four round trips. The peer needs one way for the
    /// LEAVING and a round trip for its grafts on other links to deliver; until then the leaving link still
    /// carries the records, so a deliberate close loses nothing in flight. On a LAN this is a few milliseconds.
    public static let syncLeaveGraceHandshakes = 2

    /// How long after grafting a feed back a node lets copies of it prune nothing: 1 s. The links answer a graft
    /// with the records the node lacks, all about one round trip later whatever their distance from the author, so
    /// the first answer says nothing about which link is fastest; for a second every grafted link pushes the feed,
    /// the first to bring each *new* record becomes the parent (at 4 records a second per feed, the lab's rate, a
    /// few live records race), and copies prune the others afterwards. A REROUTE is passed on once per window, so
    /// it never circles.
    public static let syncTreeRegraftRace: Duration = .seconds(1)

    /// How long after a link comes up its copies prune nothing: 1 s. Trees formed before the link existed may
    /// take a longer path than it offers, and what a new link brings first are copies of what the trees brought
    /// (records in flight while it came up), which say nothing about its speed: pruned at once, a new link would
    /// never carry a tree. For a second it races every feed, the first to bring each *new* record becomes its
    /// parent, and copies prune the slower links afterwards.
    public static let syncTreeNewLinkRace: Duration = .seconds(1)

    /// Feeds with a REQUEST in flight to the peer: 64. The node's causal buffer asks for missing ranges; more than
    /// this at once means the link is far behind, and anti-entropy repairs the rest. Further requests are dropped.
    public static let syncRequestsOutstandingMax = 64

    /// Bytes of records a session sends again, within one anti-entropy interval (`syncAntiEntropyInterval`), because
    /// the peer's REQUESTs asked for records it was sent or reported holding: 8 MiB. An honest node asks so when a
    /// record reached it first by another path while this link's copies were in flight — the range is then at most
    /// what is in flight, a window of each lane (`syncWindowBatches` × `syncBatchBytesMax` = 2 MiB, and the priority
    /// lane's) — or after losing records (its causal buffer gave them up), so it may ask often, but for little. Past
    /// the budget the link closes (`SyncError.excessiveRequests`, scored): a peer repeating REQUEST-from-1 would
    /// otherwise make this node read and send a whole feed without end (issue 19), and asking for one large record
    /// at a time costs it at most this much per interval. (The first rule, four REQUESTs per feed, counted asks,
    /// not bytes, and could close a link to an honest node whose feed's records kept racing on two paths.)
    public static let syncResentBytesMax = 8 << 20

    /// Feeds a session remembers the peer reporting that this node does not hold: 65,536 (about 6 MiB). Knowing
    /// them spares sending such a feed back when this node later gets it from another link; past the bound the
    /// session forgets new ones, and at worst sends records the peer already has. Feeds this node holds are
    /// remembered without this bound: their number follows the node's own log.
    public static let syncPeerFeedsTrackedMax = 65_536

    /// Fork-evidence records sent per feed and session: 16, the number of contradicting records a store keeps per
    /// feed (`StoreLimits.forkEvidencePerFeedMax`). The walk back to the first divergence of two branches stops
    /// there; a longer equivocation still freezes the feed, at a later point.
    public static let syncForkEvidencePerFeedMax = 16

    /// Fork-evidence records a session tracks (sent to or received from the peer), so each crosses the link at
    /// most once: 4096 ids (128 KiB). Beyond it the session stops relaying new evidence on this link.
    public static let syncEvidenceTrackedMax = 4096

    /// Time between anti-entropy rounds (a fresh SUMMARY): 30 s. Live push delivers new records at once; the
    /// rounds only repair what it missed, and an unchanged conversation costs 48 bytes per round.
    public static let syncAntiEntropyInterval: Duration = .seconds(30)

    /// Time without sending anything after which a session sends a PING: 2 s. With `syncSilenceTimeout` it lets
    /// the peer notice a dead link within a few seconds (DESIGN §5).
    public static let syncHeartbeatInterval: Duration = .seconds(2)

    /// Time without receiving anything after which the session closes the link as dead: 6 s, three heartbeat
    /// intervals, so one delayed ping on a busy LAN does not cut a healthy link.
    public static let syncSilenceTimeout: Duration = .seconds(6)
}
