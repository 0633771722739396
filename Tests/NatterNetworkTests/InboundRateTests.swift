// Goal: the transport's inbound budget — token buckets (tested in NatterSyncTests) and the frame counter — slows a fast sender by exactly its
// rate and counts frames however the stream is cut. Method: the pure types with explicit time; the frame counter
// fed the same stream whole, byte by byte and in random cuts.
import Testing

@testable import NatterNetwork

@Suite("Inbound rate limits")
struct InboundRateTests {
    @Test("frames are counted the same whole, byte by byte and cut at random")
    func frameCounter() {
        var stream = [UInt8]()
        var generator = SystemRandomNumberGenerator()
        for length in [0, 1, 51, 255, 256, 1000, 65_535, 3] {
            stream += [UInt8(length >> 8), UInt8(length & 0xFF)]
            stream += (0..<length).map { _ in UInt8.random(in: 0...255, using: &generator) }
        }
        var whole = FrameCounter()
        #expect(whole.count(stream) == 8)
        var dripped = FrameCounter()
        #expect(stream.reduce(0) { $0 + dripped.count([$1]) } == 8)
        var cut = FrameCounter()
        var total = 0
        var index = 0
        while index < stream.count {
            let end = min(stream.count, index + Int.random(in: 1...4000, using: &generator))
            total += cut.count(stream[index..<end])
            index = end
        }
        #expect(total == 8)
    }

    @Test("a flood of tiny frames pauses reading although its bytes are within the byte budget")
    func tinyFramesPause() {
        var limiter = InboundRateLimiter(
            bytesPerSecond: 1_000_000, burstBytes: 1_000_000, framesPerSecond: 100, burstFrames: 10, now: .zero)
        let frame: [UInt8] = [0, 16] + [UInt8](repeating: 0, count: 16)
        limiter.received(Array((0..<10).map { _ in frame }.joined()), now: .zero)
        #expect(limiter.pause(now: .zero) == .milliseconds(10))
        limiter.received(Array((0..<20).map { _ in frame }.joined()), now: .zero)
        #expect(limiter.pause(now: .zero) == .milliseconds(210))
        #expect(limiter.pause(now: .milliseconds(210)) == nil)
    }
}
