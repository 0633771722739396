import NatterCrypto
import NatterModel

// Goal: give the sync tests one harness that wires two sync sessions together, so each test reads as its scenario
// and its check. Method: signed fixture records from fixed seeds, in-memory logs whose ingest follows the store's
// chain rules, and a driver that carries every message to the other side (directly or through a real secure
// channel) in a fixed or seeded order, ingests deliveries when scheduled, and counts and checks what crossed.
@testable import NatterSync

// MARK: - Fixture records

/// Builds signed fixture records: plain records whose headers satisfy every rule, so the real decoder accepts them.
enum Fixture {
    /// An identity from a one-byte seed pattern.
    static func identity(_ seed: UInt8) -> IdentityKeyPair { try! IdentityKeyPair(seed: counting(from: seed)) }

    static func author(_ identity: IdentityKeyPair) -> AuthorID { AuthorID(identity.publicKey) }

    /// A conversation id from a number.
    static func conversation(_ number: Int) -> ConversationID {
        ConversationID(bytes: Blake2b.hash(Array("natter/test/conversation/\(number)".utf8), outputBytes: 32))
    }

    /// `count` records of `identity`'s feed in `conversation`, continuing `after` (the feed's previous records, or
    /// none). `salt` changes the payloads, so two calls with different salts make two forks.
    static func feed(
        _ identity: IdentityKeyPair, in conversation: ConversationID, count: Int, after previous: [Record] = [],
        payloadBytes: Int = 24, salt: Int = 0
    ) -> [Record] {
        let author = AuthorID(identity.publicKey)
        var records = [Record]()
        var last = previous.last
        for _ in 0..<count {
            let sequence = (last?.header.sequence ?? 0) + 1
            let header = RecordHeader(
                kind: .plain, conversation: conversation, author: author, sequence: sequence,
                previous: last?.id ?? .none, epoch: .none, lamport: sequence, createdAtMillis: Int64(sequence),
                dependencies: sequence == 1 ? VectorClock() : VectorClock([author: sequence - 1]))
            let payload = patterned(payloadBytes, salt: salt &* 7919 &+ Int(sequence))
            let record = try! Record.sign(header: header, payload: payload, by: identity)
            records.append(record)
            last = record
        }
        return records
    }

    /// A log holding `records` (each feed's records in order).
    static func log(_ records: [Record]) -> InMemoryRecordSource {
        let log = InMemoryRecordSource()
        log.append(records)
        return log
    }
}

// MARK: - Two sessions on one link

/// One end of a wired link: a session, its log, and what it did.
struct SyncPeer {
    var session: SyncSession<InMemoryRecordSource>
    let log: InMemoryRecordSource
    /// Messages from the other side not yet received.
    var inbox: [[UInt8]] = []
    /// Deliveries not yet ingested.
    var pendingIngest: [[[UInt8]]] = []
    /// Priority deliveries not yet ingested.
    var pendingPriorityIngest: [[[UInt8]]] = []
    /// The authors this side's node passes as priority with what it stores (none: everything goes bulk).
    var priorityAuthors: Set<AuthorID> = []
    var caughtUpCount = 0
    var peerLeavingCount = 0
    var rerouted: [FeedKey] = []
    var progress: [(received: Int, expected: Int)] = []
    var closedWith: SyncError?
    /// How many records this side stored that came over the link.
    var storedFromLink = 0

    init(log: InMemoryRecordSource) {
        self.log = log
        session = SyncSession(source: log)
    }
}

/// What crossed one direction of the link.
struct DirectionStats {
    var messages = 0
    var bytes = 0
    var messagesByType: [UInt8: Int] = [:]
    /// Every record sent, in order.
    var recordIDs: [RecordID] = []
    /// RECORDS batches sent and not yet returned as credit; never above the window.
    var outstanding = 0
    var maxOutstanding = 0
    /// The batches each CREDIT message returned, in order.
    var credits: [Int] = []
    /// PRIORITY RECORDS batches sent and not yet returned as priority credit; never above the priority window.
    var priorityOutstanding = 0
    /// Records sent on the priority lane, in order.
    var priorityRecordIDs: [RecordID] = []
    /// Conversations carried by HEADS messages (one per entry).
    var headsEntries = 0
    /// Feed heads carried by HEADS messages.
    var headFeeds = 0

    func count(_ tag: SyncMessage.Tag) -> Int { messagesByType[tag.rawValue] ?? 0 }
}

enum Side: Hashable, CustomStringConvertible {
    case a, b
    var other: Side { self == .a ? .b : .a }
    var description: String { self == .a ? "A" : "B" }
}

/// In which order the driver handles pending events.
enum Schedule {
    /// Receive everything pending, then ingest (deliveries pile up: the window fills).
    case messagesFirst
    /// Ingest every delivery as soon as possible.
    case ingestFirst
    /// A seeded random choice among the pending events.
    case random(seed: UInt64)
}

/// Two sessions wired back to back, with checks on every message.
struct SyncPair {
    var a: SyncPeer
    var b: SyncPeer
    var now: Duration = .zero
    var stats: [Side: DirectionStats] = [.a: DirectionStats(), .b: DirectionStats()]
    /// Every action in the order it happened, labelled by side.
    var transcript: [(Side, SyncAction)] = []
    /// Protocol rules broken by a session (each test expects this to stay empty).
    var violations: [String] = []
    /// Secure channels carrying the messages, when the pair runs over real links.
    private var channels: (a: SecureChannel, b: SecureChannel)?
    private var generator = SeededGenerator(seed: 0)

    init(a: InMemoryRecordSource, b: InMemoryRecordSource, overSecureChannels: Bool = false) {
        self.a = SyncPeer(log: a)
        self.b = SyncPeer(log: b)
        if overSecureChannels {
            let established = establishedChannels()
            channels = (established.initiator, established.responder)
        }
    }

    subscript(side: Side) -> SyncPeer {
        get { side == .a ? a : b }
        set { if side == .a { a = newValue } else { b = newValue } }
    }

    /// Starts both sessions.
    mutating func start() {
        let startA = a.session.start(now: now)
        let startB = b.session.start(now: now)
        process(startA, from: .a)
        process(startB, from: .b)
    }

    /// Runs until nothing is pending (or `maxSteps`), in `schedule`'s order. Returns the number of steps.
    @discardableResult
    mutating func run(_ schedule: Schedule = .ingestFirst, maxSteps: Int = 200_000) -> Int {
        if case .random(let seed) = schedule { generator = SeededGenerator(seed: seed) }
        var steps = 0
        while steps < maxSteps, let event = nextEvent(schedule) {
            steps += 1
            now += .microseconds(10)
            handle(event)
        }
        return steps
    }

    private enum Event {
        case receive(Side)
        case ingest(Side, SyncLane)
    }

    private mutating func nextEvent(_ schedule: Schedule) -> Event? {
        var events = [Event]()
        for side in [Side.a, .b] where !self[side].pendingPriorityIngest.isEmpty {
            events.append(.ingest(side, .priority))
        }
        for side in [Side.a, .b] where !self[side].pendingIngest.isEmpty { events.append(.ingest(side, .bulk)) }
        var receives = [Event]()
        for side in [Side.a, .b] where !self[side].inbox.isEmpty { receives.append(.receive(side)) }
        switch schedule {
        case .ingestFirst: return (events + receives).first
        case .messagesFirst: return (receives + events).first
        case .random:
            let all = events + receives
            return all.isEmpty ? nil : all[Int.random(in: 0..<all.count, using: &generator)]
        }
    }

    private mutating func handle(_ event: Event) {
        switch event {
        case .receive(let side):
            let message = self[side].inbox.removeFirst()
            let actions = self[side].session.receive(message: message, now: now)
            process(actions, from: side)
        case .ingest(let side, let lane):
            let batch =
                lane == .bulk ? self[side].pendingIngest.removeFirst() : self[side].pendingPriorityIngest.removeFirst()
            let (outcomes, stored) = self[side].log.ingest(batch)
            self[side].storedFromLink += stored.filter { !$0.isForkEvidence }.count
            let afterIngest = self[side].session.ingested(outcomes, lane: lane, now: now)
            process(afterIngest, from: side)
            let afterStore = self[side].session.localRecordsStored(
                stored, priorityAuthors: self[side].priorityAuthors, now: now)
            process(afterStore, from: side)
        }
    }

    /// The node's own new records on `side`: appended to its log and reported to its session.
    mutating func author(_ records: [Record], on side: Side) {
        self[side].log.append(records)
        let actions = self[side].session.localRecordsStored(
            records.map { StoredRecord($0) }, priorityAuthors: self[side].priorityAuthors, now: now)
        process(actions, from: side)
    }

    /// Feeds a timer tick to both sides at `time`.
    mutating func tick(at time: Duration) {
        now = max(now, time)
        let fromA = a.session.tick(now: now)
        let fromB = b.session.tick(now: now)
        process(fromA, from: .a)
        process(fromB, from: .b)
    }

    /// Lets virtual time pass up to `time` in steps of `step`, ticking both sides and running the link after each,
    /// as a node would at each `nextDeadline` (heartbeats keep the link alive).
    mutating func advance(to time: Duration, step: Duration = .milliseconds(500), _ schedule: Schedule = .ingestFirst) {
        while now < time {
            tick(at: min(time, now + step))
            run(schedule)
        }
    }

    mutating func process(_ actions: [SyncAction], from side: Side) {
        for action in actions {
            transcript.append((side, action))
            switch action {
            case .send(let message):
                check(message, from: side)
                carry(message, from: side)
            case .deliver(let records):
                self[side].pendingIngest.append(records.map(\.bytes))
            case .deliverPriority(let records):
                self[side].pendingPriorityIngest.append(records.map(\.bytes))
            case .caughtUp:
                self[side].caughtUpCount += 1
            case .progress(let received, let expected):
                if received > expected { violations.append("\(side) progress \(received) > \(expected)") }
                self[side].progress.append((received, expected))
            case .close(let error):
                self[side].closedWith = error
            case .peerLeaving:
                self[side].peerLeavingCount += 1
            case .rerouted(let feeds):
                self[side].rerouted += feeds
            }
        }
    }

    private mutating func carry(_ message: [UInt8], from side: Side) {
        guard var channels else {
            self[side.other].inbox.append(message)
            return
        }
        let wire: [UInt8]
        let events: [SecureChannel.Event]
        if side == .a {
            wire = try! channels.a.send(message)
            events = channels.b.receive(wire)
        } else {
            wire = try! channels.b.send(message)
            events = channels.a.receive(wire)
        }
        self.channels = channels
        guard events == [.message(message)] else {
            violations.append("the secure channel did not carry a \(message.count)-byte message: \(events)")
            return
        }
        self[side.other].inbox.append(message)
    }

    /// Checks one message against every bound, and counts it.
    private mutating func check(_ message: [UInt8], from side: Side) {
        var direction = stats[side]!
        direction.messages += 1
        direction.bytes += message.count
        direction.messagesByType[message.first ?? 0, default: 0] += 1
        if message.count > Limits.applicationMessageBytesMax {
            violations.append("\(side) sent a \(message.count)-byte message")
        }
        switch Result(catching: { () throws(SyncMessageError) in try SyncMessage.decode(message) }) {
        case .failure(let error):
            violations.append("\(side) sent an undecodable message: \(error)")
        case .success(.records(let records, let credit)):
            stats[side.other]!.outstanding -= credit
            if records.count > Limits.syncBatchRecordsMax { violations.append("\(side) batch of \(records.count)") }
            let bytes = records.reduce(0) { $0 + $1.bytes.count }
            if bytes > Limits.syncBatchBytesMax { violations.append("\(side) batch of \(bytes) bytes") }
            direction.recordIDs += records.map(\.id)
            direction.outstanding += 1
            direction.maxOutstanding = max(direction.maxOutstanding, direction.outstanding)
            if direction.outstanding > Limits.syncWindowBatches {
                violations.append("\(side) has \(direction.outstanding) batches outstanding")
            }
        case .success(.credit(let batches)):
            // Credit travels back: it frees the other direction's window.
            stats[side.other]!.outstanding -= batches
            direction.credits.append(batches)
        case .success(.priorityRecords(let records, let credit)):
            stats[side.other]!.priorityOutstanding -= credit
            if records.count > Limits.syncPriorityBatchRecordsMax {
                violations.append("\(side) priority batch of \(records.count)")
            }
            let bytes = records.reduce(0) { $0 + $1.bytes.count }
            if bytes > Limits.syncPriorityBatchBytesMax { violations.append("\(side) priority batch of \(bytes) bytes") }
            direction.recordIDs += records.map(\.id)
            direction.priorityRecordIDs += records.map(\.id)
            direction.priorityOutstanding += 1
            if direction.priorityOutstanding > Limits.syncPriorityWindowBatches {
                violations.append("\(side) has \(direction.priorityOutstanding) priority batches outstanding")
            }
        case .success(.priorityCredit(let batches)):
            stats[side.other]!.priorityOutstanding -= batches
        case .success(.heads(let entries)):
            direction.headsEntries += entries.count
            direction.headFeeds += entries.reduce(0) { $0 + $1.feeds.count }
        case .success:
            break
        }
        stats[side] = direction
    }
}

/// Every chain record and piece of evidence a log holds, as comparable sets of ids.
struct LogContents: Equatable {
    let chain: Set<RecordID>
    let evidence: Set<RecordID>

    init(_ log: InMemoryRecordSource) {
        chain = Set(log.allRecords.map(\.id))
        evidence = Set(log.evidence.values.flatMap { $0.map(\.id) })
    }
}

/// Whether `ids` has no repeats.
func allDistinct(_ ids: [RecordID]) -> Bool { Set(ids).count == ids.count }
