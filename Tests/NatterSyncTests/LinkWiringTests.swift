import NatterModel
import Testing

// Goal: show the three link machines of one side working together with no node and no lab: the handshake, the
// secure channel and the sync session bring two logs to the same records whether bytes arrive whole or one at a
// time, and a wrong network key, a flipped bit, a truncated frame or a replayed handshake message each stop the link
// with a named error before anything is stored. Method: fixed keys, a driver that carries every chunk of wire bytes
// through the handshake machines, then the channels, into the sessions and their in-memory logs.
@testable import NatterSync

@Suite("Link machines wired directly")
struct LinkWiringTests {
    static let alice = Fixture.identity(0x22)
    static let bob = Fixture.identity(0x42)

    /// A holds alice's feed in conversation 1, B bob's in conversation 2, both a shared prefix in conversation 3.
    static func logs() -> (a: InMemoryRecordSource, b: InMemoryRecordSource) {
        let shared = Fixture.feed(alice, in: Fixture.conversation(3), count: 20)
        let a = shared + Fixture.feed(alice, in: Fixture.conversation(1), count: 300)
            + Fixture.feed(alice, in: Fixture.conversation(3), count: 10, after: shared)
        let b = shared + Fixture.feed(bob, in: Fixture.conversation(2), count: 120, payloadBytes: 900)
        return (Fixture.log(a), Fixture.log(b))
    }

    /// One side after the handshake: its channel, session and log, and what stopped it.
    struct End {
        var channel: SecureChannel
        var session: SyncSession<InMemoryRecordSource>
        let log: InMemoryRecordSource
        var error: String?
        var stored = 0
    }

    /// Runs both sessions over the channels until quiet; `tamper` may change the first wire chunk A sends.
    static func sync(
        _ a: InMemoryRecordSource, _ b: InMemoryRecordSource, feeding: Feeding,
        tamper: ([UInt8], [UInt8]) -> [UInt8] = { first, _ in first }
    ) -> (a: End, b: End) {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator), responder: TestNode.responder.machine(.responder),
            feeding: feeding)
        guard let linkA = run.initiator.established, let linkB = run.responder.established else {
            preconditionFailure("the handshake failed")
        }
        var ends = [
            End(channel: linkA.channel, session: SyncSession(source: a), log: a),
            End(channel: linkB.channel, session: SyncSession(source: b), log: b),
        ]
        var wires: [[[UInt8]]] = [[], []]  // chunks in flight towards side 0 and side 1
        var sentByA = 0
        func process(_ side: Int, _ actions: [SyncAction]) {
            for action in actions {
                switch action {
                case .send(let message):
                    guard let bytes = try? ends[side].channel.send(message) else { continue }
                    if side == 0 { sentByA += 1 }
                    wires[1 - side].append(bytes)
                case .deliver(let records), .deliverPriority(let records):
                    let lane: SyncLane = if case .deliver = action { .bulk } else { .priority }
                    let (outcomes, stored) = ends[side].log.ingest(records.map(\.bytes))
                    ends[side].stored += stored.count
                    process(side, ends[side].session.ingested(outcomes, lane: lane, now: .zero))
                    process(side, ends[side].session.localRecordsStored(stored, now: .zero))
                case .close(let error):
                    ends[side].error = "sync: \(error)"
                case .caughtUp, .progress, .peerLeaving, .rerouted:
                    break
                }
            }
        }
        process(0, ends[0].session.start(now: .zero))
        process(1, ends[1].session.start(now: .zero))
        var tampered = false
        var steps = 0
        while steps < 100_000, let side = [1, 0].first(where: { !wires[$0].isEmpty }) {
            steps += 1
            var chunk = wires[side].removeFirst()
            if side == 1, !tampered {
                tampered = true
                chunk = tamper(chunk, wires[1].first ?? [])
            }
            guard ends[side].error == nil else { continue }
            for event in feed(chunk, feeding, { ends[side].channel.receive($0) }) {
                switch event {
                case .message(let message):
                    process(side, ends[side].session.receive(message: message, now: .zero))
                case .goodbye:
                    ends[side].error = "goodbye"
                case .failed(let error):
                    ends[side].error = "\(error)"
                }
                if ends[side].error != nil { break }
            }
        }
        return (ends[0], ends[1])
    }

    @Test("handshake and sync give the same stored records whole and byte by byte")
    func dripAndWholeAgree() {
        var results = [LogContents]()
        for feeding in Feeding.allCases {
            let (a, b) = Self.logs()
            let ends = Self.sync(a, b, feeding: feeding)
            #expect(ends.a.error == nil && ends.b.error == nil)
            #expect(LogContents(a) == LogContents(b))
            #expect(ends.a.stored == 120 && ends.b.stored == 310)
            results.append(LogContents(a))
        }
        #expect(results[0] == results[1])
    }

    @Test("a flipped bit in a frame fails the channel by name and stores nothing")
    func bitFlip() {
        for feeding in Feeding.allCases {
            let (a, b) = Self.logs()
            let before = LogContents(b)
            let ends = Self.sync(a, b, feeding: feeding) { first, _ in flippingBit(first.count * 8 - 3, of: first) }
            #expect(ends.b.error == "\(LinkError.decryptFailed(.transportFrame(0)))")
            #expect(ends.b.stored == 0)
            #expect(LogContents(b) == before)
        }
    }

    @Test("a truncated frame (the next frame's bytes read as its tail) fails by name and stores nothing")
    func truncatedFrame() {
        for feeding in Feeding.allCases {
            let (a, b) = Self.logs()
            let before = LogContents(b)
            let ends = Self.sync(a, b, feeding: feeding) { first, _ in Array(first.dropLast()) }
            #expect(ends.b.error == "\(LinkError.decryptFailed(.transportFrame(0)))")
            #expect(ends.b.stored == 0)
            #expect(LogContents(b) == before)
        }
    }

    @Test("a wrong network key stops the handshake at message 1: no channel, nothing stored")
    func wrongNetworkKey() {
        for feeding in Feeding.allCases {
            let run = runHandshake(
                initiator: TestNode.initiator.machine(.initiator),
                responder: TestNode.responder.machine(.responder, network: .otherNetwork), feeding: feeding)
            #expect(run.responder.error == .wrongNetworkKey)
            #expect(run.initiator.established == nil && run.responder.established == nil)
        }
    }

    @Test("a replayed handshake message fails by name and no channel is established")
    func replayedHandshakeMessage() {
        let first = runHandshake(
            initiator: TestNode.initiator.machine(.initiator), responder: TestNode.responder.machine(.responder))
        // Message 3 of that handshake, replayed into a new one that answered another message 1.
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, ephemeralSeed: 5),
            responder: TestNode.responder.machine(.responder, ephemeralSeed: 6)
        ) { number, bytes in number == 3 ? first.transcript[2] : bytes }
        #expect(run.responder.error == .decryptFailed(.handshakeMessage(3)))
        #expect(run.responder.established == nil)
    }
}
