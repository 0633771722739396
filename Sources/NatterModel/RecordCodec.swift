import NatterCrypto

/// The canonical binary encoding of records (docs/protocol.md, "Record encoding"). All integers big-endian.
///
/// ```
///  offset  size  field
///       0     1  version (1)
///       1     1  kind (1 content, 2 commit, 3 plain)
///       2    32  conversation id
///      34    32  author (Ed25519 public key)
///      66     8  sequence (u64, ≥ 1)
///      74    32  previous record id (zero iff sequence = 1)
///     106    32  epoch id
///     138     8  Lamport number (u64)
///     146     8  creation time (i64, ms since 1970)
///     154     2  dependency count n (u16, ≤ 512)
///     156   40n  dependencies: author (32) + sequence (u64), strictly ascending by author
///  156+40n    4  payload length m (u32)
///  160+40n    m  payload
///  160+40n+m 64  Ed25519 signature over `len("natter/v1/record") || "natter/v1/record" || bytes[0 ..< 160+40n+m]`
/// ```
///
/// There is exactly one encoding of each record: no optional fields, no varints, fixed field order. The decoder
/// still re-encodes and compares, so any future leniency would be caught.
public enum RecordCodec {
    /// Bytes before the dependency list.
    public static let fixedHeaderByteCount = 156
    /// Bytes per dependency entry.
    public static let dependencyByteCount = 40
    /// Smallest possible record: no dependencies, empty payload.
    public static let minimumRecordByteCount = fixedHeaderByteCount + 4 + Signature.byteCount

    /// Header length for `dependencyCount` dependencies.
    public static func headerByteCount(_ dependencyCount: Int) -> Int {
        fixedHeaderByteCount + dependencyCount * dependencyByteCount
    }

    /// The header's bytes (the payload's associated data). The header must be valid.
    public static func encodeHeader(_ header: RecordHeader) -> [UInt8] {
        var out = [UInt8]()
        out.reserveCapacity(headerByteCount(header.dependencies.count) + 4)
        out.append(RecordHeader.currentVersion)
        out.append(header.kind.rawValue)
        header.conversation.raw.appendBytes(to: &out)
        header.author.raw.appendBytes(to: &out)
        appendBigEndian(header.sequence, to: &out)
        header.previous.raw.appendBytes(to: &out)
        header.epoch.raw.appendBytes(to: &out)
        appendBigEndian(header.lamport, to: &out)
        appendBigEndian(UInt64(bitPattern: header.createdAtMillis), to: &out)
        appendBigEndian(UInt16(header.dependencies.count), to: &out)
        for entry in header.dependencies {
            entry.author.raw.appendBytes(to: &out)
            appendBigEndian(entry.sequence, to: &out)
        }
        return out
    }

    static func appendPayload(_ payload: [UInt8], to out: inout [UInt8]) {
        appendBigEndian(UInt32(truncatingIfNeeded: payload.count), to: &out)
        out.append(contentsOf: payload)
    }

    /// Decodes canonical record bytes. Every length is checked against the bytes present and the limits before
    /// anything is allocated for it.
    static func decode(_ bytes: [UInt8]) throws(RecordFormatError) -> Record {
        guard bytes.count <= Limits.recordBytesMax else { throw .tooLarge(bytes.count) }
        let parsed = bytes.withUnsafeBytes { raw in Result { () throws(RecordFormatError) in try parse(raw) } }
        let (header, payloadRange) = try parsed.get()
        try header.validate()
        let payload = Array(bytes[payloadRange])
        let signature = try! Signature(bytes: Array(bytes[payloadRange.upperBound...]))
        // Canonical form: re-encoding what was read must give back exactly the input.
        var again = encodeHeader(header)
        appendPayload(payload, to: &again)
        again.append(contentsOf: signature.bytes)
        guard again == bytes else { throw .nonCanonical }
        return Record(header: header, payload: payload, signature: signature, bytes: bytes)
    }

    /// Where record bytes claim to sit — conversation, author and sequence, read at their fixed offsets — or nil when
    /// the bytes are too short or of another version to say. Nothing is checked: for looking up what a store may
    /// already hold before deciding whether to check the record at all.
    public static func claimedPosition(_ bytes: [UInt8]) -> RecordPosition? {
        guard bytes.count >= fixedHeaderByteCount, bytes[0] == RecordHeader.currentVersion else { return nil }
        return bytes.withUnsafeBytes { raw in
            RecordPosition(
                conversation: ConversationID(raw: Bytes32(reading: raw, at: 2)),
                author: AuthorID(raw: Bytes32(reading: raw, at: 34)), sequence: readUInt64(raw, 66))
        }
    }

    /// The header of record bytes this node checked before (a stored record): parsing only, without the canonical
    /// re-encoding or the id hash that `decode` does for bytes from elsewhere.
    public static func storedHeader(_ bytes: [UInt8]) throws(RecordFormatError) -> RecordHeader {
        try bytes.withUnsafeBytes { raw in Result { () throws(RecordFormatError) in try parse(raw) } }.get().0
    }

    private static func parse(_ raw: UnsafeRawBufferPointer) throws(RecordFormatError) -> (RecordHeader, Range<Int>) {
        guard raw.count >= fixedHeaderByteCount else { throw .truncated(field: "header") }
        guard raw[0] == RecordHeader.currentVersion else { throw .unsupportedVersion(raw[0]) }
        guard let kind = RecordKind(rawValue: raw[1]) else { throw .unknownKind(raw[1]) }
        let conversation = ConversationID(raw: Bytes32(reading: raw, at: 2))
        let author = AuthorID(raw: Bytes32(reading: raw, at: 34))
        let sequence = readUInt64(raw, 66)
        let previous = RecordID(raw: Bytes32(reading: raw, at: 74))
        let epoch = EpochID(raw: Bytes32(reading: raw, at: 106))
        let lamport = readUInt64(raw, 138)
        let created = Int64(bitPattern: readUInt64(raw, 146))
        let dependencyCount = Int(UInt16(raw[154]) << 8 | UInt16(raw[155]))
        guard dependencyCount <= Limits.dependenciesMax else { throw .tooManyDependencies(dependencyCount) }
        let dependenciesEnd = headerByteCount(dependencyCount)
        guard raw.count >= dependenciesEnd + 4 else { throw .truncated(field: "dependencies") }
        var entries = [VectorClock.Entry]()
        entries.reserveCapacity(dependencyCount)
        var offset = fixedHeaderByteCount
        for _ in 0..<dependencyCount {
            let dependencyAuthor = AuthorID(raw: Bytes32(reading: raw, at: offset))
            let dependencySequence = readUInt64(raw, offset + 32)
            guard dependencySequence > 0 else { throw .zeroDependencySequence }
            if let last = entries.last {
                guard last.author != dependencyAuthor else { throw .duplicateDependency }
                guard last.author < dependencyAuthor else { throw .unsortedDependencies }
            }
            entries.append(VectorClock.Entry(author: dependencyAuthor, sequence: dependencySequence))
            offset += dependencyByteCount
        }
        let payloadLength = Int(readUInt32(raw, dependenciesEnd))
        let payloadStart = dependenciesEnd + 4
        // Judge the length on its value first (the largest payload this header leaves room for), then against
        // what is present, before using it for anything.
        guard payloadLength <= Limits.recordBytesMax - payloadStart - Signature.byteCount else {
            throw .payloadTooLarge(payloadLength)
        }
        let expectedEnd = payloadStart + payloadLength + Signature.byteCount
        guard raw.count >= payloadStart + payloadLength else { throw .truncated(field: "payload") }
        guard raw.count >= expectedEnd else { throw .truncated(field: "signature") }
        guard raw.count == expectedEnd else { throw .trailingBytes(raw.count - expectedEnd) }
        let header = RecordHeader(
            kind: kind, conversation: conversation, author: author, sequence: sequence, previous: previous,
            epoch: epoch, lamport: lamport, createdAtMillis: created,
            dependencies: VectorClock(sortedEntries: entries)!)
        return (header, payloadStart..<(payloadStart + payloadLength))
    }

    @inline(__always)
    private static func readUInt64(_ raw: UnsafeRawBufferPointer, _ offset: Int) -> UInt64 {
        UInt64(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt64.self))
    }

    @inline(__always)
    private static func readUInt32(_ raw: UnsafeRawBufferPointer, _ offset: Int) -> UInt32 {
        UInt32(bigEndian: raw.loadUnaligned(fromByteOffset: offset, as: UInt32.self))
    }
}

@inline(__always)
func appendBigEndian<T: FixedWidthInteger>(_ value: T, to out: inout [UInt8]) {
    var big = value.bigEndian
    withUnsafeBytes(of: &big) { out.append(contentsOf: $0) }
}
