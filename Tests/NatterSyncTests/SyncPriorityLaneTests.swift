import NatterModel
import Testing

// Goal: the priority lane (docs/protocol.md §3.7). A priority author's live record passes a bulk window that is
// full; records of other authors never take the lane; an author over its rate is demoted to the bulk lane; each lane
// keeps its own credit, in both directions, and a peer that overruns the priority window is cut like one that
// overruns the bulk window. Method: two sessions wired back to back (`SyncPair`), with the receiver's messages held
// back where a full window is the point, and seeded schedules where convergence is.
@testable import NatterSync

@Suite("Sync priority lane")
struct SyncPriorityLaneTests {
    static let alice = Fixture.identity(0x20)
    static let bob = Fixture.identity(0x40)
    static let chat = Fixture.conversation(7)

    /// A pair whose initial exchange is over (both logs empty), A passing Alice as its priority author.
    static func pair() -> SyncPair {
        var pair = SyncPair(a: InMemoryRecordSource(), b: InMemoryRecordSource())
        pair.start()
        pair.run()
        pair.a.priorityAuthors = [Fixture.author(alice)]
        return pair
    }

    /// B's inbox decoded (what A sent it that B has not read).
    static func inbox(_ pair: SyncPair) -> [SyncMessage] {
        pair.b.inbox.map { try! SyncMessage.decode($0) }
    }

    @Test("a priority author's live record goes in a PRIORITY RECORDS while the bulk window is exhausted")
    func passesFullBulkWindow() {
        var pair = Self.pair()
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: Limits.syncWindowBatches + 1)
        // One live record at a time: one RECORDS each, B never reads them, so the bulk window runs out.
        for record in bobs { pair.author([record], on: .a) }
        var sent = Self.inbox(pair)
        #expect(sent.count == Limits.syncWindowBatches)
        #expect(sent.allSatisfy { if case .records = $0 { true } else { false } })
        let hello = Fixture.feed(Self.alice, in: Self.chat, count: 1)
        pair.author(hello, on: .a)
        sent = Self.inbox(pair)
        #expect(sent.count == Limits.syncWindowBatches + 1)
        #expect(sent.last == .priorityRecords(hello))
        // Bob's ninth record still waits for bulk credit.
        #expect(!pair.stats[.a]!.recordIDs.contains(bobs.last!.id))
        #expect(pair.violations == [])
    }

    @Test("records of authors that are not priority never take the lane, and both lanes converge in any order",
          arguments: [1, 2, 3, 4] as [UInt64])
    func onlyPriorityAuthors(seed: UInt64) {
        var pair = Self.pair()
        pair.b.priorityAuthors = [Fixture.author(Self.bob)]
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 40)
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: 40)
        let carols = Fixture.feed(Fixture.identity(0x60), in: Self.chat, count: 40)
        for index in 0..<40 {
            pair.author([alices[index], carols[index]], on: .a)
            pair.author([bobs[index]], on: .b)
            if index % 3 == 0 { pair.run(.random(seed: seed &* 100 &+ UInt64(index))) }
        }
        pair.run(.random(seed: seed))
        let prioritySent = Set(pair.stats[.a]!.priorityRecordIDs + pair.stats[.b]!.priorityRecordIDs)
        #expect(!prioritySent.isEmpty)
        #expect(prioritySent.isSubset(of: Set((alices + bobs).map(\.id))))
        #expect(Set(pair.stats[.a]!.priorityRecordIDs).isSubset(of: Set(alices.map(\.id))))
        #expect(Set(pair.stats[.b]!.priorityRecordIDs).isSubset(of: Set(bobs.map(\.id))))
        #expect(LogContents(pair.a.log) == LogContents(pair.b.log))
        #expect(LogContents(pair.a.log).chain.count == 120)
        #expect(pair.violations == [])
    }

    @Test("an author over its priority rate is demoted to the bulk lane, and comes back once its bucket refills")
    func demotion() {
        var pair = Self.pair()
        let burst = Limits.syncPriorityAuthorRecordsBurst
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: burst + 50)
        for record in alices.prefix(burst + 49) {
            pair.author([record], on: .a)
            pair.run()
        }
        // Virtual time moved by microseconds: the burst, and not one record more than the refill allows.
        let early = pair.stats[.a]!.priorityRecordIDs.count
        #expect(early >= burst && early <= burst + 1, "\(early)")
        #expect(pair.stats[.a]!.recordIDs.count == burst + 49, "the rest went bulk")
        #expect(LogContents(pair.b.log).chain.count == burst + 49)
        // A second later the bucket holds 50 more: the next record takes the lane again.
        pair.advance(to: pair.now + .seconds(1))
        pair.author([alices.last!], on: .a)
        pair.run()
        #expect(pair.stats[.a]!.priorityRecordIDs.last == alices.last!.id)
        #expect(pair.violations == [])
    }

    @Test("each lane has its own credit: the priority window holds its batches, priority credit frees it")
    func creditPerLane() {
        var pair = Self.pair()
        let window = Limits.syncPriorityWindowBatches
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: window + 1)
        for record in alices { pair.author([record], on: .a) }
        #expect(Self.inbox(pair) == alices.prefix(window).map { .priorityRecords([$0]) })
        // Bulk credit does not open the priority lane (A's bulk window is full… of nothing: the credit overflows).
        var session = pair.a.session
        #expect(
            session.receive(message: SyncMessage.credit(1).encoded(), now: pair.now).last
                == .close(.malformed(.unexpected("credit of 1 batches beyond the window"))))
        // B reads the batches: priority deliveries, reported in their own order; with nothing going back on the lane,
        // the credit goes alone each time half the window is due.
        var toA = [SyncMessage]()
        var delivered = [[[UInt8]]]()
        for message in pair.b.inbox {
            for action in pair.b.session.receive(message: message, now: pair.now) {
                if case .deliverPriority(let records) = action { delivered.append(records.map(\.bytes)) }
                if case .deliver = action { Issue.record("a priority batch delivered as bulk") }
            }
        }
        pair.b.inbox = []
        #expect(delivered == alices.prefix(window).map { [$0.bytes] })
        for records in delivered {
            let (outcomes, _) = pair.b.log.ingest(records)
            for case .send(let bytes) in pair.b.session.ingested(outcomes, lane: .priority, now: pair.now) {
                toA.append(try! SyncMessage.decode(bytes))
            }
        }
        let half = Limits.syncPriorityCreditReturnBatches
        #expect(toA == Array(repeating: .priorityCredit(half), count: window / half))
        // Priority credit back: A sends the last record on the lane.
        let actions = pair.a.session.receive(message: SyncMessage.priorityCredit(half).encoded(), now: pair.now)
        #expect(actions == [.send(SyncMessage.priorityRecords([alices[window]]).encoded())])
        #expect(pair.violations == [])
    }

    @Test("priority credit rides on the next priority batch going back: a chat both ways sends no PRIORITY CREDIT")
    func creditRidesBack() {
        var pair = Self.pair()
        pair.b.priorityAuthors = [Fixture.author(Self.bob)]
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 20)
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: 20)
        for (alice, bob) in zip(alices, bobs) {
            pair.author([alice], on: .a)
            pair.run()
            pair.author([bob], on: .b)
            pair.run()
        }
        #expect(LogContents(pair.a.log).chain.count == 40 && LogContents(pair.b.log).chain.count == 40)
        for side in [Side.a, .b] {
            #expect(pair.stats[side]!.count(.priorityRecords) == 20)
            #expect(pair.stats[side]!.count(.priorityCredit) <= 1, "credit went on the batches, not alone")
        }
        #expect(pair.violations == [])
    }

    @Test("the push interval holds a priority record no longer than a live push on the bulk lane")
    func pushInterval() {
        var pair = SyncPair(a: InMemoryRecordSource(), b: InMemoryRecordSource())
        pair.a.session = SyncSession(source: pair.a.log, pushInterval: .milliseconds(40))
        pair.start()
        // The initial exchange spends 200 ms in flight, so the peer's DONE leaves the 40 ms interval standing.
        pair.tick(at: pair.now + .milliseconds(200))
        pair.run()
        pair.a.priorityAuthors = [Fixture.author(Self.alice)]
        let queuedAt = pair.now
        pair.author(Fixture.feed(Self.alice, in: Self.chat, count: 1), on: .a)
        pair.author(Fixture.feed(Self.bob, in: Self.chat, count: 1), on: .a)
        #expect(pair.b.inbox.isEmpty, "both wait for others to share their frames")
        #expect(pair.a.session.nextDeadline() == queuedAt + .milliseconds(40))
        pair.tick(at: queuedAt + .milliseconds(39))
        #expect(pair.b.inbox.isEmpty)
        pair.tick(at: queuedAt + .milliseconds(40))
        // Both lanes are due at once: one RECORDS carries both (the priority record riding, docs/protocol.md §3.7).
        let both = Fixture.feed(Self.bob, in: Self.chat, count: 1) + Fixture.feed(Self.alice, in: Self.chat, count: 1)
        #expect(Self.inbox(pair) == [.records(both)])
    }

    @Test("without a push interval each lane sends as it is due, the priority lane first")
    func noIntervalNoMerge() {
        var pair = Self.pair()
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 1)
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: 1)
        pair.author(alices + bobs, on: .a)
        #expect(Self.inbox(pair) == [.priorityRecords(alices), .records(bobs)])
    }

    /// A pair whose A holds live pushes 40 ms, its initial exchange over, Alice its priority author.
    static func holdingPair() -> SyncPair {
        var pair = SyncPair(a: InMemoryRecordSource(), b: InMemoryRecordSource())
        pair.a.session = SyncSession(source: pair.a.log, pushInterval: .milliseconds(40))
        pair.start()
        // The initial exchange spends 200 ms in flight, so the peer's DONE leaves the 40 ms interval standing.
        pair.tick(at: pair.now + .milliseconds(200))
        pair.run()
        pair.a.priorityAuthors = [Fixture.author(alice)]
        return pair
    }

    /// Bob's record (bulk) and Alice's (priority) queued 20 ms apart, in either order: whichever lane comes due
    /// first, one RECORDS goes then with both — Alice's riding a quiet bulk batch, or Bob's going early with her due
    /// one — instead of a frame per lane.
    @Test(
        "a RECORDS that goes while the peer takes bulk batches as they come carries both lanes' waiting records",
        arguments: [true, false])
    func oneRecordsForBothLanes(bulkFirst: Bool) {
        var pair = Self.holdingPair()
        let start = pair.now
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: 1)
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 1)
        pair.author(bulkFirst ? bobs : alices, on: .a)
        pair.tick(at: start + .milliseconds(20))
        pair.author(bulkFirst ? alices : bobs, on: .a)
        pair.tick(at: start + .milliseconds(40))
        // The first record is due; the second would wait 20 ms more for a frame of its own.
        #expect(Self.inbox(pair) == [.records(bobs + alices)])
        pair.tick(at: start + .milliseconds(60))
        #expect(Self.inbox(pair).count == 1, "nothing left for either lane")
        pair.run()
        #expect(LogContents(pair.b.log).chain.count == 2)
        #expect(pair.violations == [])
    }

    @Test("while the peer holds bulk batches, a RECORDS that goes leaves the priority records to their own lane")
    func noRidingPastHeldBulk() {
        var pair = Self.holdingPair()
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: Limits.syncCreditReturnBatches + 1)
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 1)
        // B reads nothing: each of Bob's first records goes in a RECORDS of its own and stays outstanding.
        for record in bobs.dropLast() {
            pair.author([record], on: .a)
            pair.tick(at: pair.now + .milliseconds(40))
        }
        #expect(Self.inbox(pair).count == Limits.syncCreditReturnBatches)
        let start = pair.now
        pair.author([bobs.last!], on: .a)
        pair.tick(at: start + .milliseconds(20))
        pair.author(alices, on: .a)
        pair.tick(at: start + .milliseconds(40))
        #expect(Self.inbox(pair).last == .records([bobs.last!]), "Bob's record goes alone")
        pair.tick(at: start + .milliseconds(60))
        #expect(Self.inbox(pair).last == .priorityRecords(alices))
        #expect(pair.violations == [])
    }

    @Test("each lane's deliveries are reported `ingested` in their own order")
    func lanesReportedApart() {
        var session = SyncSession(source: InMemoryRecordSource())
        _ = session.start(now: .zero)
        let bobs = Fixture.feed(Self.bob, in: Self.chat, count: 2)
        let alices = Fixture.feed(Self.alice, in: Self.chat, count: 1)
        #expect(session.receive(message: SyncMessage.records([bobs[0]]).encoded(), now: .zero).first == .deliver([bobs[0]]))
        #expect(
            session.receive(message: SyncMessage.priorityRecords(alices).encoded(), now: .zero)
                == [.deliverPriority([alices[0]])])
        #expect(session.receive(message: SyncMessage.records([bobs[1]]).encoded(), now: .zero).first == .deliver([bobs[1]]))
        // The priority delivery first, while both bulk ones wait (held by the node's quota, say); its credit waits for
        // a batch going back or half the window.
        #expect(session.ingested([.stored], lane: .priority, now: .zero) == [])
        #expect(session.ingested([.stored], now: .zero) == [])
        #expect(session.ingested([.stored], now: .zero) == [])
        #expect(!session.isClosed)
    }
}
