/// The six reactions (SPEC F9), one per person per message.
public enum Reaction: UInt8, CaseIterable, Sendable, Comparable {
    case love = 1
    case like, dislike, laugh, emphasize, question

    public var emoji: String {
        switch self {
        case .love: "❤️"
        case .like: "👍"
        case .dislike: "👎"
        case .laugh: "😂"
        case .emphasize: "‼️"
        case .question: "❓"
        }
    }

    public var name: String { "\(self)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// A member's role below the creator (the creator is derived: the group's founder, or its successor).
public enum MemberRole: UInt8, Sendable, Comparable {
    case admin = 1
    case member = 2

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.rawValue < rhs.rawValue }
}

/// Extra rights the creator can grant a plain member (SPEC F2).
public struct MemberFlags: OptionSet, Hashable, Sendable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let canAdd = MemberFlags(rawValue: 1)
    public static let canRemove = MemberFlags(rawValue: 2)
    public static let canRename = MemberFlags(rawValue: 4)
    /// Every flag defined so far; other bits are malformed.
    public static let all: MemberFlags = [.canAdd, .canRemove, .canRename]
}

/// What a content record says, once decrypted: chat content that never changes membership.
public enum ContentOperation: Hashable, Sendable {
    case message(text: String, replyTo: RecordID?)
    case edit(target: RecordID, text: String)
    case delete(target: RecordID)
    case react(target: RecordID, reaction: Reaction)
    case unreact(target: RecordID)
    /// "Read up to here": the reader has viewed everything this clock covers. Delivery needs no record of its own:
    /// any record a member writes shows, through its dependencies, everything that member's node holds.
    case receipt(readUpTo: VectorClock)
    /// A file (SPEC F13): its description and key. The contents travel apart, as encrypted chunks (§11).
    case file(FileDescriptor, replyTo: RecordID?)
}

/// Whether a conversation is a group or a direct (two-person) chat.
public enum ConversationKind: UInt8, Sendable {
    case group = 1
    case direct = 2
}

/// What a commit record says, once decrypted: a change to the conversation's control state.
public enum ControlOperation: Hashable, Sendable {
    /// The genesis: founds the conversation with its first members (creator excluded from `members`).
    case create(kind: ConversationKind, title: String?, members: [AuthorID], salt: [UInt8])
    case add(members: [AuthorID])
    case remove(members: [AuthorID])
    /// The author leaves. Remaining members re-key afterwards (the leaver must not learn the next key).
    case leave
    case rename(title: String?)
    case setRole(member: AuthorID, role: MemberRole)
    case setFlags(member: AuthorID, flags: MemberFlags)
    /// A fresh epoch for the same roster: after a leave, to merge concurrent epochs, or periodically.
    case rekey

    /// Whether the commit opens a new key epoch (sealing a fresh key to the resulting roster).
    public var opensEpoch: Bool {
        switch self {
        case .create, .add, .remove, .rekey: true
        case .leave, .rename, .setRole, .setFlags: false
        }
    }

    /// Whether it removes others: written in the removal form, whose notice the removed members read (form 4).
    public var isRemoval: Bool {
        if case .remove = self { return true }
        return false
    }
}

/// Bounds of the conversation layer, each with its reason.
public enum ConversationLimits {
    /// Most characters (grapheme clusters) in a message (SPEC F6).
    public static let messageCharactersMax = 10_000
    /// Most UTF-8 bytes in a message (SPEC F6): 10,000 characters of any script fit a record.
    public static let messageBytesMax = 40_000
    /// Most characters in a group title: a title, not a message.
    public static let titleCharactersMax = 100
    /// Most UTF-8 bytes in a title.
    public static let titleBytesMax = 400
    /// Versions of a message kept (the original plus edits): SPEC F10.
    public static let editVersionsMax = 10
    /// Salt bytes in a group's genesis (the group id is derived from its creator and this salt).
    public static let saltBytes = 16
}

// MARK: - Encoding

/// Why a decrypted payload is not a valid operation.
public enum OperationFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case truncated
    case trailingBytes
    case unknownOperation(UInt8)
    case invalidText
    case invalidValue(String)

    public var description: String {
        switch self {
        case .truncated: "operation ends early"
        case .trailingBytes: "bytes follow the operation"
        case .unknownOperation(let code): "unknown operation \(code)"
        case .invalidText: "text is not valid UTF-8 or breaks the text rules"
        case .invalidValue(let what): "invalid \(what)"
        }
    }
}

/// A bounds-checked reader over untrusted bytes.
struct OperationReader {
    let bytes: [UInt8]
    var offset = 0

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func byte() throws(OperationFormatError) -> UInt8 {
        guard offset < bytes.count else { throw .truncated }
        defer { offset += 1 }
        return bytes[offset]
    }

    mutating func take(_ count: Int) throws(OperationFormatError) -> ArraySlice<UInt8> {
        guard count >= 0, count <= bytes.count - offset else { throw .truncated }
        defer { offset += count }
        return bytes[offset..<(offset + count)]
    }

    mutating func uint16() throws(OperationFormatError) -> Int {
        let b = try take(2)
        return Int(b[b.startIndex]) << 8 | Int(b[b.startIndex + 1])
    }

    mutating func uint32() throws(OperationFormatError) -> Int {
        let b = try take(4)
        return b.reduce(0) { $0 << 8 | Int($1) }
    }

    mutating func uint64() throws(OperationFormatError) -> UInt64 {
        let b = try take(8)
        return b.reduce(0) { $0 << 8 | UInt64($1) }
    }

    mutating func id32() throws(OperationFormatError) -> Bytes32 { Bytes32(try take(32)) }

    mutating func text(maxBytes: Int) throws(OperationFormatError) -> String {
        let length = try uint32()
        guard length <= maxBytes else { throw .invalidText }
        guard let text = String(validating: try take(length), as: UTF8.self) else { throw .invalidText }
        return text
    }

    func finish() throws(OperationFormatError) {
        guard offset == bytes.count else { throw .trailingBytes }
    }
}

extension Array where Element == UInt8 {
    mutating func appendText(_ text: String) {
        let utf8 = Array(text.utf8)
        appendBigEndian(UInt32(utf8.count), to: &self)
        self += utf8
    }

    /// A reply reference: flag 0, or flag 1 and the id replied to.
    mutating func appendReply(_ replyTo: RecordID?) {
        append(replyTo == nil ? 0 : 1)
        replyTo?.raw.appendBytes(to: &self)
    }

    mutating func appendClock(_ clock: VectorClock) {
        appendBigEndian(UInt16(clock.count), to: &self)
        for entry in clock {
            entry.author.raw.appendBytes(to: &self)
            appendBigEndian(entry.sequence, to: &self)
        }
    }
}

extension OperationReader {
    mutating func reply() throws(OperationFormatError) -> RecordID? {
        let flag = try byte()
        guard flag <= 1 else { throw .invalidValue("reply flag") }
        return flag == 1 ? RecordID(raw: try id32()) : nil
    }

    mutating func clock() throws(OperationFormatError) -> VectorClock {
        let count = try uint16()
        guard count <= Limits.dependenciesMax else { throw .invalidValue("clock size") }
        var entries = [VectorClock.Entry]()
        for _ in 0..<count {
            entries.append(VectorClock.Entry(author: AuthorID(raw: try id32()), sequence: try uint64()))
        }
        guard let clock = VectorClock(sortedEntries: entries) else { throw .invalidValue("clock order") }
        return clock
    }

    mutating func authors(max: Int) throws(OperationFormatError) -> [AuthorID] {
        let count = try uint16()
        guard count >= 1, count <= max else { throw .invalidValue("member count") }
        var members = [AuthorID]()
        for _ in 0..<count { members.append(AuthorID(raw: try id32())) }
        guard Set(members).count == members.count else { throw .invalidValue("duplicate member") }
        return members
    }
}

extension ContentOperation {
    /// Canonical bytes (docs/protocol.md, "Content operations").
    public func encoded() -> [UInt8] {
        var out = [UInt8]()
        switch self {
        case .message(let text, let replyTo):
            out.append(1)
            out.appendReply(replyTo)
            out.appendText(text)
        case .edit(let target, let text):
            out.append(2)
            target.raw.appendBytes(to: &out)
            out.appendText(text)
        case .delete(let target):
            out.append(3)
            target.raw.appendBytes(to: &out)
        case .react(let target, let reaction):
            out.append(4)
            target.raw.appendBytes(to: &out)
            out.append(reaction.rawValue)
        case .unreact(let target):
            out.append(5)
            target.raw.appendBytes(to: &out)
        case .receipt(let readUpTo):
            out.append(6)
            out.appendClock(readUpTo)
        case .file(let file, let replyTo):
            out.append(7)
            out.appendReply(replyTo)
            file.append(to: &out)
        }
        return out
    }

    /// Decodes canonical bytes; anything else is an error.
    public static func decode(_ bytes: [UInt8]) throws(OperationFormatError) -> ContentOperation {
        var reader = OperationReader(bytes)
        let operation: ContentOperation
        switch try reader.byte() {
        case 1:
            let reply = try reader.reply()
            operation = .message(text: try reader.text(maxBytes: ConversationLimits.messageBytesMax), replyTo: reply)
        case 2:
            let target = RecordID(raw: try reader.id32())
            operation = .edit(target: target, text: try reader.text(maxBytes: ConversationLimits.messageBytesMax))
        case 3: operation = .delete(target: RecordID(raw: try reader.id32()))
        case 4:
            let target = RecordID(raw: try reader.id32())
            guard let reaction = Reaction(rawValue: try reader.byte()) else { throw .invalidValue("reaction") }
            operation = .react(target: target, reaction: reaction)
        case 5: operation = .unreact(target: RecordID(raw: try reader.id32()))
        case 6: operation = .receipt(readUpTo: try reader.clock())
        case 7:
            let reply = try reader.reply()
            operation = .file(try FileDescriptor.read(&reader), replyTo: reply)
        case let code: throw .unknownOperation(code)
        }
        try reader.finish()
        return operation
    }
}

extension ControlOperation {
    /// Canonical bytes (docs/protocol.md, "Control operations").
    public func encoded() -> [UInt8] {
        var out = [UInt8]()
        func appendMembers(_ members: [AuthorID]) {
            appendBigEndian(UInt16(members.count), to: &out)
            for member in members { member.raw.appendBytes(to: &out) }
        }
        switch self {
        case .create(let kind, let title, let members, let salt):
            out.append(1)
            out.append(kind.rawValue)
            out.append(title == nil ? 0 : 1)
            if let title { out.appendText(title) }
            appendMembers(members)
            out += salt
        case .add(let members):
            out.append(2)
            appendMembers(members)
        case .remove(let members):
            out.append(3)
            appendMembers(members)
        case .leave:
            out.append(4)
        case .rename(let title):
            out.append(5)
            out.append(title == nil ? 0 : 1)
            if let title { out.appendText(title) }
        case .setRole(let member, let role):
            out.append(6)
            member.raw.appendBytes(to: &out)
            out.append(role.rawValue)
        case .setFlags(let member, let flags):
            out.append(7)
            member.raw.appendBytes(to: &out)
            out.append(flags.rawValue)
        case .rekey:
            out.append(8)
        }
        return out
    }

    /// Decodes canonical bytes; anything else is an error.
    public static func decode(_ bytes: [UInt8]) throws(OperationFormatError) -> ControlOperation {
        var reader = OperationReader(bytes)
        let operation: ControlOperation
        let membersMax = Limits.groupMembersMax - 1
        switch try reader.byte() {
        case 1:
            guard let kind = ConversationKind(rawValue: try reader.byte()) else { throw .invalidValue("kind") }
            let flag = try reader.byte()
            guard flag <= 1 else { throw .invalidValue("title flag") }
            let title = flag == 1 ? try reader.text(maxBytes: ConversationLimits.titleBytesMax) : nil
            let members = try reader.authors(max: membersMax)
            let salt = Array(try reader.take(ConversationLimits.saltBytes))
            operation = .create(kind: kind, title: title, members: members, salt: salt)
        case 2: operation = .add(members: try reader.authors(max: membersMax))
        case 3: operation = .remove(members: try reader.authors(max: membersMax))
        case 4: operation = .leave
        case 5:
            let flag = try reader.byte()
            guard flag <= 1 else { throw .invalidValue("title flag") }
            operation = .rename(title: flag == 1 ? try reader.text(maxBytes: ConversationLimits.titleBytesMax) : nil)
        case 6:
            let member = AuthorID(raw: try reader.id32())
            guard let role = MemberRole(rawValue: try reader.byte()) else { throw .invalidValue("role") }
            operation = .setRole(member: member, role: role)
        case 7:
            let member = AuthorID(raw: try reader.id32())
            let flags = MemberFlags(rawValue: try reader.byte())
            guard MemberFlags.all.isSuperset(of: flags) else { throw .invalidValue("flags") }
            operation = .setFlags(member: member, flags: flags)
        case 8: operation = .rekey
        case let code: throw .unknownOperation(code)
        }
        try reader.finish()
        return operation
    }
}
