// Goal: show that SecretBytes keeps exactly the bytes it was given, compares them correctly, and that `wipe` zeroes
// an array. Method: direct checks on small known inputs, including the empty secret and secrets that differ only in
// the last byte or in length.
import NatterCrypto
import Testing

@Suite("SecretBytes and wipe")
struct SecretBytesTests {
    @Test("keeps the bytes and their count", arguments: [0, 1, 16, 32, 100])
    func keepsBytes(count: Int) {
        let bytes = (0..<count).map { UInt8(truncatingIfNeeded: 0x40 &+ $0) }
        let secret = SecretBytes(bytes)
        #expect(secret.count == count)
        #expect(secret.exposedCopy() == bytes)
        #expect(secret.withUnsafeBytes { Array($0) } == bytes)
        #expect(secret.description == "<secret \(count) bytes>")
    }

    @Test("accepts any collection of bytes")
    func collections() {
        let bytes: [UInt8] = [9, 8, 7, 6, 5]
        #expect(SecretBytes(bytes[1...3]).exposedCopy() == [8, 7, 6])
        #expect(SecretBytes(Array("key".utf8)).exposedCopy() == [0x6b, 0x65, 0x79])
    }

    @Test("constantTimeEquals compares contents and length")
    func equality() {
        let a = SecretBytes([1, 2, 3, 4])
        #expect(a.constantTimeEquals(SecretBytes([1, 2, 3, 4])))
        #expect(a.constantTimeEquals(a))
        #expect(!a.constantTimeEquals(SecretBytes([1, 2, 3, 5])))
        #expect(!a.constantTimeEquals(SecretBytes([1, 2, 3])))
        #expect(!a.constantTimeEquals(SecretBytes([1, 2, 3, 4, 0])))
        #expect(SecretBytes([]).constantTimeEquals(SecretBytes([])))
        #expect(!SecretBytes([]).constantTimeEquals(SecretBytes([0])))
    }

    @Test("wipe zeroes every byte and keeps the length")
    func wipeZeroes() {
        var bytes: [UInt8] = Array(repeating: 0xff, count: 33)
        wipe(&bytes)
        #expect(bytes == Array(repeating: 0, count: 33))
        var empty: [UInt8] = []
        wipe(&empty)
        #expect(empty.isEmpty)
    }
}
