import NatterCrypto
import NatterModel
import Testing

// Goal: show that the secure channel carries application messages of any size up to the cap intact and in order,
// however the bytes are chunked, rekeys in lockstep, tells a goodbye from a cut, and turns every tampered, replayed,
// reordered, truncated or oversize input into a named failure. Method: the two channels of a real handshake wired
// through byte buffers, delivered whole, byte by byte and in seeded random chunks; authentic frames with arbitrary
// plaintext forged through the channel's own frame sealer to reach the receiver's checks.
@testable import NatterSync

@Suite("Secure channel")
struct SecureChannelTests {
    /// Messages that cross frame boundaries in every way: empty, small, exactly one frame's worth, one more, and
    /// several frames long.
    static let sizes = [
        0, 1, 100, Limits.transportPlaintextBytesMax - 5, Limits.transportPlaintextBytesMax - 4, 70_000, 200_000,
    ]

    @Test("messages of every size arrive intact and in order", arguments: Feeding.allCases)
    func roundTrip(feeding: Feeding) throws {
        var (initiator, responder) = establishedChannels()
        let sizes = feeding == .dripFeed ? [0, 1, 100, 70_000] : Self.sizes
        for (index, size) in sizes.enumerated() {
            let message = patterned(size, salt: index)
            #expect(deliver(try initiator.send(message), to: &responder, feeding) == [.message(message)])
            #expect(deliver(try responder.send(message), to: &initiator, feeding) == [.message(message)])
        }
    }

    @Test("the largest message, 1 MiB, crosses; one byte more is refused before sending")
    func sizeCap() throws {
        var (initiator, responder) = establishedChannels()
        let largest = patterned(Limits.applicationMessageBytesMax)
        #expect(deliver(try initiator.send(largest), to: &responder) == [.message(largest)])
        #expect(throws: LinkError.messageTooLarge(bytes: largest.count + 1, limit: Limits.applicationMessageBytesMax)) {
            try initiator.send(largest + [0])
        }
        // Refusing to send spends nothing: the channel goes on.
        #expect(deliver(try initiator.send([42]), to: &responder) == [.message([42])])
    }

    @Test("whole, byte-by-byte and random chunking give the same events")
    func chunkingIsInvisible() throws {
        var (initiator, _) = establishedChannels()
        var wire: [UInt8] = []
        let messages = [patterned(10), patterned(70_000, salt: 1), [], patterned(3, salt: 2)]
        for message in messages { wire += try initiator.send(message) }
        wire += try initiator.sendGoodbye()
        let expected = messages.map { SecureChannel.Event.message($0) } + [.goodbye]

        for feeding in Feeding.allCases {
            var (_, responder) = establishedChannels()
            #expect(deliver(wire, to: &responder, feeding) == expected)
        }
        var generator = SeededGenerator(seed: 5)
        for _ in 0..<5 {
            var (_, responder) = establishedChannels()
            var events: [SecureChannel.Event] = []
            var offset = 0
            while offset < wire.count {
                let end = min(wire.count, offset + Int.random(in: 1...9000, using: &generator))
                events += responder.receive(wire[offset..<end])
                offset = end
            }
            #expect(events == expected)
        }
    }

    @Test("a whole session, handshake then transport both ways, is byte-identical whole and drip-fed")
    func sessionFeedingIsInvisible() throws {
        func session(_ feeding: Feeding) throws -> (wire: [[UInt8]], events: [SecureChannel.Event]) {
            let run = runHandshake(
                initiator: TestNode.initiator.machine(.initiator, rekeyIntervalFrames: 2),
                responder: TestNode.responder.machine(.responder, rekeyIntervalFrames: 2), feeding: feeding)
            var initiator = try #require(run.initiator.established).channel
            var responder = try #require(run.responder.established).channel
            var wire = run.transcript
            var events: [SecureChannel.Event] = []
            for (index, size) in [5, 70_000, 0].enumerated() {
                wire.append(try initiator.send(patterned(size, salt: index)))
                events += deliver(wire.last!, to: &responder, feeding)
                wire.append(try responder.send(patterned(size + 1, salt: index)))
                events += deliver(wire.last!, to: &initiator, feeding)
            }
            wire.append(try initiator.sendGoodbye())
            events += deliver(wire.last!, to: &responder, feeding)
            wire.append(try responder.sendGoodbye())
            events += deliver(wire.last!, to: &initiator, feeding)
            return (wire, events)
        }
        let whole = try session(.whole)
        let drip = try session(.dripFeed)
        #expect(whole.wire == drip.wire)
        #expect(whole.events == drip.events)
        #expect(whole.events.count == 8 && whole.events.last == .goodbye)
    }

    // MARK: - Tampering, replay, reordering

    @Test("a flipped bit anywhere in a frame fails it by name, with nothing delivered")
    func bitFlips() throws {
        var (initiator, responder) = establishedChannels()
        let frame = try initiator.send(patterned(40))
        for bit in 16..<(frame.count * 8) {
            var copy = responder
            #expect(copy.receive(flippingBit(bit, of: frame)) == [.failed(.decryptFailed(.transportFrame(0)))])
        }
        // Length-prefix flips: a longer frame waits for bytes that never come, a shorter one fails authentication.
        for bit in 0..<16 {
            var copy = responder
            let events = copy.receive(flippingBit(bit, of: frame)) + copy.endOfInput()
            #expect(events.count == 1 && !events.contains { if case .message = $0 { true } else { false } })
        }
    }

    @Test("a replayed frame fails, and so does a reordered one")
    func replayAndReorder() throws {
        var (initiator, responder) = establishedChannels()
        let first = try initiator.send([1])
        let second = try initiator.send([2])

        var replay = responder
        #expect(replay.receive(first) == [.message([1])])
        #expect(replay.receive(first) == [.failed(.decryptFailed(.transportFrame(1)))])
        #expect(replay.receive(second) == [.failed(.closed)])

        var reorder = responder
        #expect(reorder.receive(second) == [.failed(.decryptFailed(.transportFrame(0)))])
    }

    @Test("a frame cut short is truncated at the end of the stream; a frame too short for a tag fails at once")
    func truncation() throws {
        var (initiator, responder) = establishedChannels()
        let frame = try initiator.send(patterned(500))
        var cut = responder
        #expect(cut.receive(frame.dropLast()).isEmpty)
        #expect(cut.endOfInput() == [.failed(.truncated(.transportFrame(0)))])

        // A message spanning two frames, cut after the first: truncated too.
        let big = try initiator.send(patterned(70_000))
        var halfway = responder
        _ = halfway.receive(frame)
        #expect(halfway.receive(big.prefix(2 + Limits.noiseMessageBytesMax)).isEmpty)
        #expect(halfway.endOfInput() == [.failed(.truncated(.transportFrame(2)))])

        var short = responder
        #expect(
            short.receive([0x00, 0x0f] + [UInt8](repeating: 0, count: 15)) == [.failed(.truncated(.transportFrame(0)))])
    }

    // MARK: - Close

    @Test("a goodbye is a clean close; an ending without one is a cut")
    func goodbyeAndCut() throws {
        var (initiator, responder) = establishedChannels()
        #expect(responder.receive(try initiator.send([7])) == [.message([7])])
        #expect(responder.receive(try initiator.sendGoodbye()) == [.goodbye])
        #expect(initiator.hasSentGoodbye && responder.hasReceivedGoodbye)
        #expect(throws: LinkError.closed) { try initiator.send([8]) }
        #expect(throws: LinkError.closed) { try initiator.sendGoodbye() }

        // Half-close: the other direction still works until its own goodbye.
        #expect(initiator.receive(try responder.send([9])) == [.message([9])])
        #expect(initiator.receive(try responder.sendGoodbye()) == [.goodbye])
        #expect(initiator.endOfInput().isEmpty)
        #expect(responder.endOfInput().isEmpty)

        var (_, abandoned) = establishedChannels()
        #expect(abandoned.endOfInput() == [.failed(.cut)])
        #expect(abandoned.receive([0]) == [.failed(.closed)])
    }

    @Test("anything after a goodbye, in the same frame or a later one, fails by name")
    func dataAfterGoodbye() throws {
        var (initiator, responder) = establishedChannels()
        var sameFrame = responder
        let goodbyeThenMessage = try initiator.sealFrame(([1, 0, 0, 0, 0] + [0, 0, 0, 0, 1, 42])[...])
        let events = sameFrame.receive(goodbyeThenMessage)
        #expect(events.count == 2 && events[0] == .goodbye)
        guard case .failed(.unexpectedMessage) = events.last else {
            Issue.record("data after the goodbye must fail")
            return
        }

        var (sender, laterFrame) = establishedChannels()
        #expect(laterFrame.receive(try sender.sendGoodbye()) == [.goodbye])
        var forgingSender = sender
        let extra = try forgingSender.sealFrame([0, 0, 0, 0, 1, 42][...])
        guard case .failed(.unexpectedMessage) = laterFrame.receive(extra).last else {
            Issue.record("a frame after the goodbye must fail")
            return
        }
    }

    // MARK: - Records the receiver must refuse

    @Test("an announced length over 1 MiB fails before any body is buffered")
    func announcedTooLarge() throws {
        var (initiator, responder) = establishedChannels()
        let length = UInt32(Limits.applicationMessageBytesMax + 1)
        let header: [UInt8] = [
            0, UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff),
        ]
        #expect(
            responder.receive(try initiator.sealFrame(header[...]))
                == [.failed(.messageTooLarge(bytes: Int(length), limit: Limits.applicationMessageBytesMax))])
    }

    @Test("unknown record kinds and a goodbye with a body are malformed")
    func malformedRecords() throws {
        for plaintext: [UInt8] in [[2, 0, 0, 0, 0], [1, 0, 0, 0, 1, 0]] {
            var (initiator, responder) = establishedChannels()
            guard
                case .failed(.malformedPayload(.transportFrame(0), _)) = responder.receive(
                    try initiator.sealFrame(plaintext[...])
                ).last
            else {
                Issue.record("\(plaintext) must be malformed")
                continue
            }
        }
    }

    // MARK: - Rekey and nonces

    @Test("rekeying every few frames keeps working across many thresholds, both ways", arguments: [1, 3] as [UInt64])
    func rekey(interval: UInt64) throws {
        var (initiator, responder) = establishedChannels(rekeyIntervalFrames: interval)
        for index in 0..<20 {
            let message = patterned(index * 7, salt: index)
            #expect(responder.receive(try initiator.send(message)) == [.message(message)])
            #expect(initiator.receive(try responder.send(message)) == [.message(message)])
        }
        // A multi-frame message crosses a threshold in its middle.
        let big = patterned(150_000)
        #expect(responder.receive(try initiator.send(big)) == [.message(big)])
        #expect(initiator.framesSent == 23 && responder.framesReceived == 23)
    }

    @Test("rekeying really changes the key: ends that disagree on the interval part at the first rekey")
    func rekeyMismatch() throws {
        let run = runHandshake(
            initiator: TestNode.initiator.machine(.initiator, rekeyIntervalFrames: 3),
            responder: TestNode.responder.machine(.responder, rekeyIntervalFrames: 4))
        var initiator = try #require(run.initiator.established).channel
        var responder = try #require(run.responder.established).channel
        for index in 0..<3 {
            #expect(responder.receive(try initiator.send([UInt8(index)])) == [.message([UInt8(index)])])
        }
        #expect(responder.receive(try initiator.send([3])) == [.failed(.decryptFailed(.transportFrame(3)))])
    }

    @Test("the default rekey interval is the named limit")
    func defaultInterval() {
        #expect(TestNode.initiator.configuration().rekeyIntervalFrames == Limits.rekeyIntervalFrames)
        #expect(Limits.rekeyIntervalFrames == 1 << 16)
    }

    @Test("the last nonce is refused, and the channel is closed from then on")
    func nonceExhaustion() throws {
        var (initiator, _) = establishedChannels()
        initiator.setSendingNonce(UInt64.max - 1)
        _ = try initiator.send([1])
        #expect(throws: LinkError.nonceExhausted) { try initiator.send([2]) }
        #expect(throws: LinkError.closed) { try initiator.send([3]) }
    }
}
