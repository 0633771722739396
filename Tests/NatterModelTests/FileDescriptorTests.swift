// Goal: the file operation (protocol §10.3, code 7) has exactly one encoding, its decoder never crashes and accepts
// only what the rules allow, the largest descriptor fits a record, and a chunk opens only at its own position.
// Method: seeded random descriptors round-tripped and mutated (fixed seed, so a failure replays), hand-made edge
// cases at the limits, and chunk ciphertexts swapped, flipped and truncated.
import NatterCrypto
import NatterModel
import Testing

@Suite("File descriptors and chunks")
struct FileDescriptorTests {
    static let cases = 300

    /// A random valid descriptor (and reply target) from `random`.
    static func randomFile(_ random: inout SeededGenerator) -> (FileDescriptor, RecordID?) {
        let nameAlphabet = Array("abcdefghijklmnopqrstuvwxyz0123456789 .-_é日本😀")
        let nameLength = Int.random(in: 1...60, using: &random)
        var name = String((0..<nameLength).map { _ in nameAlphabet.randomElement(using: &random)! })
        if name == "." || name == ".." { name = "x" }
        let types = ["application/octet-stream", "image/png", "text/plain", "video/mp4", "application/vnd.a+b"]
        let chunkSize = [1, 17, 4096, 65_536, FileLimits.chunkBytesMax].randomElement(using: &random)!
        let maxSize = UInt64(chunkSize) * UInt64(FileLimits.chunksMax)
        let size = [0, 1, UInt64(chunkSize), UInt64.random(in: 0...maxSize, using: &random), maxSize]
            .randomElement(using: &random)!
        let count = FileDescriptor.chunkCount(size: size, chunkSize: chunkSize)
        let chunks = (0..<count).map { _ in ChunkID(bytes: random.bytes(32)) }
        let file = try! FileDescriptor(
            name: name, mediaType: types.randomElement(using: &random)!, size: size,
            plaintextHash: Bytes32(random.bytes(32)), key: try! SymmetricKey(bytes: random.bytes(32)),
            chunkSize: chunkSize, chunks: chunks)
        let reply = Bool.random(using: &random) ? RecordID(bytes: random.bytes(32)) : nil
        return (file, reply)
    }

    @Test("random descriptors round-trip to the same operation and the same bytes")
    func roundTrip() throws {
        var random = SeededGenerator(seed: 0xF11E_0001)
        var sawEmpty = false
        var sawFull = false
        for _ in 0..<Self.cases {
            let (file, reply) = Self.randomFile(&random)
            let operation = ContentOperation.file(file, replyTo: reply)
            let bytes = operation.encoded()
            let decoded = try ContentOperation.decode(bytes)
            #expect(decoded == operation)
            #expect(decoded.encoded() == bytes)
            sawEmpty = sawEmpty || file.size == 0
            sawFull = sawFull || file.chunks.count == FileLimits.chunksMax
        }
        #expect(sawEmpty && sawFull, "the generator reaches empty files and full chunk lists")
    }

    @Test("mutated encodings never crash the decoder, and whatever decodes re-encodes to its input")
    func mutations() {
        var random = SeededGenerator(seed: 0xF11E_0002)
        var accepted = 0
        var rejected = 0
        for _ in 0..<Self.cases {
            let (file, reply) = Self.randomFile(&random)
            let bytes = ContentOperation.file(file, replyTo: reply).encoded()
            for _ in 0..<8 {
                var mutated = bytes
                switch Int.random(in: 0..<4, using: &random) {
                case 0:
                    let index = Int.random(in: 0..<mutated.count, using: &random)
                    mutated[index] ^= UInt8.random(in: 1...255, using: &random)
                case 1: mutated.removeLast(Int.random(in: 1...mutated.count, using: &random))
                case 2: mutated.append(UInt8.random(in: 0...255, using: &random))
                default:
                    // Corrupt a length or size field near the start, where the counts live.
                    let index = Int.random(in: 0..<min(mutated.count, 80), using: &random)
                    mutated[index] = [0x00, 0xFF, 0x80, 0x7F].randomElement(using: &random)!
                }
                if let decoded = try? ContentOperation.decode(mutated) {
                    #expect(decoded.encoded() == mutated)
                    accepted += 1
                } else {
                    rejected += 1
                }
            }
        }
        #expect(rejected > 0 && accepted > 0, "mutations reach both outcomes (\(accepted) accepted)")
    }

    @Test("the largest descriptor, with a reply and a full dependency vector, fits the record cap")
    func largestFitsARecord() throws {
        let file = try FileDescriptor(
            name: String(repeating: "n", count: FileLimits.nameBytesMax),
            mediaType: "a/" + String(repeating: "b", count: FileLimits.mediaTypeBytesMax - 2),
            size: FileLimits.fileBytesMax, plaintextHash: .zero, key: .generate(),
            chunkSize: FileLimits.chunkBytesMax,
            chunks: (0..<FileLimits.chunksMax).map { ChunkID(bytes: [UInt8](repeating: UInt8($0 % 256), count: 32)) })
        let operation = ContentOperation.file(file, replyTo: RecordID(bytes: [UInt8](repeating: 1, count: 32)))
        let operationBytes = operation.encoded().count
        #expect(operationBytes == 33_268)
        // Record: 224 fixed bytes + 40 per dependency + payload (nonce 24 ‖ ciphertext with its 16-byte tag).
        let record = 224 + 40 * Limits.dependenciesMax + AEADNonce.byteCount + operationBytes + AEAD.tagBytes
        #expect(record == 54_012)
        #expect(record <= Limits.recordBytesMax)
        // The default cap (16 MiB in 64 KiB chunks) lists 256 chunk ids: 8 KiB.
        let defaultCount = FileDescriptor.chunkCount(
            size: FileLimits.sendBytesDefault, chunkSize: FileLimits.chunkBytesDefault)
        #expect(defaultCount == 256)
    }

    @Test("names and media types outside the rules are refused")
    func fieldRules() {
        for name in ["", ".", "..", "a/b", "line\nbreak", "nul\u{0}", "bell\u{7}", String(repeating: "x", count: 256)] {
            #expect(!FileDescriptor.isValidName(name), "\(name.debugDescription)")
        }
        for name in ["report.pdf", "..hidden", "日本語.txt", "a b", String(repeating: "x", count: 255)] {
            #expect(FileDescriptor.isValidName(name), "\(name.debugDescription)")
        }
        for type in ["", "text", "/plain", "text/", "text/plain/x", "text/pl ain", "tëxt/plain", "a/b;c=d"] {
            #expect(!FileDescriptor.isValidMediaType(type), "\(type.debugDescription)")
        }
        for type in ["text/plain", "application/vnd.oasis.opendocument.text", "image/svg+xml", "a/b"] {
            #expect(FileDescriptor.isValidMediaType(type), "\(type.debugDescription)")
        }
        #expect(throws: FileFormatError.chunkCountMismatch(expected: 2, got: 1)) {
            try FileDescriptor(
                name: "f", mediaType: "a/b", size: 3, plaintextHash: .zero, key: .generate(), chunkSize: 2,
                chunks: [ChunkID(raw: .zero)])
        }
    }

    @Test("chunks open only at their own position, and any flipped or missing byte is caught by the id")
    func chunkBinding() throws {
        var random = SeededGenerator(seed: 0xF11E_0003)
        let data = random.bytes(10_000)
        let (file, chunks) = try FileChunks.encrypt(data, name: "data.bin", chunkSize: 4096)
        #expect(file.chunks.count == 3 && chunks.count == 3)
        #expect(file.plaintextBytes(ofChunk: 2) == 10_000 - 2 * 4096)
        #expect(file.plaintextHash == Bytes32(Blake2b.hash(data, outputBytes: 32)))
        var assembled = [UInt8]()
        for (index, chunk) in chunks.enumerated() {
            #expect(chunk.count == file.plaintextBytes(ofChunk: index) + FileLimits.chunkOverheadBytes)
            assembled += try FileChunks.open(chunk, index: index, of: file)
        }
        #expect(assembled == data)
        // A chunk at another position: its id does not match that position's.
        #expect(throws: FileChunkError.hashMismatch(index: 1)) { try FileChunks.open(chunks[0], index: 1, of: file) }
        var flipped = chunks[1]
        flipped[5] ^= 1
        #expect(throws: FileChunkError.hashMismatch(index: 1)) { try FileChunks.open(flipped, index: 1, of: file) }
        #expect(throws: FileChunkError.hashMismatch(index: 2)) {
            try FileChunks.open(Array(chunks[2].dropLast()), index: 2, of: file)
        }
        // A descriptor whose ids were reordered by its author: the ids match, the nonce and associated data do not.
        let swapped = try FileDescriptor(
            name: file.name, mediaType: file.mediaType, size: 8192, plaintextHash: file.plaintextHash, key: file.key,
            chunkSize: 4096, chunks: [file.chunks[1], file.chunks[0]])
        #expect(throws: FileChunkError.undecryptable(index: 0)) {
            try FileChunks.open(chunks[1], index: 0, of: swapped)
        }
        // Two encryptions of the same bytes share no chunk id (fresh key per file).
        let again = try FileChunks.encrypt(data, name: "data.bin", chunkSize: 4096)
        #expect(Set(again.descriptor.chunks).isDisjoint(with: file.chunks))
    }

    @Test("the sender picks 64 KiB chunks, larger ones only when a file needs more than 1024")
    func chunkSizeChoice() throws {
        #expect(try FileChunks.encrypt([1, 2, 3], name: "small").descriptor.chunkSize == FileLimits.chunkBytesDefault)
        let empty = try FileChunks.encrypt([], name: "empty").descriptor
        #expect(empty.chunks.isEmpty && empty.size == 0)
        let big = [UInt8](repeating: 7, count: 64 * 1024 * 1024 + 1)
        #expect(try FileChunks.encrypt(big, name: "big").descriptor.chunkSize == 128 * 1024)
    }
}
