public import NatterModel
internal import NatterCrypto

/// What the fetcher asks its driver to do, in order.
public enum FetchAction<Peer: Hashable & Sendable>: Equatable, Sendable {
    /// Send a CHUNK_REQUEST for these chunks to `peer`.
    case request(Peer, [ChunkID])
    /// Store this chunk (its bytes hash to its id): it belongs to a file being fetched.
    case store(ChunkID, [UInt8])
    /// Plaintext bytes of `file` held so far, of `total`.
    case progress(file: RecordID, bytes: UInt64, total: UInt64)
    /// Every chunk of `file` is held; the fetcher forgets it.
    case completed(file: RecordID)
    /// `peer` sent bytes that do not hash to the chunk id it named: dropped, and fetched elsewhere (or later).
    case rejected(Peer, ChunkID)
}

/// One file to fetch: its message id, chunk ids in order, and the plaintext size of each chunk (for progress).
public struct FetchRequest: Sendable {
    public let file: RecordID
    public let chunks: [ChunkID]
    public let chunkBytes: [Int]

    public init(file: RecordID, chunks: [ChunkID], chunkBytes: [Int]) {
        precondition(chunks.count == chunkBytes.count && chunks.count <= FileLimits.chunksMax)
        self.file = file
        self.chunks = chunks
        self.chunkBytes = chunkBytes
    }

    /// The chunks of a file a member can read.
    public init(file: RecordID, descriptor: FileDescriptor) {
        self.init(
            file: file, chunks: descriptor.chunks,
            chunkBytes: descriptor.chunks.indices.map { descriptor.plaintextBytes(ofChunk: $0) })
    }
}

/// Fetches the chunks of wanted files from connected peers: pure, sans-IO and deterministic (time is an argument,
/// there is no randomness, dictionaries are walked in sorted order).
///
/// Which chunks are wanted (files in the order asked, chunks in file order), which peer each was asked of, at most
/// `fileChunksInFlightPerLinkMax` requests outstanding per peer (the least loaded peer first, ties by the smaller
/// peer), a timeout after which a chunk is asked elsewhere, a chunk every peer lacks asked again after
/// `fileChunkRetryInterval` or when a new peer comes up, chunks whose bytes do not hash to their id rejected and
/// fetched again. A link that goes down returns its requests to the wanted set at once; chunks already held are
/// never fetched again (the driver says which it holds when it asks for a file), so a fetch resumes wherever it
/// stopped.
public struct FileFetcher<Peer: Hashable & Comparable & Sendable> {
    private struct FileState {
        let request: FetchRequest
        var held: Set<ChunkID>
        var heldBytes: UInt64
        let total: UInt64
    }

    private struct InFlight {
        let peer: Peer
        let deadline: Duration
    }

    /// Files in the order they were asked for.
    private var order: [RecordID] = []
    private var files: [RecordID: FileState] = [:]
    /// Which wanted files contain each chunk not yet held.
    private var owners: [ChunkID: Set<RecordID>] = [:]
    private var inFlight: [ChunkID: InFlight] = [:]
    private var loads: [Peer: Int] = [:]
    /// Peers that may serve chunks (links up).
    public private(set) var peers: Set<Peer> = []
    /// Peers that said they lack a chunk, timed out on it, or sent it corrupted; forgotten at `retryAt`.
    private var lacking: [ChunkID: (peers: Set<Peer>, retryAt: Duration)] = [:]
    private var actions: [FetchAction<Peer>] = []
    private var now = Duration.zero

    /// Chunks rejected because their bytes did not match their id (a corrupted store or a hostile peer).
    public private(set) var rejectedChunks = 0
    /// Requests that timed out.
    public private(set) var timeouts = 0
    /// Chunks received that nobody asked for or that were held already (ignored).
    public private(set) var ignoredChunks = 0

    public init() {}

    // MARK: - Inputs

    /// Fetch `request`'s chunks, except those in `held` (stored already). Emits progress at once, and completion
    /// if nothing is missing. Asking for a file already being fetched changes nothing. Returns nothing more once
    /// `Limits.fileFetchesMax` files are being fetched (the caller reports it; see `canFetchMore`).
    public mutating func want(_ request: FetchRequest, held: Set<ChunkID>, now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        guard files[request.file] == nil, canFetchMore else { return finish() }
        var heldBytes: UInt64 = 0
        var heldSet = Set<ChunkID>()
        for (chunk, bytes) in zip(request.chunks, request.chunkBytes) where held.contains(chunk) {
            if heldSet.insert(chunk).inserted { heldBytes += UInt64(bytes) }
        }
        let total = request.chunkBytes.reduce(UInt64(0)) { $0 + UInt64($1) }
        let state = FileState(request: request, held: heldSet, heldBytes: heldBytes, total: total)
        actions.append(.progress(file: request.file, bytes: heldBytes, total: total))
        if Set(request.chunks).isSubset(of: heldSet) {
            actions.append(.completed(file: request.file))
            return finish()
        }
        files[request.file] = state
        order.append(request.file)
        for chunk in request.chunks where !heldSet.contains(chunk) { owners[chunk, default: []].insert(request.file) }
        return finish()
    }

    /// Whether another file can be asked for now (`Limits.fileFetchesMax`).
    public var canFetchMore: Bool { files.count < Limits.fileFetchesMax }

    /// Stop fetching `file` (chunks already stored stay stored).
    public mutating func cancel(_ file: RecordID, now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        forget(file)
        return finish()
    }

    /// A link to `peer` is up: it may serve chunks.
    public mutating func peerUp(_ peer: Peer, now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        peers.insert(peer)
        return finish()
    }

    /// The link to `peer` is down: its outstanding requests are wanted again at once.
    public mutating func peerDown(_ peer: Peer, now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        peers.remove(peer)
        loads[peer] = nil
        for (chunk, flight) in inFlight where flight.peer == peer { inFlight[chunk] = nil }
        return finish()
    }

    /// `peer` sent a chunk.
    public mutating func received(_ chunk: ChunkID, bytes: [UInt8], from peer: Peer, now time: Duration)
        -> [FetchAction<Peer>]
    {
        begin(time)
        release(chunk, from: peer)
        guard let owning = owners[chunk] else {
            ignoredChunks += 1
            return finish()
        }
        guard ChunkID.of(bytes) == chunk else {
            rejectedChunks += 1
            markLacking(chunk, peer)
            actions.append(.rejected(peer, chunk))
            return finish()
        }
        owners[chunk] = nil
        lacking[chunk] = nil
        actions.append(.store(chunk, bytes))
        for file in order where owning.contains(file) {
            guard var state = files[file] else { continue }
            for (id, size) in zip(state.request.chunks, state.request.chunkBytes) where id == chunk {
                if state.held.insert(id).inserted { state.heldBytes += UInt64(size) }
            }
            files[file] = state
            actions.append(.progress(file: file, bytes: state.heldBytes, total: state.total))
            if state.held.count == Set(state.request.chunks).count {
                actions.append(.completed(file: file))
                forget(file)
            }
        }
        return finish()
    }

    /// `peer` does not hold `chunk`.
    public mutating func unavailable(_ chunk: ChunkID, from peer: Peer, now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        release(chunk, from: peer)
        if owners[chunk] != nil { markLacking(chunk, peer) }
        return finish()
    }

    /// Time passed: requests past their deadline are asked elsewhere; chunks whose retry time came are asked again.
    public mutating func tick(now time: Duration) -> [FetchAction<Peer>] {
        begin(time)
        for chunk in inFlight.keys.sorted() where inFlight[chunk]!.deadline <= now {
            let peer = inFlight[chunk]!.peer
            release(chunk, from: peer)
            timeouts += 1
            if owners[chunk] != nil { markLacking(chunk, peer) }
        }
        return finish()
    }

    /// When `tick` next has work: the earliest request deadline, or retry time of a chunk waiting for one.
    public func nextDeadline() -> Duration? {
        // Loops, not `map(\.deadline)`: a key path into a generic type is instantiated at run time on every call,
        // and this runs after every turn (with nothing being fetched, it was about 3 % of a fan-out member's CPU).
        var earliest: Duration?
        for flight in inFlight.values { earliest = min(earliest ?? flight.deadline, flight.deadline) }
        for (chunk, entry) in lacking where owners[chunk] != nil {
            earliest = min(earliest ?? entry.retryAt, entry.retryAt)
        }
        return earliest
    }

    // MARK: - Queries

    /// Plaintext bytes held and total of a file being fetched.
    public func progress(of file: RecordID) -> (bytes: UInt64, total: UInt64)? {
        files[file].map { ($0.heldBytes, $0.total) }
    }

    /// Files being fetched, in the order asked.
    public var fetching: [RecordID] { order }

    /// Requests outstanding to `peer`.
    public func requestsInFlight(to peer: Peer) -> Int { loads[peer] ?? 0 }

    /// Chunks wanted and not held.
    public var chunksMissing: Int { owners.count }

    // MARK: - Plumbing

    private mutating func begin(_ time: Duration) {
        precondition(time >= now, "time never goes backwards")
        now = time
        actions = []
    }

    private mutating func finish() -> [FetchAction<Peer>] {
        pump()
        checkInvariants()
        let result = actions
        actions = []
        return result
    }

    private func checkInvariants() {
        assert(loads.values.allSatisfy { (1...Limits.fileChunksInFlightPerLinkMax).contains($0) })
        assert(loads.values.reduce(0, +) == inFlight.count, "every request in flight counts against its peer")
        assert(files.count == order.count && files.count <= Limits.fileFetchesMax)
    }

    private mutating func release(_ chunk: ChunkID, from peer: Peer) {
        guard let flight = inFlight[chunk], flight.peer == peer else { return }
        inFlight[chunk] = nil
        let load = (loads[peer] ?? 1) - 1
        loads[peer] = load > 0 ? load : nil
    }

    private mutating func markLacking(_ chunk: ChunkID, _ peer: Peer) {
        var entry = lacking[chunk] ?? (peers: [], retryAt: now + Limits.fileChunkRetryInterval)
        entry.peers.insert(peer)
        lacking[chunk] = entry
    }

    private mutating func forget(_ file: RecordID) {
        guard let state = files.removeValue(forKey: file) else { return }
        order.removeAll { $0 == file }
        for chunk in state.request.chunks {
            guard var owning = owners[chunk] else { continue }
            owning.remove(file)
            owners[chunk] = owning.isEmpty ? nil : owning
            if owning.isEmpty { lacking[chunk] = nil }
        }
    }

    /// Assigns wanted chunks (files in order, chunks in file order) to peers with room, least loaded first.
    private mutating func pump() {
        for (chunk, entry) in lacking where entry.retryAt <= now { lacking[chunk] = nil }
        guard !peers.isEmpty, !owners.isEmpty else { return }
        let sortedPeers = peers.sorted()
        var requests: [Peer: [ChunkID]] = [:]
        var seen = Set<ChunkID>()
        scan: for file in order {
            for chunk in files[file]!.request.chunks {
                guard owners[chunk] != nil, inFlight[chunk] == nil, seen.insert(chunk).inserted else { continue }
                let refused = lacking[chunk]?.peers ?? []
                var best: (peer: Peer, load: Int)?
                var anyRoom = false
                for peer in sortedPeers {
                    let load = loads[peer] ?? 0
                    guard load < Limits.fileChunksInFlightPerLinkMax else { continue }
                    anyRoom = true
                    guard !refused.contains(peer) else { continue }
                    if best == nil || load < best!.load { best = (peer, load) }
                }
                guard anyRoom else { break scan }
                guard let best else { continue }
                inFlight[chunk] = InFlight(peer: best.peer, deadline: now + Limits.fileChunkRequestTimeout)
                loads[best.peer] = best.load + 1
                requests[best.peer, default: []].append(chunk)
            }
        }
        for peer in sortedPeers {
            guard let chunks = requests[peer] else { continue }
            var rest = chunks[...]
            while !rest.isEmpty {
                let part = rest.prefix(Limits.fileChunkRequestIDsMax)
                rest = rest.dropFirst(part.count)
                actions.append(.request(peer, Array(part)))
            }
        }
    }
}
