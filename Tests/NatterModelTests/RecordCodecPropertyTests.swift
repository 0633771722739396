// Goal: the record codec accepts exactly the canonical encodings of valid records and rejects everything else with
// the `RecordFormatError` case that names the broken rule of docs/protocol.md, without ever crashing.
// Method: seeded random valid records are round-tripped and mutated (bytes, bits, truncation, insertion, appending),
// and every invalid form is made by hand-editing valid bytes at the documented offsets and re-signing them.
import NatterCrypto
import NatterModel
import Testing

// MARK: - Properties

@Suite("Record codec properties")
struct RecordCodecPropertyTests {
    static let recordsPerProperty = 500

    @Test("sign then decode gives back the same header, payload, signature, bytes and id")
    func roundTrip() throws {
        var random = RandomRecords(seed: 0x5EED_0001)
        var kinds = Set<RecordKind>()
        var dependencyCounts = Set<Int>()
        var sawEmptyPayload = false
        var sawFullRecord = false
        for _ in 0..<Self.recordsPerProperty {
            let record = random.record()
            let decoded = try Record.decodeVerified(record.bytes)
            #expect(decoded.header == record.header)
            #expect(decoded.payload == record.payload)
            #expect(decoded.signature == record.signature)
            #expect(decoded.bytes == record.bytes)
            #expect(decoded.id == record.id)
            #expect(decoded.id.bytes == Blake2b.hash(record.bytes, outputBytes: 32))
            #expect(Array(decoded.headerBytes) == RecordCodec.encodeHeader(record.header))
            #expect(reencode(decoded) == record.bytes)
            let n = record.header.dependencies.count
            #expect(record.bytes.count == RecordCodec.minimumRecordByteCount + 40 * n + record.payload.count)
            #expect(record.bytes.count <= Limits.recordBytesMax)
            kinds.insert(record.header.kind)
            dependencyCounts.insert(n)
            sawEmptyPayload = sawEmptyPayload || record.payload.isEmpty
            sawFullRecord = sawFullRecord || record.bytes.count == Limits.recordBytesMax
        }
        // The generator really covers the extremes it promises.
        #expect(kinds == Set(RecordKind.allCases))
        #expect(dependencyCounts.contains(0) && dependencyCounts.contains(40))
        #expect(sawEmptyPayload && sawFullRecord)
    }

    @Test("signing is deterministic: the same header and payload give the same bytes and id")
    func signingIsDeterministic() throws {
        var first = RandomRecords(seed: 0x5EED_0002)
        var second = RandomRecords(seed: 0x5EED_0002)
        for _ in 0..<50 {
            #expect(first.record().bytes == second.record().bytes)
        }
    }

    @Test("random mutations never crash and never decode to a validly signed record")
    func mutationsAreRejected() {
        var random = RandomRecords(seed: 0x5EED_0003)
        var rng = SeededGenerator(seed: 0x5EED_0004)
        var decodedButUnsigned = 0
        var rejected = 0
        for _ in 0..<Self.recordsPerProperty {
            let original = random.record().bytes
            // Half of the positions fall in the envelope, where the interesting rules live.
            let envelopeEnd = original.count - Signature.byteCount - payloadLength(of: original)
            func position() -> Int {
                rng.chance(50)
                    ? Int.random(in: 0..<envelopeEnd, using: &rng) : Int.random(in: 0..<original.count, using: &rng)
            }
            var mutants = [[UInt8]]()
            for _ in 0..<2 {  // a byte replaced by a different value
                var bytes = original
                let at = position()
                bytes[at] = bytes[at] &+ UInt8.random(in: 1...255, using: &rng)
                mutants.append(bytes)
            }
            for _ in 0..<2 {  // one bit flipped
                var bytes = original
                bytes[position()] ^= 1 << UInt8.random(in: 0...7, using: &rng)
                mutants.append(bytes)
            }
            mutants.append(Array(original.prefix(Int.random(in: 0..<original.count, using: &rng))))  // truncated
            var inserted = original  // one byte inserted
            inserted.insert(UInt8.random(in: 0...255, using: &rng), at: Int.random(in: 0...original.count, using: &rng))
            mutants.append(inserted)
            mutants.append(original + rng.fastBytes(Int.random(in: 1...8, using: &rng)))  // bytes appended

            for mutant in mutants {
                #expect(mutant != original)
                let verified = formatError { () throws(RecordFormatError) in try Record.decodeVerified(mutant) }
                #expect(verified != nil, "a mutated record decoded with a valid signature")
                #expect(verified != .nonCanonical)
                do throws(RecordFormatError) {
                    let record = try Record.decode(mutant)
                    // Structure may survive (a changed payload, time or signature byte), the signature may not.
                    #expect(!record.hasValidSignature)
                    #expect(verified == .badSignature)
                    #expect(record.bytes == mutant && reencode(record) == mutant)
                    decodedButUnsigned += 1
                } catch {
                    // `decodeVerified` fails for the same structural reason before looking at the signature.
                    #expect(verified == error)
                    rejected += 1
                }
            }
        }
        #expect(decodedButUnsigned > 0 && rejected > 0)
    }

    @Test("every single-bit flip of a record with dependencies is rejected, and never as non-canonical")
    func everyBitFlipIsRejected() throws {
        let original = Fixtures.contentWithDependencies().bytes
        for index in original.indices {
            for bit in 0..<8 {
                var bytes = original
                bytes[index] ^= 1 << bit
                let error = formatError { () throws(RecordFormatError) in try Record.decodeVerified(bytes) }
                #expect(error != nil && error != .nonCanonical, "flip of bit \(bit) at byte \(index)")
            }
        }
    }

    private func payloadLength(of bytes: [UInt8]) -> Int {
        let n = Int(bytes[Offset.dependencyCount]) << 8 | Int(bytes[Offset.dependencyCount + 1])
        let at = Offset.payloadLength(dependencyCount: n)
        return bytes[at..<(at + 4)].reduce(0) { $0 << 8 | Int($1) }
    }
}

// MARK: - One test per rule

/// Asserts that `bytes` are rejected as `expected` by both `decode` and `decodeVerified`.
private func expectRejected(
    _ bytes: [UInt8], as expected: RecordFormatError, sourceLocation: SourceLocation = #_sourceLocation
) {
    #expect(
        formatError { () throws(RecordFormatError) in try Record.decode(bytes) } == expected,
        sourceLocation: sourceLocation)
    #expect(
        formatError { () throws(RecordFormatError) in try Record.decodeVerified(bytes) } == expected,
        sourceLocation: sourceLocation)
}

/// Asserts that `bytes` are a valid, correctly signed record.
private func expectAccepted(_ bytes: [UInt8], sourceLocation: SourceLocation = #_sourceLocation) {
    #expect(
        formatError { () throws(RecordFormatError) in try Record.decodeVerified(bytes) } == nil,
        sourceLocation: sourceLocation)
}

@Suite("Record format rules, one test per RecordFormatError case")
struct RecordFormatRuleTests {
    let plain = Fixtures.plainFirst()
    let content = Fixtures.contentWithDependencies()
    let plainIdentity = Fixtures.identities[0]
    let contentIdentity = Fixtures.identities[1]

    init() {
        expectAccepted(plain.bytes)
        expectAccepted(content.bytes)
    }

    @Test func tooLarge() throws {
        let full = try Record.sign(
            header: content.header, payload: [UInt8](repeating: 7, count: Fixtures.payloadMax(dependencyCount: 3)),
            by: contentIdentity)
        #expect(full.bytes.count == Limits.recordBytesMax)
        expectAccepted(full.bytes)
        expectRejected(full.bytes + [0], as: .tooLarge(65_537))
        expectRejected([UInt8](repeating: 0, count: 65_537), as: .tooLarge(65_537))
        expectRejected([UInt8](repeating: 0xFF, count: 1 << 20), as: .tooLarge(1 << 20))
    }

    @Test func truncatedHeader() {
        for length in [0, 1, 2, 66, 155] {
            expectRejected(Array(plain.bytes.prefix(length)), as: .truncated(field: "header"))
        }
    }

    @Test func truncatedDependencies() {
        // The dependency list or the payload length field after it is cut short.
        for length in [156, 157, 156 + 40 * 2 + 39, 156 + 40 * 3, 156 + 40 * 3 + 3] {
            expectRejected(Array(content.bytes.prefix(length)), as: .truncated(field: "dependencies"))
        }
        expectRejected(Array(plain.bytes.prefix(159)), as: .truncated(field: "dependencies"))
    }

    @Test func truncatedPayload() {
        let payloadStart = 160 + 40 * 3
        for length in [payloadStart, payloadStart + 1, payloadStart + 31] {
            expectRejected(Array(content.bytes.prefix(length)), as: .truncated(field: "payload"))
        }
    }

    @Test func truncatedSignature() {
        for cut in [1, 32, 63, 64] {
            expectRejected(Array(content.bytes.dropLast(cut)), as: .truncated(field: "signature"))
        }
    }

    @Test func trailingBytes() {
        expectRejected(plain.bytes + [0], as: .trailingBytes(1))
        expectRejected(content.bytes + [UInt8](repeating: 0xAB, count: 64), as: .trailingBytes(64))
    }

    @Test func unsupportedVersion() {
        for version: UInt8 in [0, 2, 0x81, 0xFF] {
            var editor = RecordEditor(plain)
            editor.setByte(version, at: Offset.version)
            expectRejected(editor.resigned(by: plainIdentity), as: .unsupportedVersion(version))
        }
    }

    @Test func unknownKind() {
        for kind: UInt8 in [0, 4, 0xFF] {
            var editor = RecordEditor(plain)
            editor.setByte(kind, at: Offset.kind)
            expectRejected(editor.resigned(by: plainIdentity), as: .unknownKind(kind))
        }
    }

    @Test func zeroSequence() {
        var editor = RecordEditor(plain)
        editor.set(UInt64(0), at: Offset.sequence)
        expectRejected(editor.resigned(by: plainIdentity), as: .zeroSequence)
    }

    @Test func sequenceTooLarge() throws {
        for sequence in [UInt64.max, Limits.sequenceMax + 1] {
            var editor = RecordEditor(plain)
            editor.set(sequence, at: Offset.sequence)
            expectRejected(editor.resigned(by: plainIdentity), as: .sequenceTooLarge(sequence))
        }
        // The same rule bounds every dependency's sequence (here the last of the three, another author's).
        var editor = RecordEditor(content)
        editor.set(Limits.sequenceMax + 1, at: Offset.dependencySequence(2))
        expectRejected(editor.resigned(by: contentIdentity), as: .sequenceTooLarge(Limits.sequenceMax + 1))
        // 2^62 itself is allowed, for the record and for a dependency.
        var header = content.header
        header.sequence = Limits.sequenceMax
        header.lamport = Limits.lamportMax
        header.dependencies[header.author] = Limits.sequenceMax - 1
        header.dependencies[Fixtures.author(2)] = Limits.sequenceMax
        expectAccepted(try Record.sign(header: header, payload: [], by: contentIdentity).bytes)
    }

    @Test func previousAtFirstSequence() {
        var editor = RecordEditor(plain)
        editor.set(Fixtures.bytes32("some record"), at: Offset.previous)
        expectRejected(editor.resigned(by: plainIdentity), as: .previousAtFirstSequence)
    }

    @Test func missingPrevious() {
        var editor = RecordEditor(content)
        editor.set(Bytes32.zero, at: Offset.previous)
        expectRejected(editor.resigned(by: contentIdentity), as: .missingPrevious)
    }

    @Test func epochOnPlainRecord() {
        var editor = RecordEditor(plain)
        editor.set(Fixtures.bytes32("an epoch"), at: Offset.epoch)
        expectRejected(editor.resigned(by: plainIdentity), as: .epochOnPlainRecord)
        // A content record relabelled as plain keeps its epoch.
        var relabelled = RecordEditor(content)
        relabelled.setByte(RecordKind.plain.rawValue, at: Offset.kind)
        expectRejected(relabelled.resigned(by: contentIdentity), as: .epochOnPlainRecord)
    }

    @Test func missingEpoch() {
        var editor = RecordEditor(content)
        editor.set(Bytes32.zero, at: Offset.epoch)
        expectRejected(editor.resigned(by: contentIdentity), as: .missingEpoch)
        // The same record as a commit is fine: a commit may build on no epoch.
        editor.setByte(RecordKind.commit.rawValue, at: Offset.kind)
        expectAccepted(editor.resigned(by: contentIdentity))
    }

    @Test func tooManyDependencies() throws {
        // A hostile count in a short buffer is refused on its value, before anything is reserved for it.
        for count: UInt16 in [513, 0xFFFF] {
            var editor = RecordEditor(plain)
            editor.set(count, at: Offset.dependencyCount)
            expectRejected(editor.bytes, as: .tooManyDependencies(Int(count)))
            expectRejected(Array(editor.bytes.prefix(160)), as: .tooManyDependencies(Int(count)))
            expectRejected(Array(editor.bytes.prefix(156)), as: .tooManyDependencies(Int(count)))
        }
        // 513 well-formed, sorted entries actually present: still one too many.
        var header = content.header
        header.dependencies = VectorClock()
        for index in 0..<513 {
            header.dependencies[AuthorID(raw: Fixtures.bytes32("member \(index)"))] = 1
        }
        header.sequence = 1
        header.previous = .none
        expectRejected(encodeUnchecked(header, payload: [], by: contentIdentity), as: .tooManyDependencies(513))
        // 512 is the cap, and fits.
        header.dependencies[header.dependencies.entries[0].author] = 0
        #expect(header.dependencies.count == 512)
        expectAccepted(try Record.sign(header: header, payload: [], by: contentIdentity).bytes)
    }

    @Test func unsortedDependencies() {
        var editor = RecordEditor(content)
        let entries = content.header.dependencies.entries
        editor.set(entries[2].author.raw, at: Offset.dependency(1))
        editor.set(entries[2].sequence, at: Offset.dependencySequence(1))
        editor.set(entries[1].author.raw, at: Offset.dependency(2))
        editor.set(entries[1].sequence, at: Offset.dependencySequence(2))
        expectRejected(editor.resigned(by: contentIdentity), as: .unsortedDependencies)
    }

    @Test func duplicateDependency() {
        var editor = RecordEditor(content)
        editor.set(content.header.dependencies.entries[1].author.raw, at: Offset.dependency(2))
        expectRejected(editor.resigned(by: contentIdentity), as: .duplicateDependency)
    }

    @Test func zeroDependencySequence() {
        for index in 0..<3 {
            var editor = RecordEditor(content)
            editor.set(UInt64(0), at: Offset.dependencySequence(index))
            expectRejected(editor.resigned(by: contentIdentity), as: .zeroDependencySequence)
        }
    }

    @Test func ownDependencyMismatch() throws {
        let ownIndex = content.header.dependencies.entries.firstIndex { $0.author == content.header.author }!
        // Sequence 3 must depend on its own sequence 2, not 1 or 3.
        for own: UInt64 in [1, 3] {
            var editor = RecordEditor(content)
            editor.set(own, at: Offset.dependencySequence(ownIndex))
            expectRejected(editor.resigned(by: contentIdentity), as: .ownDependencyMismatch(expected: 2, found: own))
        }
        // Absent own entry after sequence 1.
        var header = content.header
        header.dependencies[header.author] = 0
        expectRejected(
            encodeUnchecked(header, payload: [], by: contentIdentity), as: .ownDependencyMismatch(expected: 2, found: 0)
        )
        // An own entry at sequence 1.
        header = content.header
        header.sequence = 1
        header.previous = .none
        header.dependencies[header.author] = 1
        expectRejected(
            encodeUnchecked(header, payload: [], by: contentIdentity), as: .ownDependencyMismatch(expected: 0, found: 1)
        )
    }

    @Test func lamportTooLarge() {
        for lamport in [Limits.lamportMax + 1, UInt64.max] {
            var editor = RecordEditor(content)
            editor.set(lamport, at: Offset.lamport)
            expectRejected(editor.resigned(by: contentIdentity), as: .lamportTooLarge(lamport))
        }
    }

    @Test func lamportWithoutDependencies() {
        for lamport: UInt64 in [0, 2, 1 << 40] {
            var editor = RecordEditor(plain)
            editor.set(lamport, at: Offset.lamport)
            expectRejected(editor.resigned(by: plainIdentity), as: .lamportWithoutDependencies(lamport))
        }
    }

    @Test func lamportBelowSequence() throws {
        // At sequence 3 the Lamport number is at least 3 …
        for lamport: UInt64 in [0, 1, 2] {
            var editor = RecordEditor(content)
            editor.set(lamport, at: Offset.lamport)
            expectRejected(editor.resigned(by: contentIdentity), as: .lamportBelowSequence(lamport: lamport))
        }
        var editor = RecordEditor(content)
        editor.set(UInt64(3), at: Offset.lamport)
        expectAccepted(editor.resigned(by: contentIdentity))
        // … and with dependencies at least 2, even at sequence 1.
        var header = content.header
        header.sequence = 1
        header.previous = .none
        header.dependencies[header.author] = 0
        header.lamport = 1
        expectRejected(encodeUnchecked(header, payload: [], by: contentIdentity), as: .lamportBelowSequence(lamport: 1))
        header.lamport = 2
        expectAccepted(encodeUnchecked(header, payload: [], by: contentIdentity))
    }

    @Test func creationTimeOutOfRange() {
        for created in [Int64(-1), Int64.min, Limits.createdAtMillisMax + 1, Int64.max] {
            var editor = RecordEditor(plain)
            editor.set(created, at: Offset.created)
            expectRejected(editor.resigned(by: plainIdentity), as: .creationTimeOutOfRange(created))
        }
        for created in [Int64(0), Limits.createdAtMillisMax] {
            var editor = RecordEditor(plain)
            editor.set(created, at: Offset.created)
            expectAccepted(editor.resigned(by: plainIdentity))
        }
    }

    @Test func payloadTooLarge() {
        let at = Offset.payloadLength(dependencyCount: 3)
        let largestFitting = UInt32(Limits.recordBytesMax - RecordCodec.minimumRecordByteCount - 3 * 40)
        for length: UInt32 in [0xFFFF_FFFF, 65_537, 65_536, largestFitting + 1] {
            var editor = RecordEditor(content)
            editor.set(length, at: at)
            expectRejected(editor.bytes, as: .payloadTooLarge(Int(length)))
            expectRejected(Array(editor.bytes.prefix(at + 4)), as: .payloadTooLarge(Int(length)))
        }
        // A length that fits the cap but runs beyond the bytes present is a truncation.
        var editor = RecordEditor(content)
        editor.set(largestFitting, at: at)
        expectRejected(editor.bytes, as: .truncated(field: "payload"))
    }

    /// `.nonCanonical` cannot be reached with today's fixed-width layout (docs/protocol.md, rule C1): every field has
    /// one encoding and every byte is read. This test pins that down for every field of a record with dependencies:
    /// each value written into a field either is rejected for a named rule or re-encodes to the same bytes.
    @Test func nonCanonicalIsUnreachable() {
        var rng = SeededGenerator(seed: 0xC1)
        for _ in 0..<400 {
            var editor = RecordEditor(content)
            let at = Int.random(in: 0..<(content.bytes.count - Signature.byteCount), using: &rng)
            editor.setByte(UInt8.random(in: 0...255, using: &rng), at: at)
            let bytes = editor.resigned(by: contentIdentity)
            do throws(RecordFormatError) {
                let record = try Record.decode(bytes)
                #expect(reencode(record) == bytes)
            } catch {
                #expect(error != .nonCanonical)
            }
        }
    }

    @Test func badSignature() throws {
        // A flipped bit in the signature, or in the signed part where the structure survives (payload, time).
        for at in [content.bytes.count - 1, content.bytes.count - 64, content.bytes.count - 65, Offset.created + 7] {
            var bytes = content.bytes
            bytes[at] ^= 0x01
            #expect(formatError { () throws(RecordFormatError) in try Record.decode(bytes) } == nil)
            #expect(formatError { () throws(RecordFormatError) in try Record.decodeVerified(bytes) } == .badSignature)
        }
        // Signed by someone else than the author.
        let forged = RecordEditor(content).resigned(by: Fixtures.identities[2])
        #expect(formatError { () throws(RecordFormatError) in try Record.decodeVerified(forged) } == .badSignature)
        // Signed by the author, but in another domain: the framing keeps signatures from crossing purposes.
        let otherDomain = RecordEditor(content).resigned(by: contentIdentity, in: .encryptionKey)
        #expect(formatError { () throws(RecordFormatError) in try Record.decodeVerified(otherDomain) } == .badSignature)
        // The author field swapped for another identity's key: the author's signature no longer matches.
        var editor = RecordEditor(plain)
        editor.set(Fixtures.author(3).raw, at: Offset.author)
        #expect(
            formatError { () throws(RecordFormatError) in try Record.decodeVerified(editor.bytes) } == .badSignature)
    }
}

// MARK: - Record.sign refuses what the decoder rejects

/// An invalid header made from a valid one, and the error both `Record.sign` and the decoder must report.
struct InvalidHeaderCase: Sendable, CustomTestStringConvertible {
    let name: String
    let expected: RecordFormatError
    let edit: @Sendable (inout RecordHeader) -> Void

    var testDescription: String { name }

    static let all: [InvalidHeaderCase] = [
        .init(name: "zero sequence", expected: .zeroSequence) {
            $0.sequence = 0
            $0.dependencies[$0.author] = 0
        },
        .init(name: "sequence over 2^62", expected: .sequenceTooLarge(Limits.sequenceMax + 1)) {
            $0.sequence = Limits.sequenceMax + 1
        },
        .init(name: "previous at sequence 1", expected: .previousAtFirstSequence) {
            $0.sequence = 1
            $0.dependencies[$0.author] = 0
        },
        .init(name: "no previous after sequence 1", expected: .missingPrevious) { $0.previous = .none },
        .init(name: "epoch on a plain record", expected: .epochOnPlainRecord) { $0.kind = .plain },
        .init(name: "content without epoch", expected: .missingEpoch) { $0.epoch = .none },
        .init(name: "513 dependencies", expected: .tooManyDependencies(513)) {
            for index in 0..<510 { $0.dependencies[AuthorID(raw: Fixtures.bytes32("m\(index)"))] = 1 }
        },
        .init(name: "dependency sequence over 2^62", expected: .sequenceTooLarge(UInt64.max)) {
            $0.dependencies[Fixtures.author(3)] = UInt64.max
        },
        .init(name: "own dependency behind", expected: .ownDependencyMismatch(expected: 2, found: 1)) {
            $0.dependencies[$0.author] = 1
        },
        .init(name: "own dependency missing", expected: .ownDependencyMismatch(expected: 2, found: 0)) {
            $0.dependencies[$0.author] = 0
        },
        .init(name: "Lamport over 2^62", expected: .lamportTooLarge(Limits.lamportMax + 1)) {
            $0.lamport = Limits.lamportMax + 1
        },
        .init(name: "Lamport 2 without dependencies", expected: .lamportWithoutDependencies(2)) {
            $0.sequence = 1
            $0.previous = .none
            $0.dependencies = VectorClock()
            $0.lamport = 2
        },
        .init(name: "Lamport below sequence", expected: .lamportBelowSequence(lamport: 2)) { $0.lamport = 2 },
        .init(name: "negative creation time", expected: .creationTimeOutOfRange(-1)) { $0.createdAtMillis = -1 },
        .init(name: "creation time after 9999", expected: .creationTimeOutOfRange(Limits.createdAtMillisMax + 1)) {
            $0.createdAtMillis = Limits.createdAtMillisMax + 1
        },
    ]
}

@Suite("Record.sign validates like the decoder")
struct RecordSignValidationTests {
    @Test(arguments: InvalidHeaderCase.all)
    func signRefusesInvalidHeader(_ testCase: InvalidHeaderCase) {
        let identity = Fixtures.identities[1]
        var header = Fixtures.contentHeader()
        testCase.edit(&header)
        let signError = formatError { () throws(RecordFormatError) in
            try Record.sign(header: header, payload: [1, 2, 3], by: identity)
        }
        #expect(signError == testCase.expected)
        // The same header, encoded by hand and signed, is rejected by the decoder for the same reason.
        expectRejected(encodeUnchecked(header, payload: [1, 2, 3], by: identity), as: testCase.expected)
    }

    @Test func signRefusesRecordOverCap() throws {
        let identity = Fixtures.identities[1]
        let header = Fixtures.contentHeader()
        let most = Fixtures.payloadMax(dependencyCount: header.dependencies.count)
        let full = try Record.sign(header: header, payload: [UInt8](repeating: 1, count: most), by: identity)
        #expect(full.bytes.count == Limits.recordBytesMax)
        let over = formatError { () throws(RecordFormatError) in
            try Record.sign(header: header, payload: [UInt8](repeating: 1, count: most + 1), by: identity)
        }
        #expect(over == .tooLarge(Limits.recordBytesMax + 1))
    }
}
