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

/// File transfer in the core: serving chunks to any peer that asks, fetching wanted files through `FileFetcher`.
/// Chunk frames (docs/protocol.md §3.2, types 8–10) share each link's secure channel with the sync session, but the
/// core routes them here by their type byte, so the session never sees them.
extension NodeCore {
    /// Starts (or continues) fetching a file message's chunks from the connected peers; chunks already stored are
    /// not fetched again, so a fetch resumes wherever it stopped. Progress and completion arrive as
    /// `NodeEvent.file`; a file stored completely reports completion at once.
    public func fetchFile(_ message: RecordID, in conversation: ConversationID, now: Duration) throws
        -> [NodeAction]
    {
        guard let file = try conversations.fileDescriptor(of: message, in: conversation) else {
            throw FileError.notAFile(message)
        }
        guard fetcher.canFetchMore || fetcher.progress(of: message) != nil else {
            throw FileError.tooManyFetches(Limits.fileFetchesMax)
        }
        let held = try store.heldChunks(among: file.chunks)
        var out = fileMaintenance(now: now)
        out += fetchActions(fetcher.want(FetchRequest(file: message, descriptor: file), held: held, now: now), now: now)
        return out
    }

    /// Stops fetching a file (what is stored stays).
    public func cancelFetch(_ message: RecordID, now: Duration) -> [NodeAction] {
        fetchActions(fetcher.cancel(message, now: now), now: now)
    }

    /// Plaintext bytes held and total of a file being fetched; nil when it is not being fetched.
    public func fetchProgress(of message: RecordID) -> (bytes: UInt64, total: UInt64)? {
        fetcher.progress(of: message)
    }

    /// File messages being fetched, in the order asked.
    public var filesFetching: [RecordID] { fetcher.fetching }

    /// Chunks rejected since start because their bytes did not match their id.
    public var chunksRejected: Int { fetcher.rejectedChunks }

    // MARK: - Inside the core

    /// Keeps the fetcher's peers equal to the established links and runs its timers. Called after every input.
    func fileMaintenance(now: Duration) -> [NodeAction] {
        let up = Set(establishedLinks.keys)
        var actions = [FetchAction<LinkID>]()
        for peer in fetcher.peers.subtracting(up).sorted() { actions += fetcher.peerDown(peer, now: now) }
        for peer in up.subtracting(fetcher.peers).sorted() { actions += fetcher.peerUp(peer, now: now) }
        if let deadline = fetcher.nextDeadline(), deadline <= now { actions += fetcher.tick(now: now) }
        return fetchActions(actions, now: now)
    }

    /// One file frame from an established link.
    func fileFrame(_ id: LinkID, _ message: [UInt8], now: Duration) -> [NodeAction] {
        let frame: FileFrame
        do {
            frame = try FileFrame.decode(message)
        } catch {
            // Like a malformed sync message: the link closes and the peer is scored (docs/protocol.md, files).
            return failLink(id, .malformed(error))
        }
        switch frame {
        case .chunkRequest(let ids):
            var out = [NodeAction]()
            for chunk in ids {
                // Served without reading it: any chunk stored here, whoever's file it is.
                let reply: FileFrame
                if let bytes = try? store.chunk(chunk),
                    (FileLimits.chunkOverheadBytes...Limits.fileChunkCiphertextBytesMax).contains(bytes.count)
                {
                    reply = .chunk(chunk, bytes)
                } else {
                    reply = .chunkUnavailable(chunk)
                }
                out += sendApplicationMessage(reply.encoded(), on: id)
            }
            return out
        case .chunk(let chunk, let bytes):
            return fetchActions(fetcher.received(chunk, bytes: bytes, from: id, now: now), now: now)
        case .chunkUnavailable(let chunk):
            return fetchActions(fetcher.unavailable(chunk, from: id, now: now), now: now)
        }
    }

    /// Executes the fetcher's actions in order.
    func fetchActions(_ actions: [FetchAction<LinkID>], now: Duration) -> [NodeAction] {
        var out = [NodeAction]()
        for action in actions {
            switch action {
            case .request(let link, let chunks):
                out += sendApplicationMessage(FileFrame.chunkRequest(chunks).encoded(), on: link)
            case .store(let chunk, let bytes):
                do {
                    try store.storeChunks([(chunk, bytes)], nowMillis: wallClockMillis(now))
                } catch {
                    out.append(.event(.notice("cannot store a file chunk: \(error)")))
                }
            case .progress(let file, let bytes, let total):
                out.append(.event(.file(.progress(file, bytes: bytes, total: total))))
            case .completed(let file):
                out.append(.event(.file(.completed(file))))
            case .rejected(let link, let chunk):
                if let peer = establishedLinks[link] { out.append(.event(.file(.chunkRejected(peer, chunk)))) }
            }
        }
        return out
    }
}
