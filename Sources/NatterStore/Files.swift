import Foundation
import GRDB
import NatterCrypto
public import NatterModel

#if canImport(Glibc)
import Glibc
#endif

/// What the timeline shows of a file message (SPEC F13: name, type and size).
public struct FileSummary: Hashable, Sendable {
    public let name: String
    public let mediaType: String
    public let size: UInt64
    public let chunkCount: Int

    public init(name: String, mediaType: String, size: UInt64, chunkCount: Int) {
        self.name = name
        self.mediaType = mediaType
        self.size = size
        self.chunkCount = chunkCount
    }
}

/// A file message as this node holds it: the summary and how much of the content is stored here.
public struct FileStatus: Hashable, Sendable {
    public let message: RecordID
    public let summary: FileSummary
    /// Plaintext bytes whose chunks this node stores.
    public let heldBytes: UInt64
    /// Every chunk is stored: the file can be saved.
    public var isComplete: Bool { heldBytes == summary.size }
}

/// Why a file could not be sent, found or saved, in words a person can act on.
public enum FileError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Larger than the node's send cap.
    case tooLarge(size: UInt64, cap: UInt64)
    /// The file to send could not be read.
    case unreadable(path: String, reason: String)
    case invalid(FileFormatError)
    /// The message is not a file message this node can read (or it was deleted).
    case notAFile(RecordID)
    /// Not every chunk is stored yet.
    case incomplete(heldBytes: UInt64, size: UInt64)
    /// A stored chunk does not match the descriptor, or the assembled file does not match its hash. The bad
    /// chunks were dropped; fetching again repairs it.
    case corrupted(String)
    /// The node is fetching as many files as it may at once.
    case tooManyFetches(Int)
    case destinationExists(path: String)
    case destinationIsDirectory(path: String)
    case writeFailed(path: String, reason: String)

    public var description: String {
        switch self {
        case .tooLarge(let size, let cap):
            "File is too large (\(size) bytes; the limit is \(cap) bytes)"
        case .unreadable(let path, let reason): "cannot read \(path): \(reason)"
        case .invalid(let error): "cannot send this file: \(error)"
        case .notAFile(let message): "message \(message.shortHex) is not a file you can read (or it was deleted)"
        case .incomplete(let held, let size):
            "the file is not here yet (\(held) of \(size) bytes): fetch it and wait for it to complete"
        case .corrupted(let what): "the stored file is damaged (\(what)); fetch it again"
        case .tooManyFetches(let limit): "already fetching \(limit) files; wait for one to finish"
        case .destinationExists(let path): "\(path) exists; choose another path or allow overwriting"
        case .destinationIsDirectory(let path): "\(path) is a directory; give the path of the file to write"
        case .writeFailed(let path, let reason): "cannot write \(path): \(reason)"
        }
    }
}

// MARK: - Chunk store

extension RecordStore {
    /// Stores chunks under their ids (the caller checked each id is its bytes' hash; a chunk held already is kept).
    public func storeChunks(_ chunks: [(ChunkID, [UInt8])], nowMillis: Int64) throws {
        guard !chunks.isEmpty else { return }
        try writeTransaction { db in
            let insert = try db.cachedStatement(
                sql: "INSERT OR IGNORE INTO chunk (id, bytes, stored_ms) VALUES (?, ?, ?)")
            for (id, bytes) in chunks { try insert.execute(arguments: [Data(id.bytes), Data(bytes), nowMillis]) }
        }
    }

    /// The stored bytes of a chunk, served to any peer that asks (the node need not be able to read them).
    public func chunk(_ id: ChunkID) throws -> [UInt8]? {
        try read { db in
            try Data.fetchOne(db, sql: "SELECT bytes FROM chunk WHERE id = ?", arguments: [Data(id.bytes)]).map {
                [UInt8]($0)
            }
        }
    }

    /// Which of `ids` are stored.
    public func heldChunks(among ids: [ChunkID]) throws -> Set<ChunkID> {
        guard !ids.isEmpty else { return [] }
        return try read { db in
            var held = Set<ChunkID>()
            let statement = try db.cachedStatement(sql: "SELECT 1 FROM chunk WHERE id = ?")
            for id in ids where try Bool.fetchOne(statement, arguments: [Data(id.bytes)]) == true { held.insert(id) }
            return held
        }
    }

    /// Drops chunks (a file no longer wanted, or a corrupted chunk); returns how many were stored.
    @discardableResult
    public func dropChunks(_ ids: [ChunkID]) throws -> Int {
        try writeTransaction { db in
            var dropped = 0
            for id in ids {
                try db.execute(sql: "DELETE FROM chunk WHERE id = ?", arguments: [Data(id.bytes)])
                dropped += db.changesCount
            }
            return dropped
        }
    }

    /// Chunks and their bytes stored (for status and quotas).
    public func chunkUsage() throws -> (count: Int, bytes: Int64) {
        try read { db in
            let row = try Row.fetchOne(db, sql: "SELECT COUNT(*), COALESCE(SUM(LENGTH(bytes)), 0) FROM chunk")!
            return (row[0], row[1])
        }
    }
}

// MARK: - Files in conversations

extension Conversations {
    /// Sends `bytes` as a file to `conversation`: cuts and encrypts it under a fresh key, stores the chunks, then
    /// appends the file message (whose record carries name, type, size, hash, key and chunk ids). Refuses files
    /// above `sizeCap` (default `FileLimits.sendBytesDefault`, SPEC F13).
    @discardableResult
    public func sendFile(
        _ bytes: [UInt8], name: String, mediaType: String = FileLimits.defaultMediaType,
        in conversation: ConversationID, replyTo: RecordID? = nil, sizeCap: UInt64 = FileLimits.sendBytesDefault,
        now: Int64
    ) throws -> NatterModel.Record {
        let cap = min(sizeCap, FileLimits.fileBytesMax)
        guard UInt64(bytes.count) <= cap else { throw FileError.tooLarge(size: UInt64(bytes.count), cap: cap) }
        let encrypted: (descriptor: FileDescriptor, chunks: [[UInt8]])
        do {
            encrypted = try FileChunks.encrypt(bytes, name: name, mediaType: mediaType)
        } catch {
            throw FileError.invalid(error)
        }
        // Chunks first: the record that names them never exists without them here (a crash in between leaves
        // only unreferenced chunks).
        try store.storeChunks(Array(zip(encrypted.descriptor.chunks, encrypted.chunks)), nowMillis: now)
        return try content(.file(encrypted.descriptor, replyTo: replyTo), in: conversation, now: now)
    }

    /// Sends the file at `path` (read whole; its size is checked before reading). The name defaults to the path's
    /// last component.
    @discardableResult
    public func sendFile(
        atPath path: String, name: String? = nil, mediaType: String = FileLimits.defaultMediaType,
        in conversation: ConversationID, replyTo: RecordID? = nil, sizeCap: UInt64 = FileLimits.sendBytesDefault,
        now: Int64
    ) throws -> NatterModel.Record {
        let cap = min(sizeCap, FileLimits.fileBytesMax)
        let attributes: [FileAttributeKey: Any]
        do {
            attributes = try FileManager.default.attributesOfItem(atPath: path)
        } catch {
            throw FileError.unreadable(path: path, reason: "no such file, or not allowed to read it")
        }
        guard attributes[.type] as? FileAttributeType == .typeRegular else {
            throw FileError.unreadable(path: path, reason: "not a regular file")
        }
        let size = (attributes[.size] as? NSNumber)?.uint64Value ?? 0
        guard size <= cap else { throw FileError.tooLarge(size: size, cap: cap) }
        guard let data = FileManager.default.contents(atPath: path) else {
            throw FileError.unreadable(path: path, reason: "read failed")
        }
        let fileName = name ?? (path as NSString).lastPathComponent
        return try sendFile(
            [UInt8](data), name: fileName, mediaType: mediaType, in: conversation, replyTo: replyTo, sizeCap: cap,
            now: now)
    }

    /// The descriptor of a file message this node can read (nil for other messages, deleted ones, and messages
    /// it cannot read).
    public func fileDescriptor(of message: RecordID, in conversation: ConversationID) throws -> FileDescriptor? {
        try snapshot(of: conversation).state.message(message)?.file
    }

    /// What the node holds of a file message.
    public func fileStatus(of message: RecordID, in conversation: ConversationID) throws -> FileStatus? {
        guard let file = try fileDescriptor(of: message, in: conversation) else { return nil }
        return FileStatus(
            message: message,
            summary: FileSummary(
                name: file.name, mediaType: file.mediaType, size: file.size, chunkCount: file.chunks.count),
            heldBytes: Self.plaintextBytes(of: file, among: try store.heldChunks(among: file.chunks)))
    }

    /// Plaintext bytes of `file` whose chunks are in `held`.
    private static func plaintextBytes(of file: FileDescriptor, among held: Set<ChunkID>) -> UInt64 {
        var bytes: UInt64 = 0
        for (index, chunk) in file.chunks.enumerated() where held.contains(chunk) {
            bytes += UInt64(file.plaintextBytes(ofChunk: index))
        }
        return bytes
    }

    /// Drops the stored chunks of a file message (the message stays; the file can be fetched again). Returns how
    /// many chunks were dropped.
    @discardableResult
    public func dropFile(_ message: RecordID, in conversation: ConversationID) throws -> Int {
        guard let file = try fileDescriptor(of: message, in: conversation) else { throw FileError.notAFile(message) }
        return try store.dropChunks(file.chunks)
    }

    /// Writes a file message's content to `path` — exactly that path, never anything derived from the network.
    /// Refuses an existing destination unless `overwrite`, decrypts and checks every chunk, checks the plaintext
    /// hash, and only then makes the file appear: it is written to a temporary file in the same directory, synced,
    /// and renamed into place (mode 0600). A chunk that fails its check is dropped, so a new fetch replaces it.
    public func saveFile(_ message: RecordID, in conversation: ConversationID, to path: String, overwrite: Bool)
        throws
    {
        guard let file = try fileDescriptor(of: message, in: conversation) else { throw FileError.notAFile(message) }
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) {
            if isDirectory.boolValue { throw FileError.destinationIsDirectory(path: path) }
            if !overwrite { throw FileError.destinationExists(path: path) }
        }
        let held = try store.heldChunks(among: file.chunks)
        guard held.count == Set(file.chunks).count else {
            throw FileError.incomplete(heldBytes: Self.plaintextBytes(of: file, among: held), size: file.size)
        }
        let directory = (path as NSString).deletingLastPathComponent
        let base = (path as NSString).lastPathComponent
        let temporary =
            (directory.isEmpty ? "" : directory + "/") + ".\(base).natter-\(Hex.encode(SecureRandom.bytes(6))).part"
        let fd = Glibc.open(temporary, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw FileError.writeFailed(path: path, reason: String(cString: strerror(errno))) }
        var finished = false
        defer {
            if !finished {
                close(fd)
                unlink(temporary)
            }
        }
        var hasher = Blake2bHasher(outputBytes: 32)
        for (index, id) in file.chunks.enumerated() {
            guard let ciphertext = try store.chunk(id) else {
                throw FileError.incomplete(heldBytes: 0, size: file.size)
            }
            let plain: [UInt8]
            do {
                plain = try FileChunks.open(ciphertext, index: index, of: file)
            } catch {
                try store.dropChunks([id])
                throw FileError.corrupted(error.description)
            }
            hasher.update(plain)
            try Self.writeAll(fd, plain, path: path)
        }
        guard Bytes32(hasher.finalize()) == file.plaintextHash else {
            throw FileError.corrupted("the assembled file does not match its hash")
        }
        guard fsync(fd) == 0 else { throw FileError.writeFailed(path: path, reason: String(cString: strerror(errno))) }
        close(fd)
        finished = true
        // Without overwrite, link() refuses an existing destination atomically (a file created meanwhile is kept).
        let placed = overwrite ? Glibc.rename(temporary, path) : link(temporary, path)
        let placeError = errno
        if !overwrite || placed != 0 { unlink(temporary) }
        guard placed == 0 else {
            if placeError == EEXIST { throw FileError.destinationExists(path: path) }
            throw FileError.writeFailed(path: path, reason: String(cString: strerror(placeError)))
        }
        let directoryFD = Glibc.open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        if directoryFD >= 0 {
            fsync(directoryFD)
            close(directoryFD)
        }
    }

    private static func writeAll(_ fd: Int32, _ bytes: [UInt8], path: String) throws {
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw FileError.writeFailed(path: path, reason: String(cString: strerror(errno)))
            }
            offset += written
        }
    }
}
