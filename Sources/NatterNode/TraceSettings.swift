public import NatterModel

/// A core's configuration as a trace header's named settings, and back: a replay runs the core as the node ran it.
/// Durations are nanoseconds, rates the bits of their `Double`, `nil` is -1.
public enum TraceSettings {
    private typealias Field = (
        name: String, read: @Sendable (NodeConfiguration) -> Int64,
        write: @Sendable (inout NodeConfiguration, Int64) -> Void
    )

    private static func duration(_ value: Duration) -> Int64 { value.nanosecondsClamped }
    private static func rate(_ value: Double) -> Int64 { Int64(bitPattern: value.bitPattern) }
    private static func rate(_ value: Int64) -> Double { Double(bitPattern: UInt64(bitPattern: value)) }

    private static let fields: [Field] = [
        ("handshake-timeout", { duration($0.handshakeTimeout) }, { $0.handshakeTimeout = .nanoseconds($1) }),
        ("rekey-interval-frames", { Int64($0.rekeyIntervalFrames) }, { $0.rekeyIntervalFrames = UInt64($1) }),
        ("clock-origin-ms", { $0.clockOriginMillis }, { $0.clockOriginMillis = $1 }),
        (
            "refresh-delay", { $0.conversationRefreshDelay.map(duration) ?? -1 },
            { $0.conversationRefreshDelay = $1 < 0 ? nil : .nanoseconds($1) }
        ),
        ("push-interval", { duration($0.syncPushInterval) }, { $0.syncPushInterval = .nanoseconds($1) }),
        (
            "ingest-deferred", { $0.ingestDurability == .deferred ? 1 : 0 },
            { $0.ingestDurability = $1 == 1 ? .deferred : .synced }
        ),
        ("causal-records-max", { Int64($0.causalBuffer.recordsMax) }, { $0.causalBuffer.recordsMax = Int($1) }),
        ("causal-bytes-max", { Int64($0.causalBuffer.bytesMax) }, { $0.causalBuffer.bytesMax = Int($1) }),
        (
            "causal-peer-share-divisor", { Int64($0.causalBuffer.peerShareDivisor) },
            { $0.causalBuffer.peerShareDivisor = Int($1) }
        ),
        ("causal-age", { duration($0.causalBuffer.age) }, { $0.causalBuffer.age = .nanoseconds($1) }),
        (
            "peer-records-rate", { rate($0.quotas.peerRecordsPerSecond) },
            { $0.quotas.peerRecordsPerSecond = rate($1) }
        ),
        ("peer-records-burst", { Int64($0.quotas.peerRecordsBurst) }, { $0.quotas.peerRecordsBurst = Int($1) }),
        (
            "peer-priority-rate", { rate($0.quotas.peerPriorityRecordsPerSecond) },
            { $0.quotas.peerPriorityRecordsPerSecond = rate($1) }
        ),
        (
            "peer-priority-burst", { Int64($0.quotas.peerPriorityRecordsBurst) },
            { $0.quotas.peerPriorityRecordsBurst = Int($1) }
        ),
        (
            "author-records-rate", { rate($0.quotas.authorRecordsPerSecond) },
            { $0.quotas.authorRecordsPerSecond = rate($1) }
        ),
        ("author-records-burst", { Int64($0.quotas.authorRecordsBurst) }, { $0.quotas.authorRecordsBurst = Int($1) }),
        ("authors-tracked-max", { Int64($0.quotas.authorsTrackedMax) }, { $0.quotas.authorsTrackedMax = Int($1) }),
        (
            "relay-conversations-max", { Int64($0.quotas.relayConversationsMax) },
            { $0.quotas.relayConversationsMax = Int($1) }
        ),
        ("relay-bytes-max", { Int64($0.quotas.relayBytesMax) }, { $0.quotas.relayBytesMax = Int($1) }),
        (
            "evictions-remembered-max", { Int64($0.quotas.evictionsRememberedMax) },
            { $0.quotas.evictionsRememberedMax = Int($1) }
        ),
        ("eviction-memory", { duration($0.quotas.evictionMemory) }, { $0.quotas.evictionMemory = .nanoseconds($1) }),
        (
            "relay-check-interval", { duration($0.quotas.relayCheckInterval) },
            { $0.quotas.relayCheckInterval = .nanoseconds($1) }
        ),
        (
            "ingest-records-per-turn-max", { Int64($0.quotas.ingestRecordsPerTurnMax) },
            { $0.quotas.ingestRecordsPerTurnMax = Int($1) }
        ),
        ("receipts-enabled", { $0.receipts.enabled ? 1 : 0 }, { $0.receipts.enabled = $1 == 1 }),
        ("receipts-delay", { duration($0.receipts.delay) }, { $0.receipts.delay = .nanoseconds($1) }),
        ("receipts-interval", { duration($0.receipts.interval) }, { $0.receipts.interval = .nanoseconds($1) }),
        (
            "receipts-interval-per-member", { duration($0.receipts.intervalPerMember) },
            { $0.receipts.intervalPerMember = .nanoseconds($1) }
        ),
        (
            "receipts-interval-max", { duration($0.receipts.intervalMax) },
            { $0.receipts.intervalMax = .nanoseconds($1) }
        ),
        ("rekey-delay", { duration($0.receipts.rekeyDelay) }, { $0.receipts.rekeyDelay = .nanoseconds($1) }),
    ]

    /// The settings of `configuration`, in a fixed order.
    public static func settings(of configuration: NodeConfiguration) -> [(name: String, value: Int64)] {
        fields.map { ($0.name, $0.read(configuration)) }
    }

    /// The configuration the settings describe (unnamed fields keep their defaults); throws on a name this natter
    /// does not know, since the replay could not run the core as the node ran it.
    public static func configuration(_ settings: [(name: String, value: Int64)]) throws(TraceError)
        -> NodeConfiguration
    {
        var configuration = NodeConfiguration()
        for (name, value) in settings {
            guard let field = fields.first(where: { $0.name == name }) else {
                throw TraceError("the trace has a setting this natter does not know: \(name)")
            }
            field.write(&configuration, value)
        }
        return configuration
    }
}

/// Why a trace cannot be recorded or replayed, in words a person can act on.
public struct TraceError: Error, Equatable, Sendable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

extension Duration {
    /// Whole nanoseconds, clamped to `Int64` (a duration of centuries).
    var nanosecondsClamped: Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: 1_000_000_000)
        guard !overflow else { return seconds < 0 ? .min : .max }
        return scaled &+ attoseconds / 1_000_000_000
    }
}

extension NodeCore {
    /// The digests `/digest` prints and a trace ends with: the log's, and each conversation's this node is a member
    /// of (`NodeQueries.digests`), by conversation id (`/digest` lists them by last activity, which is local: the
    /// receive times of a replay's records held at start are not the node's).
    public func digests() throws -> TraceDigests {
        let (log, conversations) = try NodeQueries(conversations: self.conversations).digests()
        return TraceDigests(log: log, conversations: conversations.map { .init(id: $0.0, digest: $0.1) }).normalized
    }
}
