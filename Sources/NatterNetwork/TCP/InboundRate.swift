import NatterSync

/// Counts the frames of natter's link framing (docs/protocol.md §2.2: `length: u16 ‖ bytes`, for handshake
/// messages and transport frames alike) in a byte stream cut anywhere, without buffering: the transport charges
/// every frame that begins to the peer's frame budget. Pure.
public struct FrameCounter: Sendable, Equatable {
    /// Body bytes still to skip in the current frame.
    private var remaining = 0
    /// The first length byte, when a chunk ended between the two.
    private var highByte: UInt8?

    public init() {}

    /// Feeds the next bytes of the stream; returns how many frames began in them.
    public mutating func count(_ bytes: some Collection<UInt8>) -> Int {
        var started = 0
        var index = bytes.startIndex
        while index != bytes.endIndex {
            if remaining > 0 {
                let skip = min(remaining, bytes.distance(from: index, to: bytes.endIndex))
                remaining -= skip
                index = bytes.index(index, offsetBy: skip)
                continue
            }
            if let high = highByte {
                remaining = Int(high) << 8 | Int(bytes[index])
                highByte = nil
                started += 1
            } else {
                highByte = bytes[index]
            }
            index = bytes.index(after: index)
        }
        return started
    }
}

/// The inbound budget of one connection: a byte bucket and a frame bucket (`TCPLimits`). Reading pauses while
/// either is in debt, so a peer that sends too fast is slowed down by TCP flow control, not cut off.
public struct InboundRateLimiter: Sendable, Equatable {
    private var bytes: TokenBucket
    private var frames: TokenBucket
    private var counter = FrameCounter()

    public init(
        bytesPerSecond: Int = TCPLimits.inboundBytesPerSecond, burstBytes: Int = TCPLimits.inboundBurstBytes,
        framesPerSecond: Int = TCPLimits.inboundFramesPerSecond, burstFrames: Int = TCPLimits.inboundBurstFrames,
        now: Duration
    ) {
        bytes = TokenBucket(capacity: burstBytes, refillPerSecond: Double(bytesPerSecond), now: now)
        frames = TokenBucket(capacity: burstFrames, refillPerSecond: Double(framesPerSecond), now: now)
    }

    /// Charges a chunk read from the socket.
    public mutating func received(_ chunk: some Collection<UInt8>, now: Duration) {
        bytes.take(chunk.count, now: now)
        frames.take(counter.count(chunk), now: now)
    }

    /// How long to wait before reading again; nil to read now.
    public func pause(now: Duration) -> Duration? {
        switch (bytes.waitTime(now: now), frames.waitTime(now: now)) {
        case (nil, nil): nil
        case (let wait?, nil), (nil, let wait?): wait
        case (let a?, let b?): max(a, b)
        }
    }
}
