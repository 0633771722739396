import NatterCrypto
import NatterModel
import NatterNode
import NatterStore

/// One simulated node: its durable store (the "disk", which survives crashes) and, while it runs, a real
/// `NodeCore` over it.
final class SimNode {
    enum Phase: Equatable {
        /// A late joiner that has not started yet.
        case waiting
        case up
        /// Crashed; restarts later on the same store.
        case crashed
        /// Crashed for good.
        case dead
    }

    let index: Int
    let name: String
    let identity: LocalIdentity
    /// The node's store: committed records are durable across crashes, as on disk with `synchronous=FULL`. A twin's
    /// is replaced by a copy of its original's when the backup is taken.
    var store: RecordStore
    var core: NodeCore?
    var phase = Phase.waiting
    /// Bumped at every crash, so events scheduled for an earlier run of the process are ignored.
    var incarnation = 0
    var startedAt: Duration?
    var everCrashed = false

    // MARK: Transport
    /// The ends this node holds: dialling, open, or ended by the network but not yet noticed. Never above the cap.
    var ends: [LinkID: UInt64] = [:]
    /// The wait before the next redial: the node's own rule (`RedialBackoff`), grown by every failed dial or lost link,
    /// reset when a link comes up.
    var backoff = RedialBackoff.shipped
    /// When the conversation tables are refreshed after a turn (the node's own rule); reset when the process starts.
    var pacing = RefreshPacing()
    var dialCheckGeneration: UInt64 = 0
    var dialCheckAt: Duration?
    var tickAt: Duration?
    var tickGeneration: UInt64 = 0
    var ticksAtSameInstant = 0
    /// Links in their initial exchange: established, and the session not caught up yet (coverage).
    var syncing: Set<LinkID> = []

    // MARK: Metrics
    var framesSent = 0
    var bytesSent = 0
    /// `recordsDelivered` / `recordsNew` of the cores of earlier runs of this node.
    var deliveredBefore = 0
    var newBefore = 0
    /// `messagesSentByKind` of the cores of earlier runs of this node.
    var messagesByKindBefore: [String: Int] = [:]
    var appliedEvents = 0

    init(index: Int, name: String, identity: LocalIdentity, store: RecordStore) {
        self.index = index
        self.name = name
        self.identity = identity
        self.store = store
    }

    var author: AuthorID { identity.author }
    var isUp: Bool { phase == .up }
    var recordsDelivered: Int { deliveredBefore + (core?.recordsDelivered ?? 0) }
    var recordsNew: Int { newBefore + (core?.recordsNew ?? 0) }
    var messagesByKind: [String: Int] {
        messagesByKindBefore.merging(core?.messagesSentByKind ?? [:], uniquingKeysWith: +)
    }
}
