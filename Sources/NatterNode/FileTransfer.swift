public import NatterModel
import NatterStore
import NatterSync

/// What file transfer reports (SPEC F13), as `NodeEvent.file`.
public enum FileEvent: Equatable, Sendable {
    /// Plaintext bytes of a file message held so far, of its size (after each chunk, and when a fetch starts).
    case progress(RecordID, bytes: UInt64, total: UInt64)
    /// Every chunk of the file is stored: it can be saved.
    case completed(RecordID)
    /// A peer sent a chunk whose bytes do not match its id: dropped, and fetched again (from another peer if one
    /// has it). A relay with a damaged disk does this as well as a hostile one, so the link stays up.
    case chunkRejected(AuthorID, ChunkID)
}

/// File transfer in the node (SPEC F13): serving chunks to any peer that asks, fetching wanted files through
/// `FileFetcher`. Chunk frames (docs/protocol.md §3.2, types 8–10) share each link's secure channel with the sync
/// session, but `NodeCore` routes them here by their type byte, so the session never sees them.
struct FileTransfer {
    private let store: RecordStore
    private let conversations: Conversations
    /// Fetches the chunks of files this node was asked to fetch, from the links.
    private var fetcher = FileFetcher<LinkID>()
    /// The link table's `establishedGeneration` the fetcher's peers were last made equal to its links at.
    private var linksFollowed: UInt64?

    init(store: RecordStore, conversations: Conversations) {
        self.store = store
        self.conversations = conversations
    }

    /// File messages being fetched, in the order asked.
    var fetching: [RecordID] { fetcher.fetching }

    /// Chunks rejected since start because their bytes did not match their id.
    var chunksRejected: Int { fetcher.rejectedChunks }

    /// When the fetcher next has work (a request that timed out).
    var nextDeadline: Duration? { fetcher.nextDeadline() }

    /// Plaintext bytes held and total of a file being fetched; nil when it is not being fetched.
    func progress(of message: RecordID) -> (bytes: UInt64, total: UInt64)? { fetcher.progress(of: message) }

    /// Starts (or continues) fetching a file message's chunks from the connected peers; chunks already stored are
    /// not fetched again, so a fetch resumes wherever it stopped. Progress and completion arrive as
    /// `NodeEvent.file`; a file stored completely reports completion at once.
    mutating func fetch(
        _ message: RecordID, in conversation: ConversationID, links: inout LinkTable, now: Duration, nowMillis: Int64
    ) throws -> [NodeAction] {
        guard let file = try conversations.fileDescriptor(of: message, in: conversation) else {
            throw FileError.notAFile(message)
        }
        guard fetcher.canFetchMore || fetcher.progress(of: message) != nil else {
            throw FileError.tooManyFetches(Limits.fileFetchesMax)
        }
        let held = try store.heldChunks(among: file.chunks)
        var out = maintain(links: &links, now: now, nowMillis: nowMillis)
        let actions = fetcher.want(FetchRequest(file: message, descriptor: file), held: held, now: now)
        out += carryOut(actions, links: &links, nowMillis: nowMillis)
        return out
    }

    /// Stops fetching a file (what is stored stays).
    mutating func cancel(_ message: RecordID, links: inout LinkTable, now: Duration, nowMillis: Int64)
        -> [NodeAction]
    {
        carryOut(fetcher.cancel(message, now: now), links: &links, nowMillis: nowMillis)
    }

    /// Keeps the fetcher's peers equal to the established links and runs its timers. Called after every input.
    mutating func maintain(links: inout LinkTable, now: Duration, nowMillis: Int64) -> [NodeAction] {
        var actions = [FetchAction<LinkID>]()
        if linksFollowed != links.establishedGeneration {  // the links changed: most inputs change none
            linksFollowed = links.establishedGeneration
            let up = Set(links.establishedLinks.keys)
            for peer in fetcher.peers.subtracting(up).sorted() { actions += fetcher.peerDown(peer, now: now) }
            for peer in up.subtracting(fetcher.peers).sorted() { actions += fetcher.peerUp(peer, now: now) }
        }
        if let deadline = fetcher.nextDeadline(), deadline <= now { actions += fetcher.tick(now: now) }
        return carryOut(actions, links: &links, nowMillis: nowMillis)
    }

    /// One file frame from an established link.
    mutating func received(
        _ message: [UInt8], on id: LinkID, links: inout LinkTable, now: Duration, nowMillis: Int64
    ) -> [NodeAction] {
        let frame: FileFrame
        do {
            frame = try FileFrame.decode(message)
        } catch {
            // Like a malformed sync message: the link closes and the peer is scored (docs/protocol.md, files).
            return links.fail(id, .malformed(error))
        }
        switch frame {
        case .chunkRequest(let ids):
            var out = [NodeAction]()
            for chunk in ids {
                // Served without reading it: any chunk stored here, whoever's file it is.
                let reply: FileFrame
                if let bytes = storedChunk(chunk),
                    (FileLimits.chunkOverheadBytes...Limits.fileChunkCiphertextBytesMax).contains(bytes.count)
                {
                    reply = .chunk(chunk, bytes)
                } else {
                    reply = .chunkUnavailable(chunk)
                }
                out += links.send(reply.encoded(), on: id)
            }
            return out
        case .chunk(let chunk, let bytes):
            return carryOut(fetcher.received(chunk, bytes: bytes, from: id, now: now), links: &links, nowMillis: nowMillis)
        case .chunkUnavailable(let chunk):
            return carryOut(fetcher.unavailable(chunk, from: id, now: now), links: &links, nowMillis: nowMillis)
        }
    }

    /// A chunk as stored, or nil when this node does not have it (or cannot read it now: the peer is told it is
    /// unavailable and asks another).
    private func storedChunk(_ chunk: ChunkID) -> [UInt8]? {
        do {
            return try store.chunk(chunk)
        } catch {
            return nil
        }
    }

    /// Executes the fetcher's actions in order.
    private func carryOut(_ actions: [FetchAction<LinkID>], links: inout LinkTable, nowMillis: Int64) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            switch action {
            case .request(let link, let chunks):
                out += links.send(FileFrame.chunkRequest(chunks).encoded(), on: link)
            case .store(let chunk, let bytes):
                do {
                    try store.storeChunks([(chunk, bytes)], nowMillis: nowMillis)
                } catch {
                    out.append(.event(.notice("cannot store a file chunk: \(error)")))
                }
            case .progress(let file, let bytes, let total):
                out.append(.event(.file(.progress(file, bytes: bytes, total: total))))
            case .completed(let file):
                out.append(.event(.file(.completed(file))))
            case .rejected(let link, let chunk):
                if let peer = links.peer(of: link) { out.append(.event(.file(.chunkRejected(peer, chunk)))) }
            }
        }
        return out
    }
}
