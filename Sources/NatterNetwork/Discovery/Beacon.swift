public import NatterCrypto

// MARK: - Node tag

/// A random 16-byte name a node picks for one run, so that beacons can say "the same node again" without saying who.
///
/// It is not an identity: a new run draws a new tag, so beacons never link a node across runs, and the tag travels
/// encrypted, so only holders of the network key see it at all. Identities are revealed only inside the
/// authenticated link handshake.
public struct NodeTag: Hashable, Sendable, CustomStringConvertible {
    /// Tag length: 16 bytes. Two tags collide with probability 2^-128 per pair: never, on any LAN.
    public static let byteCount = 16

    /// The 16 bytes.
    public let bytes: [UInt8]

    /// The tag made of exactly 16 bytes (anything else is a programming error; beacons go through `Beacon.open`).
    public init(bytes: [UInt8]) {
        precondition(bytes.count == Self.byteCount, "a node tag is \(Self.byteCount) bytes, got \(bytes.count)")
        self.bytes = bytes
    }

    /// A fresh tag from `generator`. Production passes `SecureRandomGenerator`; simulations a seeded one.
    public static func random(using generator: inout some RandomNumberGenerator) -> NodeTag {
        NodeTag(bytes: DiscoveryRandom.bytes(byteCount, using: &generator))
    }

    /// First 8 hex digits: enough for logs.
    public var description: String { String(Hex.encode(bytes).prefix(8)) }
}

// MARK: - Beacon

/// One discovery beacon: "a node of this network listens for links on TCP port `port`", in a fixed 63-byte datagram.
///
/// Layout (byte by byte in docs/protocol.md §4, to be docs/protocol.md §4):
///
/// ```
///  0       4   5                        29                                 47               63
///  +-------+---+------------------------+----------------------------------+----------------+
///  | magic |ver| nonce (24)             | sealed: tag (16) ‖ port (u16 BE) | Poly1305 (16)  |
///  | natr  | 1 |                        | = 18 bytes of ciphertext         |                |
///  +-------+---+------------------------+----------------------------------+----------------+
/// ```
///
/// The sealed part is XChaCha20-Poly1305 under the network key's beacon subkey (`NetworkKey.beaconKey`) with the
/// random nonce carried in bytes 5..<29, and associated data `natter/v1/beacon` ‖ bytes 0..<5 (magic and version), so
/// a beacon is valid for nothing else and its header cannot be changed. There is no identity, no address, no clock
/// and no counter: a replayed beacon can only make its receivers dial the replay's source address at the beacon's
/// port, where a sender without the network key fails the link handshake at its first message. That is harmless, so
/// beacons carry no freshness (and discovery needs no synchronised clocks).
public struct Beacon: Equatable, Sendable {
    /// The four ASCII bytes `natr` that open every beacon: they tell a beacon of another natter network (which fails
    /// authentication) from stray traffic on the port (which lacks them).
    public static let magic: [UInt8] = Array("natr".utf8)
    /// The only version this code writes and reads.
    public static let version: UInt8 = 1
    /// The AEAD domain label, authenticated before the header.
    public static let domain: [UInt8] = Array("natter/v1/beacon".utf8)

    /// Bytes before the nonce: magic and version.
    public static let headerBytes = 5
    /// Plaintext length: tag (16) and port (2).
    public static let plaintextBytes = NodeTag.byteCount + 2
    /// Total size of a version-1 beacon: 5 + 24 + 18 + 16 = 63 bytes, always.
    public static let byteCount = headerBytes + AEADNonce.byteCount + plaintextBytes + 16

    /// The sender's tag for this run.
    public let tag: NodeTag
    /// The TCP port the sender accepts links on (1...65535).
    public let port: UInt16

    public init(tag: NodeTag, port: UInt16) {
        precondition(port != 0, "a beacon announces a real TCP port")
        self.tag = tag
        self.port = port
    }

    /// The plaintext that is sealed: tag ‖ port (u16 big-endian). Nothing else.
    public var plaintext: [UInt8] { tag.bytes + [UInt8(port >> 8), UInt8(port & 0xff)] }

    /// The 63-byte datagram, sealed under `key` (a network's `beaconKey`) with `nonce`. Every beacon needs a fresh
    /// nonce; random 24-byte nonces never collide in practice.
    public func seal(key: SymmetricKey, nonce: AEADNonce) -> [UInt8] {
        let header = Self.magic + [Self.version]
        let sealed = AEAD.seal(plaintext, key: key, nonce: nonce, associatedData: Self.domain + header)
        let out = header + nonce.bytes + sealed
        assert(out.count == Self.byteCount)
        return out
    }

    /// The beacon in `datagram`, if it is a version-1 beacon sealed under `key`; otherwise the reason it is not.
    ///
    /// Checks, in order: room for the header, magic, version, exact size, authentication, port. Untrusted input never
    /// traps here.
    public static func open(_ datagram: some Collection<UInt8>, key: SymmetricKey) -> Result<Beacon, BeaconError> {
        // Look at the header before copying anything: a datagram may be 64 KiB of junk.
        let count = datagram.count
        guard count >= headerBytes else { return .failure(.wrongSize(count)) }
        let header = Array(datagram.prefix(headerBytes))
        guard Array(header[0..<4]) == magic else { return .failure(.notABeacon) }
        guard header[4] == version else { return .failure(.unknownVersion(header[4])) }
        guard count == byteCount else { return .failure(.wrongSize(count)) }
        let bytes = Array(datagram)
        let nonceEnd = headerBytes + AEADNonce.byteCount
        let nonce = try! AEADNonce(bytes: Array(bytes[headerBytes..<nonceEnd]))
        let plain: [UInt8]
        do {
            plain = try AEAD.open(
                Array(bytes[nonceEnd...]), key: key, nonce: nonce,
                associatedData: domain + Array(bytes[0..<headerBytes]))
        } catch {
            return .failure(.wrongKeyOrTampered)
        }
        assert(plain.count == plaintextBytes)
        let port = UInt16(plain[16]) << 8 | UInt16(plain[17])
        guard port != 0 else { return .failure(.invalidPort) }
        return .success(Beacon(tag: NodeTag(bytes: Array(plain[0..<16])), port: port))
    }
}

/// Why a datagram on the discovery port is not a beacon this node accepts. Every case is a rejection value, never a
/// crash, and none of them is answered.
public enum BeaconError: Error, Hashable, Sendable, CustomStringConvertible {
    /// Shorter than a header, or a version-1 header on a datagram that is not exactly 63 bytes.
    case wrongSize(Int)
    /// The first four bytes are not `natr`: not natter traffic.
    case notABeacon
    /// A natter beacon of a version this node does not read (a newer node; harmless).
    case unknownVersion(UInt8)
    /// Authentication failed: a beacon of another natter network (another network key), or one altered in transit.
    /// XChaCha20-Poly1305 cannot tell the two apart, and neither can anyone without both keys.
    case wrongKeyOrTampered
    /// Authentic, but announcing TCP port 0: a broken sender.
    case invalidPort

    public var description: String {
        switch self {
        case .wrongSize(let count): "wrong size (\(count) bytes, a beacon is \(Beacon.byteCount))"
        case .notABeacon: "not a natter beacon"
        case .unknownVersion(let version): "beacon version \(version), this node reads version \(Beacon.version)"
        case .wrongKeyOrTampered: "another network key (or altered in transit)"
        case .invalidPort: "authentic beacon announcing TCP port 0"
        }
    }
}

// MARK: - Helpers

/// Random bytes from an injected generator (tags, beacon nonces), so that simulations replay from their seed.
enum DiscoveryRandom {
    /// `count` bytes from `generator`, eight at a time.
    static func bytes(_ count: Int, using generator: inout some RandomNumberGenerator) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count + 7)
        while out.count < count {
            let word = generator.next()
            withUnsafeBytes(of: word.littleEndian) { out.append(contentsOf: $0) }
        }
        return Array(out.prefix(count))
    }
}
