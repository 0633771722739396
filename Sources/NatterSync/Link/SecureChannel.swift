internal import NatterCrypto

/// The encrypted byte stream of an established link: application messages in, wire bytes out, and back.
///
/// Wire: a sequence of frames, each `length: u16 BE` then that many bytes of Noise ciphertext (16 ≤ length ≤ 65535,
/// tag included). The frames' plaintexts, concatenated, form a stream of records, each `kind: u8`, `length: u32 BE`,
/// then `length` bytes; kind 0 is an application message (up to `Limits.applicationMessageBytesMax`), kind 1 the
/// goodbye (length 0). A record may span frames, so messages can be larger than one Noise message; `send` starts
/// every message in a fresh frame and never pads. Every frame's nonce is its position in its direction, so a
/// replayed, dropped or reordered frame fails authentication, and a clean close (goodbye, authenticated like any
/// record) is told apart from a cut (the stream simply ends).
///
/// Sans-IO: `receive` takes bytes in any chunking, one at a time included, and returns what they completed. Each
/// direction rekeys after every `rekeyIntervalFrames` frames; both ends count the same frames, so no signal is
/// needed.
public struct SecureChannel: Sendable {
    /// What received bytes completed.
    public enum Event: Sendable, Equatable {
        /// One whole application message.
        case message([UInt8])
        /// The peer closed the link cleanly; it sends nothing more.
        case goodbye
        /// The link is unusable from now on: close the connection.
        case failed(LinkError)
    }

    /// Record kinds in the decrypted stream.
    enum RecordKind: UInt8 {
        case message = 0
        case goodbye = 1
    }

    /// Bytes of a record header: kind (1) and length (4).
    static let recordHeaderBytes = 5

    private var sender: CipherState
    private var receiver: CipherState
    private let rekeyIntervalFrames: UInt64
    /// Frames sent and received so far: the number of the next frame in each direction.
    private(set) var framesSent: UInt64 = 0
    private(set) var framesReceived: UInt64 = 0
    private var wire = ByteQueue()
    private var stream = ByteQueue()
    private var pendingRecord: (kind: RecordKind, length: Int)?
    /// Set once the channel failed or its input ended; every later call reports `.closed`.
    private var finished = false

    /// Whether this side sent its goodbye (it can no longer send).
    public private(set) var hasSentGoodbye = false
    /// Whether the peer's goodbye arrived (it will send nothing more).
    public private(set) var hasReceivedGoodbye = false

    init(sender: CipherState, receiver: CipherState, rekeyIntervalFrames: UInt64) {
        precondition(sender.hasKey && receiver.hasKey, "a secure channel needs both transport keys")
        precondition(rekeyIntervalFrames > 0, "the rekey interval counts at least one frame")
        self.sender = sender
        self.receiver = receiver
        self.rekeyIntervalFrames = rekeyIntervalFrames
    }

    // MARK: - Sending

    /// The wire bytes carrying `message`. Throws `.messageTooLarge` above the cap (nothing is sent, the channel
    /// stays usable), `.closed` after a goodbye or a failure, `.nonceExhausted` at the end of the nonce space.
    public mutating func send(_ message: some Collection<UInt8>) throws(LinkError) -> [UInt8] {
        guard !finished, !hasSentGoodbye else { throw .closed }
        guard message.count <= Limits.applicationMessageBytesMax else {
            throw .messageTooLarge(bytes: message.count, limit: Limits.applicationMessageBytesMax)
        }
        return try seal(kind: .message, body: message)
    }

    /// The wire bytes of the goodbye. Nothing can be sent after it; receiving goes on until the peer's goodbye.
    public mutating func sendGoodbye() throws(LinkError) -> [UInt8] {
        guard !finished, !hasSentGoodbye else { throw .closed }
        let bytes = try seal(kind: .goodbye, body: [])
        hasSentGoodbye = true
        return bytes
    }

    private mutating func seal(kind: RecordKind, body: some Collection<UInt8>) throws(LinkError) -> [UInt8] {
        var record: [UInt8] = [kind.rawValue]
        record.reserveCapacity(Self.recordHeaderBytes + body.count)
        let length = UInt32(body.count)
        record += [UInt8(length >> 24), UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff)]
        record.append(contentsOf: body)

        var out: [UInt8] = []
        var offset = 0
        while offset < record.count {
            let end = min(offset + Limits.transportPlaintextBytesMax, record.count)
            out += try sealFrame(record[offset..<end])
            offset = end
        }
        return out
    }

    /// One wire frame carrying `plaintext` (at most `Limits.transportPlaintextBytesMax` bytes), rekeying after it
    /// when the interval is reached. Internal so tests can forge authentic frames with arbitrary plaintext.
    mutating func sealFrame(_ plaintext: ArraySlice<UInt8>) throws(LinkError) -> [UInt8] {
        precondition(plaintext.count <= Limits.transportPlaintextBytesMax, "a frame's plaintext is at most 65519 bytes")
        let ciphertext: [UInt8]
        do {
            ciphertext = try sender.encrypt(plaintext, associatedData: [])
        } catch {
            finished = true
            throw .nonceExhausted
        }
        framesSent += 1
        if framesSent % rekeyIntervalFrames == 0 { sender.rekey() }
        return [UInt8(ciphertext.count >> 8), UInt8(ciphertext.count & 0xff)] + ciphertext
    }

    // MARK: - Receiving

    /// Feeds bytes from the connection; returns the messages they complete, in order, and at most one failure,
    /// last. Messages completed before a failure in the same chunk are authentic and returned.
    public mutating func receive(_ bytes: some Collection<UInt8>) -> [Event] {
        guard !finished else { return [.failed(.closed)] }
        wire.append(bytes)
        var events: [Event] = []
        while wire.count >= 2 {
            let stage = LinkError.Stage.transportFrame(framesReceived)
            let length = Int(wire.bigEndian(at: 0, width: 2))
            guard length >= ChaCha20Poly1305.tagBytes else { return events + fail(.truncated(stage)) }
            guard wire.count >= 2 + length else { break }
            guard !hasReceivedGoodbye else {
                return events + fail(.unexpectedMessage("a transport frame arrived after the peer's goodbye"))
            }
            wire.skip(2)
            let frame = wire.take(length)
            let plaintext: [UInt8]
            do {
                plaintext = try receiver.decrypt(frame, associatedData: [])
            } catch NoiseError.nonceExhausted {
                return events + fail(.nonceExhausted)
            } catch {
                return events + fail(.decryptFailed(stage))
            }
            framesReceived += 1
            if framesReceived % rekeyIntervalFrames == 0 { receiver.rekey() }
            stream.append(plaintext)
            if let failure = parseRecords(into: &events, stage: stage) { return events + fail(failure) }
        }
        return events
    }

    /// Turns whole records at the front of the decrypted stream into events; returns the failure, if any.
    private mutating func parseRecords(into events: inout [Event], stage: LinkError.Stage) -> LinkError? {
        while true {
            if pendingRecord == nil {
                guard stream.count >= Self.recordHeaderBytes else { return nil }
                guard let kind = RecordKind(rawValue: stream[0]) else {
                    return .malformedPayload(stage, "unknown record kind \(stream[0])")
                }
                let length = Int(stream.bigEndian(at: 1, width: 4))
                switch kind {
                case .message:
                    // Checked before the body is buffered.
                    guard length <= Limits.applicationMessageBytesMax else {
                        return .messageTooLarge(bytes: length, limit: Limits.applicationMessageBytesMax)
                    }
                case .goodbye:
                    guard length == 0 else { return .malformedPayload(stage, "a goodbye of \(length) bytes") }
                }
                stream.skip(Self.recordHeaderBytes)
                pendingRecord = (kind, length)
            }
            guard let record = pendingRecord, stream.count >= record.length else { return nil }
            pendingRecord = nil
            switch record.kind {
            case .message:
                events.append(.message(stream.take(record.length)))
            case .goodbye:
                hasReceivedGoodbye = true
                events.append(.goodbye)
                guard stream.isEmpty else { return .unexpectedMessage("data followed the peer's goodbye") }
                return nil
            }
        }
    }

    /// The connection's input ended. Nothing if the peer said goodbye; otherwise `.truncated` when it ended inside
    /// a frame or a message, `.cut` when it ended between messages without a goodbye.
    public mutating func endOfInput() -> [Event] {
        guard !finished else { return [] }
        finished = true
        if hasReceivedGoodbye, wire.isEmpty { return [] }
        if !wire.isEmpty || !stream.isEmpty || pendingRecord != nil {
            return [.failed(.truncated(.transportFrame(framesReceived)))]
        }
        return [.failed(.cut)]
    }

    private mutating func fail(_ error: LinkError) -> [Event] {
        finished = true
        wire = ByteQueue()
        stream = ByteQueue()
        pendingRecord = nil
        return [.failed(error)]
    }

    /// Test access: move the sending nonce (to reach exhaustion without 2^64 frames).
    mutating func setSendingNonce(_ nonce: UInt64) { sender.setNonce(nonce) }
}
