// Shared helpers for the record tests: fixed identities, a seeded generator of valid headers and payloads, and a
// byte editor that patches an encoded record field by field (at the offsets of docs/protocol.md) and re-signs it.
import NatterCrypto
import NatterModel

// MARK: - Identities

enum Fixtures {
    /// Six identities with fixed seeds (`0x10…`, `0x11…`, …): deterministic keys, signatures and ids.
    static let identities: [IdentityKeyPair] = (0..<6).map { index in
        try! IdentityKeyPair(seed: [UInt8](repeating: UInt8(0x10 + index), count: IdentityKeyPair.seedByteCount))
    }

    static func author(_ index: Int) -> AuthorID { AuthorID(identities[index].publicKey) }

    /// A 32-byte value made from a label, for readable fixed ids.
    static func bytes32(_ label: String) -> Bytes32 {
        Bytes32(Blake2b.hash(Array(label.utf8), outputBytes: 32))
    }

    /// Largest payload that fits the record cap with `dependencyCount` dependencies.
    static func payloadMax(dependencyCount: Int) -> Int {
        Limits.recordBytesMax - RecordCodec.minimumRecordByteCount - dependencyCount * RecordCodec.dependencyByteCount
    }

    /// A valid plain record: sequence 1, no dependencies, a short payload.
    static func plainFirst(payload: [UInt8] = Array("hello".utf8)) -> Record {
        let author = author(0)
        let header = RecordHeader(
            kind: .plain, conversation: .profileFeed(of: author), author: author, sequence: 1, previous: .none,
            epoch: .none, lamport: 1, createdAtMillis: 1_700_000_000_000, dependencies: VectorClock())
        return try! Record.sign(header: header, payload: payload, by: identities[0])
    }

    /// A valid header of a content record at sequence 3 with three dependencies (its own at 2 and two others).
    static func contentHeader() -> RecordHeader {
        let author = author(1)
        return RecordHeader(
            kind: .content, conversation: ConversationID(raw: bytes32("conversation")), author: author,
            sequence: 3, previous: RecordID(raw: bytes32("previous")), epoch: EpochID(raw: bytes32("epoch")),
            lamport: 7, createdAtMillis: 1_700_000_123_456,
            dependencies: VectorClock([author: 2, Fixtures.author(2): 5, Fixtures.author(3): 6]))
    }

    /// A valid content record at sequence 3 with three dependencies and a 32-byte payload.
    static func contentWithDependencies() -> Record {
        try! Record.sign(header: contentHeader(), payload: [UInt8](repeating: 0xC5, count: 32), by: identities[1])
    }
}

// MARK: - Random values

extension SeededGenerator {
    /// `count` random bytes, eight at a time (fast enough in debug builds for 64 KiB payloads).
    mutating func fastBytes(_ count: Int) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(count + 8)
        while out.count < count {
            var word = next()
            withUnsafeBytes(of: &word) { out.append(contentsOf: $0) }
        }
        out.removeLast(out.count - count)
        return out
    }

    /// A random non-zero 32-byte value.
    mutating func nonZero32() -> Bytes32 {
        while true {
            let value = Bytes32(fastBytes(32))
            if !value.isZero { return value }
        }
    }

    /// True with probability `percent`/100.
    mutating func chance(_ percent: Int) -> Bool { Int.random(in: 0..<100, using: &self) < percent }
}

/// Generates random *valid* records: every kind, sequence 1 to 2^62, 0…40 dependencies, Lamport numbers, creation
/// times and payload sizes including the extremes (empty, and up to the largest payload the cap allows).
struct RandomRecords {
    var rng: SeededGenerator

    init(seed: UInt64) { rng = SeededGenerator(seed: seed) }

    mutating func header(author: AuthorID) -> RecordHeader {
        let kind = RecordKind.allCases.randomElement(using: &rng)!
        let sequence: UInt64
        switch Int.random(in: 0..<10, using: &rng) {
        case 0..<3: sequence = 1
        case 3..<7: sequence = UInt64.random(in: 2...20, using: &rng)
        case 7..<9: sequence = UInt64.random(in: 21...(1 << 32), using: &rng)
        default: sequence = Limits.sequenceMax - UInt64.random(in: 0...3, using: &rng)
        }
        let previous: RecordID = sequence == 1 ? .none : RecordID(raw: rng.nonZero32())
        let epoch: EpochID
        switch kind {
        case .plain: epoch = .none
        case .content: epoch = EpochID(raw: rng.nonZero32())
        case .commit: epoch = rng.chance(30) ? .none : EpochID(raw: rng.nonZero32())
        }
        var dependencies = VectorClock()
        let dependencyCount = Int.random(in: sequence == 1 ? 0...40 : 1...40, using: &rng)
        if sequence > 1 { dependencies[author] = sequence - 1 }
        while dependencies.count < dependencyCount {
            // Mostly real keys of the fixture identities, otherwise arbitrary bytes (a dependency is just bytes).
            let other =
                rng.chance(20)
                ? Fixtures.author(Int.random(in: 0..<Fixtures.identities.count, using: &rng))
                : AuthorID(raw: rng.nonZero32())
            guard other != author else { continue }
            dependencies[other] =
                rng.chance(80)
                ? UInt64.random(in: 1...1000, using: &rng) : UInt64.random(in: 1...Limits.sequenceMax, using: &rng)
        }
        let lamport: UInt64
        if dependencies.isEmpty {
            lamport = 1
        } else {
            let lowest = max(2, sequence)
            switch Int.random(in: 0..<10, using: &rng) {
            case 0: lamport = lowest
            case 1: lamport = Limits.lamportMax
            default: lamport = UInt64.random(in: lowest...min(lowest + 10_000, Limits.lamportMax), using: &rng)
            }
        }
        let created: Int64
        switch Int.random(in: 0..<10, using: &rng) {
        case 0: created = 0
        case 1: created = Limits.createdAtMillisMax
        default: created = Int64.random(in: 0...Limits.createdAtMillisMax, using: &rng)
        }
        return RecordHeader(
            kind: kind, conversation: ConversationID(raw: rng.nonZero32()), author: author, sequence: sequence,
            previous: previous, epoch: epoch, lamport: lamport, createdAtMillis: created, dependencies: dependencies)
    }

    mutating func payload(dependencyCount: Int) -> [UInt8] {
        let most = Fixtures.payloadMax(dependencyCount: dependencyCount)
        switch Int.random(in: 0..<20, using: &rng) {
        case 0..<3: return []
        case 3..<6: return rng.fastBytes(most - Int.random(in: 0...3, using: &rng))
        case 6..<8: return rng.fastBytes(Int.random(in: 0...most, using: &rng))
        default: return rng.fastBytes(Int.random(in: 1...300, using: &rng))
        }
    }

    /// A random valid record, signed by one of the fixture identities.
    mutating func record() -> Record {
        let identity = Fixtures.identities.randomElement(using: &rng)!
        let header = header(author: AuthorID(identity.publicKey))
        return try! Record.sign(
            header: header, payload: payload(dependencyCount: header.dependencies.count), by: identity)
    }
}

// MARK: - Editing encoded records

/// Byte offsets of the envelope fields (docs/protocol.md, "Layout").
enum Offset {
    static let version = 0
    static let kind = 1
    static let conversation = 2
    static let author = 34
    static let sequence = 66
    static let previous = 74
    static let epoch = 106
    static let lamport = 138
    static let created = 146
    static let dependencyCount = 154
    static func dependency(_ index: Int) -> Int { 156 + 40 * index }
    static func dependencySequence(_ index: Int) -> Int { dependency(index) + 32 }
    static func payloadLength(dependencyCount: Int) -> Int { 156 + 40 * dependencyCount }
}

/// An encoded record under edit: patch fields in place, then re-sign so that only the edited rule is broken.
struct RecordEditor {
    var bytes: [UInt8]

    init(_ record: Record) { bytes = record.bytes }
    init(bytes: [UInt8]) { self.bytes = bytes }

    mutating func set<T: FixedWidthInteger>(_ value: T, at offset: Int) {
        var big = value.bigEndian
        let field = withUnsafeBytes(of: &big) { Array($0) }
        bytes.replaceSubrange(offset..<(offset + field.count), with: field)
    }

    mutating func set(_ value: Bytes32, at offset: Int) {
        bytes.replaceSubrange(offset..<(offset + 32), with: value.bytes)
    }

    mutating func setByte(_ value: UInt8, at offset: Int) { bytes[offset] = value }

    /// The bytes with the last 64 (the signature) replaced by `identity`'s signature over everything before them.
    func resigned(by identity: IdentityKeyPair, in domain: SignatureDomain = .record) -> [UInt8] {
        precondition(bytes.count >= Signature.byteCount)
        let body = Array(bytes.dropLast(Signature.byteCount))
        return body + identity.sign(body, in: domain).bytes
    }
}

/// Encodes `header` and `payload` by hand, signed by `identity`, without validating anything: how a hostile or buggy
/// peer would build bytes that `Record.sign` refuses to make.
func encodeUnchecked(_ header: RecordHeader, payload: [UInt8], by identity: IdentityKeyPair) -> [UInt8] {
    var bytes = RecordCodec.encodeHeader(header)
    var length = UInt32(payload.count).bigEndian
    withUnsafeBytes(of: &length) { bytes.append(contentsOf: $0) }
    bytes += payload
    return bytes + identity.sign(bytes, in: .record).bytes
}

/// The canonical encoding rebuilt from a decoded record's fields (independently of the bytes it was decoded from).
func reencode(_ record: Record) -> [UInt8] {
    var bytes = RecordCodec.encodeHeader(record.header)
    var length = UInt32(record.payload.count).bigEndian
    withUnsafeBytes(of: &length) { bytes.append(contentsOf: $0) }
    return bytes + record.payload + record.signature.bytes
}

/// The error `body` throws, or nil if it succeeds.
func formatError<T>(_ body: () throws(RecordFormatError) -> T) -> RecordFormatError? {
    do {
        _ = try body()
        return nil
    } catch {
        return error
    }
}
