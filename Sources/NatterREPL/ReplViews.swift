import NatterModel
import NatterNode
import NatterStore

/// Short, stable labels for the lines of one conversation: the shortest prefix of the record id's hex (at least
/// four digits) that no other line of the conversation shares. A label changes only if a line with the same
/// prefix arrives later (about one in 65,536 per pair). Kept as the lines arrive: ids are grouped by their first
/// two bytes (a four-digit label), since only ids of one group can share more than four digits, so a new line and
/// a label cost the size of one group, not the conversation's.
struct RefBook {
    static let digitsMin = 4

    private var groups: [UInt16: [RecordID]] = [:]

    init(_ ids: some Sequence<RecordID>) {
        for id in ids { insert(id) }
    }

    private static func group(of id: RecordID) -> UInt16 {
        let bytes = id.bytes
        return UInt16(bytes[bytes.startIndex]) << 8 | UInt16(bytes[bytes.startIndex + 1])
    }

    mutating func insert(_ id: RecordID) {
        let group = Self.group(of: id)
        if groups[group]?.contains(id) != true { groups[group, default: []].append(id) }
    }

    /// The label of `id`: one more digit than it shares with any other line, at least four.
    func label(of id: RecordID) -> String {
        let hex = id.hex
        var shared = 0
        for other in groups[Self.group(of: id)] ?? [] where other != id {
            shared = max(shared, zip(hex, other.hex).prefix { $0 == $1 }.count)
        }
        return String(hex.prefix(max(Self.digitsMin, shared + 1)))
    }

    /// The lines whose id starts with `prefix` (lower-case hex digits).
    func matching(_ prefix: String) -> [RecordID] {
        guard prefix.count < Self.digitsMin else {
            let group = UInt16(prefix.prefix(Self.digitsMin), radix: 16)
            return (group.flatMap { groups[$0] } ?? []).filter { $0.hex.hasPrefix(prefix) }
        }
        return groups.values.joined().filter { $0.hex.hasPrefix(prefix) }
    }
}

/// What the REPL remembers of each conversation it can read: its details (from the node's deltas), the labels of
/// its lines (loaded when first needed, then kept as lines arrive) and the day of the last line shown (for date
/// headers).
struct ConversationViews {
    private struct View {
        var details: ConversationDetails
        var refs: RefBook?
        var lastShownMillis: Int64?
    }

    private var views: [ConversationID: View] = [:]
    /// Until when each muted conversation is muted (`Int64.max`: for ever): the REPL's own setting, kept here so a
    /// notice needs no read of the store.
    private var mutedUntil: [ConversationID: Int64] = [:]

    var ids: [ConversationID] { views.keys.sorted() }

    mutating func mute(_ conversation: ConversationID, until millis: Int64?) { mutedUntil[conversation] = millis }

    func isMuted(_ conversation: ConversationID, at nowMillis: Int64) -> Bool {
        mutedUntil[conversation].map { nowMillis < $0 } ?? false
    }

    func details(of conversation: ConversationID) -> ConversationDetails? { views[conversation]?.details }

    mutating func update(_ conversation: ConversationID, _ details: ConversationDetails) {
        views[conversation, default: View(details: details)].details = details
    }

    /// The title as the REPL shows it: the group's own (made safe), else the other members' display names.
    func title(of conversation: ConversationID, names: NameBook) -> String {
        guard let details = views[conversation]?.details else { return "?" }
        if let title = details.ownTitle { return Safe.line(title) }
        let others = details.sortedMembers.filter { $0 != names.me }
        return others.isEmpty ? "(just you)" : others.map(names.display).joined(separator: ", ")
    }

    /// Whether the labels of `conversation` are loaded.
    func hasRefs(_ conversation: ConversationID) -> Bool { views[conversation]?.refs != nil }

    /// Loads the labels of a conversation from its line ids (once).
    mutating func loadRefs(_ conversation: ConversationID, ids: [RecordID]) {
        guard views[conversation] != nil, views[conversation]?.refs == nil else { return }
        views[conversation]?.refs = RefBook(ids)
    }

    /// A line arrived: its label joins the others (if they are loaded; otherwise loading brings it).
    mutating func noteLine(_ id: RecordID, in conversation: ConversationID) {
        views[conversation]?.refs?.insert(id)
    }

    /// The label of a line (its short hex when the labels are not loaded).
    func label(of id: RecordID, in conversation: ConversationID) -> String {
        views[conversation]?.refs?.label(of: id) ?? id.shortHex
    }

    /// The lines of `conversation` whose id starts with `prefix`.
    func lines(in conversation: ConversationID, matching prefix: String) -> [RecordID] {
        views[conversation]?.refs?.matching(prefix) ?? []
    }

    func lastShownMillis(in conversation: ConversationID) -> Int64? { views[conversation]?.lastShownMillis }

    mutating func shown(_ millis: Int64, in conversation: ConversationID) {
        views[conversation]?.lastShownMillis = millis
    }
}

/// Who is online and how far each is synced (SPEC F12, F18), from the node's events. A person is online while at
/// least one link to them is up: a link replaced by another to the same person is not "offline".
struct Presence {
    private var links: [AuthorID: Set<LinkID>] = [:]
    /// When each person was last seen: a link going down, a typing frame.
    private var lastSeen: [AuthorID: Int64] = [:]
    private(set) var caughtUp = Set<AuthorID>()
    private(set) var progress: [AuthorID: (received: Int, expected: Int)] = [:]

    /// People with a link up now.
    var online: Set<AuthorID> { Set(links.keys) }

    /// A link came up; true when it is the person's first (they came online).
    mutating func up(_ person: AuthorID, _ link: LinkID) -> Bool {
        lastSeen[person] = nil
        return links[person, default: []].insert(link).inserted && links[person]!.count == 1
    }

    /// A link went down; true when it was the person's last (they went offline).
    mutating func down(_ person: AuthorID, _ link: LinkID, at millis: Int64) -> Bool {
        guard links[person]?.remove(link) != nil else { return false }
        guard links[person]!.isEmpty else { return false }
        links[person] = nil
        caughtUp.remove(person)
        progress[person] = nil
        lastSeen[person] = millis
        return true
    }

    mutating func synced(_ person: AuthorID) { caughtUp.insert(person) }

    mutating func syncing(_ person: AuthorID, received: Int, expected: Int) { progress[person] = (received, expected) }

    /// Someone was active (typing) at `millis`.
    mutating func active(_ person: AuthorID, at millis: Int64) { lastSeen[person] = max(lastSeen[person] ?? .min, millis) }

    func lastSeen(_ person: AuthorID) -> Int64? { lastSeen[person] }

    /// Everyone seen but not online now, most recent first.
    var offline: [(person: AuthorID, millis: Int64)] {
        lastSeen.filter { links[$0.key] == nil }.sorted { ($0.value, $0.key) > ($1.value, $1.key) }.map { ($0.key, $0.value) }
    }

    /// Received and expected records over the peers still catching up.
    var syncing: (received: Int, expected: Int)? {
        let pending = progress.filter { !caughtUp.contains($0.key) }.values
        guard !pending.isEmpty else { return nil }
        return (pending.map(\.received).reduce(0, +), pending.map(\.expected).reduce(0, +))
    }
}
