import NatterModel
import NatterNode
import NatterStore

/// Finding what a command names — people, conversations, lines — and showing conversations.
extension ReplSession {
    // MARK: - People

    /// The identity a name stands for: a profile name (exact, then ignoring case) or a fingerprint prefix. An
    /// ambiguous name lists the candidates with fingerprints.
    func resolvePerson(_ query: String, includingMe: Bool = false) throws -> AuthorID {
        let book = names
        let candidates = book.authors.filter { includingMe || $0 != me }
        var matches = candidates.filter { book.raw($0) == query }
        if matches.isEmpty { matches = candidates.filter { book.raw($0)?.lowercased() == query.lowercased() } }
        if matches.isEmpty {
            let digits = query.lowercased().filter { $0 != "-" }
            if digits.count >= 4 {
                matches = candidates.filter { $0.publicKey.fingerprint.filter { $0 != "-" }.hasPrefix(digits) }
            }
        }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty {
            throw ReplError("no one called \(Safe.line(query)) (see /who; names arrive with profiles)")
        }
        throw ReplError(
            "\(Safe.line(query)) is ambiguous: "
                + matches.map { "\(Safe.line(book.raw($0) ?? "?")) \($0.publicKey.fingerprint)" }
                .joined(separator: ", ") + " (use a fingerprint prefix)")
    }

    /// Online (a link now), else last seen: the latest of a link going down, a typing frame, or the newest record
    /// of theirs this node holds.
    func presence(of person: AuthorID) async throws -> String {
        if presence.online.contains(person) { return "online" }
        let now = nowMillis()
        let newest = try await node.read { try $0.newestRecordMillis(of: person, nowMillis: now) }
        if let seen = [presence.lastSeen(person), newest].compactMap({ $0 }).max() {
            return "last seen \(renderer.relative(seen))"
        }
        return "offline"
    }

    // MARK: - Conversations and lines

    enum Target {
        case conversation(ConversationID)
        case person(AuthorID)
        /// A message (a search result's label, or any line's): its conversation, around it.
        case message(ConversationID, RecordID)
    }

    /// A conversation by `#N` (from /list), by title, a message label (a search result's, or any line's), or a
    /// person (their direct chat).
    func resolveTarget(_ query: String) async throws -> Target {
        if query.hasPrefix("#"), let number = Int(query.dropFirst()) {
            guard navigation.listed.indices.contains(number - 1) else {
                throw ReplError("no conversation \(query) (run /list first; it numbers them)")
            }
            return .conversation(navigation.listed[number - 1])
        }
        let wanted = query.lowercased()
        let isLabel = wanted.count >= RefBook.digitsMin && wanted.allSatisfy(\.isHexDigit)
        let results = isLabel ? navigation.searchResults.filter { $0.message.hex.hasPrefix(wanted) } : []
        if results.count > 1 {
            throw ReplError("\(query) starts \(results.count) search results: use more digits")
        }
        if let result = results.first { return .message(result.conversation, result.message) }
        let groups = views.ids.filter { views.details(of: $0)?.kind == .group }
        var matches = groups.filter { views.details(of: $0)?.ownTitle == query }
        if matches.isEmpty { matches = groups.filter { views.details(of: $0)?.ownTitle?.lowercased() == wanted } }
        if matches.count > 1 {
            throw ReplError("\(Safe.line(query)) names \(matches.count) groups: use #N from /list")
        }
        if let match = matches.first { return .conversation(match) }
        do {
            return .person(try resolvePerson(query))
        } catch {
            guard isLabel, let found = try? await resolveRef(query) else { throw error }
            return .message(found.0, found.1)
        }
    }

    func currentConversation() throws -> ConversationID {
        guard let id = navigation.currentConversation else {
            throw ReplError("no conversation open (use /open NAME, or /msg NAME TEXT)")
        }
        return id
    }

    /// The message a REF names: `last` (your last message), else a label or id prefix — in the current
    /// conversation first, then in all.
    func resolveRef(_ ref: String) async throws -> (ConversationID, RecordID) {
        let wanted = ref.lowercased()
        if wanted == "last" {
            guard let last = navigation.lastOwn else { throw ReplError("you have sent no message yet in this session") }
            return last
        }
        guard !wanted.isEmpty, wanted.allSatisfy(\.isHexDigit) else {
            throw ReplError("\(Safe.line(ref)) is not a message label (the 4 or more hex digits beside a line)")
        }
        var scopes = [ConversationID]()
        if let id = navigation.currentConversation { scopes.append(id) }
        scopes += views.ids.filter { !scopes.contains($0) }
        for conversation in scopes {
            try await loadRefs(conversation)
            let found = views.lines(in: conversation, matching: wanted)
            if found.count == 1 { return (conversation, found[0]) }
            if found.count > 1 { throw ReplError("\(ref) matches \(found.count) lines: use more digits") }
        }
        throw ReplError("no line labelled \(ref) (labels are shown beside each line)")
    }

    /// Loads the labels of a conversation's lines the first time they are needed.
    func loadRefs(_ conversation: ConversationID) async throws {
        guard !views.hasRefs(conversation) else { return }
        let ids = try await node.read { try $0.lineIDs(of: conversation) }
        views.loadRefs(conversation, ids: ids)
    }

    /// The message `id` of `conversation` if it is this person's own; otherwise why not.
    func ownMessage(_ id: RecordID, in conversation: ConversationID) async throws -> ConversationLine {
        guard let line = try await node.read({ try $0.line(id, in: conversation) }), case .message(let message) = line.item
        else {
            throw ReplError("that line is not a message (system lines cannot be changed)")
        }
        guard message.author == me else {
            throw ReplError("only the author may do that to a message, and it is not yours")
        }
        return line
    }

    // MARK: - Showing a conversation

    /// Makes `id` current (the node writes its read receipt: node policy) and shows its last page.
    func open(_ id: ConversationID) async throws {
        navigation.current = .conversation(id)
        await node.view(id)
        try await show(id, last: Conversations.pageSize)
    }

    /// Makes `id` current and shows the lines around `message` (a search result).
    func open(_ id: ConversationID, around message: RecordID) async throws {
        let (index, count) = try await node.read { (try $0.index(of: message, in: id), try $0.lineCount(of: id)) }
        guard let index else {
            throw ReplError("that message is no longer shown (deleted or retracted since the search)")
        }
        navigation.current = .conversation(id)
        await node.view(id)
        let half = Conversations.pageSize / 2
        let start = max(0, index - half)
        let end = min(count, index + half + 1)
        navigation.shownFrom[id] = start
        try await loadRefs(id)
        var lines = ["── \(title(of: id)) ── around \(views.label(of: message, in: id))"]
        lines += try await render(id, lines: start..<end, total: count).lines
        if end < count {
            lines.append(renderer.paint("── \(count - end) newer lines (/history shows the latest) ──", .dim))
        }
        say(lines)
    }

    /// Shows the last `count` lines of `id`.
    func show(_ id: ConversationID, last count: Int) async throws {
        let total = try await node.read { try $0.lineCount(of: id) }
        let start = max(0, total - count)
        navigation.shownFrom[id] = start
        try await loadRefs(id)
        var lines = ["── \(title(of: id)) ──"]
        let page = try await render(id, lines: start..<total, total: total)
        if page.messages == 0 { lines.append("No messages yet — say hello") }
        say(lines + page.lines)
    }

    /// The lines `range` of the timeline, with date headers (retracted lines after the newest), and how many of them
    /// are messages.
    func render(_ id: ConversationID, lines range: Range<Int>, total: Int) async throws -> (
        lines: [String], messages: Int
    ) {
        let (page, retracted) = try await node.read {
            (try $0.lines(of: id, range), range.upperBound == total ? try $0.retractedLines(of: id) : [])
        }
        let render = renderer
        var out = [String]()
        var lastMillis: Int64?
        var messages = 0
        for line in page + retracted {
            let millis: Int64
            switch line.item {
            case .message(let message):
                messages += 1
                if people.isHidden(message.author) { continue }
                millis = message.displayedAtMillis
            case .system(let event):
                millis = event.displayedAtMillis
            }
            if !line.retracted, lastMillis.map({ !render.sameDay($0, millis) }) ?? true {
                out.append(render.header(millis))
            }
            if !line.retracted { lastMillis = millis }
            switch line.item {
            case .message: out += render.message(messageLine(line, in: id))
            case .system(let event):
                out.append(
                    render.system(
                        event.displayedAtMillis,
                        Renderer.describe(event.change, by: names.speaker(event.author), name: names.speaker)))
            }
        }
        if let lastMillis { views.shown(lastMillis, in: id) }
        return (out, messages)
    }
}
