import NatterModel
import NatterCrypto
import NatterStore
import NatterSync

/// Typing indicators in the node (SPEC F12; docs/protocol.md §3.2, TYPING): frames built, checked, forwarded and
/// shown here, timed by `TypingTracker`. Nothing of this is ever written to the store.
struct TypingRelay {
    private let identity: LocalIdentity
    private let conversations: Conversations
    /// When to send, who is typing, which frames were seen.
    private var tracker = TypingTracker()
    /// Typing frames each link may still bring (`Limits.typingFramesPerLink…`).
    private var buckets: [LinkID: TokenBucket] = [:]

    init(identity: LocalIdentity, conversations: Conversations) {
        self.identity = identity
        self.conversations = conversations
    }

    /// When the tracker next has work (a refresh or "stopped" frame due, an indicator expiring).
    var nextDeadline: Duration? { tracker.nextDeadline() }

    /// The people typing in `conversation` now (members only; never this node's own identity).
    func people(in conversation: ConversationID) -> [AuthorID] { tracker.people(in: conversation) }

    // MARK: - This node's user

    /// The user edited a non-command line for `conversation` (a keystroke). Sends a "typing" frame to every link
    /// when one is due; nothing when this node cannot write there (not a member, no key yet).
    mutating func keystroke(
        in conversation: ConversationID, links: inout LinkTable, random: inout any RandomNumberGenerator,
        now: Duration, nowMillis: Int64
    ) -> [NodeAction] {
        guard tracker.keystroke(in: conversation, now: now) else { return [] }
        return sendOwn(.typing, in: conversation, links: &links, random: &random, now: now, nowMillis: nowMillis)
    }

    /// The user sent the line, cleared it, or left the conversation: a "stopped" frame if typing was announced.
    mutating func stopped(
        in conversation: ConversationID, links: inout LinkTable, random: inout any RandomNumberGenerator,
        now: Duration, nowMillis: Int64
    ) -> [NodeAction] {
        guard tracker.stop(in: conversation) else { return [] }
        return sendOwn(.stopped, in: conversation, links: &links, random: &random, now: now, nowMillis: nowMillis)
    }

    private mutating func sendOwn(
        _ state: TypingFrame.State, in conversation: ConversationID, links: inout LinkTable,
        random: inout any RandomNumberGenerator, now: Duration, nowMillis: Int64
    ) -> [NodeAction] {
        guard let snapshot = readableSnapshot(of: conversation), snapshot.state.members[identity.author] != nil,
            let epoch = snapshot.state.currentEpoch, let key = snapshot.keys[epoch]
        else { return [] }
        let sequence = tracker.nextSequence(
            clockMillis: nowMillis, conversation: conversation, author: identity.author, now: now)
        let nonce = try! AEADNonce(bytes: (0..<AEADNonce.byteCount).map { _ in UInt8.random(in: 0...255, using: &random) })
        let frame = TypingFrame.seal(
            state, conversation: conversation, epoch: epoch, epochKey: key, sequence: sequence, nonce: nonce,
            identity: identity.signing)
        return Self.broadcast(frame.encoded(), except: nil, links: &links)
    }

    /// The conversation's snapshot when it exists here; nil otherwise — typing is best effort, so a conversation
    /// the store cannot read now simply shows and sends no indicator.
    private func readableSnapshot(of conversation: ConversationID) -> ConversationSnapshot? {
        guard let snapshot = try? conversations.snapshot(of: conversation), snapshot.state.exists else { return nil }
        return snapshot
    }

    private static func broadcast(_ message: [UInt8], except: LinkID?, links: inout LinkTable) -> [NodeAction] {
        var out = [NodeAction]()
        for id in links.establishedIDs where id != except { out += links.send(message, on: id) }
        return out
    }

    // MARK: - Frames from links

    /// A TYPING frame from a link: malformed closes the link; over the link's rate, a copy, or a bad signature is
    /// dropped; otherwise it is forwarded (hops permitting) and, if this node is a member that can open it and the
    /// author is a member too, shown.
    mutating func received(_ message: [UInt8], on id: LinkID, links: inout LinkTable, now: Duration)
        -> [NodeAction]
    {
        let frame: TypingFrame
        do {
            frame = try TypingFrame.decode(message)
        } catch {
            // Like a malformed sync message: the link closes and the peer is scored.
            return links.fail(id, .malformed(error))
        }
        var bucket =
            buckets[id]
            ?? TokenBucket(
                capacity: NatterSync.Limits.typingFramesPerLinkBurst,
                refillPerSecond: NatterSync.Limits.typingFramesPerLinkPerSecond, now: now)
        let allowed = bucket.takeIfAvailable(now: now)
        buckets[id] = bucket
        let key = TypingTracker.Key(conversation: frame.conversation, author: frame.author)
        guard allowed, frame.author != identity.author, tracker.isNew(key, sequence: frame.sequence),
            frame.isValidlySigned, tracker.remember(key, sequence: frame.sequence, now: now)
        else { return [] }
        var out = [NodeAction]()
        if frame.hops > 1 {
            var forwarded = frame
            forwarded.hops -= 1
            out += Self.broadcast(forwarded.encoded(), except: id, links: &links)
        }
        guard let snapshot = readableSnapshot(of: frame.conversation),
            snapshot.state.members[identity.author] != nil, snapshot.state.members[frame.author] != nil,
            let epochKey = snapshot.keys[frame.epoch], let state = frame.open(epochKey: epochKey)
        else { return out }
        if tracker.received(key, typing: state == .typing, now: now) {
            out.append(.event(.typing(frame.conversation, tracker.people(in: frame.conversation))))
        }
        return out
    }

    // MARK: - Time

    /// Repeats "typing" while the user types, sends "stopped" when they went idle, and reports indicators that
    /// expired.
    mutating func tick(
        links: inout LinkTable, random: inout any RandomNumberGenerator, now: Duration, nowMillis: Int64
    ) -> [NodeAction] {
        // Forgets the buckets of links gone; no table of every link per tick (most ticks there are none).
        if !buckets.isEmpty { buckets = buckets.filter { links.isEstablished($0.key) } }
        let due = tracker.tick(now: now)
        var out = [NodeAction]()
        for conversation in due.refresh {
            out += sendOwn(.typing, in: conversation, links: &links, random: &random, now: now, nowMillis: nowMillis)
        }
        for conversation in due.stopped {
            out += sendOwn(.stopped, in: conversation, links: &links, random: &random, now: now, nowMillis: nowMillis)
        }
        for conversation in due.changed {
            out.append(.event(.typing(conversation, tracker.people(in: conversation))))
        }
        return out
    }
}
