// Goal: show that `Blake2b` and `Blake2bHasher` compute standard BLAKE2b, keyed and unkeyed, at several output
// sizes, and that streaming equals hashing in one go. Method: digests from Python's `hashlib.blake2b` (and RFC 7693's
// "abc" example) embedded as constants, and the streaming hasher compared with the one-shot hash at every split point.
import NatterCrypto
import Testing

/// One BLAKE2b known answer, produced with Python 3.11:
/// `hashlib.blake2b(message, digest_size=outputBytes, key=key).hexdigest()`.
struct Blake2bVector: Sendable, CustomTestStringConvertible {
    let name: String
    let message: [UInt8]
    let key: [UInt8]?
    let outputBytes: Int
    let digest: String

    var testDescription: String { name }
}

/// `bytes(range(n))` in Python.
private func counting(_ count: Int) -> [UInt8] { (0..<count).map { UInt8(truncatingIfNeeded: $0) } }

/// `bytes(i % 251 for i in range(1000))` in Python: 1000 bytes that cross several 128-byte blocks.
private let longMessage = (0..<1000).map { UInt8($0 % 251) }

@Suite("BLAKE2b one-shot and streaming")
struct HashingTests {
    static let vectors: [Blake2bVector] = [
        Blake2bVector(
            name: "empty, 32", message: [], key: nil, outputBytes: 32,
            digest: "0e5751c026e543b2e8ab2eb06099daa1d1e5df47778f7787faab45cdf12fe3a8"),
        Blake2bVector(
            name: "abc, 16", message: Array("abc".utf8), key: nil, outputBytes: 16,
            digest: "cf4ab791c62b8d2b2109c90275287816"),
        Blake2bVector(
            name: "abc, 32", message: Array("abc".utf8), key: nil, outputBytes: 32,
            digest: "bddd813c634239723171ef3fee98579b94964e3bb1cb3e427262c8c068d52319"),
        // Also RFC 7693 appendix A.
        Blake2bVector(
            name: "abc, 64", message: Array("abc".utf8), key: nil, outputBytes: 64,
            digest: "ba80a53f981c4d0d6a2797b69f12f6e94c212f14685ac4b74b12bb6fdbffa2d1"
                + "7d87c5392aab792dc252d5de4533cc9518d38aa8dbf1925ab92386edd4009923"),
        Blake2bVector(
            name: "1000 bytes, 48", message: longMessage, key: nil, outputBytes: 48,
            digest: "f0a7a4bb3c3290f432e513caa227ab3bf933c4c8c167193dff1cb10a0b992f04"
                + "2f5679e477f00c551e2cf2bec8101f1e"),
        Blake2bVector(
            name: "keyed (16-byte key), abc, 16", message: Array("abc".utf8), key: counting(16), outputBytes: 16,
            digest: "cc611a2673ca66e9f7fc64b995c5467c"),
        Blake2bVector(
            name: "keyed (32-byte key), abc, 32", message: Array("abc".utf8), key: counting(32), outputBytes: 32,
            digest: "d63a32d3e44738d7907f964316c241adaba0abfeabc32349677578a15a203f7f"),
        Blake2bVector(
            name: "keyed (32-byte key), empty, 64", message: [], key: counting(32), outputBytes: 64,
            digest: "84bfa69f0d90df7db2a3ee026042988b5bd9caa2320af1f371823dd28351202f"
                + "8e6277c40c050711c8dd4e2c1ac30c34c9aed0bddd468b031287fe872675e0cc"),
        Blake2bVector(
            name: "keyed (64-byte key), 256 bytes, 64", message: counting(256), key: counting(64), outputBytes: 64,
            digest: "b72071e096277edebb8ee5134dd3714996307ba3a55aa4733d412abbe28e909e"
                + "10e57e6fbfb4ef53b3b960518294ff889a90829254412e2a60b85add07a3674f"),
    ]

    @Test("one-shot digests match hashlib", arguments: vectors)
    func oneShot(vector: Blake2bVector) {
        let digest = Blake2b.hash(vector.message, outputBytes: vector.outputBytes, key: vector.key)
        #expect(Hex.encode(digest) == vector.digest)
    }

    @Test("the default output is 32 bytes, and the maximum is 64")
    func defaults() {
        #expect(Blake2b.hash(Array("abc".utf8)) == Blake2b.hash(Array("abc".utf8), outputBytes: 32))
        #expect(Blake2b.outputBytesMax == 64)
    }

    @Test("keys and output sizes change the digest, not just its length")
    func parametersMatter() {
        let message = Array("abc".utf8)
        let digest32 = Blake2b.hash(message, outputBytes: 32)
        #expect(Array(Blake2b.hash(message, outputBytes: 64).prefix(32)) != digest32)
        #expect(Blake2b.hash(message, outputBytes: 32, key: counting(32)) != digest32)
        #expect(Blake2b.hash(message, outputBytes: 32, key: counting(32)) != Blake2b.hash(message, key: counting(33)))
    }

    @Test("array, slice and raw buffer inputs hash alike")
    func byteSources() {
        let padded = [0xEE] + longMessage + [0xEE]
        let expected = Blake2b.hash(longMessage)
        #expect(Blake2b.hash(padded[1..<(padded.count - 1)]) == expected)
        #expect(longMessage.withUnsafeBytes { Blake2b.hash($0) } == expected)
    }

    // MARK: - Streaming

    @Test("streaming equals one-shot for every split of 1000 bytes")
    func streamingEveryTwoWaySplit() {
        let expected = Blake2b.hash(longMessage, outputBytes: 48)
        let mismatches = (0...longMessage.count).filter { split in
            var hasher = Blake2bHasher(outputBytes: 48)
            hasher.update(longMessage[..<split])
            hasher.update(longMessage[split...])
            return hasher.finalize() != expected
        }
        #expect(mismatches.isEmpty, "streaming differs at split points \(mismatches)")
    }

    @Test("streaming equals one-shot byte by byte, in uneven chunks and with empty updates")
    func streamingChunks() {
        let expected = Blake2b.hash(longMessage, outputBytes: 64)
        var byteByByte = Blake2bHasher(outputBytes: 64)
        for byte in longMessage { byteByByte.update([byte]) }
        #expect(byteByByte.finalize() == expected)

        var chunked = Blake2bHasher(outputBytes: 64)
        var start = 0
        var size = 1
        while start < longMessage.count {
            let end = min(start + size, longMessage.count)
            chunked.update(longMessage[start..<end])
            chunked.update([UInt8]())
            start = end
            size = size * 3 + 1  // 1, 4, 13, 40, 121, 364, ...
        }
        #expect(chunked.finalize() == expected)
    }

    @Test("the streaming hasher of nothing is the hash of nothing, at the default size")
    func streamingEmpty() {
        #expect(Hex.encode(Blake2bHasher().finalize()) == HashingTests.vectors[0].digest)
    }

    /// Python: `hashlib.blake2b(b"abc" + struct.pack(">Q", 0x0102030405060708) + struct.pack(">Q", 1),
    /// digest_size=32).hexdigest()`
    @Test("update(bigEndian:) feeds the eight big-endian bytes")
    func bigEndianIntegers() {
        var hasher = Blake2bHasher()
        hasher.update(Array("abc".utf8))
        hasher.update(bigEndian: 0x0102_0304_0506_0708)
        hasher.update(bigEndian: 1)
        #expect(Hex.encode(hasher.finalize()) == "691c23cc6ead9d72c1705a4cfdd37a73a06e463d486b69df514ab7d3961b5695")
    }
}
