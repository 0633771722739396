// Goal: show that a beacon is exactly the documented 63 bytes, opens only under its own network's beacon key, and
// carries nothing but version, tag and port. Method: round trips with seeded tags and nonces, a vector computed
// independently with Python (hashlib BLAKE2b + PyNaCl, script in docs/protocol.md §4), every one of the 504 single-bit flips,
// another network's key, every wrong size, and opening the sealed part by hand with the documented layout.
import NatterCrypto
import NatterModel
import Testing

@testable import NatterNetwork

@Suite("Discovery beacon codec", .timeLimit(.minutes(1)))
struct DiscoveryBeaconTests {
    static let networkKey = NetworkKey(key: try! SymmetricKey(bytes: Array(0..<32)))
    static let nonce = try! AEADNonce(bytes: Array(0x40..<0x58))
    static let tag = NodeTag(bytes: Array(0x80..<0x90))
    /// From the Python script in docs/protocol.md §4: network key 00…1f, nonce 40…57, tag 80…8f, port 7720.
    static let vector =
        "6e61747201404142434445464748494a4b4c4d4e4f505152535455565759b26c6f81d80fe7bfeb4d71307b01ae8ed6664c84f110f98"
        + "2c6a47030dc7ab9b816"
    static let beaconKeyVector = "dc696b09f63e0e7f4c926a978ee1d1c5a733a1f1cc6a3cf8c691c66d309038ee"

    @Test("the sealed beacon matches the independently computed vector")
    func vector() {
        let bytes = Beacon(tag: Self.tag, port: 7720).seal(key: Self.networkKey.beaconKey, nonce: Self.nonce)
        #expect(Hex.encode(bytes) == Self.vector)
        #expect(Self.networkKey.beaconKey.secret.withUnsafeBytes { Hex.encode($0) } == Self.beaconKeyVector)
        #expect(Beacon.open(bytes, key: Self.networkKey.beaconKey) == .success(Beacon(tag: Self.tag, port: 7720)))
    }

    @Test("round trip for many tags, ports and nonces; always 63 bytes")
    func roundTrip() {
        var random = SeededGenerator(seed: 17)
        let key = NetworkKey.generate().beaconKey
        for port in [1, 2, 7719, 40000, 65535] as [UInt16] {
            for _ in 0..<20 {
                let beacon = Beacon(tag: .random(using: &random), port: port)
                let nonce = try! AEADNonce(bytes: random.bytes(24))
                let bytes = beacon.seal(key: key, nonce: nonce)
                #expect(bytes.count == Beacon.byteCount)
                #expect(bytes.count == 63)
                #expect(Beacon.open(bytes, key: key) == .success(beacon))
                #expect(Beacon.open(bytes[...], key: key) == .success(beacon), "slices decode too")
            }
        }
    }

    @Test("every single-bit flip is rejected, each with the error of the field it hits")
    func everyBitFlip() {
        let key = Self.networkKey.beaconKey
        let good = Beacon(tag: Self.tag, port: 7720).seal(key: key, nonce: Self.nonce)
        for bit in 0..<(good.count * 8) {
            var bad = good
            bad[bit / 8] ^= UInt8(1 << (bit % 8))
            let result = Beacon.open(bad, key: key)
            switch bit / 8 {
            case 0..<4: #expect(result == .failure(.notABeacon), "bit \(bit)")
            case 4: #expect(result == .failure(.unknownVersion(bad[4])), "bit \(bit)")
            default: #expect(result == .failure(.wrongKeyOrTampered), "bit \(bit)")
            }
        }
    }

    @Test("a beacon of another network is rejected as wrongKeyOrTampered")
    func otherNetwork() {
        let other = NetworkKey(key: try! SymmetricKey(bytes: Array(1...32)))
        let bytes = Beacon(tag: Self.tag, port: 7720).seal(key: other.beaconKey, nonce: Self.nonce)
        #expect(Beacon.open(bytes, key: Self.networkKey.beaconKey) == .failure(.wrongKeyOrTampered))
        // Nor does the network key itself, or the handshake subkey, open a beacon: only the beacon subkey does.
        let mine = Beacon(tag: Self.tag, port: 7720).seal(key: Self.networkKey.beaconKey, nonce: Self.nonce)
        #expect(Beacon.open(mine, key: Self.networkKey.key) == .failure(.wrongKeyOrTampered))
        #expect(Beacon.open(mine, key: Self.networkKey.handshakeKey) == .failure(.wrongKeyOrTampered))
    }

    @Test("wrong sizes are rejected before any decryption, unknown versions by version")
    func sizesAndVersions() {
        let key = Self.networkKey.beaconKey
        let good = Beacon(tag: Self.tag, port: 7720).seal(key: key, nonce: Self.nonce)
        for count in 0..<5 {
            #expect(Beacon.open(Array(good.prefix(count)), key: key) == .failure(.wrongSize(count)))
        }
        for count in 5..<63 {
            #expect(Beacon.open(Array(good.prefix(count)), key: key) == .failure(.wrongSize(count)))
        }
        #expect(Beacon.open(good + [0], key: key) == .failure(.wrongSize(64)))
        #expect(Beacon.open(good + [UInt8](repeating: 0, count: 1000), key: key) == .failure(.wrongSize(1063)))
        // A future version may have another size: it is reported as a version, not a size.
        var future = good + [0, 0, 0]
        future[4] = 2
        #expect(Beacon.open(future, key: key) == .failure(.unknownVersion(2)))
        #expect(Beacon.open(Array("hello, world".utf8), key: key) == .failure(.notABeacon))
    }

    @Test("an authentic beacon announcing port 0 is rejected")
    func portZero() {
        let key = Self.networkKey.beaconKey
        let header = Beacon.magic + [Beacon.version]
        let sealed = AEAD.seal(
            Self.tag.bytes + [0, 0], key: key, nonce: Self.nonce, associatedData: Beacon.domain + header)
        #expect(Beacon.open(header + Self.nonce.bytes + sealed, key: key) == .failure(.invalidPort))
    }

    @Test("the plaintext is the tag and the port, nothing else; the clear part is magic, version and nonce")
    func noIdentityInside() throws {
        let key = Self.networkKey.beaconKey
        let bytes = Beacon(tag: Self.tag, port: 0x1E28).seal(key: key, nonce: Self.nonce)
        // Open by hand, with the layout as documented, not through the codec.
        #expect(Array(bytes[0..<4]) == Array("natr".utf8))
        #expect(bytes[4] == 1)
        #expect(Array(bytes[5..<29]) == Self.nonce.bytes)
        let plaintext = try AEAD.open(
            Array(bytes[29...]), key: key, nonce: try AEADNonce(bytes: Array(bytes[5..<29])),
            associatedData: Array("natter/v1/beacon".utf8) + Array(bytes[0..<5]))
        #expect(plaintext == Self.tag.bytes + [0x1E, 0x28])
        #expect(plaintext.count == NodeTag.byteCount + 2)
        // And the wire bytes contain neither the tag nor the port in clear.
        #expect(!contains(bytes, Self.tag.bytes))
    }

    @Test("fresh nonces make two beacons of one node unlinkable on the wire")
    func unlinkable() {
        var random = SeededGenerator(seed: 3)
        let key = Self.networkKey.beaconKey
        let beacon = Beacon(tag: Self.tag, port: 7720)
        let a = beacon.seal(key: key, nonce: try! AEADNonce(bytes: random.bytes(24)))
        let b = beacon.seal(key: key, nonce: try! AEADNonce(bytes: random.bytes(24)))
        #expect(a[0..<5] == b[0..<5])
        #expect(zip(a[5...], b[5...]).filter { $0 == $1 }.count < 8, "beyond the header, the bytes look unrelated")
    }

    private func contains(_ haystack: [UInt8], _ needle: [UInt8]) -> Bool {
        guard haystack.count >= needle.count else { return false }
        return (0...(haystack.count - needle.count)).contains { Array(haystack[$0..<($0 + needle.count)]) == needle }
    }
}
