// Goal: the file fetcher asks for exactly the chunks it lacks, within its per-link bound, from peers that may have
// them, and recovers from silence, refusals, corruption and cut links; the file frames have one encoding each.
// Method: a fetcher driven with explicit time and hand-played peers (integers), every action checked.
import NatterCrypto
import NatterModel
import NatterSync
import Testing

/// Chunks of a synthetic file: ciphertext bytes and their ids (the fetcher checks ids only).
private struct SyntheticFile {
    let id: RecordID
    let bytes: [[UInt8]]
    var chunks: [ChunkID] { bytes.map { ChunkID.of($0) } }
    var request: FetchRequest {
        FetchRequest(file: id, chunks: chunks, chunkBytes: bytes.map { $0.count - FileLimits.chunkOverheadBytes })
    }

    init(seed: UInt64, chunks: Int) {
        var random = SeededGenerator(seed: seed)
        id = RecordID(bytes: random.bytes(32))
        bytes = (0..<chunks).map { _ in random.bytes(116) }
    }

    func bytes(of chunk: ChunkID) -> [UInt8] { bytes[chunks.firstIndex(of: chunk)!] }
}

private func requests(_ actions: [FetchAction<Int>]) -> [(peer: Int, chunks: [ChunkID])] {
    actions.compactMap { if case .request(let peer, let chunks) = $0 { (peer, chunks) } else { nil } }
}

private func stored(_ actions: [FetchAction<Int>]) -> [ChunkID] {
    actions.compactMap { if case .store(let chunk, _) = $0 { chunk } else { nil } }
}

private func completed(_ actions: [FetchAction<Int>]) -> Bool {
    actions.contains { if case .completed = $0 { true } else { false } }
}

@Suite("File fetcher")
struct FileFetcherTests {
    @Test("requests stay within the per-link bound, spread over peers, and drain as chunks arrive")
    func boundedAndSpread() {
        let file = SyntheticFile(seed: 1, chunks: 40)
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(1, now: .zero)
        _ = fetcher.peerUp(2, now: .zero)
        let first = fetcher.want(file.request, held: [], now: .zero)
        #expect(first.first == .progress(file: file.id, bytes: 0, total: 40 * 100))
        let asked = requests(first)
        #expect(asked.map(\.peer) == [1, 2])
        #expect(asked.allSatisfy { $0.chunks.count == Limits.fileChunksInFlightPerLinkMax })
        // Chunks go out in file order, alternating between the least loaded peers.
        #expect(asked[0].chunks == [0, 2, 4, 6, 8, 10, 12, 14].map { file.chunks[$0] })
        #expect(fetcher.requestsInFlight(to: 1) == 8 && fetcher.requestsInFlight(to: 2) == 8)
        // Serve everything asked, in order, until the file completes.
        var now = Duration.zero
        var outstanding = asked
        var served = 0
        var done = false
        while let next = outstanding.first {
            outstanding.removeFirst()
            for chunk in next.chunks {
                now += .milliseconds(1)
                let actions = fetcher.received(chunk, bytes: file.bytes(of: chunk), from: next.peer, now: now)
                served += 1
                #expect(stored(actions) == [chunk])
                outstanding += requests(actions)
                #expect(fetcher.requestsInFlight(to: 1) <= 8 && fetcher.requestsInFlight(to: 2) <= 8)
                done = done || completed(actions)
            }
        }
        #expect(served == 40 && done)
        #expect(fetcher.fetching.isEmpty && fetcher.chunksMissing == 0 && fetcher.nextDeadline() == nil)
    }

    @Test("a silent peer times out at the deadline and the chunk is asked of another")
    func timeoutMovesToAnotherPeer() {
        let file = SyntheticFile(seed: 2, chunks: 1)
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(1, now: .zero)
        #expect(requests(fetcher.want(file.request, held: [], now: .zero)).map(\.peer) == [1])
        _ = fetcher.peerUp(2, now: .seconds(1))
        #expect(fetcher.nextDeadline() == Limits.fileChunkRequestTimeout)
        #expect(requests(fetcher.tick(now: Limits.fileChunkRequestTimeout - .milliseconds(1))).isEmpty)
        let retry = fetcher.tick(now: Limits.fileChunkRequestTimeout)
        #expect(requests(retry).map(\.peer) == [2])
        #expect(fetcher.timeouts == 1)
        // The late answer from peer 1 still counts (its bytes match), and peer 2's answer is then ignored.
        let late = fetcher.received(file.chunks[0], bytes: file.bytes[0], from: 1, now: .seconds(11))
        #expect(completed(late))
        #expect(fetcher.received(file.chunks[0], bytes: file.bytes[0], from: 2, now: .seconds(11)).isEmpty)
        #expect(fetcher.ignoredChunks == 1 && fetcher.requestsInFlight(to: 2) == 0)
    }

    @Test("a chunk no peer holds waits for the retry interval or a new peer")
    func unavailableEverywhere() {
        let file = SyntheticFile(seed: 3, chunks: 1)
        let chunk = file.chunks[0]
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(1, now: .zero)
        _ = fetcher.peerUp(2, now: .zero)
        #expect(requests(fetcher.want(file.request, held: [], now: .zero)).map(\.peer) == [1])
        #expect(requests(fetcher.unavailable(chunk, from: 1, now: .seconds(1))).map(\.peer) == [2])
        #expect(requests(fetcher.unavailable(chunk, from: 2, now: .seconds(2))).isEmpty)
        #expect(fetcher.nextDeadline() == .seconds(1) + Limits.fileChunkRetryInterval)
        // A new peer is asked at once.
        #expect(requests(fetcher.peerUp(3, now: .seconds(3))).map(\.peer) == [3])
        #expect(requests(fetcher.unavailable(chunk, from: 3, now: .seconds(4))).isEmpty)
        // After the retry interval everyone may be asked again, the least loaded (smallest) first.
        #expect(requests(fetcher.tick(now: .seconds(6))).map(\.peer) == [1])
    }

    @Test("a chunk whose bytes do not match its id is rejected, counted, and fetched again elsewhere")
    func tamperedChunk() {
        let file = SyntheticFile(seed: 4, chunks: 2)
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(7, now: .zero)
        #expect(requests(fetcher.want(file.request, held: [], now: .zero)).map(\.peer) == [7])
        var bad = file.bytes[0]
        bad[0] ^= 0xFF
        let rejected = fetcher.received(file.chunks[0], bytes: bad, from: 7, now: .seconds(1))
        #expect(rejected.contains(.rejected(7, file.chunks[0])))
        #expect(stored(rejected).isEmpty && fetcher.rejectedChunks == 1)
        #expect(fetcher.progress(of: file.id)?.bytes == 0)
        // Peer 7 is not asked again for it until the retry interval; a second peer is, at once.
        #expect(requests(fetcher.peerUp(8, now: .seconds(2))).map(\.peer) == [8])
        #expect(requests(fetcher.peerUp(8, now: .seconds(2))).isEmpty)
        let repaired = fetcher.received(file.chunks[0], bytes: file.bytes[0], from: 8, now: .seconds(3))
        #expect(stored(repaired) == [file.chunks[0]])
        #expect(completed(fetcher.received(file.chunks[1], bytes: file.bytes[1], from: 7, now: .seconds(3))))
    }

    @Test("a cut link returns its requests at once; a resumed fetch skips what is held")
    func cutAndResume() {
        let file = SyntheticFile(seed: 5, chunks: 12)
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(1, now: .zero)
        let first = requests(fetcher.want(file.request, held: [], now: .zero))
        #expect(first.flatMap(\.chunks) == Array(file.chunks.prefix(8)))
        for chunk in file.chunks.prefix(3) {
            _ = fetcher.received(chunk, bytes: file.bytes(of: chunk), from: 1, now: .seconds(1))
        }
        #expect(fetcher.requestsInFlight(to: 1) == 8)  // three answered, three more asked
        #expect(requests(fetcher.peerDown(1, now: .seconds(2))).isEmpty)
        #expect(fetcher.requestsInFlight(to: 1) == 0 && fetcher.nextDeadline() == nil)
        let again = requests(fetcher.peerUp(1, now: .seconds(3)))
        #expect(again.flatMap(\.chunks) == Array(file.chunks[3..<11]))
        // A node restarted with chunks 0...5 stored asks only for the rest.
        var fresh = FileFetcher<Int>()
        _ = fresh.peerUp(1, now: .zero)
        let resumed = fresh.want(file.request, held: Set(file.chunks.prefix(6)), now: .zero)
        #expect(resumed.first == .progress(file: file.id, bytes: 600, total: 1200))
        #expect(requests(resumed).flatMap(\.chunks) == Array(file.chunks[6...]))
        // Everything held: complete at once, nothing asked.
        var held = FileFetcher<Int>()
        let done = held.want(file.request, held: Set(file.chunks), now: .zero)
        #expect(completed(done) && requests(done).isEmpty && held.fetching.isEmpty)
    }

    @Test("unsolicited chunks are ignored and a cancelled file asks for nothing more")
    func unsolicitedAndCancel() {
        let file = SyntheticFile(seed: 6, chunks: 20)
        var fetcher = FileFetcher<Int>()
        _ = fetcher.peerUp(1, now: .zero)
        #expect(fetcher.received(file.chunks[0], bytes: file.bytes[0], from: 1, now: .zero).isEmpty)
        #expect(fetcher.ignoredChunks == 1)
        _ = fetcher.want(file.request, held: [], now: .zero)
        _ = fetcher.cancel(file.id, now: .seconds(1))
        #expect(fetcher.fetching.isEmpty)
        #expect(requests(fetcher.received(file.chunks[0], bytes: file.bytes[0], from: 1, now: .seconds(1))).isEmpty)
        #expect(requests(fetcher.tick(now: .seconds(20))).isEmpty && fetcher.requestsInFlight(to: 1) == 0)
    }

    @Test("file frames round-trip, and malformed ones are refused with the rule they break")
    func frames() throws {
        let ids = (0..<3).map { ChunkID(bytes: [UInt8](repeating: UInt8($0), count: 32)) }
        let frames: [FileFrame] = [
            .chunkRequest(ids), .chunk(ids[0], [UInt8](repeating: 9, count: 40)), .chunkUnavailable(ids[1]),
            .chunk(ids[2], [UInt8](repeating: 1, count: Limits.fileChunkCiphertextBytesMax)),
        ]
        for frame in frames {
            let bytes = frame.encoded()
            #expect(FileFrame.isFileFrame(bytes))
            #expect(try FileFrame.decode(bytes) == frame)
        }
        #expect(FileFrame.chunkRequest(ids).encoded().count == 3 + 96)
        #expect(FileFrame.chunkUnavailable(ids[0]).encoded().count == 33)
        #expect(!FileFrame.isFileFrame([7]) && !FileFrame.isFileFrame([]))
        #expect(throws: SyncMessageError.zeroCount(field: "chunk ids")) { try FileFrame.decode([8, 0, 0]) }
        #expect(throws: SyncMessageError.tooMany(field: "chunk ids", count: 17, limit: 16)) {
            try FileFrame.decode([8, 0, 17] + [UInt8](repeating: 0, count: 17 * 32))
        }
        #expect(throws: SyncMessageError.unexpected("a chunk requested twice in one request")) {
            try FileFrame.decode([8, 0, 2] + ids[0].bytes + ids[0].bytes)
        }
        #expect(throws: SyncMessageError.truncated(field: "chunk ids")) {
            try FileFrame.decode([8, 0, 2] + ids[0].bytes)
        }
        #expect(throws: SyncMessageError.truncated(field: "chunk bytes")) {
            try FileFrame.decode([9] + ids[0].bytes + [1])
        }
        let oversized = [9] + ids[0].bytes + [UInt8](repeating: 0, count: Limits.fileChunkCiphertextBytesMax + 1)
        #expect(throws: SyncMessageError.tooMany(field: "chunk bytes", count: 262_161, limit: 262_160)) {
            try FileFrame.decode(oversized)
        }
        #expect(throws: SyncMessageError.trailingBytes(1)) { try FileFrame.decode([10] + ids[0].bytes + [0]) }
        #expect(throws: SyncMessageError.empty) { try FileFrame.decode([]) }
    }
}
