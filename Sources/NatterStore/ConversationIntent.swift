public import NatterModel

/// A change a person — or the node's own policy (receipts, re-keys) — asks for: what `Conversations.author` turns
/// into records. Every write of a conversation record goes through it, whatever the front end.
public enum ConversationIntent: Sendable, Equatable {
    /// A message to an existing conversation, possibly a reply.
    case send(String, in: ConversationID, replyTo: RecordID? = nil)
    /// A message to a person: their direct conversation, founded with it if it does not exist yet.
    case sendDirect(String, to: AuthorID)
    case edit(RecordID, to: String, in: ConversationID)
    case delete(RecordID, in: ConversationID)
    case react(Reaction, to: RecordID, in: ConversationID)
    case unreact(RecordID, in: ConversationID)
    case createGroup(title: String?, members: [AuthorID])
    case invite([AuthorID], to: ConversationID)
    case kick([AuthorID], from: ConversationID)
    /// A new title (nil: untitled, shown by its members' names).
    case rename(ConversationID, to: String?)
    case setRole(MemberRole, of: AuthorID, in: ConversationID)
    /// Gives a member rights (SPEC F2 flags), keeping those they have.
    case grant(MemberFlags, to: AuthorID, in: ConversationID)
    /// Takes rights from a member, keeping the others.
    case revoke(MemberFlags, from: AuthorID, in: ConversationID)
    case leave(ConversationID)
    /// A new display name (a profile record).
    case nick(String)
    /// "Read up to here": everything this node holds in the conversation (SPEC F8).
    case markRead(ConversationID)
    /// "Delivered up to here", without claiming it was read.
    case markDelivered(ConversationID)
    /// A fresh epoch for the current roster (after a leave, to merge concurrent epochs, or when the rules make it
    /// this node's duty).
    case rekey(ConversationID)

    /// The conversation it writes in, when it names one (not for a new group, a direct message or a nick).
    public var conversation: ConversationID? {
        switch self {
        case .send(_, let id, _), .edit(_, _, let id), .delete(_, let id), .react(_, _, let id), .unreact(_, let id),
            .invite(_, let id), .kick(_, let id), .rename(let id, _), .setRole(_, _, let id), .grant(_, _, let id),
            .revoke(_, _, let id), .leave(let id), .markRead(let id), .markDelivered(let id), .rekey(let id):
            id
        case .sendDirect, .createGroup, .nick: nil
        }
    }
}

/// What an intent wrote.
public struct Authored: Sendable, Equatable {
    /// The conversation written in (the author's profile feed for a nick).
    public let conversation: ConversationID
    /// The records written, in order; the last is the intent's own (a direct conversation founded by its first
    /// message has its founding commit first).
    public let records: [Record]

    public init(conversation: ConversationID, records: [Record]) {
        self.conversation = conversation
        self.records = records
    }

    /// The record the intent asked for: the message, the commit, the receipt.
    public var record: Record { records[records.count - 1] }
    public var id: RecordID { record.id }
    /// Where each record sits (`RecordRef`: id and feed position).
    public var refs: [RecordRef] { records.map { RecordRef(id: $0.id, position: $0.header.position) } }
}

extension Conversations {
    /// Carries out intents in order and returns what each wrote, or why it was refused (`ConversationError`, or the
    /// store's error). Consecutive content intents in existing conversations (messages, replies, edits, deletes,
    /// reactions, receipts) are appended in one transaction — one fsync for all (group commit); the others each in
    /// their own. Nothing is written for a refused intent, and a refusal does not affect the others.
    public func author(_ intents: [ConversationIntent], now: Int64) -> [Result<Authored, any Error>] {
        var results = [Result<Authored, any Error>]()
        var pending = [(ContentOperation, ConversationID)]()
        func flush() {
            guard !pending.isEmpty else { return }
            results += contents(pending, now: now).map { result in
                result.map { Authored(conversation: $0.header.conversation, records: [$0]) }
            }
            pending = []
        }
        for intent in intents {
            do {
                if let operation = try contentOperation(of: intent) {
                    pending.append(operation)
                    continue
                }
                flush()
                results.append(Result { try authorAlone(intent, now: now) })
            } catch {
                flush()
                results.append(.failure(error))
            }
        }
        flush()
        return results
    }

    /// The content operation an intent appends to an existing conversation (nil for the other intents), checked as
    /// far as it can be before anything is written.
    private func contentOperation(of intent: ConversationIntent) throws -> (ContentOperation, ConversationID)? {
        switch intent {
        case .send(let text, let id, let replyTo):
            return (.message(text: try cleanText(text), replyTo: replyTo), id)
        case .sendDirect(let text, let peer):
            let id = try directConversationID(with: peer)
            let snapshot = try snapshot(of: id)
            guard snapshot.state.exists, snapshot.state.currentEpoch != nil else { return nil }  // founds it: alone
            return (.message(text: try cleanText(text), replyTo: nil), id)
        case .edit(let message, let text, let id): return (.edit(target: message, text: try cleanText(text)), id)
        case .delete(let message, let id): return (.delete(target: message), id)
        case .react(let reaction, let message, let id): return (.react(target: message, reaction: reaction), id)
        case .unreact(let message, let id):
            guard try snapshot(of: id).state.reactions[message]?[identity.author] != nil else {
                throw ConversationError.refused("you have not reacted to that message")
            }
            return (.unreact(target: message), id)
        case .markRead(let id): return (.receipt(readUpTo: try store.appliedClock(of: id)), id)
        case .markDelivered(let id):
            return (.receipt(readUpTo: try snapshot(of: id).state.receipts[identity.author]?.read ?? VectorClock()), id)
        case .createGroup, .invite, .kick, .rename, .setRole, .grant, .revoke, .leave, .nick, .rekey:
            return nil
        }
    }

    /// Carries out one intent in a transaction of its own.
    private func authorAlone(_ intent: ConversationIntent, now: Int64) throws -> Authored {
        func wrote(_ record: Record) -> Authored { Authored(conversation: record.header.conversation, records: [record]) }
        switch intent {
        case .sendDirect(let text, let peer):
            let id = try directConversationID(with: peer)
            let before = try ownLength(of: id)
            let message = try sendDirect(text, to: peer, now: now)
            // The founding commit, when this message founded the conversation.
            let founding = try store.records(
                conversation: id, author: identity.author, from: before + 1,
                limit: Int(message.header.sequence - before - 1))
            return Authored(conversation: id, records: founding + [message])
        case .createGroup(let title, let members):
            let id = try createGroup(title: title, members: members, now: now)
            return Authored(conversation: id, records: try store.records(
                conversation: id, author: identity.author, from: 1, limit: 1))
        case .invite(let members, let id): return wrote(try add(members, to: id, now: now))
        case .kick(let members, let id): return wrote(try remove(members, from: id, now: now))
        case .rename(let id, let title): return wrote(try rename(id, to: title, now: now))
        case .setRole(let role, let member, let id): return wrote(try setRole(role, of: member, in: id, now: now))
        case .grant(let flags, let member, let id), .revoke(let flags, let member, let id):
            guard let info = try snapshot(of: id).state.members[member] else {
                throw ConversationError.refused("not a member here")
            }
            var updated = info.flags
            if case .grant = intent { updated.formUnion(flags) } else { updated.subtract(flags) }
            return wrote(try setFlags(updated, of: member, in: id, now: now))
        case .leave(let id): return wrote(try leave(id, now: now))
        case .nick(let name): return wrote(try publishProfile(name: name, now: now))
        case .rekey(let id): return wrote(try rekey(id, now: now))
        case .send, .edit, .delete, .react, .unreact, .markRead, .markDelivered:
            preconditionFailure("content intents are appended in batches (`contents`)")
        }
    }

    private func cleanText(_ text: String) throws -> String {
        do {
            return try MessageText.clean(text)
        } catch {
            throw ConversationError.text(error)
        }
    }

    /// How many records this node wrote in `conversation`.
    private func ownLength(of conversation: ConversationID) throws -> UInt64 {
        try store.feeds(of: conversation).first { $0.author == identity.author }?.stored ?? 0
    }
}
