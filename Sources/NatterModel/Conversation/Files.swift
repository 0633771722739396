public import NatterCrypto

/// A file chunk's content address: BLAKE2b-256 of its ciphertext, so any node can check a chunk it serves or
/// receives without the file key.
public struct ChunkID: Identifier32 {
    public let raw: Bytes32
    public init(raw: Bytes32) { self.raw = raw }

    /// The address of `ciphertext`.
    public static func of(_ ciphertext: some ByteSource) -> ChunkID {
        ChunkID(bytes: Blake2b.hash(ciphertext, outputBytes: 32))
    }
}

/// Bounds of file transfer (SPEC F13), each with its reason. Protocol bounds (what a decoder accepts) are apart
/// from the default send cap, which a node may configure up to the protocol bound.
public enum FileLimits {
    /// Default largest file a node sends: 16 MiB (SPEC F13). Configurable up to `fileBytesMax`.
    public static let sendBytesDefault: UInt64 = 16 * 1024 * 1024

    /// Chunk size a sender uses by default: 64 KiB. Small enough that a lost link costs little and a chunk is one
    /// transport frame; large enough that a 16 MiB file is 256 chunks and its hash list (8 KiB) fits a record.
    public static let chunkBytesDefault = 64 * 1024

    /// Largest chunk (plaintext) a descriptor may name: 256 KiB. A chunk travels in one sync message of at most
    /// 1 MiB (`applicationMessageBytesMax`), and a receiver holds a few per link in flight.
    public static let chunkBytesMax = 256 * 1024

    /// Most chunks in one file: 1024. The descriptor lists every chunk id (32 bytes each, 32 KiB at most), and the
    /// descriptor, a full dependency vector (20 KiB) and the envelope must fit `Limits.recordBytesMax` (64 KiB):
    /// 224 + 40 × 512 + 24 + 33,268 + 16 = 54,012 bytes at most.
    public static let chunksMax = 1024

    /// Largest file a descriptor may describe: 1024 chunks of 256 KiB = 256 MiB.
    public static let fileBytesMax = UInt64(chunksMax) * UInt64(chunkBytesMax)

    /// Most UTF-8 bytes in a file name: 255, what Linux file systems allow for one path component.
    public static let nameBytesMax = 255

    /// Most bytes in a media type: 127, the RFC 6838 bound on a type name and a subtype name together.
    public static let mediaTypeBytesMax = 127

    /// Bytes the AEAD adds to each chunk (the Poly1305 tag).
    public static let chunkOverheadBytes = 16

    /// The media type of a file whose type nobody named.
    public static let defaultMediaType = "application/octet-stream"
}

/// What a file message carries (inside its encrypted record): enough to show the file, fetch its chunks by id,
/// decrypt them and check the result. The key is per file, random, and never used for anything else.
public struct FileDescriptor: Hashable, Sendable, CustomStringConvertible {
    /// Display name. Never used as a path: whoever saves the file names the destination.
    public let name: String
    /// `type/subtype`, RFC 6838 characters.
    public let mediaType: String
    /// Plaintext bytes.
    public let size: UInt64
    /// BLAKE2b-256 (unkeyed) of the whole plaintext, checked before anything is written out.
    public let plaintextHash: Bytes32
    /// The file key: XChaCha20-Poly1305 for every chunk, nonce from the chunk index.
    public let key: SymmetricKey
    /// Plaintext bytes per chunk (the last chunk may be shorter).
    public let chunkSize: Int
    /// Chunk ids in file order: `ceil(size / chunkSize)` of them.
    public let chunks: [ChunkID]

    /// A descriptor whose fields satisfy every rule of the layout, or the rule they break.
    public init(
        name: String, mediaType: String, size: UInt64, plaintextHash: Bytes32, key: SymmetricKey, chunkSize: Int,
        chunks: [ChunkID]
    ) throws(FileFormatError) {
        guard FileDescriptor.isValidName(name) else { throw .invalidName }
        guard FileDescriptor.isValidMediaType(mediaType) else { throw .invalidMediaType }
        guard (1...FileLimits.chunkBytesMax).contains(chunkSize) else { throw .invalidChunkSize(chunkSize) }
        guard size <= FileLimits.fileBytesMax else { throw .tooLarge(size) }
        let count = FileDescriptor.chunkCount(size: size, chunkSize: chunkSize)
        guard count <= FileLimits.chunksMax else { throw .tooManyChunks(count) }
        guard chunks.count == count else { throw .chunkCountMismatch(expected: count, got: chunks.count) }
        self.name = name
        self.mediaType = mediaType
        self.size = size
        self.plaintextHash = plaintextHash
        self.key = key
        self.chunkSize = chunkSize
        self.chunks = chunks
    }

    /// Chunks of a file of `size` bytes cut into `chunkSize` pieces (0 for an empty file).
    public static func chunkCount(size: UInt64, chunkSize: Int) -> Int {
        precondition(chunkSize > 0)
        let chunk = UInt64(chunkSize)
        let count = size / chunk + (size % chunk == 0 ? 0 : 1)
        return count > UInt64(Int.max) ? Int.max : Int(count)
    }

    /// Plaintext bytes of chunk `index`.
    public func plaintextBytes(ofChunk index: Int) -> Int {
        precondition(chunks.indices.contains(index))
        return index == chunks.count - 1 ? Int(size - UInt64(chunkSize) * UInt64(index)) : chunkSize
    }

    /// A file name is 1…255 UTF-8 bytes without control characters or `/`, and neither `.` nor `..`: it is shown,
    /// and may be offered as a default name, so it must not be able to name a directory or forge a line.
    public static func isValidName(_ name: String) -> Bool {
        let bytes = name.utf8.count
        guard bytes >= 1, bytes <= FileLimits.nameBytesMax, name != ".", name != ".." else { return false }
        return !name.unicodeScalars.contains { $0 == "/" || $0.properties.generalCategory == .control }
    }

    /// A media type is `type/subtype`, each part 1+ characters of RFC 6838's restricted names, 127 bytes at most.
    public static func isValidMediaType(_ type: String) -> Bool {
        let bytes = Array(type.utf8)
        guard bytes.count >= 3, bytes.count <= FileLimits.mediaTypeBytesMax else { return false }
        let parts = bytes.split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 2, !parts[0].isEmpty, !parts[1].isEmpty else { return false }
        let extra = Set("!#$&-^_.+".utf8)
        return bytes.allSatisfy { byte in
            byte == UInt8(ascii: "/") || extra.contains(byte) || (0x30...0x39).contains(byte)
                || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte)
        }
    }

    public static func == (lhs: Self, rhs: Self) -> Bool {
        lhs.name == rhs.name && lhs.mediaType == rhs.mediaType && lhs.size == rhs.size
            && lhs.plaintextHash == rhs.plaintextHash && lhs.chunkSize == rhs.chunkSize && lhs.chunks == rhs.chunks
            && lhs.key.secret.constantTimeEquals(rhs.key.secret)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(plaintextHash)
        hasher.combine(chunks.first)
    }

    public var description: String { "\(name) (\(mediaType), \(size) bytes, \(chunks.count) chunks)" }
}

/// Why a file descriptor (or a file to send) breaks the rules.
public enum FileFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidName
    case invalidMediaType
    case invalidChunkSize(Int)
    case tooLarge(UInt64)
    case tooManyChunks(Int)
    case chunkCountMismatch(expected: Int, got: Int)

    public var description: String {
        switch self {
        case .invalidName:
            "invalid file name (1–\(FileLimits.nameBytesMax) bytes, no control characters or '/', not '.' or '..')"
        case .invalidMediaType: "invalid media type (type/subtype, at most \(FileLimits.mediaTypeBytesMax) bytes)"
        case .invalidChunkSize(let size): "chunk size \(size) outside 1…\(FileLimits.chunkBytesMax)"
        case .tooLarge(let size): "file of \(size) bytes exceeds the protocol's \(FileLimits.fileBytesMax) bytes"
        case .tooManyChunks(let count): "\(count) chunks exceed \(FileLimits.chunksMax)"
        case .chunkCountMismatch(let expected, let got): "\(got) chunk ids where the size needs \(expected)"
        }
    }
}

/// Why a chunk's bytes are not chunk `index` of a file.
public enum FileChunkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The bytes do not hash to the id the descriptor names.
    case hashMismatch(index: Int)
    /// The bytes hash right but do not decrypt: the author wrote a broken file.
    case undecryptable(index: Int)

    public var description: String {
        switch self {
        case .hashMismatch(let index): "chunk \(index) does not match its id"
        case .undecryptable(let index): "chunk \(index) does not decrypt under the file key"
        }
    }
}

/// Chunk encryption (docs/protocol.md §11): XChaCha20-Poly1305 under the file key, nonce = 16 zero bytes ‖ chunk
/// index (u64), associated data = `natter/v1/file-chunk` ‖ index (u32) ‖ chunk count (u32). A chunk therefore
/// opens only at its own position in its own file; its id is BLAKE2b-256 of the ciphertext.
public enum FileChunks {
    static let label = Array("natter/v1/file-chunk".utf8)

    static func nonce(_ index: Int) -> AEADNonce {
        var bytes = [UInt8](repeating: 0, count: 16)
        appendBigEndian(UInt64(index), to: &bytes)
        return try! AEADNonce(bytes: bytes)
    }

    static func associatedData(_ index: Int, count: Int) -> [UInt8] {
        var ad = label
        appendBigEndian(UInt32(index), to: &ad)
        appendBigEndian(UInt32(count), to: &ad)
        return ad
    }

    /// The ciphertext of chunk `index` of `count`.
    public static func seal(_ plaintext: some Collection<UInt8>, index: Int, count: Int, key: SymmetricKey)
        -> [UInt8]
    {
        precondition(index >= 0 && index < count && count <= FileLimits.chunksMax)
        return AEAD.seal(
            Array(plaintext), key: key, nonce: nonce(index), associatedData: associatedData(index, count: count))
    }

    /// Checks `ciphertext` against the descriptor's id for chunk `index`, then decrypts it.
    public static func open(_ ciphertext: [UInt8], index: Int, of file: FileDescriptor) throws(FileChunkError)
        -> [UInt8]
    {
        precondition(file.chunks.indices.contains(index))
        guard ChunkID.of(ciphertext) == file.chunks[index] else { throw .hashMismatch(index: index) }
        guard
            let plain = try? AEAD.open(
                ciphertext, key: file.key, nonce: nonce(index),
                associatedData: associatedData(index, count: file.chunks.count)),
            plain.count == file.plaintextBytes(ofChunk: index)
        else { throw .undecryptable(index: index) }
        return plain
    }

    /// Cuts `data` into chunks under a fresh random key and describes the result. `chunkSize` defaults to 64 KiB,
    /// or the smallest power of two that keeps the file within `FileLimits.chunksMax` chunks.
    public static func encrypt(
        _ data: [UInt8], name: String, mediaType: String = FileLimits.defaultMediaType, chunkSize: Int? = nil
    ) throws(FileFormatError) -> (descriptor: FileDescriptor, chunks: [[UInt8]]) {
        guard UInt64(data.count) <= FileLimits.fileBytesMax else { throw .tooLarge(UInt64(data.count)) }
        var size = chunkSize ?? FileLimits.chunkBytesDefault
        if chunkSize == nil {
            while FileDescriptor.chunkCount(size: UInt64(data.count), chunkSize: size) > FileLimits.chunksMax {
                size *= 2
            }
        }
        guard (1...FileLimits.chunkBytesMax).contains(size) else { throw .invalidChunkSize(size) }
        let count = FileDescriptor.chunkCount(size: UInt64(data.count), chunkSize: size)
        guard count <= FileLimits.chunksMax else { throw .tooManyChunks(count) }
        let key = SymmetricKey.generate()
        var chunks = [[UInt8]]()
        chunks.reserveCapacity(count)
        for index in 0..<count {
            let start = index * size
            chunks.append(seal(data[start..<min(start + size, data.count)], index: index, count: count, key: key))
        }
        let descriptor = try FileDescriptor(
            name: name, mediaType: mediaType, size: UInt64(data.count),
            plaintextHash: Bytes32(Blake2b.hash(data, outputBytes: 32)), key: key, chunkSize: size,
            chunks: chunks.map { ChunkID.of($0) })
        return (descriptor, chunks)
    }
}

// MARK: - Encoding

extension FileDescriptor {
    /// Canonical bytes (docs/protocol.md §10.3, operation 7, after the reply fields).
    func append(to out: inout [UInt8]) {
        let nameBytes = Array(name.utf8)
        appendBigEndian(UInt32(nameBytes.count), to: &out)
        out += nameBytes
        let typeBytes = Array(mediaType.utf8)
        appendBigEndian(UInt32(typeBytes.count), to: &out)
        out += typeBytes
        appendBigEndian(size, to: &out)
        appendBigEndian(UInt32(chunkSize), to: &out)
        plaintextHash.appendBytes(to: &out)
        out += key.secret.exposedCopy()
        for chunk in chunks { chunk.raw.appendBytes(to: &out) }
    }

    /// Reads a descriptor, checking each length against its limit before reading it.
    static func read(_ reader: inout OperationReader) throws(OperationFormatError) -> FileDescriptor {
        let nameLength = try reader.uint32()
        guard nameLength <= FileLimits.nameBytesMax else { throw .invalidValue("file name length") }
        guard let name = String(validating: try reader.take(nameLength), as: UTF8.self) else { throw .invalidText }
        let typeLength = try reader.uint32()
        guard typeLength <= FileLimits.mediaTypeBytesMax else { throw .invalidValue("media type length") }
        guard let type = String(validating: try reader.take(typeLength), as: UTF8.self) else { throw .invalidText }
        let size = try reader.uint64()
        let chunkSize = try reader.uint32()
        let hash = try reader.id32()
        let keyBytes = Array(try reader.take(SymmetricKey.byteCount))
        let key = try! SymmetricKey(bytes: keyBytes)  // exactly 32 bytes were taken
        guard size <= FileLimits.fileBytesMax else { throw .invalidValue("file size") }
        guard (1...FileLimits.chunkBytesMax).contains(chunkSize) else { throw .invalidValue("chunk size") }
        let count = chunkCount(size: size, chunkSize: chunkSize)
        guard count <= FileLimits.chunksMax else { throw .invalidValue("chunk count") }
        guard reader.bytes.count - reader.offset >= count * 32 else { throw .truncated }
        var chunks = [ChunkID]()
        chunks.reserveCapacity(count)
        for _ in 0..<count { chunks.append(ChunkID(raw: try reader.id32())) }
        do {
            return try FileDescriptor(
                name: name, mediaType: type, size: size, plaintextHash: hash, key: key, chunkSize: chunkSize,
                chunks: chunks)
        } catch {
            throw .invalidValue(error.description)
        }
    }
}
