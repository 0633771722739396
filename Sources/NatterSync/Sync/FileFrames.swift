public import NatterModel

// MARK: - Limits of file transfer

extension Limits {
    /// Chunk ids per CHUNK_REQUEST: 16. A requester never has more than `fileChunksInFlightPerLinkMax` chunks
    /// outstanding on a link, so one request always fits; the bound caps what one 515-byte message can make a
    /// peer send back (16 chunks of at most 256 KiB).
    public static let fileChunkRequestIDsMax = 16

    /// Chunks a fetcher has requested and not yet received per link: 8. Eight 64 KiB chunks (512 KiB) keep a
    /// LAN link busy across a millisecond round trip, and bound what the serving side queues for one requester.
    public static let fileChunksInFlightPerLinkMax = 8

    /// A requested chunk that has not arrived after this long is asked of another peer (or the same one, if it
    /// is the only one): 10 s. A 256 KiB chunk takes milliseconds on a LAN; a link that delivers nothing for 6 s
    /// is closed by its sync session anyway (`syncSilenceTimeout`), so this only catches a peer that keeps the
    /// link alive but never answers.
    public static let fileChunkRequestTimeout: Duration = .seconds(10)

    /// A chunk every connected peer said it lacks (or sent corrupted) is asked again after this long: 5 s. A peer
    /// that is itself still fetching the file may hold the chunk by then.
    public static let fileChunkRetryInterval: Duration = .seconds(5)

    /// Files a node fetches at once: 64. Each costs its chunk list in memory (at most 32 KiB).
    public static let fileFetchesMax = 64

    /// Largest chunk ciphertext a CHUNK message may carry: the largest chunk plus its tag.
    public static let fileChunkCiphertextBytesMax = FileLimits.chunkBytesMax + FileLimits.chunkOverheadBytes
}

/// The file-transfer messages of a link (docs/protocol.md §3.2, types 8–10). They share the secure channel with the
/// sync session's messages but not its state: the node routes them to its `FileFetcher` (requests and chunks
/// received) and its chunk store (requests to serve), by their type byte.
public enum FileFrame: Equatable, Sendable {
    /// Please send these chunks (1…`fileChunkRequestIDsMax` distinct ids).
    case chunkRequest([ChunkID])
    /// A chunk's ciphertext, answering a request. The receiver checks that it hashes to `id`.
    case chunk(ChunkID, [UInt8])
    /// The sender does not hold this chunk.
    case chunkUnavailable(ChunkID)

    /// Message type bytes, after the sync session's 1–7.
    public enum Tag: UInt8, CaseIterable, Sendable {
        case chunkRequest = 8
        case chunk = 9
        case chunkUnavailable = 10
    }

    /// Whether an application message is a file frame (by its first byte), to route it away from the session.
    public static func isFileFrame(_ message: [UInt8]) -> Bool {
        guard let first = message.first else { return false }
        return Tag(rawValue: first) != nil
    }

    /// The frame's bytes. Callers respect the limits; the encoder checks them as preconditions.
    public func encoded() -> [UInt8] {
        var out = [UInt8]()
        switch self {
        case .chunkRequest(let ids):
            precondition((1...Limits.fileChunkRequestIDsMax).contains(ids.count))
            out.reserveCapacity(3 + 32 * ids.count)
            out.append(Tag.chunkRequest.rawValue)
            appendBigEndian(UInt16(ids.count), to: &out)
            for id in ids { id.raw.appendBytes(to: &out) }
        case .chunk(let id, let bytes):
            precondition((FileLimits.chunkOverheadBytes...Limits.fileChunkCiphertextBytesMax).contains(bytes.count))
            out.reserveCapacity(33 + bytes.count)
            out.append(Tag.chunk.rawValue)
            id.raw.appendBytes(to: &out)
            out += bytes
        case .chunkUnavailable(let id):
            out.append(Tag.chunkUnavailable.rawValue)
            id.raw.appendBytes(to: &out)
        }
        return out
    }

    /// Decodes one frame, checking every count against its limit before reading, and rejecting trailing bytes and
    /// duplicate ids. Errors are `SyncMessageError`s: the peer broke the protocol, and the link closes.
    public static func decode(_ bytes: [UInt8]) throws(SyncMessageError) -> FileFrame {
        guard !bytes.isEmpty else { throw .empty }
        var reader = SyncReader(bytes)
        let type = try reader.u8("type")
        guard let tag = Tag(rawValue: type) else { throw .unknownType(type) }
        let frame: FileFrame
        switch tag {
        case .chunkRequest:
            let count = Int(try reader.u16("chunk count"))
            guard count >= 1 else { throw .zeroCount(field: "chunk ids") }
            guard count <= Limits.fileChunkRequestIDsMax else {
                throw .tooMany(field: "chunk ids", count: count, limit: Limits.fileChunkRequestIDsMax)
            }
            try reader.require(count * 32, "chunk ids")
            var ids = [ChunkID]()
            for _ in 0..<count { ids.append(ChunkID(raw: try reader.bytes32("chunk id"))) }
            guard Set(ids).count == ids.count else { throw .unexpected("a chunk requested twice in one request") }
            frame = .chunkRequest(ids)
        case .chunk:
            let id = ChunkID(raw: try reader.bytes32("chunk id"))
            let length = reader.remaining
            guard length <= Limits.fileChunkCiphertextBytesMax else {
                throw .tooMany(field: "chunk bytes", count: length, limit: Limits.fileChunkCiphertextBytesMax)
            }
            guard length >= FileLimits.chunkOverheadBytes else { throw .truncated(field: "chunk bytes") }
            frame = .chunk(id, try reader.take(length, "chunk bytes"))
        case .chunkUnavailable:
            frame = .chunkUnavailable(ChunkID(raw: try reader.bytes32("chunk id")))
        }
        try reader.finish()
        return frame
    }
}
