public import NatterCrypto

/// Thirty-two bytes held as four big-endian words: cheap to hash, compare and copy. Ordering is byte-lexicographic.
public struct Bytes32: Hashable, Comparable, Sendable {
    public static let byteCount = 32
    public static let zero = Bytes32(words: (0, 0, 0, 0))

    // w0 holds bytes 0...7 (big-endian), and so on; comparing words in order compares bytes in order.
    @usableFromInline let w0: UInt64, w1: UInt64, w2: UInt64, w3: UInt64

    @usableFromInline init(words: (UInt64, UInt64, UInt64, UInt64)) {
        (w0, w1, w2, w3) = words
    }

    /// Exactly 32 bytes; anything else is a programming error (untrusted input goes through the decoder).
    public init(_ bytes: some Collection<UInt8>) {
        precondition(bytes.count == Self.byteCount, "Bytes32 needs exactly 32 bytes, got \(bytes.count)")
        if let fast = bytes.withContiguousStorageIfAvailable({ Bytes32(reading: UnsafeRawBufferPointer($0), at: 0) }) {
            self = fast
            return
        }
        self.init(Array(bytes))
    }

    /// The 32 bytes.
    public var bytes: [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(32)
        appendBytes(to: &out)
        return out
    }

    /// Appends the 32 bytes to `buffer` (the codec's hot path).
    @inlinable
    public func appendBytes(to buffer: inout [UInt8]) {
        withUnsafeBytes { buffer.append(contentsOf: $0) }
    }

    /// Calls `body` with the 32 bytes in order, from the stack (binding them to SQL costs no allocation).
    @inlinable
    public func withUnsafeBytes<Result>(_ body: (UnsafeRawBufferPointer) throws -> Result) rethrows -> Result {
        let words = (w0.bigEndian, w1.bigEndian, w2.bigEndian, w3.bigEndian)
        return try Swift.withUnsafeBytes(of: words, body)
    }

    public var isZero: Bool { self == .zero }
    /// Lower-case hex of the 32 bytes.
    public var hex: String { Hex.encode(bytes) }

    public static func < (lhs: Self, rhs: Self) -> Bool {
        (lhs.w0, lhs.w1, lhs.w2, lhs.w3) < (rhs.w0, rhs.w1, rhs.w2, rhs.w3)
    }
}

/// A 32-byte identifier with its own type, so an author can never be passed where a record id is expected.
public protocol Identifier32: Hashable, Comparable, Sendable, CustomStringConvertible {
    var raw: Bytes32 { get }
    init(raw: Bytes32)
}

extension Identifier32 {
    /// The identifier from exactly 32 bytes (a programming error otherwise).
    public init(bytes: some Collection<UInt8>) { self.init(raw: Bytes32(bytes)) }
    public var bytes: [UInt8] { raw.bytes }
    public var hex: String { raw.hex }
    /// First 8 hex digits: enough for logs and traces.
    public var shortHex: String { String(raw.hex.prefix(8)) }
    public var description: String { shortHex }
    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.raw < rhs.raw }
}

/// The author of records: an identity's Ed25519 public key.
public struct AuthorID: Identifier32 {
    public let raw: Bytes32
    public init(raw: Bytes32) { self.raw = raw }
    public init(_ key: IdentityPublicKey) { self.raw = Bytes32(key.bytes) }
    /// The verification key this id names.
    public var publicKey: IdentityPublicKey { try! IdentityPublicKey(bytes: raw.bytes) }
}

/// A conversation (direct chat, group, or an author's public profile feed).
public struct ConversationID: Identifier32 {
    public let raw: Bytes32
    public init(raw: Bytes32) { self.raw = raw }

    /// The public feed where `author` publishes its profile (display name, certified encryption key):
    /// BLAKE2b-256 of `natter/v1/profile-feed` followed by the author's key.
    public static func profileFeed(of author: AuthorID) -> ConversationID {
        ConversationID(bytes: Blake2b.hash(Array("natter/v1/profile-feed".utf8) + author.bytes, outputBytes: 32))
    }
}

/// A record's id: BLAKE2b-256 of its canonical bytes, signature included.
public struct RecordID: Identifier32 {
    public let raw: Bytes32
    public init(raw: Bytes32) { self.raw = raw }
    /// The all-zero id, used as "no previous record" at sequence 1.
    public static let none = RecordID(raw: .zero)

    /// The id of the record whose canonical bytes are `bytes` (whether or not they decode).
    public static func of(_ bytes: some ByteSource) -> RecordID {
        RecordID(bytes: Blake2b.hash(bytes, outputBytes: 32))
    }
}

/// A key epoch of a conversation (named by the commit that opened it). Zero for public records.
public struct EpochID: Identifier32 {
    public let raw: Bytes32
    public init(raw: Bytes32) { self.raw = raw }
    /// No epoch: public (unencrypted) records.
    public static let none = EpochID(raw: .zero)
}

extension Bytes32 {
    /// Reads 32 bytes at `offset` of `buffer` (the caller has checked the bounds).
    @inlinable
    init(reading buffer: UnsafeRawBufferPointer, at offset: Int) {
        precondition(offset >= 0 && offset + 32 <= buffer.count)
        self.init(
            words: (
                UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset, as: UInt64.self)),
                UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset + 8, as: UInt64.self)),
                UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset + 16, as: UInt64.self)),
                UInt64(bigEndian: buffer.loadUnaligned(fromByteOffset: offset + 24, as: UInt64.self))
            ))
    }
}
