import Foundation
public import NatterCrypto
public import NatterModel
import Synchronization

/// Why a conversation action was refused, in words a person can act on.
public enum ConversationError: Error, Equatable, Sendable, CustomStringConvertible {
    case noSuchConversation
    case text(MessageText.Problem)
    case invalidTitle
    case unknownProfile(AuthorID)
    case waitingForRekey
    /// This identity is no member any more: removed (it read the notice, or a membership change was sealed without
    /// it), left, or left out of a new epoch.
    case lockedOut
    /// The rules every member applies would reject it; the reason is theirs.
    case refused(String)

    public var description: String {
        switch self {
        case .noSuchConversation: "no such conversation"
        case .text(let problem): problem.description
        case .invalidTitle: "Title is too long (max \(ConversationLimits.titleCharactersMax) characters)"
        case .unknownProfile(let author):
            "no profile from \(author.shortHex) yet (their name and key arrive when you sync with them)"
        case .waitingForRekey: "waiting for the group to re-key after a membership change; try again shortly"
        case .lockedOut: "you are no longer a member of this conversation"
        case .refused(let reason): reason
        }
    }
}

/// A conversation as this node sees it: the derived state and the epoch keys it holds.
public struct ConversationSnapshot: Sendable {
    public let id: ConversationID
    public let context: ConversationContext
    public let state: ConversationState
    public let keys: [EpochID: SymmetricKey]
    let engine: ConversationEngine
    /// The identity it is seen by.
    let viewer: AuthorID

    /// Whether this identity is no member any more: the rules say so (it left, or read the notice of its removal), or
    /// a commit sealed after us cannot be opened here (`ConversationEngine.isLockedOut`).
    public var lockedOut: Bool { (state.exists && state.members[viewer] == nil) || engine.isLockedOut }

    /// Whether this node should write the re-key the rules owe from it (`ConversationState.owesRekey`).
    public var owesRekey: Bool {
        !lockedOut && state.owesRekey(viewer, holding: { keys[$0] != nil })
    }
}

/// What `Conversations` keeps in memory per conversation so that reading new records costs only those records.
struct ConversationCache: Sendable {
    var engine: ConversationEngine
    var keys: [EpochID: SymmetricKey] = [:]
    /// Applied length of each feed already given to the engine.
    var applied: [AuthorID: UInt64] = [:]
    /// Records we could not read yet: a later commit may bring their key.
    var unreadable: [RecordID: Record] = [:]
}

/// Authoring and reading conversations on top of the record log: turns user intent into records (encrypted
/// under the right epoch, checked against the same rules every member applies) and records into state.
///
/// Not thread-safe by itself: the node drives it from one place, as it does ingest.
public final class Conversations: Sendable {
    public let store: RecordStore
    public let identity: LocalIdentity
    private var me: AuthorID { identity.author }

    /// Per-conversation engines and keys, so a snapshot reads and checks only what is new.
    let caches = Mutex<[ConversationID: ConversationCache]>([:])
    /// Direct conversation id → peer, for every profile seen so far (an X25519 agreement each, so cached).
    /// `seenAt`: the store's profile generation when `known` was last brought up to date (nil: never), so a
    /// snapshot reads the profile authors only after one changed instead of at every call (a read of every profile:
    /// 7 % of a 100-node lab run).
    private let directPeers = Mutex<(known: Set<AuthorID>, peers: [ConversationID: AuthorID], seenAt: UInt64?)>(
        ([], [:], nil))
    /// The decoded latest profile per author, with the applied sequence it was read at: decoding checks the key
    /// certificate's signature, and every conversation refresh asks for the name of each member (a fifth of the
    /// lab's time before this cache, measured with perf). Bounded by the number of profile feeds in the store.
    private let profiles = Mutex<[AuthorID: (sequence: UInt64, profile: Profile?)]>([:])
    /// What `refresh` last wrote per conversation this node reads (ConversationTables.swift): the next refresh
    /// builds and compares rows only for the lines that changed, and reads nothing back from the tables.
    let written = Mutex<[ConversationID: WrittenTables]>([:])
    /// Conversations this node holds no key for, with the applied length of each feed up to which every commit was
    /// found not to open one (ConversationTables.swift, `refreshChanged`): a relay's refresh then reads only the
    /// commits that arrived since, not every record it relays.
    let keyless = Mutex<[ConversationID: [AuthorID: UInt64]]>([:])
    /// Counts the refreshes that found a profile changed: names shown in the tables can only change when it moves.
    let profileGeneration = Mutex(0)
    /// The members each epoch head's commit sealed a wrong key to, once every slot was rebuilt
    /// (Conversations+SlotRepair.swift): rebuilding costs an X25519 per member, and a commit never changes.
    let slotChecks = Mutex<[EpochID: Set<AuthorID>]>([:])
    /// Refreshes written by this process: the token each writes in its conversation row (`WrittenTables.token`).
    let refreshCount = Mutex<UInt64>(0)

    public init(store: RecordStore, identity: LocalIdentity) {
        self.store = store
        self.identity = identity
    }

    /// Forgets what is cached of `conversation` (its records were evicted: a later fetch starts from scratch).
    public func forgetCache(of conversation: ConversationID) {
        caches.withLock { $0[conversation] = nil }
        written.withLock { $0[conversation] = nil }
        keyless.withLock { $0[conversation] = nil }
    }

    /// The authors of applied records in `conversation` who were never in its roster (not the creator, in no
    /// epoch's roster, not a member): junk feeds (DESIGN §3). Only for a conversation this node is a member of and
    /// whose every commit it can read (so it knows every roster). An honest author's records depend on the commit that added them, so they are never
    /// applied before that commit: a feed judged here is junk for good, on every member alike.
    public func junkAuthors(in conversation: ConversationID) throws -> [AuthorID] {
        let snapshot = try snapshot(of: conversation)
        let state = snapshot.state
        guard state.exists, state.members[me] != nil else { return [] }
        // Every commit must be readable here: one sealed without us (a concurrent add) may be what made an author
        // a member, and judging without it would call an honest feed junk.
        guard !snapshot.engine.hasUnreadableCommit else { return [] }
        var everMember = Set(state.members.keys)
        if let creator = state.creator { everMember.insert(creator) }
        for epoch in state.epochs.values { everMember.formUnion(epoch.roster) }
        // Every applied record is in the engine: with no author outside the rosters there is nothing to ask the
        // store (the usual case, checked after every refresh of a busy group).
        guard snapshot.engine.hasAuthor(outside: everMember) else { return [] }
        return try store.liveFeeds(of: conversation).filter {
            $0.applied > 0 && !everMember.contains($0.author)
        }
        .map(\.author)
    }

    /// Reduces the junk feeds of `conversation` to their frontier (`RecordStore.reduceJunk`) and forgets the cached
    /// derivation, so their records no longer cost anything. Returns the junk authors found.
    @discardableResult
    public func reduceJunk(in conversation: ConversationID) throws -> [AuthorID] {
        let junk = try junkAuthors(in: conversation)
        guard !junk.isEmpty else { return [] }
        try store.reduceJunk(conversation: conversation, authors: junk)
        forgetCache(of: conversation)
        return junk
    }

    // MARK: - Profiles

    /// Publishes (or updates) this identity's profile: display name and certified encryption key.
    @discardableResult
    public func publishProfile(name: String, now: Int64) throws -> Record {
        let clean = try DisplayName.validate(name)
        let profile = Profile(name: clean, certificate: identity.certificate)
        return try store.appendOwn(
            conversation: .profileFeed(of: me), kind: .plain, epoch: .none, createdAtMillis: now,
            identity: identity.signing
        ) { _ in profile.encoded() }
    }

    /// The latest applied profile of `author`.
    public func profile(of author: AuthorID) throws -> Profile? {
        let feed = ConversationID.profileFeed(of: author)
        guard let state = try store.feeds(of: feed).first(where: { $0.author == author }), state.applied > 0 else {
            return nil
        }
        if let cached = profiles.withLock({ $0[author] }), cached.sequence == state.applied { return cached.profile }
        let profile = try store.records(conversation: feed, author: author, from: state.applied, limit: 1).first
            .flatMap { Profile.decode($0.payload, author: author) }
        profiles.withLock { $0[author] = (state.applied, profile) }
        return profile
    }

    /// The id of the direct conversation with `peer` (needs the peer's profile for its encryption key).
    public func directConversationID(with peer: AuthorID) throws -> ConversationID {
        guard let profile = try profile(of: peer) else { throw ConversationError.unknownProfile(peer) }
        return ConversationContext.directID(agreement: try identity.encryption.agreement(with: profile.encryptionKey))
    }

    /// What this node knows about who may found `conversation`: for the direct conversation with a peer whose
    /// profile we hold, the two parties.
    public func context(for conversation: ConversationID) throws -> ConversationContext {
        let generation = store.profileAuthorsGeneration  // read before the authors: a later change is seen next time
        let authors = directPeers.withLock { $0.seenAt } == generation ? nil : try store.profileAuthors()
        let peer: AuthorID? = directPeers.withLock { cache in
            if let authors {
                for author in authors where author != me && !cache.known.contains(author) {
                    // `try?`: a profile that cannot be read or agreed with names no direct conversation yet; it is
                    // not marked known, so it is tried again once the profile generation moves (a new profile).
                    guard let id = try? directConversationID(with: author) else { continue }
                    cache.known.insert(author)
                    cache.peers[id] = author
                }
                cache.seenAt = generation
            }
            return cache.peers[conversation]
        }
        guard let peer else { return ConversationContext(conversation: conversation) }
        return ConversationContext(conversation: conversation, directParties: [me, peer])
    }

    // MARK: - Reading

    /// The conversation's state from its applied records. Only records applied since the last call are read and
    /// checked (`ConversationEngine`); the result always equals a derivation from scratch.
    public func snapshot(of conversation: ConversationID) throws -> ConversationSnapshot {
        let context = try context(for: conversation)
        // Junk feeds are left out: their bodies are dropped, so they add nothing to the derivation, and a flood of
        // throwaway identities would otherwise make every snapshot read thousands of feed rows.
        let feeds = try store.liveFeeds(of: conversation)
        // Taken out of the table while it is extended, so its storage is not shared and `add` does not copy every
        // entry of the conversation (copy-on-write); put back below. A concurrent snapshot of the same
        // conversation meanwhile starts from scratch, which is slower but gives the same state. If reading throws,
        // the cache is dropped (the next call starts over) rather than kept half extended.
        var taken = caches.withLock { $0.removeValue(forKey: conversation) }
        let shrunk = feeds.contains { $0.applied < taken?.applied[$0.author] ?? 0 }
        if taken == nil || shrunk || taken!.engine.context.directParties != context.directParties {
            // First read, a fork un-applied records, or we learned who founded it: start over. What the last
            // refresh wrote can no longer be followed through this engine's change log.
            taken = ConversationCache(engine: ConversationEngine(context: context))
            written.withLock { $0[conversation] = nil }
        }
        var cache = taken.take()!  // the only reference, so `add` extends it in place
        var fresh = [Record]()
        for feed in feeds where feed.applied > cache.applied[feed.author] ?? 0 {
            let from = (cache.applied[feed.author] ?? 0) + 1
            fresh += try store.records(
                conversation: conversation, author: feed.author, from: from, limit: Int(feed.applied - from + 1))
            cache.applied[feed.author] = feed.applied
        }
        if !fresh.isEmpty {
            let reader = ConversationReader(member: me, keyPair: identity.encryption)
            var (entries, keys) = reader.read(fresh, knownKeys: cache.keys)
            var read = fresh
            // Records left unreadable stay so until a new key turns up (keys only come from slots, which do not
            // depend on other records, and from epochs whose key is known): only then are they read again. A
            // node relaying a conversation it cannot read thus reads each record once, not once per refresh. A
            // removal read only through its notice is kept with them: a re-add may bring its key, and its body.
            if keys.count > cache.keys.count && !cache.unreadable.isEmpty {
                read = fresh + cache.unreadable.values
                (entries, keys) = reader.read(read, knownKeys: cache.keys)
                cache.unreadable = [:]
            }
            cache.keys = keys
            let records = Dictionary(uniqueKeysWithValues: read.map { ($0.id, $0) })
            for entry in entries {
                if entry.isUnreadable || entry.isNotice { cache.unreadable[entry.id] = records[entry.id] }
            }
            cache.engine.add(entries)
        }
        let kept = cache
        caches.withLock { $0[conversation] = kept }
        return ConversationSnapshot(
            id: conversation, context: context, state: cache.engine.state, keys: cache.keys, engine: cache.engine,
            viewer: me)
    }

    // MARK: - Authoring: conversations

    /// Founds a group with `members` (not including yourself). Returns its id.
    @discardableResult
    public func createGroup(title: String?, members: [AuthorID], now: Int64) throws -> ConversationID {
        guard let clean = GroupTitle.clean(title) else { throw ConversationError.invalidTitle }
        let salt = SecureRandom.bytes(ConversationLimits.saltBytes)
        let id = ConversationContext.groupID(creator: me, salt: salt)
        let operation = ControlOperation.create(kind: .group, title: clean, members: members, salt: salt)
        _ = try commit(operation, in: id, now: now)
        return id
    }

    /// Sends `text` to a direct conversation with `peer`, founding it first if it does not exist yet: the
    /// conversation and its first message come into being together.
    @discardableResult
    public func sendDirect(_ text: String, to peer: AuthorID, now: Int64) throws -> Record {
        let id = try directConversationID(with: peer)
        let snapshot = try snapshot(of: id)
        if !snapshot.state.exists || snapshot.state.currentEpoch == nil {
            let salt = SecureRandom.bytes(ConversationLimits.saltBytes)
            _ = try commit(.create(kind: .direct, title: nil, members: [peer], salt: salt), in: id, now: now)
        }
        return try send(text, in: id, now: now)
    }

    // MARK: - Authoring: content

    @discardableResult
    public func send(_ text: String, in conversation: ConversationID, replyTo: RecordID? = nil, now: Int64) throws
        -> Record
    {
        let clean: String
        do {
            clean = try MessageText.clean(text)
        } catch {
            throw ConversationError.text(error)
        }
        return try content(.message(text: clean, replyTo: replyTo), in: conversation, now: now)
    }

    @discardableResult
    public func edit(_ message: RecordID, to text: String, in conversation: ConversationID, now: Int64) throws -> Record
    {
        let clean: String
        do {
            clean = try MessageText.clean(text)
        } catch {
            throw ConversationError.text(error)
        }
        return try content(.edit(target: message, text: clean), in: conversation, now: now)
    }

    @discardableResult
    public func delete(_ message: RecordID, in conversation: ConversationID, now: Int64) throws -> Record {
        try content(.delete(target: message), in: conversation, now: now)
    }

    @discardableResult
    public func react(_ reaction: Reaction, to message: RecordID, in conversation: ConversationID, now: Int64) throws
        -> Record
    {
        try content(.react(target: message, reaction: reaction), in: conversation, now: now)
    }

    @discardableResult
    public func unreact(_ message: RecordID, in conversation: ConversationID, now: Int64) throws -> Record {
        try content(.unreact(target: message), in: conversation, now: now)
    }

    /// Marks everything this node holds in the conversation as read ("read up to here").
    @discardableResult
    public func markRead(_ conversation: ConversationID, now: Int64) throws -> Record {
        try content(.receipt(readUpTo: try store.appliedClock(of: conversation)), in: conversation, now: now)
    }

    /// Tells the members this node holds everything applied here, without claiming it was read (SPEC F8
    /// "delivered"): a receipt that repeats your read position, whose dependencies carry what you hold.
    @discardableResult
    public func markDelivered(_ conversation: ConversationID, now: Int64) throws -> Record {
        let read = try snapshot(of: conversation).state.receipts[me]?.read ?? VectorClock()
        return try content(.receipt(readUpTo: read), in: conversation, now: now)
    }

    // MARK: - Authoring: control

    @discardableResult
    public func add(_ members: [AuthorID], to conversation: ConversationID, now: Int64) throws -> Record {
        try commit(.add(members: members), in: conversation, now: now)
    }

    @discardableResult
    public func remove(_ members: [AuthorID], from conversation: ConversationID, now: Int64) throws -> Record {
        try commit(.remove(members: members), in: conversation, now: now)
    }

    @discardableResult
    public func leave(_ conversation: ConversationID, now: Int64) throws -> Record {
        try commit(.leave, in: conversation, now: now)
    }

    @discardableResult
    public func rename(_ conversation: ConversationID, to title: String?, now: Int64) throws -> Record {
        guard let clean = GroupTitle.clean(title) else { throw ConversationError.invalidTitle }
        return try commit(.rename(title: clean), in: conversation, now: now)
    }

    @discardableResult
    public func setRole(_ role: MemberRole, of member: AuthorID, in conversation: ConversationID, now: Int64) throws
        -> Record
    {
        try commit(.setRole(member: member, role: role), in: conversation, now: now)
    }

    @discardableResult
    public func setFlags(_ flags: MemberFlags, of member: AuthorID, in conversation: ConversationID, now: Int64) throws
        -> Record
    {
        try commit(.setFlags(member: member, flags: flags), in: conversation, now: now)
    }

    /// Opens a fresh epoch for the current roster, chaining every epoch head whose key we hold: after a leave,
    /// to merge concurrent epochs, or periodically.
    @discardableResult
    public func rekey(_ conversation: ConversationID, now: Int64) throws -> Record {
        try commit(.rekey, in: conversation, now: now)
    }

    // MARK: - Appending

    /// Appends a content record under the current epoch, refusing what every member would reject.
    func content(_ operation: ContentOperation, in conversation: ConversationID, now: Int64) throws -> Record {
        let append = try contentAppend(operation, try snapshot(of: conversation))
        return try store.appendOwn(
            conversation: conversation, kind: .content, epoch: append.epoch, createdAtMillis: now,
            identity: identity.signing, makePayload: append.makePayload)
    }

    /// Appends content records, in one transaction (one fsync) for all of them: group commit. Each is checked and
    /// sealed as `content` would; a refused one is left out and reported, in its place.
    func contents(_ operations: [(ContentOperation, ConversationID)], now: Int64) -> [Result<Record, any Error>] {
        var results = [Result<Record, any Error>?](repeating: nil, count: operations.count)
        var appends = [RecordStore.OwnAppend]()
        var placed = [Int]()
        var snapshots = [ConversationID: ConversationSnapshot]()
        for (index, (operation, conversation)) in operations.enumerated() {
            do {
                let snapshot = try snapshots[conversation] ?? snapshot(of: conversation)
                snapshots[conversation] = snapshot
                appends.append(try contentAppend(operation, snapshot))
                placed.append(index)
            } catch {
                results[index] = .failure(error)
            }
        }
        if !appends.isEmpty {
            do {
                let written = try store.appendOwn(appends, createdAtMillis: now, identity: identity.signing)
                for (index, result) in zip(placed, written) { results[index] = result }
            } catch {
                for index in placed { results[index] = .failure(error) }
            }
        }
        return results.map { $0! }
    }

    /// How to append `operation` to the conversation `snapshot` shows: under its current epoch, sealed with the final
    /// header as associated data, after a dry run of the rules (a record every member would reject is not written).
    private func contentAppend(_ operation: ContentOperation, _ snapshot: ConversationSnapshot) throws
        -> RecordStore.OwnAppend
    {
        guard snapshot.state.exists else { throw ConversationError.noSuchConversation }
        guard !snapshot.lockedOut else { throw ConversationError.lockedOut }
        guard let epoch = snapshot.state.currentEpoch, let key = snapshot.keys[epoch] else {
            throw ConversationError.waitingForRekey
        }
        return RecordStore.OwnAppend(conversation: snapshot.id, kind: .content, epoch: epoch) { header in
            let payload = ConversationPayload.sealContent(operation, key: key, header: RecordCodec.encodeHeader(header))
            try self.check(.content(operation), header: header, against: snapshot)
            return payload
        }
    }

    /// Appends a commit: in-epoch operations under the current epoch, epoch-opening ones with a fresh key sealed to
    /// the resulting roster and the parent epochs' keys chained under it.
    private func commit(_ operation: ControlOperation, in conversation: ConversationID, now: Int64) throws -> Record {
        let snapshot = try snapshot(of: conversation)
        let state = snapshot.state
        if case .create = operation {
        } else {
            guard state.exists else { throw ConversationError.noSuchConversation }
            guard !snapshot.lockedOut else { throw ConversationError.lockedOut }
        }
        guard operation.opensEpoch else {
            guard let epoch = state.currentEpoch, let key = snapshot.keys[epoch] else {
                throw ConversationError.waitingForRekey
            }
            return try store.appendOwn(
                conversation: conversation, kind: .commit, epoch: epoch, createdAtMillis: now,
                identity: identity.signing
            ) { header in
                try self.check(.control(operation, opening: nil), header: header, against: snapshot)
                return ConversationPayload.sealInEpochCommit(
                    operation, key: key, header: RecordCodec.encodeHeader(header))
            }
        }
        let parents = state.epochHeads.filter { snapshot.keys[$0] != nil }
        if case .create = operation {} else if parents.isEmpty { throw ConversationError.waitingForRekey }
        let roster = try roster(after: operation, state: state)
        let encryptionKey = { (member: AuthorID) throws -> (AuthorID, EncryptionPublicKey) in
            guard let profile = try self.profile(of: member) else { throw ConversationError.unknownProfile(member) }
            return (member, profile.encryptionKey)
        }
        let sealedTo = try roster.sorted().map(encryptionKey)
        // A removal tells those it removes (its notice, docs/protocol.md §10.2).
        var notify: [(AuthorID, EncryptionPublicKey)]?
        if case .remove(let members) = operation { notify = try members.map(encryptionKey) }
        let newKey = SymmetricKey.generate()
        return try store.appendOwn(
            conversation: conversation, kind: .commit, epoch: parents.first ?? .none, createdAtMillis: now,
            identity: identity.signing
        ) { header in
            let payload = try ConversationPayload.sealOpeningCommit(
                operation, newKey: newKey, parents: parents.map { ($0, snapshot.keys[$0]!) }, roster: sealedTo,
                notify: notify, header: RecordCodec.encodeHeader(header))
            try self.check(
                .control(
                    operation,
                    opening: EpochOpening(
                        parents: parents, roster: roster, key: newKey, announced: operation.isRemoval)),
                header: header, against: snapshot)
            return payload
        }
    }

    /// The roster an epoch-opening operation seals to, from the author's current view.
    private func roster(after operation: ControlOperation, state: ConversationState) throws -> Set<AuthorID> {
        let current = Set(state.members.keys)
        switch operation {
        case .create(_, _, let members, _): return Set(members + [me])
        case .add(let members): return current.union(members)
        case .remove(let members): return current.subtracting(members)
        case .rekey: return current
        case .leave, .rename, .setRole, .setFlags: return current
        }
    }

    /// Runs the rules on the conversation plus the record about to be written; throws their reason if every
    /// member would reject it, which aborts the append (nothing is written).
    private func check(_ body: ConversationEntry.Body, header: RecordHeader, against snapshot: ConversationSnapshot)
        throws
    {
        let probe = ConversationEntry(
            id: RecordID(bytes: [UInt8](repeating: 0xFF, count: 32)), header: header, body: body)
        let reason = snapshot.engine.contentRejection(of: probe)
        // Debug builds (every test) check the shortcut against adding the entry to a copy of the engine.
        assert(
            {
                var engine = snapshot.engine
                engine.add([probe])
                return engine.state.rejected[probe.id] == reason
            }(), "contentRejection disagrees with add for \(body)")
        if let reason { throw ConversationError.refused(reason) }
    }
}
