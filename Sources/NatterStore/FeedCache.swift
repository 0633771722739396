import NatterModel
import Synchronization

/// The feed rows of recently used conversations, and the Lamport numbers of recently stored records, in memory: a
/// cache of the `feed` and `record` tables that ingest, sync and the node read over and over (every ingest read its
/// conversation's feed rows and, for each record it applied, the Lamport number of every dependency: two fifths of
/// a lab run, perf 2026-11-27).
///
/// Coherent with what is committed: an ingest applies the feed rows it wrote (`committed`) only after its
/// transaction commits, a read fills a conversation in only if nothing was committed since it began
/// (`generation`), and whatever else writes feeds or deletes records (junk reduction, eviction) drops everything
/// (`invalidate`). Bounded by `conversationsMax` conversations and `feedsMax` feeds, each with a run of at most
/// `lamportsPerFeedMax` Lamport numbers; past a bound the least recently used conversation goes.
final class FeedCache: Sendable {
    /// Conversations cached at most: 256 (a node reads a few actively; relays more).
    static let conversationsMax = 256
    /// Feeds cached at most over all conversations: 16,384 (about 2 MiB of rows). A flood of junk feeds in one
    /// conversation larger than this is not cached.
    static let feedsMax = 16_384
    /// Lamport numbers kept per feed: the 256 latest stored (2 KiB). Dependencies name recent records; older ones
    /// are read from the table.
    static let lamportsPerFeedMax = 256

    /// A feed's latest stored records' Lamport numbers: `values[i]` is that of sequence `first + i`.
    private struct LamportRun {
        var first: UInt64
        var values: [UInt64]
    }

    private struct Conversation {
        var feeds: [AuthorID: FeedState]
        var lastUse: UInt64
    }

    private struct State {
        var conversations: [ConversationID: Conversation] = [:]
        var feedCount = 0
        var lamports: [RecordPosition.Feed: LamportRun] = [:]
        var uses: UInt64 = 0
        /// Bumped at every commit applied and every invalidation.
        var generation: UInt64 = 0
        /// Bumped after every commit that wrote a profile feed's row, and every invalidation: while it is unchanged,
        /// so is `profile_author` (every write of it is such a commit).
        var profileGeneration: UInt64 = 0
    }

    private let state = Mutex(State())

    /// The commit generation now: pass it to `fill` with what a read found.
    var generation: UInt64 { state.withLock { $0.generation } }

    /// The profile generation now: read it before reading `profile_author`; while it is unchanged, so is the table.
    var profileGeneration: UInt64 { state.withLock { $0.profileGeneration } }

    /// Every feed of `conversation` by author, if cached.
    func feeds(of conversation: ConversationID) -> [AuthorID: FeedState]? {
        state.withLock { state in
            guard var cached = state.conversations[conversation] else { return nil }
            state.uses += 1
            cached.lastUse = state.uses
            state.conversations[conversation] = cached
            return cached.feeds
        }
    }

    /// Caches every feed of `conversation` as a read found them, if nothing was committed since `generation`.
    func fill(_ conversation: ConversationID, _ feeds: [FeedState], generation: UInt64) {
        guard feeds.count <= Self.feedsMax else { return }
        state.withLock { state in
            guard state.generation == generation, state.conversations[conversation] == nil else { return }
            while state.conversations.count >= Self.conversationsMax || state.feedCount + feeds.count > Self.feedsMax,
                let oldest = state.conversations.min(by: { $0.value.lastUse < $1.value.lastUse })?.key
            {
                state.feedCount -= state.conversations.removeValue(forKey: oldest)!.feeds.count
            }
            state.uses += 1
            state.conversations[conversation] = Conversation(
                feeds: Dictionary(feeds.map { ($0.author, $0) }, uniquingKeysWith: { $1 }), lastUse: state.uses)
            state.feedCount += feeds.count
        }
    }

    /// A transaction committed: these feed rows were written, and these records stored (position → Lamport number).
    func committed(feeds written: [FeedState], stored: [(RecordPosition, UInt64)]) {
        state.withLock { state in
            state.generation += 1
            if written.contains(where: { $0.conversation == .profileFeed(of: $0.author) }) {
                state.profileGeneration += 1
            }
            for feed in written {
                guard var cached = state.conversations[feed.conversation] else { continue }
                if cached.feeds.updateValue(feed, forKey: feed.author) == nil { state.feedCount += 1 }
                state.conversations[feed.conversation] = cached
            }
            for (position, lamport) in stored {
                let key = position.feed
                if var run = state.lamports[key], run.first + UInt64(run.values.count) == position.sequence {
                    run.values.append(lamport)
                    if run.values.count > Self.lamportsPerFeedMax {
                        let drop = run.values.count - Self.lamportsPerFeedMax
                        run.values.removeFirst(drop)
                        run.first += UInt64(drop)
                    }
                    state.lamports[key] = run
                } else {
                    if state.lamports[key] == nil, state.lamports.count >= Self.feedsMax { state.lamports.removeAll() }
                    state.lamports[key] = LamportRun(first: position.sequence, values: [lamport])
                }
            }
        }
    }

    /// The Lamport number of the stored record at `position`, if cached.
    func lamport(at position: RecordPosition) -> UInt64? {
        state.withLock { state in
            guard let run = state.lamports[position.feed], position.sequence >= run.first,
                position.sequence < run.first + UInt64(run.values.count)
            else { return nil }
            return run.values[Int(position.sequence - run.first)]
        }
    }

    /// Something other than an ingest wrote feed rows or deleted records: forget everything.
    func invalidate() {
        state.withLock { state in
            state.conversations = [:]
            state.feedCount = 0
            state.lamports = [:]
            state.generation += 1
            state.profileGeneration += 1
        }
    }
}

extension RecordPosition {
    /// A feed, as a key.
    struct Feed: Hashable {
        let conversation: ConversationID
        let author: AuthorID
    }

    var feed: Feed { Feed(conversation: conversation, author: author) }
}
