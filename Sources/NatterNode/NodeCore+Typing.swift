public import NatterModel
import NatterCrypto
import NatterStore
import NatterSync

/// Typing indicators (SPEC F12; docs/protocol.md §3.2, TYPING): frames built, checked, forwarded and shown here,
/// timed by `TypingTracker`. Nothing of this is ever written to the store.
extension NodeCore {
    // MARK: - This node's user

    /// The user edited a non-command line for `conversation` (a keystroke). Sends a "typing" frame to every link
    /// when one is due; nothing when this node cannot write there (not a member, no key yet).
    public func userTyping(in conversation: ConversationID, now: Duration) -> [NodeAction] {
        guard typing.keystroke(in: conversation, now: now) else { return [] }
        return sendOwnTyping(.typing, in: conversation, now: now)
    }

    /// The user sent the line, cleared it, or left the conversation: a "stopped" frame if typing was announced.
    public func userStoppedTyping(in conversation: ConversationID, now: Duration) -> [NodeAction] {
        guard typing.stop(in: conversation) else { return [] }
        return sendOwnTyping(.stopped, in: conversation, now: now)
    }

    /// The people typing in `conversation` now (members only; never this node's own identity).
    public func typingPeople(in conversation: ConversationID) -> [AuthorID] { typing.people(in: conversation) }

    private func sendOwnTyping(_ state: TypingFrame.State, in conversation: ConversationID, now: Duration)
        -> [NodeAction]
    {
        guard let snapshot = try? conversations.snapshot(of: conversation), snapshot.state.exists,
            snapshot.state.members[identity.author] != nil, let epoch = snapshot.state.currentEpoch,
            let key = snapshot.keys[epoch]
        else { return [] }
        let sequence = typing.nextSequence(
            clockMillis: wallClockMillis(now),
            conversation: conversation, author: identity.author, now: now)
        var generator = random
        let nonce = try! AEADNonce(bytes: (0..<AEADNonce.byteCount).map { _ in UInt8.random(in: 0...255, using: &generator) })
        random = generator
        let frame = TypingFrame.seal(
            state, conversation: conversation, epoch: epoch, epochKey: key, sequence: sequence, nonce: nonce,
            identity: identity.signing)
        return broadcast(frame.encoded(), except: nil)
    }

    private func broadcast(_ message: [UInt8], except: LinkID?) -> [NodeAction] {
        var out = [NodeAction]()
        for id in establishedLinks.keys.sorted() where id != except {
            out += sendApplicationMessage(message, on: id)
        }
        return out
    }

    // MARK: - Frames from links

    /// A TYPING frame from a link: malformed closes the link; over the link's rate, a copy, or a bad signature is
    /// dropped; otherwise it is forwarded (hops permitting) and, if this node is a member that can open it and the
    /// author is a member too, shown.
    func typingFrame(_ id: LinkID, _ message: [UInt8], now: Duration) -> [NodeAction] {
        let frame: TypingFrame
        do {
            frame = try TypingFrame.decode(message)
        } catch {
            // Like a malformed sync message: the link closes and the peer is scored.
            return failLink(id, .malformed(error))
        }
        var bucket =
            typingBuckets[id]
            ?? TokenBucket(
                capacity: NatterSync.Limits.typingFramesPerLinkBurst,
                refillPerSecond: NatterSync.Limits.typingFramesPerLinkPerSecond, now: now)
        let allowed = bucket.takeIfAvailable(now: now)
        typingBuckets[id] = bucket
        let key = TypingTracker.Key(conversation: frame.conversation, author: frame.author)
        guard allowed, frame.author != identity.author, typing.isNew(key, sequence: frame.sequence),
            frame.isValidlySigned, typing.remember(key, sequence: frame.sequence, now: now)
        else { return [] }
        var out = [NodeAction]()
        if frame.hops > 1 {
            var forwarded = frame
            forwarded.hops -= 1
            out += broadcast(forwarded.encoded(), except: id)
        }
        guard let snapshot = try? conversations.snapshot(of: frame.conversation), snapshot.state.exists,
            snapshot.state.members[identity.author] != nil, snapshot.state.members[frame.author] != nil,
            let epochKey = snapshot.keys[frame.epoch], let state = frame.open(epochKey: epochKey)
        else { return out }
        if typing.received(key, typing: state == .typing, now: now) {
            out.append(.event(.typing(frame.conversation, typing.people(in: frame.conversation))))
        }
        return out
    }

    // MARK: - Time

    /// Repeats "typing" while the user types, sends "stopped" when they went idle, and reports indicators that
    /// expired. Called from `tick`.
    func typingTick(now: Duration) -> [NodeAction] {
        let links = establishedLinks
        typingBuckets = typingBuckets.filter { links[$0.key] != nil }
        let due = typing.tick(now: now)
        var out = [NodeAction]()
        for conversation in due.refresh { out += sendOwnTyping(.typing, in: conversation, now: now) }
        for conversation in due.stopped { out += sendOwnTyping(.stopped, in: conversation, now: now) }
        for conversation in due.changed {
            out.append(.event(.typing(conversation, typing.people(in: conversation))))
        }
        return out
    }
}
