import Foundation
import NatterCrypto
import NatterModel

/// Rendering of text from the network: control characters, bidirectional overrides and invisible characters
/// escaped, continuation lines indented so a message cannot forge another line (SPEC "REPL"; issue 19, item 4).
public enum Safe {
    /// One line: every control character (newline included), every bidirectional override or isolate, and every
    /// default-ignorable or format character escaped — except inside an emoji sequence (the variation selector of
    /// ❤️, the joiners of 👩‍👩‍👧), and a joiner between two letters (Persian, Indic scripts shape words with them).
    public static func line(_ text: String) -> String { escaped(text, joinersBetweenLetters: true) }

    /// A name: as `line`, but joiners are escaped between letters too. A name is what an impersonator forges, and
    /// "Vic\u{200d}tim" must not print as "Victim".
    static func name(_ text: String) -> String { escaped(text, joinersBetweenLetters: false) }

    /// Several lines: each made safe, continuation lines indented by `indent` spaces (at least one), so no line
    /// of a message can pass for a line of the REPL.
    static func text(_ text: String, indent: Int = 4) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line(String($0)) }
            .joined(separator: "\n" + String(repeating: " ", count: max(indent, 1)))
    }

    /// A one-line preview: newlines shown as spaces, then made safe.
    static func preview(_ text: String) -> String {
        line(text.replacingOccurrences(of: "\n", with: " "))
    }

    private static func escaped(_ text: String, joinersBetweenLetters: Bool) -> String {
        // Printable ASCII, most lines, holds nothing to escape (no control, format or invisible character): a scan
        // of its bytes instead of a lookup of Unicode properties per scalar.
        if text.utf8.allSatisfy({ (0x20...0x7E).contains($0) }) { return text }
        var out = ""
        let characters = Array(text)
        for (position, character) in characters.enumerated() {
            let scalars = Array(character.unicodeScalars)
            let emoji = isEmojiSequence(scalars)
            for (index, scalar) in scalars.enumerated() {
                var escape = isDangerous(scalar)
                if !escape && isInvisible(scalar) {
                    let joinsLetters =
                        joinersBetweenLetters && (scalar.value == 0x200C || scalar.value == 0x200D)
                        && isLetter(scalars.first!) && position + 1 < characters.count
                        && isLetter(characters[position + 1].unicodeScalars.first!)
                    escape = !(emoji && index > 0) && !joinsLetters
                }
                if escape {
                    out += "\\u{\(String(scalar.value, radix: 16))}"
                } else {
                    out.unicodeScalars.append(scalar)
                }
            }
        }
        return out
    }

    private static func isDangerous(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.generalCategory == .control
            || (0x202A...0x202E).contains(scalar.value)  // embeddings and overrides
            || (0x2066...0x2069).contains(scalar.value)  // isolates
            || scalar.value == 0x200E || scalar.value == 0x200F || scalar.value == 0x061C  // marks
    }

    /// Characters that print as nothing (or nearly): default-ignorable code points and format characters.
    private static func isInvisible(_ scalar: Unicode.Scalar) -> Bool {
        scalar.properties.isDefaultIgnorableCodePoint || scalar.properties.generalCategory == .format
    }

    /// A grapheme that is an emoji: its first scalar is one, shown as emoji (by default, or by U+FE0F).
    private static func isEmojiSequence(_ scalars: [Unicode.Scalar]) -> Bool {
        guard let first = scalars.first, first.properties.isEmoji else { return false }
        return first.properties.isEmojiPresentation || scalars.contains("\u{FE0F}")
    }

    private static func isLetter(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.properties.generalCategory {
        case .uppercaseLetter, .lowercaseLetter, .titlecaseLetter, .modifierLetter, .otherLetter,
            .nonspacingMark, .spacingMark:
            true
        default: false
        }
    }
}

/// Display names for identities, made safe, with a fingerprint added wherever a name could be taken for another
/// (SPEC "REPL": two people with the same name are told apart by their fingerprints). "The same" is judged by UTS #39
/// skeletons (`NameSkeleton`): "Victim" + U+200B, "V\u{456}ctim" with a Cyrillic i, or "victim" are all Victim's name.
struct NameBook: Sendable {
    private var names: [AuthorID: String]
    /// Identities whose name is confusable with someone else's, the viewer's included.
    private let confusable: Set<AuthorID>
    /// Their fingerprints, to flag JSON events (`flagged`).
    private let confusableFingerprints: Set<String>
    let me: AuthorID

    init(names: [AuthorID: String], me: AuthorID) {
        self.names = names
        self.me = me
        var holders = [String: Set<AuthorID>]()
        for (author, name) in names {
            for key in NameSkeleton.keys(name) { holders[key, default: []].insert(author) }
        }
        confusable = Set(holders.values.filter { $0.count > 1 }.flatMap { $0 })
        confusableFingerprints = Set(confusable.map(\.publicKey.fingerprint))
    }

    /// The profile name as published (unsafe), or nil when no profile has arrived.
    func raw(_ author: AuthorID) -> String? { names[author] }

    /// Whether `author`'s name could be taken for someone else's.
    func isConfusable(_ author: AuthorID) -> Bool { confusable.contains(author) }

    /// What to print for `author`: the safe name, "Name (fingerprint)" when it could be taken for someone else's,
    /// the fingerprint alone when no profile has arrived yet.
    func display(_ author: AuthorID) -> String {
        guard let name = names[author] else { return author.publicKey.fingerprint }
        let safe = Safe.name(name)
        return confusable.contains(author) ? "\(safe) (\(author.publicKey.fingerprint))" : safe
    }

    /// "you" for the viewer, otherwise `display`.
    func speaker(_ author: AuthorID) -> String { author == me ? "you" : display(author) }

    /// Every known identity.
    var authors: [AuthorID] { names.keys.sorted() }

    /// A JSON event with each identity's flag beside its fingerprint: `"confusable"` after `"fingerprint"`,
    /// `"by_confusable"` after `"by_fingerprint"` (names stay raw in JSON; the flag says when not to trust one).
    func flagged(_ event: JSON) -> JSON {
        switch event {
        case .array(let items):
            return .array(items.map(flagged))
        case .object(let fields):
            var out = [(String, JSON)]()
            for (index, (key, value)) in fields.enumerated() {
                out.append((key, flagged(value)))
                if key == "fingerprint" || key == "by_fingerprint", case .string(let fingerprint) = value {
                    let flag = key == "fingerprint" ? "confusable" : "by_confusable"
                    // Flagged once: an object built from flagged parts keeps the flags it has.
                    if index + 1 < fields.count, fields[index + 1].0 == flag { continue }
                    out.append((flag, .bool(confusableFingerprints.contains(fingerprint))))
                }
            }
            return .object(out)
        default:
            return event
        }
    }
}

/// A message as the renderer needs it: everything decided, nothing looked up.
struct MessageLine: Sendable {
    var ref: String
    var millis: Int64
    var author: String
    var own: Bool
    /// Current text; nil when deleted.
    var text: String?
    var edited: Bool = false
    var retracted: Bool = false
    /// The one-line quote of the message this one answers: (speaker, text); text nil when that one was deleted.
    var replyQuote: (author: String, text: String?)? = nil
    /// Own messages only.
    var status: StatusMark? = nil
    var reactions: [ReactionCount] = []
    /// A file message: what to show of the file (SPEC F13).
    var file: (name: String, mediaType: String, size: UInt64)? = nil
}

/// What an own message's status mark shows (SPEC F7).
enum StatusMark: Equatable, Sendable {
    case sending
    /// Stored and signed; `queued` when no peer is connected to carry it.
    case sent(queued: Bool)
    case delivered
    case readBy(Int, of: Int)
    case read
    case notDelivered(String)

    init(_ status: MessageStatus?, peersConnected: Bool) {
        guard let status else {
            self = .sending
            return
        }
        switch status.phase {
        case .sent: self = .sent(queued: !peersConnected)
        case .delivered:
            self =
                status.recipients.count > 1 && !status.readBy.isEmpty
                ? .readBy(status.readBy.count, of: status.recipients.count) : .delivered
        case .read: self = .read
        case .notDelivered(let reason): self = .notDelivered(reason)
        }
    }

    /// The word scripts see (`status` events, `/wait`).
    var name: String {
        switch self {
        case .sending: "sending"
        case .sent(let queued): queued ? "queued" : "sent"
        case .delivered, .readBy: "delivered"
        case .read: "read"
        case .notDelivered: "not-delivered"
        }
    }
}

/// Pure rendering of everything the REPL prints. The time zone and the clock are injected, so tests pin them.
struct Renderer: Sendable {
    enum Style {
        case dim, bold, own, read, system, error, notice, highlight
    }

    /// nil: the machine's zone, looked up when a time is rendered — `TimeZone.current` loads ICU's zone data (about
    /// 1.2 MiB of RSS), which a node whose output shows no time never needs (decision 0013).
    var timeZone: TimeZone?
    var nowMillis: Int64
    var colours: Bool

    init(timeZone: TimeZone? = nil, nowMillis: Int64, colours: Bool) {
        self.timeZone = timeZone
        self.nowMillis = nowMillis
        self.colours = colours
    }

    static let weekdays = ["Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday"]
    static let months = ["Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec"]

    private var calendar: Calendar {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = timeZone ?? .current
        return calendar
    }

    private func date(_ millis: Int64) -> Date { Date(timeIntervalSince1970: Double(millis) / 1000) }

    private func parts(_ millis: Int64) -> DateComponents {
        calendar.dateComponents([.year, .month, .day, .hour, .minute, .weekday], from: date(millis))
    }

    /// Whole calendar days from `millis` to now (0 today, 1 yesterday; negative in the future).
    func daysAgo(_ millis: Int64) -> Int {
        let from = calendar.startOfDay(for: date(millis))
        let to = calendar.startOfDay(for: date(nowMillis))
        return calendar.dateComponents([.day], from: from, to: to).day ?? 0
    }

    func sameDay(_ a: Int64, _ b: Int64) -> Bool {
        calendar.isDate(date(a), inSameDayAs: date(b))
    }

    // MARK: - Times

    /// Local time of day: "10:30".
    func clock(_ millis: Int64) -> String {
        let p = parts(millis)
        return String(format: "%02d:%02d", p.hour ?? 0, p.minute ?? 0)
    }

    /// A day header: "Today", "Yesterday", "Monday 15 Oct" (with the year when it is not this year's).
    func dayHeader(_ millis: Int64) -> String {
        switch daysAgo(millis) {
        case 0: return "Today"
        case 1: return "Yesterday"
        default:
            let p = parts(millis)
            let base = "\(Self.weekdays[(p.weekday ?? 1) - 1]) \(p.day ?? 1) \(Self.months[(p.month ?? 1) - 1])"
            return p.year == parts(nowMillis).year ? base : "\(base) \(p.year ?? 0)"
        }
    }

    /// A conversation list time (SPEC F5): "14:05" today, "Yesterday", a weekday within the week ("Tue"),
    /// else "12 Oct" (with the year when it is not this year's).
    func relative(_ millis: Int64) -> String {
        let days = daysAgo(millis)
        let p = parts(millis)
        switch days {
        case ...0: return clock(millis)
        case 1: return "Yesterday"
        case 2...6: return String(Self.weekdays[(p.weekday ?? 1) - 1].prefix(3))
        default:
            let base = "\(p.day ?? 1) \(Self.months[(p.month ?? 1) - 1])"
            return p.year == parts(nowMillis).year ? base : "\(base) \(p.year ?? 0)"
        }
    }

    // MARK: - Styles

    func paint(_ text: String, _ style: Style) -> String {
        guard colours else { return text }
        let code =
            switch style {
            case .dim: "2"
            case .bold: "1"
            case .own: "36"
            case .read: "34;1"
            case .system: "33"
            case .error: "31"
            case .notice: "35"
            case .highlight: "1;4"
            }
        return "\u{1B}[\(code)m\(text)\u{1B}[0m"
    }

    // MARK: - Lines

    func header(_ millis: Int64) -> String { paint("── \(dayHeader(millis)) ──", .dim) }

    func status(_ mark: StatusMark) -> String {
        switch mark {
        case .sending: paint("sending…", .dim)
        case .sent(let queued): paint(queued ? "queued (goes out when a peer appears)" : "sent ✓", .dim)
        case .delivered: paint("delivered ✓✓", .dim)
        case .readBy(let count, let total): paint("✓✓ read by \(count) of \(total)", .dim)
        case .read: paint("read ✓✓", .read)
        case .notDelivered(let reason): paint("not delivered: \(reason)", .error)
        }
    }

    /// Reactions grouped with counts, most popular first (as given), yours marked: "❤️ 2 (you)  👍 1".
    func reactions(_ counts: [ReactionCount]) -> String {
        counts.map { "\($0.reaction.emoji) \($0.count)" + ($0.mine ? " (you)" : "") }.joined(separator: "  ")
    }

    /// The lines of one message: an optional reply quote, the message (time, ref, speaker, text, marks),
    /// indented continuation lines, and the reactions under it.
    func message(_ line: MessageLine) -> [String] {
        let prefix = "\(clock(line.millis)) \(line.ref) "
        let pad = String(repeating: " ", count: prefix.count)
        var out = [String]()
        if let quote = line.replyQuote {
            let quoted = quote.text.map { Safe.preview(String($0.prefix(60))) + ($0.count > 60 ? "…" : "") }
            out.append(pad + paint("┌ \(quote.author): \(quoted ?? "message deleted")", .dim))
        }
        let speaker = line.own ? paint(line.author, .own) : paint(line.author, .bold)
        var body: String
        if line.retracted {
            body = paint("retracted: ", .error) + Safe.text(line.text ?? "", indent: pad.count + 2)
        } else if let file = line.file {
            let details = " (\(Safe.line(file.mediaType)), \(Self.byteCount(file.size)))"
            body = "📎 " + Safe.line(file.name) + paint(details, .dim)
            if let text = line.text, !text.isEmpty { body += " " + Safe.text(text, indent: pad.count + 2) }
        } else if let text = line.text {
            body = Safe.text(text, indent: pad.count + 2)
            if line.edited { body += " " + paint("(edited)", .dim) }
        } else {
            body = paint("message deleted", .dim)
        }
        var main = paint(prefix, .dim) + speaker + ": " + body
        if let status = line.status { main += "  " + self.status(status) }
        out.append(main)
        if !line.reactions.isEmpty { out.append(pad + "  " + reactions(line.reactions)) }
        return out
    }

    /// A size as people read it: "512 B", "3.2 KiB", "16 MiB".
    static func byteCount(_ bytes: UInt64) -> String {
        let units = ["B", "KiB", "MiB", "GiB"]
        var value = Double(bytes)
        var unit = 0
        while value >= 1024 && unit < units.count - 1 {
            value /= 1024
            unit += 1
        }
        if unit == 0 { return "\(bytes) B" }
        let rounded = (value * 10).rounded() / 10
        return rounded == rounded.rounded() ? "\(Int(rounded)) \(units[unit])" : "\(rounded) \(units[unit])"
    }

    /// A system line, set apart from chat lines: "10:32 ─ Alice added Bob".
    func system(_ millis: Int64, _ text: String) -> String {
        paint("\(clock(millis)) ─ \(text)", .system)
    }

    /// "Alice added Bob" and friends (SPEC F3); names are already safe.
    static func describe(_ change: SystemEvent.Change, by who: String, name: (AuthorID) -> String) -> String {
        switch change {
        case .created(let kind, let title, let members):
            if kind == .direct { return "\(who) started the conversation" }
            let titled = title.map { " \"\(Safe.line($0))\"" } ?? ""
            return "\(who) created the group\(titled) with \(members.map(name).joined(separator: ", "))"
        case .added(let members): return "\(who) added \(members.map(name).joined(separator: ", "))"
        case .removed(let members): return "\(who) removed \(members.map(name).joined(separator: ", "))"
        case .left: return "\(who) left"
        case .renamed(let title):
            return title.map { "\(who) renamed the group to \(Safe.line($0))" } ?? "\(who) removed the group's title"
        case .roleChanged(let member, let role):
            return "\(who) made \(name(member)) \(role == .admin ? "an admin" : "a member")"
        case .flagsChanged(let member, let flags):
            let rights = FlagName.names(flags)
            return "\(who) set what \(name(member)) may do: " + (rights.isEmpty ? "nothing extra" : rights)
        case .rekeyed: return "\(who) renewed the group key"
        }
    }

    /// One row of the conversation list (SPEC F5): number, title, unread count in bold, relative time, preview.
    func conversationRow(
        number: Int, title: String, unread: Int, lastActivityMillis: Int64?, preview: String?, isMember: Bool,
        muted: Bool = false, archived: Bool = false
    ) -> String {
        var row = "#\(number) " + paint(Safe.line(title), unread > 0 ? .bold : .own)
        if unread > 0 { row += " " + paint("(\(unread) unread)", .bold) }
        if !isMember { row += " " + paint("(left)", .dim) }
        if muted { row += " " + paint("(muted)", .dim) }
        if archived { row += " " + paint("(archived)", .dim) }
        if let lastActivityMillis, lastActivityMillis > 0 { row += "  " + paint(relative(lastActivityMillis), .dim) }
        row += "  " + (preview.map { Safe.preview($0) } ?? paint("No messages yet — say hello", .dim))
        return row
    }

    /// The typing line (SPEC F12); nil when nobody types.
    static func typing(_ names: [String]) -> String? {
        switch names.count {
        case 0: nil
        case 1: "\(names[0]) is typing…"
        case 2: "\(names[0]) and \(names[1]) are typing…"
        default: "Several people are typing…"
        }
    }

    /// A snippet with its matches marked (SPEC F14): bold and underlined with colours, else between asterisks.
    /// Each piece is made safe on its own, so the markers are the only escape sequences in the line.
    func highlighted(_ snippet: String, _ ranges: [Range<String.Index>]) -> String {
        var out = ""
        var position = snippet.startIndex
        for range in ranges where range.lowerBound >= position {
            out += Safe.preview(String(snippet[position..<range.lowerBound]))
            let word = Safe.preview(String(snippet[range]))
            out += colours ? paint(word, .highlight) : "*\(word)*"
            position = range.upperBound
        }
        return out + Safe.preview(String(snippet[position...]))
    }

    /// One search result: "[Lab] Yesterday 10:31 3f2a Alice: …the scope *probe*…" (the label opens it).
    func searchResult(conversation: String, millis: Int64, ref: String, sender: String, snippet: String) -> String {
        let when = daysAgo(millis) == 0 ? clock(millis) : "\(relative(millis)) \(clock(millis))"
        return paint("[\(Safe.line(conversation))] ", .notice) + paint("\(when) \(ref) ", .dim) + paint(sender, .bold)
            + ": " + snippet
    }

    /// A one-line notice for a conversation you are not viewing (SPEC F15): "[Lab] Alice: hello".
    func notice(conversation: String, text: String) -> String {
        paint("[\(Safe.line(conversation))] ", .notice) + text
    }
}

/// The names of the rights a creator grants (SPEC F2) as the REPL spells them.
enum FlagName {
    static let all: [(String, MemberFlags)] = [("add", .canAdd), ("remove", .canRemove), ("rename", .canRename)]

    static func names(_ flags: MemberFlags) -> String {
        all.filter { flags.contains($0.1) }.map(\.0).joined(separator: ", ")
    }

    static func parse(_ word: String) -> MemberFlags? {
        all.first { $0.0 == word.lowercased() || "can-\($0.0)" == word.lowercased() }?.1
    }
}
