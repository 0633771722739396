// Goal: show that Hex round-trips every byte and refuses anything that is not an even run of hex digits, since the
// other tests' vectors depend on it. Method: all 256 byte values, fixed strings in both cases, and malformed inputs.
import NatterCrypto
import Testing

@Suite("Hex")
struct HexTests {
    @Test("encodes lower case and round-trips all 256 byte values")
    func roundTrip() {
        let all = (0...255).map { UInt8($0) }
        let text = Hex.encode(all)
        #expect(text.count == 512)
        #expect(text.hasPrefix("000102"))
        #expect(text.hasSuffix("fdfeff"))
        #expect(Hex.decode(text) == all)
        #expect(Hex.decode(text.uppercased()) == all)
    }

    @Test("a sequence without contiguous storage encodes as its array does")
    func nonContiguous() {
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.encode(all.lazy.map { $0 }) == Hex.encode(all))
        #expect(Hex.encode(all[3..<7]) == "03040506")
        #expect(Hex.encode((0..<0).lazy.map { UInt8($0) }) == "")
    }

    @Test("known strings")
    func known() {
        #expect(Hex.encode([0xde, 0xad, 0xbe, 0xef]) == "deadbeef")
        #expect(Hex.decode("DeadBEEF") == [0xde, 0xad, 0xbe, 0xef])
        #expect(Hex.encode([UInt8]()) == "")
        #expect(Hex.decode("") == [])
    }

    @Test("refuses malformed hex", arguments: ["0", "abc", "0g", "g0", "0x00", " 00", "00 ", "a-b0", "é0", "0é"])
    func malformed(text: String) {
        #expect(Hex.decode(text) == nil)
    }
}
