// Goal: docs/protocol.md and the code agree, so the document can be trusted to write a second implementation.
// Method: the test vectors are read from the document's machine-readable blocks, each record is rebuilt from its
// documented inputs with `Record.sign`, and its bytes, id and decoded fields are compared with the documented ones.
import Foundation
import NatterCrypto
import NatterModel
import Testing

/// One test vector as documented: inputs and expected outputs.
struct DocumentedVector: Sendable, CustomTestStringConvertible {
    let name: String
    let seed: [UInt8]
    let author: AuthorID
    let header: RecordHeader
    let payload: [UInt8]
    let bytes: [UInt8]
    let id: RecordID

    var testDescription: String { "vector \(name)" }
}

enum ProtocolDocument {
    /// The package root: this file is `Tests/NatterModelTests/ProtocolVectorTests.swift`.
    static let root = URL(fileURLWithPath: #filePath)
        .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()

    static func text() throws -> String {
        try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
    }

    /// The fenced blocks whose info string is `LANGUAGE vector-…` (or another `prefix`), by their name.
    static func vectorBlocks(_ text: String, prefix: String = "vector-") throws -> [String: String] {
        var blocks = [String: String]()
        var current: (name: String, lines: [String])?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if var open = current {
                if trimmed == "```" {
                    #expect(blocks[open.name] == nil, "block \(open.name) appears twice")
                    blocks[open.name] = open.lines.joined(separator: "\n")
                    current = nil
                } else {
                    open.lines.append(String(line))
                    current = open
                }
            } else if trimmed.hasPrefix("```") {
                let info = trimmed.dropFirst(3).split(separator: " ")
                if info.count == 2, info[1].hasPrefix(prefix) {
                    current = (String(info[1]), [])
                }
            }
        }
        try #require(current == nil, "unterminated fenced block")
        return blocks
    }

    static func hex(_ text: String, _ what: String) throws -> [UInt8] {
        let digits = text.filter { !$0.isWhitespace }
        return try #require(Hex.decode(digits), "\(what) is not hex")
    }

    static func id32(_ text: String, _ what: String) throws -> Bytes32 {
        let bytes = try hex(text, what)
        try #require(bytes.count == 32, "\(what) is not 32 bytes")
        return Bytes32(bytes)
    }

    /// Every documented vector, parsed.
    static func vectors() throws -> [DocumentedVector] {
        let blocks = try vectorBlocks(try text())
        let names = blocks.keys.filter { $0.hasSuffix("-inputs") }
            .map { String($0.dropFirst("vector-".count).dropLast("-inputs".count)) }
            .sorted()
        return try names.map { name in
            let prefix = "vector-\(name)-"
            let inputs = try #require(blocks[prefix + "inputs"])
            var fields = [String: String]()
            var dependencies = [VectorClock.Entry]()
            for line in inputs.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                try #require(parts.count == 2, "vector \(name): bad input line \(line)")
                if parts[0] == "dependency" {
                    let words = parts[1].split(separator: " ")
                    try #require(words.count == 2, "vector \(name): bad dependency \(parts[1])")
                    let sequence = try #require(UInt64(words[1]), "vector \(name): bad dependency sequence")
                    dependencies.append(
                        .init(
                            author: AuthorID(raw: try id32(String(words[0]), "dependency author")), sequence: sequence))
                } else {
                    #expect(fields[parts[0]] == nil, "vector \(name): \(parts[0]) given twice")
                    fields[parts[0]] = parts[1]
                }
            }
            func field(_ key: String) throws -> String { try #require(fields[key], "vector \(name): no \(key)") }
            let kindValue = try #require(UInt8(try field("kind")), "vector \(name): bad kind")
            let clock = try #require(
                VectorClock(sortedEntries: dependencies), "vector \(name): dependencies not sorted, unique, non-zero")
            let header = RecordHeader(
                kind: try #require(RecordKind(rawValue: kindValue)),
                conversation: ConversationID(raw: try id32(try field("conversation"), "conversation")),
                author: AuthorID(raw: try id32(try field("author"), "author")),
                sequence: try #require(UInt64(try field("sequence"))),
                previous: RecordID(raw: try id32(try field("previous"), "previous")),
                epoch: EpochID(raw: try id32(try field("epoch"), "epoch")),
                lamport: try #require(UInt64(try field("lamport"))),
                createdAtMillis: try #require(Int64(try field("created"))),
                dependencies: clock)
            #expect(
                Set(fields.keys) == [
                    "seed", "author", "kind", "conversation", "sequence", "previous", "epoch",
                    "lamport", "created",
                ], "vector \(name): unexpected input fields")
            return DocumentedVector(
                name: name,
                seed: try hex(try field("seed"), "seed"),
                author: header.author,
                header: header,
                payload: try hex(try #require(blocks[prefix + "payload"], "vector \(name): no payload"), "payload"),
                bytes: try hex(try #require(blocks[prefix + "bytes"], "vector \(name): no bytes"), "bytes"),
                id: RecordID(raw: try id32(try #require(blocks[prefix + "id"], "vector \(name): no id"), "id")))
        }
    }
}

@Suite("docs/protocol.md test vectors")
struct ProtocolVectorTests {
    @Test("the document has the vectors it promises")
    func documentHasVectors() throws {
        let vectors = try ProtocolDocument.vectors()
        try #require(vectors.count >= 3)
        #expect(vectors.contains { $0.header.kind == .plain && $0.header.dependencies.isEmpty })
        #expect(
            vectors.contains {
                $0.header.kind == .content && $0.header.sequence == 2 && $0.header.dependencies.count == 3
            })
        #expect(vectors.contains { $0.header.kind == .commit })
        // Each vector's hex blocks are wrapped at 64 digits per line.
        let blocks = try ProtocolDocument.vectorBlocks(try ProtocolDocument.text())
        for (name, block) in blocks where !name.hasSuffix("-inputs") {
            #expect(block.split(separator: "\n").allSatisfy { $0.count <= 64 }, "\(name) has a line over 64 digits")
        }
    }

    @Test("Record.sign rebuilds every documented vector byte for byte")
    func vectorsRebuild() throws {
        for vector in try ProtocolDocument.vectors() {
            let identity = try IdentityKeyPair(seed: vector.seed)
            #expect(
                AuthorID(identity.publicKey) == vector.author, "vector \(vector.name): author is not the seed's key")
            let record = try Record.sign(header: vector.header, payload: vector.payload, by: identity)
            if record.bytes != vector.bytes {
                let common = min(record.bytes.count, vector.bytes.count)
                let at = (0..<common).first { record.bytes[$0] != vector.bytes[$0] } ?? common
                Issue.record(
                    """
                    vector \(vector.name): the code's encoding differs from the document's at byte \(at) \
                    (code: \(record.bytes.count) bytes, document: \(vector.bytes.count))
                    """)
            }
            #expect(record.id == vector.id, "vector \(vector.name): id")
            #expect(
                record.id.bytes == Blake2b.hash(vector.bytes, outputBytes: 32),
                "vector \(vector.name): the id is not BLAKE2b-256 of the documented bytes")
        }
    }

    @Test("decodeVerified of the documented bytes gives the documented fields")
    func vectorsDecode() throws {
        for vector in try ProtocolDocument.vectors() {
            let record = try Record.decodeVerified(vector.bytes)
            #expect(record.header == vector.header, "vector \(vector.name): header")
            #expect(record.header.kind == vector.header.kind)
            #expect(record.header.conversation == vector.header.conversation)
            #expect(record.header.author == vector.header.author)
            #expect(record.header.sequence == vector.header.sequence)
            #expect(record.header.previous == vector.header.previous)
            #expect(record.header.epoch == vector.header.epoch)
            #expect(record.header.lamport == vector.header.lamport)
            #expect(record.header.createdAtMillis == vector.header.createdAtMillis)
            #expect(record.header.dependencies == vector.header.dependencies)
            #expect(record.payload == vector.payload, "vector \(vector.name): payload")
            #expect(record.id == vector.id, "vector \(vector.name): id")
            // The signature is the documented framing over everything before it.
            let signed = Array(vector.bytes.dropLast(Signature.byteCount))
            #expect(vector.author.publicKey.isValidSignature(record.signature, for: signed, in: .record))
            #expect(
                Array(record.headerBytes) == Array(vector.bytes.prefix(156 + 40 * vector.header.dependencies.count)))
        }
    }

    @Test("the fuzz seed corpus holds the documented vectors")
    func corpusMatchesDocument() throws {
        for vector in try ProtocolDocument.vectors() {
            let file = ProtocolDocument.root.appendingPathComponent(
                "Tests/Fuzz/record/vector-\(vector.name).bin")
            let data = try Data(contentsOf: file)
            #expect(Array(data) == vector.bytes, "\(file.lastPathComponent) differs from docs/protocol.md")
        }
    }

    @Test("the document's layout constants are the code's")
    func layoutConstants() {
        #expect(RecordCodec.fixedHeaderByteCount == 156)
        #expect(RecordCodec.dependencyByteCount == 40)
        #expect(RecordCodec.minimumRecordByteCount == 224)
        #expect(RecordHeader.currentVersion == 1)
        #expect(RecordKind.content.rawValue == 1 && RecordKind.commit.rawValue == 2 && RecordKind.plain.rawValue == 3)
        #expect(Limits.recordBytesMax == 65_536)
        #expect(Limits.dependenciesMax == 512)
        #expect(Limits.sequenceMax == 1 << 62 && Limits.lamportMax == 1 << 62)
        #expect(Limits.createdAtMillisMax == 253_402_300_799_999)
        #expect(SignatureDomain.record.label == "natter/v1/record")
    }

    @Test("the document names every RecordFormatError case")
    func documentNamesEveryError() throws {
        let text = try ProtocolDocument.text()
        for error in Self.everyError {
            let name = Self.caseName(error)
            #expect(text.contains("`.\(name)"), "docs/protocol.md does not mention .\(name)")
        }
    }

    static let everyError: [RecordFormatError] = [
        .tooLarge(0), .truncated(field: ""), .trailingBytes(0), .unsupportedVersion(0), .unknownKind(0), .zeroSequence,
        .sequenceTooLarge(0), .previousAtFirstSequence, .missingPrevious, .epochOnPlainRecord, .missingEpoch,
        .tooManyDependencies(0), .unsortedDependencies, .duplicateDependency, .zeroDependencySequence,
        .ownDependencyMismatch(expected: 0, found: 0), .lamportTooLarge(0), .lamportWithoutDependencies(0),
        .lamportBelowSequence(lamport: 0), .creationTimeOutOfRange(0), .payloadTooLarge(0), .nonCanonical,
        .badSignature,
    ]

    /// Exhaustive on purpose: a new case breaks this switch, a reminder to document its rule and add it above.
    static func caseName(_ error: RecordFormatError) -> String {
        switch error {
        case .tooLarge: "tooLarge"
        case .truncated: "truncated"
        case .trailingBytes: "trailingBytes"
        case .unsupportedVersion: "unsupportedVersion"
        case .unknownKind: "unknownKind"
        case .zeroSequence: "zeroSequence"
        case .sequenceTooLarge: "sequenceTooLarge"
        case .previousAtFirstSequence: "previousAtFirstSequence"
        case .missingPrevious: "missingPrevious"
        case .epochOnPlainRecord: "epochOnPlainRecord"
        case .missingEpoch: "missingEpoch"
        case .tooManyDependencies: "tooManyDependencies"
        case .unsortedDependencies: "unsortedDependencies"
        case .duplicateDependency: "duplicateDependency"
        case .zeroDependencySequence: "zeroDependencySequence"
        case .ownDependencyMismatch: "ownDependencyMismatch"
        case .lamportTooLarge: "lamportTooLarge"
        case .lamportWithoutDependencies: "lamportWithoutDependencies"
        case .lamportBelowSequence: "lamportBelowSequence"
        case .creationTimeOutOfRange: "creationTimeOutOfRange"
        case .payloadTooLarge: "payloadTooLarge"
        case .nonCanonical: "nonCanonical"
        case .badSignature: "badSignature"
        }
    }
}
