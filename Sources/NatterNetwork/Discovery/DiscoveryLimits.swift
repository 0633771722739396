/// Every number discovery depends on, with its reason. (Kept apart from the module's other limits so that the TCP
/// transport and discovery can grow in parallel; the two may be folded into one `Limits` later.)
public enum DiscoveryLimits {
    // MARK: - Port and schedule

    /// The UDP discovery port: 7719. Unassigned by IANA; every node of every network shares it (beacons of other
    /// networks fail authentication), so one host can run several nodes on it with `SO_REUSEPORT`.
    public static let defaultPort = 7719

    /// Beacons in the burst sent at start and on every interface change: 3. One datagram may be lost, or arrive
    /// before a neighbour's socket is bound; three make first contact within about one beacon all but certain.
    public static let burstCount = 3

    /// Gap between burst beacons: 200 ms. Short enough that first contact stays well under a second, long enough to
    /// ride out a momentary loss or a neighbour's still-binding socket.
    public static let burstInterval: Duration = .milliseconds(200)

    /// Shortest gap between periodic beacons: 15 s. A node learns of newcomers from their own bursts, so the period
    /// only repairs lost bursts and healed partitions; 15–30 s keeps 100 nodes at about 4.5 beacons/s in all.
    public static let periodMin: Duration = .seconds(15)

    /// Longest gap between periodic beacons: 30 s. The period is drawn uniformly from `periodMin...periodMax` each time
    /// (in whole milliseconds) so that nodes started together drift apart instead of beaconing in lockstep.
    public static let periodMax: Duration = .seconds(30)

    // MARK: - Incoming beacons

    /// Beacons one source address may have in hand at once (a token bucket's capacity): 32. Several nodes on one host
    /// share a source address and each burst may arrive by a couple of paths; 32 lets five of them start together.
    public static let sourceBeaconBurstMax = 32

    /// One token returns to a source's bucket every 250 ms (4 beacons/s sustained), some 80 times what one node
    /// sends in its periodic phase; what exceeds it is dropped before decryption.
    public static let sourceBeaconRefillInterval: Duration = .milliseconds(250)

    /// Source addresses tracked by the rate limiter: 1024. When full, the idlest is forgotten (and so gets a full
    /// bucket again if it returns): spoofed sources can waste this table, but never block a real neighbour.
    public static let sourcesTrackedMax = 1024

    /// Nodes remembered from their beacons (tag, address, port): 256, more than any LAN swarm natter is built for.
    /// When full, the one heard from longest ago is evicted (preferring nodes not linked).
    public static let candidatesMax = 256

    /// A candidate not heard from for this long is forgotten: 90 s, three of the longest periods.
    public static let candidateLifetime: Duration = .seconds(90)

    /// Shortest gap between two dial requests for the same tag: 1 s. A burst arrives as several datagrams (and
    /// copies by several paths) within 400 ms; they make one dial. A failed dial is retried at the next beacon at
    /// least this much later.
    public static let dialIntervalMin: Duration = .seconds(1)

    /// A node that hears a node it did not know answers with one beacon of its own (broadcast like every beacon,
    /// never unicast) within this delay, drawn at random so a whole LAN does not answer at once: 200 ms. Without
    /// it, a newcomer whose socket was bound after its neighbours' start bursts would hear of them only at their
    /// next periodic beacon, 15–30 s later (they dial it, but it cannot dial them).
    public static let answerDelayMax: Duration = .milliseconds(200)

    /// Least time between two answers: 1 s, so a crowd of newcomers (or forged tags) costs at most one extra beacon
    /// per second.
    public static let answerIntervalMin: Duration = .seconds(1)

    /// Distinct (source, reason) rejections that are logged: 256. Each is logged once; past this, one line says that
    /// further rejections go unlogged, so a flood of spoofed sources cannot flood the log.
    public static let rejectionsLoggedMax = 256

    // MARK: - Dials (DialScheduler, DiscoveryDialer)

    /// Dials discovery runs at once: 16. A node dials a handful of new neighbours at a time, each connecting in
    /// milliseconds on a LAN; the cap bounds the sockets a beacon flood can make it open.
    public static let dialsInFlightMax = 16

    /// Dials to one source address at once: 1. Nodes behind one address (several on a host) are dialled one after
    /// the other, a millisecond each; forged beacons from few addresses hold few dials.
    public static let dialsInFlightPerSourceMax = 1

    /// Dials one source address may cause at once before its rate applies: 8 (a host starting several nodes at
    /// once); then one more every `dialsPerSourceRefillInterval`.
    public static let dialsPerSourceBurst = 8

    /// One dial token returns to a source every second: a LAN neighbour is dialled once per link; fresh tags from
    /// one address at beacon speed (4 a second, `sourceBeaconRefillInterval`) get a quarter of their dials.
    public static let dialsPerSourceRefillInterval: Duration = .seconds(1)

    /// After a dial that did not connect, its source is not dialled again for 2 s, doubling with each further
    /// failure up to `dialFailureBackoffMax` and forgotten at the first success: a beacon announcing a port that
    /// drops connections costs one dial per backoff, not one per beacon.
    public static let dialFailureBackoffMin: Duration = .seconds(2)

    /// The longest failure backoff: 60 s, so a neighbour that was down when first heard is dialled within a minute
    /// of coming back (its start burst, and other nodes' dials, usually come first).
    public static let dialFailureBackoffMax: Duration = .seconds(60)

    /// Requests waiting for a free dial, at most (one per source): 64. Past it the oldest waiting one is dropped; its
    /// node's next beacon asks again.
    public static let dialsQueuedMax = 64

    /// Source addresses the dial scheduler remembers: 1024. Past it the least recently used idle ones are forgotten
    /// (which only forgives them).
    public static let dialSourcesTrackedMax = 1024

    /// A discovery dial's connect timeout: 1 s. A LAN neighbour answers a connect in milliseconds; waiting longer only
    /// lets a beacon that announces a port dropping SYNs hold a dial (a named peer, possibly routed, gets the
    /// transport's 3 s).
    public static let dialConnectTimeout: Duration = .seconds(1)

    /// Source addresses and ports whose first new node is logged: 256. A node is logged when first heard, once per
    /// address and port (a restart on the same port is not news); fresh tags forged from one address are one line,
    /// and past the bound nothing more is logged, so a beacon flood cannot flood the log.
    public static let discoveriesLoggedMax = 256

    // MARK: - Driver

    /// How often the driver re-reads the interface list: 5 s. A new interface or address gets its own burst within
    /// this delay; reading the list (`getifaddrs`) costs microseconds.
    public static let interfacePollInterval: Duration = .seconds(5)

    /// Pause before rebinding after the discovery socket failed: 1 s, so a persistent failure cannot spin.
    public static let rebindDelay: Duration = .seconds(1)

    /// Dial requests held for a consumer that is not reading: 64 (the newest are kept). A node dials a handful of
    /// neighbours at a time; older requests would be stale by the time anyone read them.
    public static let dialRequestsBufferedMax = 64

    /// Log entries held for a consumer that is not reading: 256 (the newest are kept).
    public static let logsBufferedMax = 256
}
