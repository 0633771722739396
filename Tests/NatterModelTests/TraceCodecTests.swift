// Goal: the trace codec (NodeTrace.swift) gives back exactly what it encoded, and its decoder accepts only the
// encoder's output: every other input — cut short, mutated, over a limit — gets a `TraceFormatError` that says where,
// never a crash or an allocation sized by the input.
// Method: seeded random headers and entries of every kind are round-tripped; valid traces are cut at every length
// and mutated at random bytes (what still decodes must re-encode to the same bytes); hand-made inputs break each
// limit and tag.
import NatterModel
import Testing

@Suite("Trace codec")
struct TraceCodecTests {
    @Test("random headers and entries of every kind decode to what was encoded")
    func roundTrip() throws {
        var random = RandomTraces(seed: 0x7ACE_0001)
        var kinds = Set<String>()
        for _ in 0..<200 {
            let (header, entries) = random.trace()
            let bytes = RandomTraces.encode(header, entries)
            let (decodedHeader, decodedEntries) = try TraceCodec.decode(bytes)
            #expect(decodedHeader == header)
            #expect(decodedEntries == entries)
            for entry in entries { kinds.insert(String(describing: entry.call).prefix { $0 != "(" }.description) }
        }
        #expect(kinds.count == RandomTraces.callKinds, "every kind of call was drawn: \(kinds.sorted())")
    }

    @Test("a trace cut anywhere decodes to a prefix of its entries, or fails with where")
    func truncation() throws {
        var random = RandomTraces(seed: 0x7ACE_0002)
        let (header, entries) = random.trace(entries: 12)
        let bytes = RandomTraces.encode(header, entries)
        var prefixes = 0
        for length in 0..<bytes.count {
            do {
                let (decodedHeader, decoded) = try TraceCodec.decode(Array(bytes[..<length]))
                #expect(decodedHeader == header)
                #expect(decoded == Array(entries.prefix(decoded.count)))
                prefixes += 1
            } catch {
                #expect(error.offset <= length)
                #expect(error.description.contains("at byte"))
            }
        }
        #expect(prefixes == entries.count, "one cut per entry boundary decodes (the last is the whole trace)")
        // A trace cut inside an entry (its node died while writing) gives the entries before the cut, and where.
        let headerBytes = TraceCodec.encode(header).count
        for length in headerBytes..<bytes.count {
            let (_, decoded, cutAt) = try TraceCodec.decodeCut(Array(bytes[..<length]))
            #expect(decoded == Array(entries.prefix(decoded.count)))
            let boundary = decoded.reduce(headerBytes) { $0 + TraceCodec.encode($1).count }
            #expect(cutAt == (boundary == length ? nil : boundary))
        }
    }

    @Test("mutated traces fail with an error or decode to what re-encodes to the same bytes")
    func mutation() throws {
        var random = RandomTraces(seed: 0x7ACE_0003)
        var rejected = 0
        for _ in 0..<300 {
            let (header, entries) = random.trace(entries: 6)
            var bytes = RandomTraces.encode(header, entries)
            for _ in 0...Int.random(in: 0..<3, using: &random.generator) {
                bytes[Int.random(in: 0..<bytes.count, using: &random.generator)] = UInt8.random(
                    in: 0...255, using: &random.generator)
            }
            do {
                let (decodedHeader, decoded) = try TraceCodec.decode(bytes)
                #expect(RandomTraces.encode(decodedHeader, decoded) == bytes)
            } catch {
                rejected += 1
            }
        }
        #expect(rejected > 0)
    }

    @Test("bad magic, version, tags, booleans and lengths over the limits are refused with their reason")
    func refusals() throws {
        var random = RandomTraces(seed: 0x7ACE_0004)
        let header = random.header()
        let start = TraceCodec.encode(header)
        func reason(_ bytes: [UInt8]) -> String {
            do {
                _ = try TraceCodec.decode(bytes)
                return "accepted"
            } catch {
                return error.reason
            }
        }
        #expect(reason(Array("natter-trice".utf8) + start.dropFirst(12)).contains("not a natter trace"))
        var version = start
        version[12] = 2
        #expect(reason(version).contains("version 2"))
        let tick = TraceCodec.encode(TraceEntry(at: 5, call: .tick))
        #expect(reason(start + tick) == "accepted")
        var unknown = tick
        unknown[4] = 99
        #expect(reason(start + unknown).contains("entry kind 99"))
        var opened = TraceCodec.encode(TraceEntry(at: 1, call: .linkOpened(3, initiator: true)))
        opened[4 + 1 + 8 + 8] = 2
        #expect(reason(start + opened).contains("is not 0 or 1"))
        let huge: [UInt8] = [0xFF, 0xFF, 0xFF, 0xFF]
        #expect(reason(start + huge).contains("over the limit"))
        #expect(reason(start + tick + [0]).contains("cut short"))
        // A draw count over the limit is refused before anything is allocated for it.
        var draws = TraceCodec.encode(TraceEntry(at: 1, call: .tick, draws: [7]))
        draws.replaceSubrange(13..<17, with: [0x7F, 0xFF, 0xFF, 0xFF])
        #expect(reason(start + draws).contains("draws"))
    }
}

/// Seeded random traces with every kind of call.
struct RandomTraces {
    var generator: SeededGenerator
    static let callKinds = 22

    init(seed: UInt64) { generator = SeededGenerator(seed: seed) }

    static func encode(_ header: TraceHeader, _ entries: [TraceEntry]) -> [UInt8] {
        entries.reduce(TraceCodec.encode(header)) { $0 + TraceCodec.encode($1) }
    }

    mutating func bytes(_ count: Int) -> [UInt8] {
        (0..<count).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }
    mutating func small(_ upper: Int) -> Int { Int.random(in: 0...upper, using: &generator) }
    mutating func author() -> AuthorID { AuthorID(bytes: bytes(32)) }
    mutating func conversation() -> ConversationID { ConversationID(bytes: bytes(32)) }
    mutating func ref() -> RecordRef {
        RecordRef(
            id: RecordID(bytes: bytes(32)),
            position: RecordPosition(conversation: conversation(), author: author(), sequence: generator.next()))
    }
    mutating func records() -> [TraceRecord] {
        (0..<small(3)).map { _ in small(1) == 0 ? .bytes(bytes(small(200))) : .held(ref()) }
    }

    mutating func header() -> TraceHeader {
        TraceHeader(
            node: author(), startMillis: Int64.random(in: 0...Int64.max, using: &generator),
            initialLogDigest: bytes(32),
            settings: (0..<small(5)).map { index in
                ("setting-\(index)", Int64.random(in: .min ... .max, using: &generator))
            },
            initialDraws: (0..<small(8)).map { _ in generator.next() },
            initialRecords: (0..<small(4)).map { _ in ref() })
    }

    mutating func call() -> TraceCall {
        let link = UInt64(small(40))
        switch small(Self.callKinds - 1) {
        case 0: return .linkOpened(link, initiator: small(1) == 1)
        case 1: return .received(link, bytes(small(300)))
        case 2: return .linkClosed(link)
        case 3: return .writable(link, small(1) == 1)
        case 4: return .tick
        case 5: return .heard(link)
        case 6: return .refresh
        case 7: return .refused((0..<small(3)).map { _ in author() })
        case 8: return .published(records())
        case 9: return .author(markRead: (0..<small(4)).map { _ in small(1) == 1 })
        case 10: return .view(small(1) == 1 ? conversation() : nil)
        case 11: return .review
        case 12: return .writePending
        case 13: return .closeAll
        case 14: return .retire(link)
        case 15: return .fetchFile(RecordID(bytes: bytes(32)), in: conversation())
        case 16: return .cancelFetch(RecordID(bytes: bytes(32)))
        case 17: return .typing(conversation())
        case 18: return .stoppedTyping(conversation())
        case 19: return .forceWrite
        case 20:
            return .digests(
                TraceDigests(
                    log: bytes(32),
                    conversations: (0..<small(3)).map { _ in .init(id: conversation(), digest: bytes(32)) }))
        default: return .truncated
        }
    }

    mutating func entry() -> TraceEntry {
        TraceEntry(
            at: Int64.random(in: 0...Int64.max, using: &generator), call: call(),
            draws: (0..<small(4)).map { _ in generator.next() },
            writes: (0..<small(2)).map { _ in
                (0..<small(3)).map { _ in small(2) == 0 ? .refused : .wrote(conversation(), records()) }
            })
    }

    mutating func trace(entries count: Int? = nil) -> (TraceHeader, [TraceEntry]) {
        (header(), (0..<(count ?? small(10))).map { _ in entry() })
    }
}
