public import NatterModel

/// The timing of typing indicators (SPEC F12), as a pure machine: keystrokes and frames in, with the time; what to
/// send and who is typing where, out. `NodeCore` seals and routes the frames; this decides when.
///
/// - This node's user: typing starts with the first keystroke of a non-command line (a frame at once), is
///   re-announced every `refreshInterval` while keystrokes continue, and ends `idleTimeout` after the last
///   keystroke or when the line is sent (a "stopped" frame).
/// - Others: a person is typing from their "typing" frame until their "stopped" frame, or `displayTimeout` after
///   their last frame (a lost "stopped" frame, a node that vanished).
/// - Frames: the highest sequence seen per (conversation, author) is kept for `sequenceMemory`, at most
///   `feedsTrackedMax` of them; a frame at or below it is a copy (another path, a loop, a replay) and is dropped.
public struct TypingTracker: Sendable {
    /// A typing person's frames are repeated this often, so late joiners and lossy paths catch up.
    public static let refreshInterval: Duration = .seconds(2)
    /// Typing ends this long after the last keystroke (SPEC F12: 3 s).
    public static let idleTimeout: Duration = .seconds(3)
    /// Someone is shown typing for this long after their last frame: one refresh interval plus two seconds of slack,
    /// so a refresh delayed on a slow path or a loaded machine does not make the indicator flicker off and on.
    public static let displayTimeout: Duration = .seconds(4)
    /// How long a highest sequence is remembered after its frame: far longer than any path's delay.
    public static let sequenceMemory: Duration = .seconds(60)
    /// (conversation, author) pairs whose highest sequence is remembered: bounds the memory a flood of throwaway
    /// identities can take. When full and nothing is old enough to forget, new typists are not shown.
    public static let feedsTrackedMax = 4_096
    /// People shown typing per conversation ("Several people are typing…" starts at three).
    public static let typistsPerConversationMax = 64

    public struct Key: Hashable, Sendable {
        public let conversation: ConversationID
        public let author: AuthorID

        public init(conversation: ConversationID, author: AuthorID) {
            self.conversation = conversation
            self.author = author
        }
    }

    private struct Local {
        var lastKeystroke: Duration
        var lastSent: Duration
    }

    private var local: [ConversationID: Local] = [:]
    /// Expiry of each typing person, per conversation.
    private var remote: [ConversationID: [AuthorID: Duration]] = [:]
    private var highest: [Key: (sequence: UInt64, at: Duration)] = [:]
    private var lastOwnSequence: UInt64 = 0

    public init() {}

    // MARK: - This node's user

    /// A keystroke in a non-command line for `conversation`: true when a "typing" frame should go out now (the
    /// first keystroke, or the first after `refreshInterval`).
    public mutating func keystroke(in conversation: ConversationID, now: Duration) -> Bool {
        if var entry = local[conversation] {
            entry.lastKeystroke = now
            let due = now - entry.lastSent >= Self.refreshInterval
            if due { entry.lastSent = now }
            local[conversation] = entry
            return due
        }
        local[conversation] = Local(lastKeystroke: now, lastSent: now)
        return true
    }

    /// The line was sent or cleared: true when a "stopped" frame should go out (typing had been announced).
    public mutating func stop(in conversation: ConversationID) -> Bool {
        local.removeValue(forKey: conversation) != nil
    }

    /// Conversations where this node's user is typing now.
    public var typingHere: [ConversationID] { local.keys.sorted() }

    /// The next sequence for an own frame: the clock in milliseconds, or one more than the last when the clock has
    /// not advanced (or went back). Remembered, so copies of own frames that come back are dropped.
    public mutating func nextSequence(clockMillis: Int64, conversation: ConversationID, author: AuthorID, now: Duration)
        -> UInt64
    {
        lastOwnSequence = max(lastOwnSequence + 1, UInt64(max(1, clockMillis)))
        highest[Key(conversation: conversation, author: author)] = (lastOwnSequence, now)
        return lastOwnSequence
    }

    // MARK: - Frames from others

    /// Whether a frame with this sequence is new (above the highest seen): only those are verified, forwarded and
    /// shown. Cheap: call before checking the signature.
    public func isNew(_ key: Key, sequence: UInt64) -> Bool {
        sequence > (highest[key]?.sequence ?? 0)
    }

    /// Remembers a verified frame's sequence; false when the table is full of recent entries (then the frame is
    /// neither forwarded nor shown).
    public mutating func remember(_ key: Key, sequence: UInt64, now: Duration) -> Bool {
        if highest[key] == nil && highest.count >= Self.feedsTrackedMax {
            highest = highest.filter { now - $0.value.at < Self.sequenceMemory }
            guard highest.count < Self.feedsTrackedMax else { return false }
        }
        highest[key] = (sequence, now)
        return true
    }

    /// A member's verified, opened frame; true when the people typing in that conversation changed.
    public mutating func received(_ key: Key, typing: Bool, now: Duration) -> Bool {
        let before = remote[key.conversation]?[key.author] != nil
        if typing {
            if !before && (remote[key.conversation]?.count ?? 0) >= Self.typistsPerConversationMax { return false }
            remote[key.conversation, default: [:]][key.author] = now + Self.displayTimeout
        } else {
            remote[key.conversation]?[key.author] = nil
            if remote[key.conversation]?.isEmpty == true { remote[key.conversation] = nil }
        }
        return before != typing
    }

    /// People typing in `conversation` now, in identity order.
    public func people(in conversation: ConversationID) -> [AuthorID] {
        (remote[conversation]?.keys).map { $0.sorted() } ?? []
    }

    // MARK: - Time

    public struct Due: Equatable, Sendable {
        /// Conversations where a "typing" frame must be repeated.
        public var refresh: [ConversationID] = []
        /// Conversations where this node's user stopped typing (idle): send "stopped".
        public var stopped: [ConversationID] = []
        /// Conversations whose set of typing people changed (someone's indicator expired).
        public var changed: [ConversationID] = []

        public init() {}
    }

    public mutating func tick(now: Duration) -> Due {
        var due = Due()
        for conversation in local.keys.sorted() {
            guard var entry = local[conversation] else { continue }
            if now - entry.lastKeystroke >= Self.idleTimeout {
                local[conversation] = nil
                due.stopped.append(conversation)
            } else if now - entry.lastSent >= Self.refreshInterval {
                entry.lastSent = now
                local[conversation] = entry
                due.refresh.append(conversation)
            }
        }
        for conversation in remote.keys.sorted() {
            let live = remote[conversation]!.filter { $0.value > now }
            guard live.count != remote[conversation]!.count else { continue }
            remote[conversation] = live.isEmpty ? nil : live
            due.changed.append(conversation)
        }
        return due
    }

    /// When `tick` next has work.
    public func nextDeadline() -> Duration? {
        var deadlines = [Duration]()
        for entry in local.values {
            deadlines.append(min(entry.lastKeystroke + Self.idleTimeout, entry.lastSent + Self.refreshInterval))
        }
        for people in remote.values { if let first = people.values.min() { deadlines.append(first) } }
        return deadlines.min()
    }
}
