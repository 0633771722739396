/// Where one of your messages stands (SPEC F7). Derived from the members' receipts, so it never goes backwards.
public struct MessageStatus: Hashable, Sendable, CustomStringConvertible {
    public enum Phase: Hashable, Sendable {
        /// Stored and signed in your log; no recipient's node holds it yet (queued, never failed).
        case sent
        /// At least one recipient's node holds it.
        case delivered
        /// Every recipient has read it.
        case read
        /// Every member rejects it: you were removed concurrently.
        case notDelivered(String)
    }

    public let phase: Phase
    /// Members when it was sent (its causal position), less those who have left or been removed since.
    public let recipients: [AuthorID]
    public let deliveredTo: [AuthorID]
    public let readBy: [AuthorID]

    public var description: String {
        switch phase {
        case .sent: "sent"
        case .delivered:
            recipients.count > 1 && !readBy.isEmpty ? "read by \(readBy.count) of \(recipients.count)" : "delivered"
        case .read: "read"
        case .notDelivered(let reason): "not delivered: \(reason)"
        }
    }
}

/// One line of the receipts view: who read (and when), who has it, who does not yet.
public struct ReceiptLine: Hashable, Sendable {
    public enum State: Hashable, Sendable {
        case read(atMillis: Int64)
        case delivered
        case pending
    }

    public let member: AuthorID
    public let state: State
}

/// Reactions of one kind on a message.
public struct ReactionCount: Hashable, Sendable {
    public let reaction: Reaction
    public let count: Int
    /// Whether the viewer is among them.
    public let mine: Bool
    public let people: [AuthorID]
}

extension ConversationState {
    /// The status of message `id`, or nil if it is neither a valid message nor a rejected one.
    public func status(of id: RecordID) -> MessageStatus? {
        if let reason = rejected[id], reason.contains("removed concurrently") {
            return MessageStatus(
                phase: .notDelivered("you were no longer a member"), recipients: [], deliveredTo: [], readBy: [])
        }
        guard let message = message(id), let atSend = recipientsAtSend[id] else { return nil }
        let recipients = atSend.filter { members[$0] != nil }
        let delivered = recipients.filter { (receipts[$0]?.delivered[message.author] ?? 0) >= message.sequence }
        let read = recipients.filter { (receipts[$0]?.read[message.author] ?? 0) >= message.sequence }
        let phase: MessageStatus.Phase
        if !recipients.isEmpty && read.count == recipients.count {
            phase = .read
        } else if !delivered.isEmpty || !read.isEmpty {
            phase = .delivered
        } else {
            phase = .sent
        }
        return MessageStatus(phase: phase, recipients: recipients, deliveredTo: delivered, readBy: read)
    }

    /// Whether someone other than `viewer` wrote a message that `marks` (a clock of `viewer`'s receipts) does not
    /// cover: the need for a delivered or read receipt. O(authors).
    public func hasMessages(beyond marks: VectorClock, viewer: AuthorID) -> Bool {
        messageSequences.contains { author, sequences in
            author != viewer && (sequences.last ?? 0) > marks[author]
        }
    }

    /// Messages by others that `viewer` has not read (after their read receipt): the unread count.
    /// O(authors · log messages).
    public func unreadCount(viewer: AuthorID) -> Int {
        let read = receipts[viewer]?.read ?? VectorClock()
        var unread = 0
        for (author, sequences) in messageSequences where author != viewer {
            let mark = read[author]
            // The first sequence above the read mark (binary search over the ascending sequences).
            var low = 0
            var high = sequences.count
            while low < high {
                let middle = (low + high) / 2
                if sequences[middle] <= mark { low = middle + 1 } else { high = middle }
            }
            unread += sequences.count - low
        }
        return unread
    }

    /// Who read message `id` and when, who holds it, who does not yet (recipients only).
    public func receiptsView(of id: RecordID) -> [ReceiptLine] {
        guard let message = message(id), let status = status(of: id) else { return [] }
        return status.recipients.map { member in
            if status.readBy.contains(member) {
                let first = readReceipts[member]?.first { $0.readUpTo[message.author] >= message.sequence }
                return ReceiptLine(member: member, state: .read(atMillis: first?.atMillis ?? 0))
            }
            return ReceiptLine(member: member, state: status.deliveredTo.contains(member) ? .delivered : .pending)
        }
    }

    /// Reactions on message `id` grouped by kind, most popular first (ties in the fixed reaction order).
    public func reactionSummary(of id: RecordID, viewer: AuthorID) -> [ReactionCount] {
        var people = [Reaction: [AuthorID]]()
        for (person, reaction) in reactions[id] ?? [:] { people[reaction, default: []].append(person) }
        return people.map { reaction, who in
            ReactionCount(reaction: reaction, count: who.count, mine: who.contains(viewer), people: who.sorted())
        }.sorted { ($0.count, $1.reaction) > ($1.count, $0.reaction) }
    }
}

/// The message a reply quotes, as shown beside it.
public struct Quote: Hashable, Sendable {
    public let author: AuthorID
    /// The quoted text; nil when the quoted message was deleted.
    public let text: String?
}

/// A line as a front end shows it to one viewer: the timeline item and what goes with it.
public struct ConversationLine: Hashable, Sendable {
    public let item: TimelineItem
    /// A late record invalidated this message (a concurrent removal of its author): shown "retracted" (SPEC F4).
    public let retracted: Bool
    /// For a reply: the message it answers, when that message is shown.
    public let quote: Quote?
    /// For the viewer's own messages: where they stand (SPEC F7).
    public let status: MessageStatus?
    /// Reactions, most popular first (SPEC F9).
    public let reactions: [ReactionCount]

    public var id: RecordID { item.id }
}

extension ConversationState {
    /// The line `id` as `viewer` sees it: a timeline item, or a retracted message; nil for anything else.
    public func line(_ id: RecordID, viewer: AuthorID) -> ConversationLine? {
        if let item = items[id] { return line(item, retracted: false, viewer: viewer) }
        if let message = retracted[id] { return line(.message(message), retracted: true, viewer: viewer) }
        return nil
    }

    /// The lines of `range` of the timeline, in order (a history page: O(page)).
    public func lines(_ range: Range<Int>, viewer: AuthorID) -> [ConversationLine] {
        timeline[range].map { line($0, retracted: false, viewer: viewer) }
    }

    /// The retracted messages, in their order (shown after the newest line).
    public func retractedLines(viewer: AuthorID) -> [ConversationLine] {
        retracted.values.sorted { $0.position < $1.position }.map { line(.message($0), retracted: true, viewer: viewer) }
    }

    private func line(_ item: TimelineItem, retracted: Bool, viewer: AuthorID) -> ConversationLine {
        guard case .message(let message) = item else {
            return ConversationLine(item: item, retracted: retracted, quote: nil, status: nil, reactions: [])
        }
        let quote = message.replyTo.flatMap { self.message($0) }.map {
            Quote(author: $0.author, text: $0.deleted ? nil : $0.text)
        }
        return ConversationLine(
            item: item, retracted: retracted, quote: quote,
            status: message.author == viewer && !retracted ? status(of: message.id) : nil,
            reactions: retracted ? [] : reactionSummary(of: message.id, viewer: viewer))
    }
}
