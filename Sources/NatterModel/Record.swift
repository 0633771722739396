public import NatterCrypto

/// What a record's payload is, as far as every node (member or relay) can tell.
public enum RecordKind: UInt8, Sendable, CaseIterable {
    /// Conversation content (message, edit, delete, reaction, receipt …), encrypted under the named epoch key.
    case content = 1
    /// A membership or key change that may open a new epoch; its epoch field names the epoch it builds on
    /// (zero for the commit that creates a conversation).
    case commit = 2
    /// A public, unencrypted record (an author's profile); its epoch field is zero.
    case plain = 3
}

/// Everything every node can read about a record: the envelope before the payload (DESIGN §3). Its encoding is
/// the associated data of the payload's AEAD, so the payload cannot be moved to another header.
public struct RecordHeader: Hashable, Sendable {
    /// The only envelope version so far.
    public static let currentVersion: UInt8 = 1

    public var kind: RecordKind
    public var conversation: ConversationID
    public var author: AuthorID
    /// Position in the author's feed of this conversation, from 1, without gaps.
    public var sequence: UInt64
    /// Id of the author's record at `sequence - 1`; `.none` at sequence 1.
    public var previous: RecordID
    public var epoch: EpochID
    /// Exactly one more than the largest Lamport number among the dependencies (1 with no dependencies).
    public var lamport: UInt64
    /// The author's clock when writing, in milliseconds since 1970 (shown, never used for order).
    public var createdAtMillis: Int64
    /// The author's vector clock of the conversation when it wrote this record (its own previous record included).
    public var dependencies: VectorClock

    public init(
        kind: RecordKind, conversation: ConversationID, author: AuthorID, sequence: UInt64, previous: RecordID,
        epoch: EpochID, lamport: UInt64, createdAtMillis: Int64, dependencies: VectorClock
    ) {
        self.kind = kind
        self.conversation = conversation
        self.author = author
        self.sequence = sequence
        self.previous = previous
        self.epoch = epoch
        self.lamport = lamport
        self.createdAtMillis = createdAtMillis
        self.dependencies = dependencies
    }

    /// Checks every rule a header must satisfy on its own (the codec's structural rules), throwing the first broken.
    public func validate() throws(RecordFormatError) {
        guard sequence >= 1 else { throw .zeroSequence }
        guard sequence <= Limits.sequenceMax else { throw .sequenceTooLarge(sequence) }
        if sequence == 1 {
            guard previous == .none else { throw .previousAtFirstSequence }
        } else {
            guard previous != .none else { throw .missingPrevious }
        }
        switch kind {
        case .plain: guard epoch == .none else { throw .epochOnPlainRecord }
        case .content: guard epoch != .none else { throw .missingEpoch }
        case .commit: break
        }
        guard dependencies.count <= Limits.dependenciesMax else {
            throw .tooManyDependencies(dependencies.count)
        }
        for entry in dependencies where entry.sequence > Limits.sequenceMax {
            throw .sequenceTooLarge(entry.sequence)
        }
        let own = dependencies[author]
        if sequence == 1 {
            guard own == 0 else { throw .ownDependencyMismatch(expected: 0, found: own) }
        } else {
            guard own == sequence - 1 else { throw .ownDependencyMismatch(expected: sequence - 1, found: own) }
        }
        guard lamport <= Limits.lamportMax else { throw .lamportTooLarge(lamport) }
        if dependencies.isEmpty {
            guard lamport == 1 else { throw .lamportWithoutDependencies(lamport) }
        } else {
            // Each own record's Lamport number exceeds the previous one's, so it is at least the sequence number.
            guard lamport >= 2, lamport >= sequence else { throw .lamportBelowSequence(lamport: lamport) }
        }
        guard (0...Limits.createdAtMillisMax).contains(createdAtMillis) else {
            throw .creationTimeOutOfRange(createdAtMillis)
        }
    }
}

/// Where a record sits: its conversation, its author's feed there, and its sequence number in that feed. The record
/// log is addressed by position; the id (the hash of the bytes) proves which record sits there.
public struct RecordPosition: Hashable, Sendable, CustomStringConvertible {
    public let conversation: ConversationID
    public let author: AuthorID
    public let sequence: UInt64

    public init(conversation: ConversationID, author: AuthorID, sequence: UInt64) {
        self.conversation = conversation
        self.author = author
        self.sequence = sequence
    }

    public var description: String { "\(conversation.shortHex)/\(author.shortHex)#\(sequence)" }
}

extension RecordHeader {
    /// Where the record with this header sits.
    public var position: RecordPosition {
        RecordPosition(conversation: conversation, author: author, sequence: sequence)
    }
}

/// A record named by its id together with where it sits, so it can be read back from a log addressed by position.
public struct RecordRef: Hashable, Sendable {
    public let id: RecordID
    public let position: RecordPosition

    public init(id: RecordID, position: RecordPosition) {
        self.id = id
        self.position = position
    }
}

/// A signed record: the unit of everything natter stores and syncs. Immutable; its id is the BLAKE2b-256 of its
/// canonical bytes. Build one with `Record.sign`, read one with `Record.decode`.
public struct Record: Hashable, Sendable, CustomStringConvertible {
    public let header: RecordHeader
    /// The payload as carried: ciphertext for content and commits, plain bytes for plain records.
    public let payload: [UInt8]
    public let signature: Signature
    /// The canonical encoding (docs/protocol.md).
    public let bytes: [UInt8]
    public let id: RecordID

    init(header: RecordHeader, payload: [UInt8], signature: Signature, bytes: [UInt8]) {
        self.header = header
        self.payload = payload
        self.signature = signature
        self.bytes = bytes
        self.id = .of(bytes)
    }

    /// The record's id and position.
    public var ref: RecordRef { RecordRef(id: id, position: header.position) }

    /// Signs `header` and `payload` with `identity`, which must be the header's author.
    public static func sign(header: RecordHeader, payload: [UInt8], by identity: IdentityKeyPair)
        throws(RecordFormatError) -> Record
    {
        precondition(AuthorID(identity.publicKey) == header.author, "records are signed by their author")
        try header.validate()
        let size = RecordCodec.headerByteCount(header.dependencies.count) + 4 + payload.count + Signature.byteCount
        guard size <= Limits.recordBytesMax else { throw .tooLarge(size) }
        var bytes = RecordCodec.encodeHeader(header)
        RecordCodec.appendPayload(payload, to: &bytes)
        let signature = identity.sign(bytes, in: .record)
        bytes.append(contentsOf: signature.bytes)
        return Record(header: header, payload: payload, signature: signature, bytes: bytes)
    }

    /// Decodes canonical bytes, checking structure and limits but not the signature (see `decodeVerified`).
    public static func decode(_ bytes: [UInt8]) throws(RecordFormatError) -> Record {
        try RecordCodec.decode(bytes)
    }

    /// Decodes and verifies the author's signature: what every node checks before storing a record.
    public static func decodeVerified(_ bytes: [UInt8]) throws(RecordFormatError) -> Record {
        let record = try RecordCodec.decode(bytes)
        guard record.hasValidSignature else { throw .badSignature }
        return record
    }

    /// Whether the signature is the author's over everything before it.
    public var hasValidSignature: Bool {
        bytes.withUnsafeBytes { all in
            header.author.publicKey.isValidSignature(
                signature, for: UnsafeRawBufferPointer(rebasing: all[0..<(all.count - Signature.byteCount)]),
                in: .record)
        }
    }

    /// The header's encoding: the associated data under which the payload was encrypted.
    public var headerBytes: ArraySlice<UInt8> { bytes[0..<RecordCodec.headerByteCount(header.dependencies.count)] }

    public var description: String {
        "record \(id.shortHex) \(header.kind) \(header.author.shortHex)#\(header.sequence) in \(header.conversation.shortHex)"
    }

    public static func == (lhs: Record, rhs: Record) -> Bool { lhs.id == rhs.id }
    public func hash(into hasher: inout Hasher) { hasher.combine(id) }
}
