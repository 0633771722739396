public import NatterModel
public import NatterStore

/// What a front end may read of the node's store — conversations, history pages, statuses, search, people — and
/// nothing it could write with. Handed out by `Node.read` on the node's actor, so reads never race the node's own
/// refreshes (which share the conversations' in-memory engines).
public struct NodeQueries {
    private let conversations: Conversations
    private var store: RecordStore { conversations.store }
    private var me: AuthorID { conversations.identity.author }

    init(conversations: Conversations) {
        self.conversations = conversations
    }

    // MARK: - Conversations

    /// Every conversation this node can read, most recent activity first (SPEC F5).
    public func conversationList(filter: String? = nil, includeArchived: Bool = false) throws -> [ConversationRow] {
        try conversations.conversationList(filter: filter, includeArchived: includeArchived)
    }

    /// Unread messages over the conversations the list shows.
    public func totalUnread() throws -> Int { try conversations.totalUnread() }

    /// Every conversation this node reads, with its details (what a front end starts from).
    public func allDetails() throws -> [ConversationID: ConversationDetails] {
        var all = [ConversationID: ConversationDetails]()
        for row in try conversations.conversationList(includeArchived: true) {
            all[row.id] = try conversations.details(of: row.id)
        }
        return all
    }

    public func details(of conversation: ConversationID) throws -> ConversationDetails? {
        try conversations.details(of: conversation)
    }

    /// How many lines the conversation's timeline has (retracted ones apart).
    public func lineCount(of conversation: ConversationID) throws -> Int {
        try conversations.snapshot(of: conversation).state.timeline.count
    }

    /// Lines `range` of the timeline, as this node's user sees them (a history page: O(page)).
    public func lines(of conversation: ConversationID, _ range: Range<Int>) throws -> [ConversationLine] {
        let state = try conversations.snapshot(of: conversation).state
        let clamped = range.clamped(to: 0..<state.timeline.count)
        return state.lines(clamped, viewer: me)
    }

    /// The retracted messages (shown after the newest line).
    public func retractedLines(of conversation: ConversationID) throws -> [ConversationLine] {
        try conversations.snapshot(of: conversation).state.retractedLines(viewer: me)
    }

    /// The ids of every line (timeline and retracted): what a front end's labels must tell apart.
    public func lineIDs(of conversation: ConversationID) throws -> [RecordID] {
        let state = try conversations.snapshot(of: conversation).state
        return state.timeline.map(\.id) + state.retracted.keys
    }

    /// Where a line sits in the timeline (nil: not shown).
    public func index(of line: RecordID, in conversation: ConversationID) throws -> Int? {
        try conversations.snapshot(of: conversation).state.timeline.firstIndex { $0.id == line }
    }

    /// One line as this node's user sees it.
    public func line(_ id: RecordID, in conversation: ConversationID) throws -> ConversationLine? {
        try conversations.snapshot(of: conversation).state.line(id, viewer: me)
    }

    /// Who read this node's message (and when), who has it, who does not yet (SPEC F7).
    public func receipts(of message: RecordID, in conversation: ConversationID) throws -> [ReceiptLine] {
        try conversations.snapshot(of: conversation).state.receiptsView(of: message)
    }

    /// Full-text search over the messages this node can read (SPEC F14).
    public func search(_ query: String, in conversation: ConversationID?) throws -> [SearchHit] {
        try conversations.search(query, in: conversation)
    }

    public func isMuted(_ conversation: ConversationID, at nowMillis: Int64) throws -> Bool {
        try conversations.isMuted(conversation, at: nowMillis)
    }

    // MARK: - People

    /// Every person whose profile arrived, with their display name.
    public func names() throws -> [AuthorID: String] {
        var names = [AuthorID: String]()
        for author in try store.profileAuthors() {
            if let name = try conversations.profile(of: author)?.name { names[author] = name }
        }
        return names
    }

    public func hasProfile(_ person: AuthorID) throws -> Bool { try conversations.profile(of: person) != nil }

    /// The direct conversation with `person` (its id exists before its first message).
    public func directConversationID(with person: AuthorID) throws -> ConversationID {
        try conversations.directConversationID(with: person)
    }

    /// When this node last heard of `person` through their own records: the newest creation time among their
    /// feeds' heads, capped at `nowMillis` (their clock may run ahead).
    public func newestRecordMillis(of person: AuthorID, nowMillis: Int64) throws -> Int64? {
        var newest: Int64?
        for feed in try store.feeds() where feed.author == person && feed.stored > 0 {
            let head = try store.records(conversation: feed.conversation, author: person, from: feed.stored, limit: 1)
            if let created = head.first?.header.createdAtMillis { newest = max(newest ?? .min, min(created, nowMillis)) }
        }
        return newest
    }

    // MARK: - The node

    /// The log's digest and, per conversation this node is a member of, its shared-state digest (SPEC F21).
    public func digests() throws -> (log: [UInt8], conversations: [(ConversationID, [UInt8])]) {
        var digests = [(ConversationID, [UInt8])]()
        for row in try conversations.conversationList(includeArchived: true) where row.isMember {
            digests.append((row.id, try conversations.snapshot(of: row.id).state.digest()))
        }
        return (try store.logDigest(), digests)
    }

    /// Name, type, size of a file message and how much of it this node holds (nil if not a readable file).
    public func fileStatus(of message: RecordID, in conversation: ConversationID) throws -> FileStatus? {
        try conversations.fileStatus(of: message, in: conversation)
    }
}
