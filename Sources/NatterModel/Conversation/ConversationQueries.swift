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
