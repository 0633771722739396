import NatterModel
import NatterStore
import NatterSync

/// The bounds of a node's causal buffer, each with its reason (`NodeConfiguration.causalBuffer`).
public struct CausalBufferLimits: Sendable, Equatable {
    /// Records held at once: 4,096, a few sync windows of out-of-order records (a window is at most 2,048).
    public var recordsMax = 4_096
    /// Record bytes held at once: 16 MiB, eight sync windows' worth (records are at most 64 KiB, so the record bound
    /// alone would allow 256 MiB).
    public var bytesMax = 16 << 20
    /// Of each bound, the part one peer may hold: a quarter. Honest records arrive out of order from a few links at
    /// a time; a peer that sends feeds which never become contiguous (a feed starting at sequence 2) fills only its
    /// share, and the rest stays free for everyone else.
    public var peerShareDivisor = 4
    /// A record waiting longer than this is given up: 60 s, two anti-entropy rounds. Its predecessor did not come
    /// from any link in that time, so the next rounds fetch the feed again from where the store stops; until then it
    /// only takes a place.
    public var age: Duration = .seconds(60)

    public init() {}

    /// The most records one peer may hold.
    public var peerRecordsMax: Int { max(1, recordsMax / peerShareDivisor) }
    /// The most bytes one peer may hold.
    public var peerBytesMax: Int { max(1, bytesMax / peerShareDivisor) }
}

/// Records that arrived before their feed's predecessor, held until it is stored (DESIGN §5, causal buffer): pure,
/// time as an input, its state private.
///
/// A feed position holds at most two different records: when an author forked, both branches may arrive before
/// their predecessor, and the second is what proves the fork to the store (kept as evidence, relayed). A third adds
/// nothing the two do not prove.
///
/// Every record is charged to the peer whose link delivered it. A peer holds at most its share of the bounds; when
/// the buffer is full, a record from a peer holding less than the heaviest holder takes the place of that holder's
/// oldest record, so one peer filling the buffer cannot make another's out-of-order records drop (issue 19, item
/// 6). Records waiting longer than `CausalBufferLimits.age` expire. What is dropped, refused or expired is not lost:
/// the session asks the peer for the gap, and anti-entropy fetches the rest.
struct CausalBuffer {
    /// What became of a record offered to the buffer.
    enum Outcome: Equatable {
        case held
        /// Held already (the same record), or its position holds two different records already.
        case duplicate
        /// Its peer holds its share, or the buffer is full of records of peers holding no more than it.
        case refused
    }

    private struct Entry {
        let record: Record
        let peer: AuthorID
        let arrivedAt: Duration
        /// Arrival order, so eviction breaks ties the same way on every run.
        let serial: UInt64
    }

    private struct Holdings {
        var records = 0
        var bytes = 0
    }

    let limits: CausalBufferLimits
    /// Different records one feed position holds at most: a record and one other branch of a fork.
    static let branchesMax = 2
    /// Per feed and sequence, the records held there in arrival order.
    private var entries: [FeedKey: [UInt64: [Entry]]] = [:]
    private var holdings: [AuthorID: Holdings] = [:]
    private var nextSerial: UInt64 = 0
    /// Records and bytes held.
    private(set) var count = 0
    private(set) var bytes = 0

    init(limits: CausalBufferLimits = CausalBufferLimits()) {
        precondition(limits.recordsMax > 0 && limits.bytesMax > 0 && limits.peerShareDivisor > 0 && limits.age > .zero)
        self.limits = limits
    }

    /// Holds `record`, delivered by `peer` at `now`, within the bounds (see the type's comment).
    mutating func hold(_ record: Record, from peer: AuthorID, now: Duration) -> Outcome {
        let feed = FeedKey(conversation: record.header.conversation, author: record.header.author)
        let there = entries[feed]?[record.header.sequence] ?? []
        guard there.count < Self.branchesMax, !there.contains(where: { $0.record.id == record.id }) else {
            return .duplicate
        }
        let size = record.bytes.count
        let mine = holdings[peer] ?? Holdings()
        guard mine.records < limits.peerRecordsMax, mine.bytes + size <= limits.peerBytesMax else { return .refused }
        while count >= limits.recordsMax || bytes + size > limits.bytesMax {
            // The bound that is full is what the holders are weighed by; the heaviest holder other than `peer`, if it
            // holds more than `peer` will, gives up its oldest record.
            let byRecords = count >= limits.recordsMax
            let weight: (Holdings) -> Int = byRecords ? { $0.records } : { $0.bytes }
            let mineAfter = byRecords ? mine.records + 1 : mine.bytes + size
            let heaviest = holdings.filter { $0.key != peer }.max { (weight($0.value), $1.key) < (weight($1.value), $0.key) }
            guard let heaviest, weight(heaviest.value) > mineAfter else { return .refused }
            evictOldest(of: heaviest.key)
        }
        nextSerial += 1
        entries[feed, default: [:]][record.header.sequence, default: []].append(
            Entry(record: record, peer: peer, arrivedAt: now, serial: nextSerial))
        holdings[peer, default: Holdings()].records += 1
        holdings[peer, default: Holdings()].bytes += size
        count += 1
        bytes += size
        checkInvariants()
        return .held
    }

    /// Feeds with records held, in order.
    var feeds: [FeedKey] { entries.keys.sorted() }

    /// The held records of `feed` up to `next` (the sequence after the store's head), taken out of the buffer in
    /// sequence and arrival order. Those below `next` were stored meanwhile by another path, or are the other branch
    /// of a fork there: only the store can tell, so they go to it too (a copy of a stored record costs it a lookup).
    mutating func take(_ feed: FeedKey, next: UInt64) -> [Record] {
        guard let held = entries[feed] else { return [] }
        var taken = [Record]()
        for (sequence, here) in held.sorted(by: { $0.key < $1.key }) where sequence <= next {
            taken += here.map(\.record)
            for entry in here { remove(feed, sequence, entry.serial) }
        }
        return taken
    }

    /// Hands every record whose predecessor is now stored to `ingest`, repeatedly, until none is left that can go:
    /// `storedHead` says how far a feed is stored (nil: the store cannot say; the feed waits), and `ingest` stores a
    /// record and says whether it was appended to its feed (false: not appended, so it makes no progress).
    mutating func drain(storedHead: (FeedKey) -> UInt64?, ingest: (Record) -> Bool) {
        var progress = true
        while progress && count > 0 {
            progress = false
            for feed in feeds {
                guard let head = storedHead(feed) else { continue }
                // Not short-circuited: after one branch is appended, the other must still reach the store.
                for record in take(feed, next: head + 1) where ingest(record) { progress = true }
            }
        }
    }

    /// Gives up records that waited longer than the age bound; returns how many.
    mutating func expire(now: Duration) -> Int {
        var expired = 0
        for feed in entries.keys.sorted() {
            for (sequence, held) in entries[feed]! {
                for entry in held where now - entry.arrivedAt >= limits.age {
                    remove(feed, sequence, entry.serial)
                    expired += 1
                }
            }
        }
        return expired
    }

    /// When the oldest record held expires (nil: none held).
    var nextExpiry: Duration? {
        entries.values.lazy.flatMap(\.values).joined().map(\.arrivedAt).min().map { $0 + limits.age }
    }

    /// Forgets every record of `conversation` (it was evicted).
    mutating func drop(conversation: ConversationID) {
        for feed in entries.keys.sorted() where feed.conversation == conversation {
            for (sequence, held) in entries[feed]! {
                for entry in held { remove(feed, sequence, entry.serial) }
            }
        }
    }

    /// Records `peer` holds now.
    func held(by peer: AuthorID) -> Int { holdings[peer]?.records ?? 0 }

    // MARK: - Private

    private mutating func evictOldest(of peer: AuthorID) {
        var oldest: (feed: FeedKey, sequence: UInt64, serial: UInt64)?
        for (feed, positions) in entries {
            for (sequence, held) in positions {
                for entry in held where entry.peer == peer && entry.serial < (oldest?.serial ?? .max) {
                    oldest = (feed, sequence, entry.serial)
                }
            }
        }
        guard let oldest else { preconditionFailure("a holder with nothing held") }
        remove(oldest.feed, oldest.sequence, oldest.serial)
    }

    /// Removes the entry `serial` at `feed`'s `sequence`, and its charges.
    private mutating func remove(_ feed: FeedKey, _ sequence: UInt64, _ serial: UInt64) {
        guard let index = entries[feed]?[sequence]?.firstIndex(where: { $0.serial == serial }) else { return }
        let entry = entries[feed]![sequence]!.remove(at: index)
        if entries[feed]![sequence]!.isEmpty { entries[feed]![sequence] = nil }
        if entries[feed]!.isEmpty { entries[feed] = nil }
        let size = entry.record.bytes.count
        count -= 1
        bytes -= size
        holdings[entry.peer]!.records -= 1
        holdings[entry.peer]!.bytes -= size
        if holdings[entry.peer]!.records == 0 { holdings[entry.peer] = nil }
    }

    private func checkInvariants() {
        assert(count <= limits.recordsMax && bytes <= limits.bytesMax, "the causal buffer within its bounds")
        assert(holdings.values.allSatisfy { $0.records <= limits.peerRecordsMax && $0.bytes <= limits.peerBytesMax })
        assert(holdings.values.reduce(0) { $0 + $1.records } == count, "holdings add up")
        assert(entries.values.allSatisfy { $0.values.allSatisfy { 1...Self.branchesMax ~= $0.count } })
    }
}

extension CausalBuffer {
    /// What a drain did: the records appended to their feeds, those kept as fork evidence (their feed's chain
    /// named another record at the sequence before), and every record that became applied meanwhile.
    struct Drained {
        var stored = [Record]()
        var evidence = [Record]()
        /// A record kept as evidence applies records too: its fork re-applies the conversation up to the fork.
        var applied = [RecordRef]()
        /// Conversations a fork made the store re-apply: records applied before the drain may be cut off now.
        var rebuilt = [ConversationID]()
    }

    /// Ingests into `store` every held record whose predecessor is stored now. A feed the store cannot read now
    /// waits in the buffer; a record the store cannot store now is dropped from it (anti-entropy fetches it again):
    /// those errors are not the delivering peer's fault.
    mutating func drain(
        into store: RecordStore, receivedAtMillis: Int64, durability: RecordStore.IngestDurability
    ) -> Drained {
        var drained = Drained()
        drain(
            storedHead: { feed in
                // `try?`: a feed the store cannot read now waits (above).
                (try? store.feeds(of: feed.conversation))?.first { $0.author == feed.author }.map(\.stored)
            },
            ingest: { record in
                // `try?`: a record the store cannot store now is dropped (above).
                guard
                    let report = try? store.ingest(
                        [record], receivedAtMillis: receivedAtMillis, durability: durability)
                else { return false }
                drained.applied += report.applied
                drained.rebuilt += report.rebuilt
                switch report.outcomes[0] {
                case .stored:
                    drained.stored.append(record)
                    return true
                case .forkEvidence:
                    drained.evidence.append(record)
                    return false
                case .duplicate, .outOfOrder, .rejected:
                    return false
                }
            })
        return drained
    }
}
