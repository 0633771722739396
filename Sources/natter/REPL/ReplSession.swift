import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore
import NatterSync
import Synchronization

/// A command failed: one line a person can act on. The node keeps running.
struct ReplError: Error, Equatable, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The REPL: reads command lines from a `Console`, carries them out on the node, and turns what the node reports
/// into lines for a person or JSON events for a script (SPEC "REPL", F22; docs/cli.md).
///
/// Events for statuses, reactions, edits and membership are derived here by comparing each conversation's state
/// with what was last reported (`ConversationView`), so nothing is reported twice and nothing is missed whatever
/// the node's events batch together.
actor ReplSession {
    struct Options: Sendable {
        var json = false
        var interactive = false
        var colours = false
        /// Ring the terminal bell with notices from other conversations.
        var bell = true
        var timeZone = TimeZone.current
        /// Delay before delivered/read receipts are written, so one receipt covers a burst of messages.
        var receiptDelay: Duration = .milliseconds(150)
        /// Desktop notifications through `notify-send` when it is on the PATH (`--notify`).
        var desktopNotifications = false
        /// The PATH searched for `notify-send` (tests point it at a fake one).
        var notifyPath = ProcessInfo.processInfo.environment["PATH"]
        /// Record-writing commands allowed per second, with a burst (SPEC F16); nil: no limit (`--send-rate 0`).
        var sendRate: SendRate? = .interactiveDefault
    }

    /// What was last reported about one conversation.
    struct ConversationView {
        var items: Set<RecordID> = []
        var retracted: Set<RecordID> = []
        var marks: [RecordID: MessageMark] = [:]
        var statuses: [RecordID: StatusMark] = [:]
        var reactions: [RecordID: [AuthorID: Reaction]] = [:]
        var refs: [RecordID: String] = [:]
        var title = ""
        var lastShownMillis: Int64?
    }

    struct MessageMark: Equatable {
        var editCount: Int
        var deleted: Bool
    }

    enum Current: Equatable {
        case none
        case conversation(ConversationID)
        /// A direct chat with no messages yet: the first line founds it.
        case direct(AuthorID)
    }

    let node: Node
    let service: Conversations
    let me: AuthorID
    let console: any Console
    let options: Options
    /// Where `/ignore` and `/block` are remembered (nil: this run only).
    let ignoreFile: String?

    private var current = Current.none
    private var listed: [ConversationID] = []
    /// Index into the timeline of the oldest line shown, per conversation (for /more).
    private var shownFrom: [ConversationID: Int] = [:]
    private var views: [ConversationID: ConversationView] = [:]
    private var cachedNames: NameBook?
    private var caughtUp = Set<AuthorID>()
    private var progress: [AuthorID: (received: Int, expected: Int)] = [:]
    /// Files asked for with `/save` that are still being fetched: where each goes once complete.
    private var pendingSaves: [RecordID: PendingSave] = [:]
    /// Files saved by `/save` (for `/wait saved REF`).
    private var savedFiles = Set<RecordID>()

    private struct PendingSave {
        let conversation: ConversationID
        let path: String
        let overwrite: Bool
        let ref: String
    }
    private var lastSeen: [AuthorID: Int64] = [:]
    /// When someone was last seen typing (presence beyond direct links).
    private var lastActive: [AuthorID: Int64] = [:]
    private var lastOwn: (conversation: ConversationID, id: RecordID)?
    private var ignored = Set<AuthorID>()
    private var blocked = Set<AuthorID>()
    private var pendingRead = Set<ConversationID>()
    private var pendingDelivered = Set<ConversationID>()
    /// Groups this node must re-key (after a leave, or concurrent commits: the rules name who).
    private var pendingRekey = Set<ConversationID>()
    private var acksScheduled = false
    /// People typing per conversation, as the node last reported (SPEC F12).
    private var typingNow: [ConversationID: [AuthorID]] = [:]
    /// The conversation this person is typing in, as last told to the node.
    private var typingIn: ConversationID?
    /// The send rate's tokens (nil: no limit).
    private var sendBucket: TokenBucket?
    /// The labels of the last search's results, so `/open REF` jumps to one.
    private var searchResults: [(conversation: ConversationID, message: RecordID)] = []
    private let desktop: DesktopNotifier?
    private let clock = ContinuousClock()
    private let startedAt: ContinuousClock.Instant
    /// Whether any command failed (the exit status of a script).
    private(set) var failed = false

    init(node: Node, console: any Console, options: Options, ignoreFile: String?) async {
        self.node = node
        service = await node.conversations
        me = await node.identity.author
        self.console = console
        self.options = options
        self.ignoreFile = ignoreFile
        desktop = options.desktopNotifications ? DesktopNotifier(path: options.notifyPath) : nil
        sendBucket = options.sendRate.map { TokenBucket(capacity: $0.burst, refillPerSecond: $0.perSecond) }
        startedAt = clock.now
        loadIgnored()
    }

    /// Names and titles for tab completion, kept current as profiles and conversations change; read from the
    /// line editor's thread through `complete(line:word:)`.
    private nonisolated let completionWords = Mutex<(names: [String], titles: [String])>(([], []))

    /// Tab completion (the line editor's `completer`): commands, then names and titles.
    nonisolated func complete(line: String, word: String) -> [String] {
        let (names, titles) = completionWords.withLock { $0 }
        return ReplCompletion.candidates(line: line, word: word, names: names, titles: titles)
    }

    // MARK: - Running

    /// Takes in the state as it is (nothing of it is announced), then reports what changes from here on.
    func start() async {
        await node.setBlocked(blocked)  // blocked people's links are refused from the start
        for conversation in (try? service.store.conversationIDs()) ?? [] {
            try? diff(conversation, announce: false)
        }
        queueAcksForAll()
        updatePrompt()
    }

    /// Turns node events into lines or JSON events until the node stops.
    func watch() async {
        for await event in node.events { await handle(event) }
    }

    /// Reads commands until end of input or `/quit`; then writes pending receipts. Returns whether any failed.
    func readCommands() async -> Bool {
        for await line in console.lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            if !(await execute(trimmed)) { break }
            updatePrompt()
        }
        await flushAcks()
        return failed
    }

    /// Carries out one line; returns false for `/quit`.
    @discardableResult
    func execute(_ line: String) async -> Bool {
        if line.hasPrefix("/") { console.addHistory(line) }
        switch ReplParser.parse(line) {
        case .failure(let failure):
            report(failure.description)
        case .success(.quit):
            return false
        case .success(let action):
            // Commands read the conversation tables, whose refresh after a bulk turn may wait for
            // `Node.bulkRefreshInterval`: bring them up to date first (nothing to do when no refresh is pending).
            await node.refreshConversationTables()
            do {
                try await perform(action)
            } catch {
                report(String(describing: error))
            }
        }
        return true
    }

    // MARK: - Output

    private var renderer: Renderer {
        Renderer(timeZone: options.timeZone, nowMillis: nowMillis(), colours: options.colours)
    }

    /// Command output: lines for a person, `output` events for a script.
    private func say(_ lines: [String]) {
        for line in lines {
            if options.json {
                console.show(JSON.object([("type", "output"), ("text", .string(line))]).encoded)
            } else {
                console.show(line)
            }
        }
    }

    private func say(_ line: String) { say([line]) }

    private func emit(_ event: JSON) {
        if options.json { console.show(names.flagged(event).encoded) }
    }

    /// One error line (standard error when scripted; an `error` event too with `--json`).
    private func report(_ message: String) {
        failed = true
        console.showError(options.colours ? renderer.paint("error: \(message)", .error) : "error: \(message)")
        emit(.object([("type", "error"), ("message", .string(message))]))
    }

    private func notice(_ message: String) {
        console.showError("notice: \(message)")
        emit(.object([("type", "notice"), ("message", .string(message))]))
    }

    private func updatePrompt() {
        guard options.interactive else { return }
        var parts = [String]()
        if case .conversation(let id) = current { parts.append(views[id]?.title ?? "?") }
        if case .direct(let peer) = current { parts.append(names.display(peer)) }
        let unread = (try? service.totalUnread()) ?? 0
        if unread > 0 { parts.append("\(unread) unread") }
        let syncing = progress.filter { !caughtUp.contains($0.key) }.values
        if !syncing.isEmpty {
            let received = syncing.map(\.received).reduce(0, +)
            let expected = syncing.map(\.expected).reduce(0, +)
            parts.append("syncing \(received.formatted()) / \(expected.formatted())")
        }
        parts.append(connectedNow.count == 1 ? "1 peer" : "\(connectedNow.count) peers")
        if let typing = typingLine() { parts.append(typing) }
        console.setPrompt("[" + parts.joined(separator: " · ") + "] > ")
    }

    // MARK: - Node events

    private func handle(_ event: NodeEvent) async {
        switch event {
        case .peerUp(let peer, _):
            connectedNow.insert(peer)
            lastSeen[peer] = nil
            emit(person("peer", peer, [("state", "up")]))
            if !options.json { say(renderer.paint("\(names.display(peer)) is online", .dim)) }
        case .peerDown(let peer, _):
            connectedNow.remove(peer)
            caughtUp.remove(peer)
            progress[peer] = nil
            lastSeen[peer] = nowMillis()
            emit(person("peer", peer, [("state", "down")]))
            if !options.json { say(renderer.paint("\(names.display(peer)) went offline", .dim)) }
        case .caughtUp(let peer):
            caughtUp.insert(peer)
            emit(person("sync", peer, [("caught_up", true)]))
        case .syncProgress(let peer, let received, let expected):
            progress[peer] = (received, expected)
            emit(
                person(
                    "sync", peer,
                    [("caught_up", false), ("received", .int(Int64(received))), ("expected", .int(Int64(expected)))]))
        case .applied(let refs):
            cachedNames = nil
            for conversation in conversations(of: refs) { try? diff(conversation, announce: true) }
        case .conversationChanged(let conversation, _):
            try? diff(conversation, announce: true)
        case .file(let event):
            fileEvent(event)
        case .linkFailed(_, let reason):
            notice("link failed: \(reason)")
        case .notice(let line):
            notice(line)
        case .misbehaved:
            break  // its linkFailed was shown; a ban that follows arrives as a notice
        case .typing(let conversation, let people):
            typingChanged(conversation, people)
        }
        updatePrompt()
    }

    /// The conversations the applied records belong to.
    private func conversations(of refs: [RecordRef]) -> [ConversationID] {
        Set(refs.map(\.position.conversation)).filter { views[$0] != nil || !isProfileFeed($0) }.sorted()
    }

    private func isProfileFeed(_ conversation: ConversationID) -> Bool {
        names.authors.contains { ConversationID.profileFeed(of: $0) == conversation }
    }

    private func person(_ type: String, _ author: AuthorID, _ fields: [(String, JSON)]) -> JSON {
        .object(
            [("type", .string(type)), ("name", .text(names.raw(author))), ("fingerprint", fingerprint(author))]
                + fields)
    }

    private func fingerprint(_ author: AuthorID) -> JSON { .string(author.publicKey.fingerprint) }

    // MARK: - Diffing conversation state into events

    /// Compares the conversation's state with what was last reported and reports the difference: new lines,
    /// retractions, edits and deletes, status changes of your messages, reactions, membership and titles.
    private func diff(_ conversation: ConversationID, announce: Bool) throws {
        let state = try service.snapshot(of: conversation).state
        guard state.exists else { return }
        let old = views[conversation] ?? ConversationView()
        var view = old
        view.title = title(state)
        view.refs = Refs.labels(state.timeline.map(\.id) + state.retracted.keys.sorted())
        view.items = Set(state.timeline.map(\.id))
        view.retracted = Set(state.retracted.keys)
        view.reactions = state.reactions
        view.marks = [:]
        view.statuses = [:]
        for case .message(let message) in state.timeline {
            view.marks[message.id] = MessageMark(editCount: message.editCount, deleted: message.deleted)
            if message.author == me {
                view.statuses[message.id] = StatusMark(state.status(of: message.id), peersConnected: true)
            }
        }
        views[conversation] = view
        let titles = views.values.map(\.title)
        completionWords.withLock { $0.titles = titles }
        if current == .direct(state.members.keys.first { $0 != me } ?? me), state.isDirect {
            current = .conversation(conversation)
        }
        guard announce else { return }
        let viewing = current == .conversation(conversation)
        for item in state.timeline where !old.items.contains(item.id) {
            announceNew(item, in: conversation, state: state, viewing: viewing)
        }
        for (id, message) in state.retracted where !old.retracted.contains(id) {
            emit(messageEvent(message, conversation, state, change: "retracted"))
            if viewing && !options.json {
                var line = messageLine(message, conversation, state)
                line.retracted = true
                say(renderer.message(line))
            }
        }
        for case .message(let message) in state.timeline where old.items.contains(message.id) {
            let mark = view.marks[message.id]
            guard let before = old.marks[message.id], before != mark else { continue }
            let change = mark?.deleted == true ? "delete" : "edit"
            emit(messageEvent(message, conversation, state, change: change))
            if viewing && !options.json && !isHidden(message.author) {
                say(renderer.message(messageLine(message, conversation, state)))
            }
        }
        for (id, status) in view.statuses.sorted(by: { $0.key < $1.key }) where old.statuses[id] != status {
            guard old.items.contains(id) || old.statuses[id] != nil || status != .sent(queued: false) else { continue }
            emit(statusEvent(id, conversation, state))
            if viewing && !options.json {
                let mark = StatusMark(state.status(of: id), peersConnected: true)
                say(renderer.paint("      \(view.refs[id] ?? id.shortHex) ", .dim) + renderer.status(mark))
            }
        }
        announceReactions(old.reactions, state, conversation, viewing: viewing)
        if state.members[me] != nil && state.currentEpoch == nil && state.rekeyDuty == me {
            pendingRekey.insert(conversation)
        }
        if viewing {
            if needsReceipt(\.read, state) { pendingRead.insert(conversation) }
        } else if needsReceipt(\.delivered, state) {
            pendingDelivered.insert(conversation)
        }
        scheduleAcks()
    }

    private func announceNew(
        _ item: TimelineItem, in conversation: ConversationID, state: ConversationState, viewing: Bool
    ) {
        let render = renderer
        switch item {
        case .message(let message):
            if message.author == me { lastOwn = (conversation, message.id) }
            if isHidden(message.author) { return }
            typingNow[conversation]?.removeAll { $0 == message.author }  // their line arrived
            emit(messageEvent(message, conversation, state, change: "new"))
            if viewing {
                guard !options.json else { return }
                showHeaderIfNewDay(message.displayedAtMillis, conversation)
                say(render.message(messageLine(message, conversation, state)))
            } else {
                let ref = views[conversation]?.refs[message.id] ?? ""
                let text = message.deleted ? "message deleted" : Safe.preview(String(message.text.prefix(200)))
                let line = "\(ref) \(names.speaker(message.author)): \(text)"
                if message.author != me {
                    notify(conversation, state, from: message.author, kind: "message", ref: ref, text: line)
                } else if !options.json {
                    say(render.notice(conversation: title(state), text: line))  // the echo of your own /msg
                }
            }
        case .system(let event):
            emit(systemEvent(event, conversation))
            guard !options.json else { return }
            let text = Renderer.describe(event.change, by: names.speaker(event.author), name: names.speaker)
            if viewing {
                showHeaderIfNewDay(event.displayedAtMillis, conversation)
                say(render.system(event.displayedAtMillis, text))
            } else {
                say(render.notice(conversation: title(state), text: render.paint(text, .system)))
            }
        }
    }

    /// A notice for a conversation the person is not viewing (SPEC F15): one line (with the bell in a terminal
    /// unless `--no-bell`), a `notice` event for scripts, and a desktop notification when asked for (`--notify`);
    /// nothing at all while the conversation is muted, or for your own lines and hidden people.
    private func notify(
        _ conversation: ConversationID, _ state: ConversationState, from author: AuthorID, kind: String, ref: String,
        text: String
    ) {
        let muted = (try? service.isMuted(conversation, at: nowMillis())) ?? false
        guard
            let policy = NoticePolicy.decide(
                viewing: current == .conversation(conversation), fromMe: author == me, hidden: isHidden(author),
                muted: muted, interactive: options.interactive, bellAllowed: options.bell,
                desktopAllowed: desktop?.executable != nil)
        else { return }
        let conversationTitle = title(state)
        if options.json {
            emit(
                .object([
                    ("type", "notice"), ("message", .string("[\(conversationTitle)] \(text)")), ("kind", .string(kind)),
                    ("conversation", .string(conversation.hex)), ("ref", .string(ref)),
                ]))
        } else {
            say(renderer.notice(conversation: conversationTitle, text: text) + (policy.bell ? "\u{7}" : ""))
        }
        if policy.desktop { desktop?.notify(title: "natter · \(conversationTitle)", body: text) }
    }

    // MARK: - Typing (SPEC F12)

    /// The line editor's draft changed (the terminal layer calls this on every edit): typing starts while a
    /// non-command line is edited in an open conversation; it ends when the line is cleared or becomes a command,
    /// when it is sent, or 3 s after the last keystroke (the node decides the timing).
    func userIsTyping(draft: String) async {
        let typing = !draft.trimmingCharacters(in: .whitespaces).isEmpty && !draft.hasPrefix("/")
        guard typing, case .conversation(let id) = current else {
            await stopTyping()
            return
        }
        if typingIn != id { await stopTyping() }
        typingIn = id
        await node.userTyping(in: id)
    }

    private func stopTyping() async {
        guard let id = typingIn else { return }
        typingIn = nil
        await node.userStoppedTyping(in: id)
    }

    /// The node reported who is typing in a conversation: a `typing` event (for scripts), and the prompt.
    private func typingChanged(_ conversation: ConversationID, _ people: [AuthorID]) {
        let shown = people.filter { $0 != me && !isHidden($0) }
        let now = nowMillis()
        for person in shown { lastActive[person] = now }
        guard (typingNow[conversation] ?? []) != shown else { return }
        typingNow[conversation] = shown.isEmpty ? nil : shown
        emit(
            .object([
                ("type", "typing"), ("conversation", .string(conversation.hex)),
                ("title", .string(views[conversation]?.title ?? "")),
                (
                    "people",
                    .array(shown.map { .object([("name", .text(names.raw($0))), ("fingerprint", fingerprint($0))]) })
                ),
            ]))
    }

    /// "Alice is typing…" for the conversation being viewed, or nil.
    func typingLine() -> String? {
        guard case .conversation(let id) = current else { return nil }
        return Renderer.typing((typingNow[id] ?? []).map(names.display))
    }

    private func showHeaderIfNewDay(_ millis: Int64, _ conversation: ConversationID) {
        defer { views[conversation]?.lastShownMillis = millis }
        if let last = views[conversation]?.lastShownMillis, renderer.sameDay(last, millis) { return }
        say(renderer.header(millis))
    }

    private func announceReactions(
        _ old: [RecordID: [AuthorID: Reaction]], _ state: ConversationState, _ conversation: ConversationID,
        viewing: Bool
    ) {
        for id in Set(old.keys).union(state.reactions.keys).sorted() {
            let before = old[id] ?? [:]
            let after = state.reactions[id] ?? [:]
            for person in Set(before.keys).union(after.keys).sorted() where before[person] != after[person] {
                if isHidden(person) { continue }
                let reaction = after[person]
                let ref = views[conversation]?.refs[id] ?? id.shortHex
                let counts = state.reactionSummary(of: id, viewer: me).map { count -> JSON in
                    .object([
                        ("reaction", .string(count.reaction.name)), ("emoji", .string(count.reaction.emoji)),
                        ("count", .int(Int64(count.count))), ("mine", .bool(count.mine)),
                    ])
                }
                emit(
                    .object([
                        ("type", "reaction"), ("conversation", .string(conversation.hex)), ("id", .string(id.hex)),
                        ("ref", .string(ref)), ("name", .text(names.raw(person))), ("fingerprint", fingerprint(person)),
                        ("reaction", .text(reaction?.name)), ("emoji", .text(reaction?.emoji)),
                        ("counts", .array(counts)),
                    ]))
                let what = reaction.map { "reacted \($0.emoji) to \(ref)" } ?? "removed their reaction from \(ref)"
                let line = "\(names.speaker(person)) \(what)"
                if !viewing && reaction != nil && state.message(id)?.author == me {
                    notify(conversation, state, from: person, kind: "reaction", ref: ref, text: line)
                }
                if viewing && !options.json { say(renderer.system(nowMillis(), line)) }
            }
        }
    }

    // MARK: - Event shapes

    private func messageEvent(
        _ message: TimelineMessage, _ conversation: ConversationID, _ state: ConversationState, change: String
    ) -> JSON {
        let refs = views[conversation]?.refs ?? [:]
        return .object([
            ("type", "message"), ("change", .string(change)), ("conversation", .string(conversation.hex)),
            ("title", .string(title(state))), ("id", .string(message.id.hex)),
            ("ref", .string(refs[message.id] ?? message.id.shortHex)), ("author", .text(names.raw(message.author))),
            ("fingerprint", fingerprint(message.author)), ("own", .bool(message.author == me)),
            ("text", message.deleted ? .null : .string(message.text)), ("time_ms", .int(message.displayedAtMillis)),
            ("reply_to", .text(message.replyTo.map { refs[$0] ?? $0.shortHex })),
            ("edited", .bool(message.edited)), ("deleted", .bool(message.deleted)),
            ("retracted", .bool(change == "retracted")),
            (
                "file",
                message.file.map { file in
                    .object([
                        ("name", .string(file.name)), ("media_type", .string(file.mediaType)),
                        ("size", .int(Int64(file.size))),
                    ])
                } ?? .null
            ),
            (
                "status",
                message.author == me
                    ? .string(StatusMark(state.status(of: message.id), peersConnected: true).name) : .null
            ),
        ])
    }

    private func statusEvent(_ id: RecordID, _ conversation: ConversationID, _ state: ConversationState) -> JSON {
        let status = state.status(of: id)
        let mark = StatusMark(status, peersConnected: true)
        return .object([
            ("type", "status"), ("conversation", .string(conversation.hex)), ("id", .string(id.hex)),
            ("ref", .string(views[conversation]?.refs[id] ?? id.shortHex)), ("status", .string(mark.name)),
            ("recipients", .int(Int64(status?.recipients.count ?? 0))),
            ("delivered_to", .int(Int64(status?.deliveredTo.count ?? 0))),
            ("read_by", .int(Int64(status?.readBy.count ?? 0))),
        ])
    }

    private func systemEvent(_ event: SystemEvent, _ conversation: ConversationID) -> JSON {
        func people(_ members: [AuthorID]) -> JSON {
            .array(members.map { .object([("name", .text(names.raw($0))), ("fingerprint", fingerprint($0))]) })
        }
        var fields: [(String, JSON)] = [("conversation", .string(conversation.hex))]
        switch event.change {
        case .created(let kind, let title, let members):
            fields =
                [("type", "member"), ("change", "created"), ("kind", kind == .direct ? "direct" : "group")]
                + fields + [("title", .text(title)), ("members", people(members))]
        case .added(let members):
            fields = [("type", "member"), ("change", "added")] + fields + [("members", people(members))]
        case .removed(let members):
            fields = [("type", "member"), ("change", "removed")] + fields + [("members", people(members))]
        case .left: fields = [("type", "member"), ("change", "left")] + fields + [("members", people([event.author]))]
        case .roleChanged(let member, let role):
            fields =
                [("type", "member"), ("change", "role")] + fields
                + [("members", people([member])), ("role", role == .admin ? "admin" : "member")]
        case .flagsChanged(let member, let flags):
            let rights = JSON.array(FlagName.all.filter { flags.contains($0.1) }.map { .string($0.0) })
            fields =
                [("type", "member"), ("change", "rights")] + fields + [
                    ("members", people([member])), ("rights", rights),
                ]
        case .renamed(let title): fields = [("type", "rename")] + fields + [("title", .text(title))]
        case .rekeyed: fields = [("type", "member"), ("change", "rekeyed")] + fields
        }
        return .object(
            fields + [
                ("id", .string(event.id.hex)), ("by", .text(names.raw(event.author))),
                ("by_fingerprint", fingerprint(event.author)), ("time_ms", .int(event.displayedAtMillis)),
            ])
    }

    // MARK: - Lines

    private func messageLine(_ message: TimelineMessage, _ conversation: ConversationID, _ state: ConversationState)
        -> MessageLine
    {
        var line = MessageLine(
            ref: views[conversation]?.refs[message.id] ?? message.id.shortHex, millis: message.displayedAtMillis,
            author: names.speaker(message.author), own: message.author == me,
            text: message.deleted ? nil : message.text, edited: message.edited)
        if let file = message.file, !message.deleted {
            line.file = (file.name, file.mediaType, file.size)
        }
        if let replyTo = message.replyTo, let quoted = state.message(replyTo) {
            line.replyQuote = (names.speaker(quoted.author), quoted.deleted ? nil : quoted.text)
        }
        if message.author == me {
            line.status = StatusMark(state.status(of: message.id), peersConnected: !connectedNow.isEmpty)
        }
        line.reactions = state.reactionSummary(of: message.id, viewer: me)
        return line
    }

    /// Peers connected now, kept current by peer events.
    private var connectedNow = Set<AuthorID>()

    /// The lines `range` of the conversation's timeline, with date headers (retracted lines after the newest).
    private func render(_ conversation: ConversationID, _ state: ConversationState, lines range: Range<Int>) -> [String]
    {
        let render = renderer
        var out = [String]()
        var lastMillis: Int64?
        for item in state.timeline[range] {
            switch item {
            case .message(let message):
                if isHidden(message.author) { continue }
                if lastMillis.map({ !render.sameDay($0, message.displayedAtMillis) }) ?? true {
                    out.append(render.header(message.displayedAtMillis))
                }
                lastMillis = message.displayedAtMillis
                out += render.message(messageLine(message, conversation, state))
            case .system(let event):
                if lastMillis.map({ !render.sameDay($0, event.displayedAtMillis) }) ?? true {
                    out.append(render.header(event.displayedAtMillis))
                }
                lastMillis = event.displayedAtMillis
                out.append(
                    render.system(
                        event.displayedAtMillis,
                        Renderer.describe(event.change, by: names.speaker(event.author), name: names.speaker)))
            }
        }
        for message in state.retracted.values.sorted(by: { $0.position < $1.position })
        where range.upperBound == state.timeline.count {
            var line = messageLine(message, conversation, state)
            line.retracted = true
            out += render.message(line)
        }
        if let lastMillis { views[conversation]?.lastShownMillis = lastMillis }
        return out
    }

    /// The conversation's title: its own, the other person's name, or the members' names.
    private func title(_ state: ConversationState) -> String {
        if let title = state.title { return Safe.line(title) }
        let others = state.sortedMembers.filter { $0 != me }
        return others.isEmpty ? "(just you)" : others.map(names.display).joined(separator: ", ")
    }

    // MARK: - Receipts

    /// Whether this member has a message from someone else past its own `receipt` clock (read or delivered).
    private func needsReceipt(_ receipt: KeyPath<ReaderMarks, VectorClock>, _ state: ConversationState) -> Bool {
        guard state.members[me] != nil else { return false }
        let marked = state.receipts[me]?[keyPath: receipt] ?? VectorClock()
        return state.timeline.contains {
            if case .message(let message) = $0 {
                return message.author != me && marked[message.author] < message.sequence
            }
            return false
        }
    }

    private func queueAcksForAll() {
        for conversation in views.keys {
            guard let state = try? service.snapshot(of: conversation).state else { continue }
            if needsReceipt(\.delivered, state) { pendingDelivered.insert(conversation) }
        }
        scheduleAcks()
    }

    /// Receipts go out shortly after messages arrive, one record per conversation for a burst (SPEC F8).
    private func scheduleAcks() {
        guard !acksScheduled, !pendingRead.isEmpty || !pendingDelivered.isEmpty || !pendingRekey.isEmpty else { return }
        acksScheduled = true
        let delay = options.receiptDelay
        Task {
            try? await Task.sleep(for: delay)
            await self.flushAcks()
        }
    }

    /// Writes what is pending now: re-keys this node is due to make, then receipts — "read up to here" for the
    /// conversation being viewed, "delivered" for the others.
    func flushAcks() async {
        acksScheduled = false
        let read = pendingRead
        let delivered = pendingDelivered.subtracting(read)
        let rekey = pendingRekey
        pendingRead = []
        pendingDelivered = []
        pendingRekey = []
        for conversation in rekey.sorted() {
            try? await authoring(conversation) { try service.rekey(conversation, now: nowMillis()) }
        }
        for conversation in read.sorted() {
            try? await authoring(conversation) { try service.markRead(conversation, now: nowMillis()) }
        }
        for conversation in delivered.sorted() {
            try? await authoring(conversation) { try service.markDelivered(conversation, now: nowMillis()) }
        }
    }

    // MARK: - Authoring

    /// Runs an authoring call, hands what it wrote to the node, and reports the change.
    private func authoring(_ conversation: ConversationID, _ body: () throws -> Void) async throws {
        let before = try ownLength(conversation)
        try body()
        let after = try ownLength(conversation)
        if after > before {
            let records = try service.store.records(
                conversation: conversation, author: me, from: before + 1, limit: Int(after - before))
            await node.publish(records)
        }
        try diff(conversation, announce: true)
    }

    private func ownLength(_ conversation: ConversationID) throws -> UInt64 {
        try service.store.feeds(of: conversation).first { $0.author == me }?.stored ?? 0
    }

    // MARK: - Names

    private var names: NameBook {
        if let cachedNames { return cachedNames }
        var found = [AuthorID: String]()
        let authors = (try? service.store.profileAuthors()) ?? []
        for author in authors {
            if let name = (try? service.profile(of: author))??.name { found[author] = name }
        }
        let book = NameBook(names: found, me: me)
        cachedNames = book
        let people = book.authors.filter { $0 != me }.compactMap { book.raw($0) }
        let titles = views.values.map(\.title)
        completionWords.withLock { $0 = (people, titles) }
        return book
    }

    private func isHidden(_ author: AuthorID) -> Bool { ignored.contains(author) || blocked.contains(author) }

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

    private enum Target {
        case conversation(ConversationID)
        case person(AuthorID)
        /// A message (a search result's label, or any line's): its conversation, around it.
        case message(ConversationID, RecordID)
    }

    /// A conversation by `#N` (from /list), by title, or a person (their direct chat).
    private func resolveTarget(_ query: String) throws -> Target {
        if query.hasPrefix("#"), let number = Int(query.dropFirst()) {
            guard listed.indices.contains(number - 1) else {
                throw ReplError("no conversation \(query) (run /list first; it numbers them)")
            }
            return .conversation(listed[number - 1])
        }
        let wanted = query.lowercased()
        let isLabel = wanted.count >= Refs.digitsMin && wanted.allSatisfy(\.isHexDigit)
        let results = isLabel ? searchResults.filter { $0.message.hex.hasPrefix(wanted) } : []
        if results.count > 1 {
            throw ReplError("\(query) starts \(results.count) search results: use more digits")
        }
        if let result = results.first { return .message(result.conversation, result.message) }
        let rows = try service.conversationList(includeArchived: true).filter { $0.kind == .group }
        var matches = rows.filter { $0.title == query }
        if matches.isEmpty { matches = rows.filter { $0.title.lowercased() == query.lowercased() } }
        if matches.count > 1 {
            throw ReplError("\(Safe.line(query)) names \(matches.count) groups: use #N from /list")
        }
        if let match = matches.first { return .conversation(match.id) }
        do {
            return .person(try resolvePerson(query))
        } catch {
            guard isLabel, let found = try? resolveRef(query) else { throw error }
            return .message(found.0, found.1)
        }
    }

    private func currentConversation() throws -> ConversationID {
        guard case .conversation(let id) = current else {
            throw ReplError("no conversation open (use /open NAME, or /msg NAME TEXT)")
        }
        return id
    }

    /// The message a REF names: `last` (your last message), else a label or id prefix — in the current
    /// conversation first, then in all.
    private func resolveRef(_ ref: String) throws -> (ConversationID, RecordID) {
        let wanted = ref.lowercased()
        if wanted == "last" {
            guard let lastOwn else { throw ReplError("you have sent no message yet in this session") }
            return lastOwn
        }
        guard !wanted.isEmpty, wanted.allSatisfy(\.isHexDigit) else {
            throw ReplError("\(Safe.line(ref)) is not a message label (the 4 or more hex digits beside a line)")
        }
        var scopes = [ConversationID]()
        if case .conversation(let id) = current { scopes.append(id) }
        scopes.append(contentsOf: views.keys.sorted().filter { !scopes.contains($0) })
        for (index, conversation) in scopes.enumerated() {
            let ids = (views[conversation]?.refs.keys).map(Array.init) ?? []
            let found = ids.filter { $0.hex.hasPrefix(wanted) }
            if found.count == 1 { return (conversation, found[0]) }
            if found.count > 1 {
                throw ReplError("\(ref) matches \(found.count) lines: use more digits")
            }
            if index == 0 && scopes.count > 1 { continue }
        }
        throw ReplError("no line labelled \(ref) (labels are shown beside each line)")
    }

    // MARK: - Commands

    private func perform(_ action: ReplAction) async throws {
        if action.writesRecords, var bucket = sendBucket {
            let allowed = bucket.takeIfAvailable(now: clock.now - startedAt)
            sendBucket = bucket
            guard allowed else {
                throw ReplError(
                    "Please slow down: at most \(Int(bucket.capacity)) at once, then \(bucket.refillPerSecond.formatted()) a second (natter run --send-rate N raises it)"
                )
            }
        }
        switch action {
        case .help(let command):
            switch ReplParser.help(command) {
            case .success(let lines): say(lines)
            case .failure(let failure): throw ReplError(failure.description)
            }
        case .nick(let name):
            let record = try service.publishProfile(name: name, now: nowMillis())
            await node.publish([record])
            cachedNames = nil
            say("you are now \(Safe.line(name))")
        case .whoami:
            say("\(names.display(me)) \(me.publicKey.fingerprint)")
        case .peers:
            let peers = await node.connectedPeers
            if peers.isEmpty {
                say("no peers connected (on a LAN they appear within seconds; /connect HOST:PORT for others)")
            }
            for peer in peers {
                let sync =
                    caughtUp.contains(peer)
                    ? "caught up" : progress[peer].map { "syncing \($0.received) / \($0.expected)" } ?? "syncing"
                say("peer \(names.display(peer)) \(peer.publicKey.fingerprint) \(sync)")
            }
            for (peer, seen) in lastSeen.sorted(by: { $0.value > $1.value }) where !peers.contains(peer) {
                say("peer \(names.display(peer)) \(peer.publicKey.fingerprint) offline, last seen \(renderer.relative(seen))")
            }
        case .who:
            let peers = Set(await node.connectedPeers)
            let others = names.authors.filter { $0 != me }
            if others.isEmpty { say("nobody known yet (people appear when their profile arrives)") }
            for person in others {
                say("\(names.display(person)) \(person.publicKey.fingerprint) \(presence(person, peers))")
            }
        case .whois(let name):
            let person = try resolvePerson(name, includingMe: true)
            let peers = Set(await node.connectedPeers)
            var lines = ["\(names.display(person)) \(person.publicKey.fingerprint)"]
            lines.append(person == me ? "this is you" : presence(person, peers))
            let shared = views.compactMap { id, view -> String? in
                guard let state = try? service.snapshot(of: id).state, state.members[person] != nil,
                    state.members[me] != nil, person != me
                else { return nil }
                return view.title
            }.sorted()
            if !shared.isEmpty { lines.append("conversations: " + shared.joined(separator: ", ")) }
            if blocked.contains(person) {
                lines.append("blocked")
            } else if ignored.contains(person) {
                lines.append("ignored")
            }
            say(lines)
        case .status:
            let peers = await node.connectedPeers
            var lines = ["\(names.display(me)) \(me.publicKey.fingerprint), listening on port \(node.port)"]
            lines.append("peers: \(peers.count) connected, \(peers.filter { caughtUp.contains($0) }.count) caught up")
            let rows = try service.conversationList()
            lines.append("conversations: \(rows.count), unread: \(try service.totalUnread())")
            for (peer, counts) in progress where !caughtUp.contains(peer) {
                lines.append("syncing with \(names.display(peer)): \(counts.received) / \(counts.expected)")
            }
            say(lines)
        case .connect(let text):
            guard let address = PeerAddress(text) else { throw ReplError("\(Safe.line(text)) is not HOST:PORT") }
            await node.connect(address)
            say("dialling \(address)")
        case .ignore(let name):
            let person = try resolvePerson(name)
            let now = toggle(person, blocking: false)
            say(
                now
                    ? "ignoring \(names.display(person)): their messages and notices are hidden (/ignore again to stop)"
                    : "no longer ignoring \(names.display(person))")
        case .block(let name):
            let person = try resolvePerson(name)
            let now = toggle(person, blocking: true)
            await node.setBlocked(blocked)
            say(
                now
                    ? "blocked \(names.display(person)): their links are refused and everything from them is hidden "
                        + "(/block again to unblock)"
                    : "unblocked \(names.display(person))")
        case .digest:
            let log = Hex.encode(try service.store.logDigest())
            var conversations = [(String, String)]()
            for row in try service.conversationList() where row.isMember {
                conversations.append((row.id.hex, Hex.encode(try service.snapshot(of: row.id).state.digest())))
            }
            if options.json {
                emit(
                    .object([
                        ("type", "digest"), ("log", .string(log)),
                        (
                            "conversations",
                            .array(conversations.map { .object([("id", .string($0.0)), ("digest", .string($0.1))]) })
                        ),
                    ]))
            } else {
                say(["log \(log)"] + conversations.map { "conversation \($0.0) \($0.1)" })
            }
        case .wait(let condition, let arguments):
            try await wait(condition, arguments)
        case .sendFile(let path):
            try await sendFile(path)
        case .save(let ref, let path, let overwrite):
            try await save(ref, to: path, overwrite: overwrite)
        case .search(let query, let all):
            try search(query, all: all)
        case .mute(let duration):
            let id = try currentConversation()
            let name = views[id]?.title ?? "this conversation"
            guard let duration else {
                try service.mute(id, until: nil)
                return say("muted \(name) for ever (/unmute to hear it again)")
            }
            let until = nowMillis() + (try MuteDuration.parse(duration).get())
            try service.mute(id, until: until)
            let render = renderer
            let when = render.daysAgo(until) == 0 ? render.clock(until) : "\(render.dayHeader(until)) \(render.clock(until))"
            say("muted \(name) until \(when) (/unmute to hear it sooner)")
        case .unmute:
            let id = try currentConversation()
            let name = views[id]?.title ?? "this conversation"
            guard try service.isMuted(id, at: nowMillis()) else { return say("\(name) is not muted") }
            try service.unmute(id)
            say("\(name) is no longer muted")
        case .archive:
            let id = try currentConversation()
            try service.archive(id)
            say(
                "archived \(views[id]?.title ?? "this conversation"): hidden from /list until something new arrives (/list --all shows it)"
            )
        case .quit:
            break
        default:
            try await performConversation(action)
        }
    }

    /// Online (a link now), else last seen: the latest of a link going down, a typing frame, or the newest record
    /// of theirs this node holds (its creation time, capped at now: their clock may run ahead).
    private func presence(_ person: AuthorID, _ peers: Set<AuthorID>) -> String {
        if peers.contains(person) { return "online" }
        if let seen = [lastSeen[person], lastActive[person], newestRecordMillis(of: person)].compactMap({ $0 }).max() {
            return "last seen \(renderer.relative(seen))"
        }
        return "offline"
    }

    private func newestRecordMillis(of person: AuthorID) -> Int64? {
        let feeds: [FeedState] = ((try? service.store.feeds()) ?? []).filter { $0.author == person && $0.stored > 0 }
        let now = nowMillis()
        return feeds.compactMap { feed -> Int64? in
            (try? service.store.records(conversation: feed.conversation, author: person, from: feed.stored, limit: 1))?
                .first.map { min($0.header.createdAtMillis, now) }
        }.max()
    }

    // MARK: - Search (SPEC F14)

    /// `/search [--all] WORDS`: the current conversation (all when none is open, or with --all), newest first;
    /// each result's label opens the conversation around it (`/open REF`).
    private func search(_ query: String, all: Bool) throws {
        var scope: ConversationID?
        if !all, case .conversation(let id) = current { scope = id }
        let hits: [SearchHit]
        do {
            hits = try service.search(query, in: scope).filter { !isHidden($0.sender) }
        } catch let error as SearchError {
            throw ReplError(error.description)
        }
        let place = scope.map { "in \(views[$0]?.title ?? "this conversation")" } ?? "in all conversations"
        searchResults = hits.map { ($0.conversation, $0.message) }
        let render = renderer
        var lines = [String]()
        var results = [JSON]()
        if hits.isEmpty {
            lines.append(
                "no messages \(place) match \"\(Safe.line(query))\"" + (scope == nil ? "" : " (/search --all looks everywhere)"))
        } else {
            lines.append(
                render.paint(
                    "── \(hits.count) \(hits.count == 1 ? "message" : "messages") \(place), newest first (/open REF shows one) ──",
                    .dim))
        }
        for hit in hits {
            let ref = views[hit.conversation]?.refs[hit.message] ?? hit.message.shortHex
            let conversationTitle = views[hit.conversation]?.title ?? Safe.line(hit.conversationTitle)
            lines.append(
                render.searchResult(
                    conversation: conversationTitle, millis: hit.displayedAtMillis, ref: ref,
                    sender: names.speaker(hit.sender), snippet: render.highlighted(hit.snippet, hit.highlights)))
            let scalars = hit.snippet.unicodeScalars
            let highlights = hit.highlights.map { range -> JSON in
                .array([
                    .int(Int64(scalars.distance(from: scalars.startIndex, to: range.lowerBound))),
                    .int(Int64(scalars.distance(from: scalars.startIndex, to: range.upperBound))),
                ])
            }
            results.append(
                .object([
                    ("conversation", .string(hit.conversation.hex)), ("title", .string(conversationTitle)),
                    ("id", .string(hit.message.hex)), ("ref", .string(ref)), ("author", .text(names.raw(hit.sender))),
                    ("fingerprint", fingerprint(hit.sender)), ("time_ms", .int(hit.displayedAtMillis)),
                    ("snippet", .string(hit.snippet)), ("highlights", .array(highlights)),
                ]))
        }
        if options.json {
            emit(
                .object([
                    ("type", "search"), ("query", .string(query)), ("conversation", .text(scope?.hex)),
                    ("results", .array(results)),
                ]))
        } else {
            say(lines)
        }
    }

    private func performConversation(_ action: ReplAction) async throws {
        switch action {
        case .list(let filter, let all):
            let rows = try service.conversationList(filter: filter, includeArchived: all)
            listed = rows.map(\.id)
            if rows.isEmpty {
                let archived = all ? 0 : try service.conversationList(filter: filter, includeArchived: true).count
                say(
                    archived > 0
                        ? "no conversations here: \(archived) archived (/list --all shows them)"
                        : filter == nil ? "No conversations yet — /msg NAME TEXT starts one" : "no conversation matches")
            }
            let render = renderer
            let now = nowMillis()
            for (index, row) in rows.enumerated() {
                say(
                    render.conversationRow(
                        number: index + 1, title: views[row.id]?.title ?? row.title, unread: row.unread,
                        lastActivityMillis: row.lastActivityMillis, preview: row.preview, isMember: row.isMember,
                        muted: row.isMuted(at: now), archived: row.archived))
            }
        case .open(let query):
            await stopTyping()
            switch try resolveTarget(query) {
            case .conversation(let id): try open(id)
            case .message(let id, let message): try open(id, around: message)
            case .person(let person):
                if let id = try? service.directConversationID(with: person), views[id] != nil {
                    try open(id)
                } else {
                    guard (try? service.profile(of: person)) != nil else {
                        throw ReplError("no profile from \(names.display(person)) yet")
                    }
                    current = .direct(person)
                    say(["── \(names.display(person)) ──", "No messages yet — say hello"])
                }
            }
        case .message(let query, let text):
            switch try resolveTarget(query) {
            case .conversation(let id), .message(let id, _):
                try await authoring(id) { _ = try service.send(text, in: id, now: nowMillis()) }
            case .person(let person):
                let id = try service.directConversationID(with: person)
                try await authoring(id) { _ = try service.sendDirect(text, to: person, now: nowMillis()) }
            }
        case .say(let text):
            await stopTyping()
            switch current {
            case .none: throw ReplError("no conversation open: /open NAME first, or /msg NAME TEXT")
            case .direct(let person):
                let id = try service.directConversationID(with: person)
                try await authoring(id) { _ = try service.sendDirect(text, to: person, now: nowMillis()) }
                current = .conversation(id)
            case .conversation(let id):
                try await authoring(id) { _ = try service.send(text, in: id, now: nowMillis()) }
            }
        case .groupCreate(let title, let memberNames):
            let members = try memberNames.map { try resolvePerson($0) }
            let id = try service.createGroup(title: title, members: members, now: nowMillis())
            await node.publish(try service.store.appliedRecords(of: id).filter { $0.header.author == me })
            current = .conversation(id)
            try diff(id, announce: true)
            say("created \(views[id]?.title ?? "the group"); it is now the current conversation")
        case .invite(let who):
            let id = try currentConversation()
            let members = try who.map { try resolvePerson($0) }
            try await authoring(id) { _ = try service.add(members, to: id, now: nowMillis()) }
        case .kick(let who):
            let id = try currentConversation()
            let members = try who.map { try resolvePerson($0) }
            try await authoring(id) { _ = try service.remove(members, from: id, now: nowMillis()) }
        case .rename(let title):
            let id = try currentConversation()
            try await authoring(id) { _ = try service.rename(id, to: title == "-" ? nil : title, now: nowMillis()) }
        case .role(let name, let roleName):
            let id = try currentConversation()
            let role: MemberRole
            switch roleName.lowercased() {
            case "admin": role = .admin
            case "member": role = .member
            default: throw ReplError("\(Safe.line(roleName)) is not a role: admin or member")
            }
            let member = try resolvePerson(name)
            try await authoring(id) { _ = try service.setRole(role, of: member, in: id, now: nowMillis()) }
        case .grant(let name, let flagName), .revoke(let name, let flagName):
            let id = try currentConversation()
            guard let flag = FlagName.parse(flagName) else {
                throw ReplError("\(Safe.line(flagName)) is not a right: add, remove or rename")
            }
            let member = try resolvePerson(name)
            let state = try service.snapshot(of: id).state
            guard let info = state.members[member] else {
                throw ReplError("\(names.display(member)) is not a member here")
            }
            var flags = info.flags
            if case .grant = action { flags.insert(flag) } else { flags.remove(flag) }
            let updated = flags
            try await authoring(id) { _ = try service.setFlags(updated, of: member, in: id, now: nowMillis()) }
        case .leave:
            let id = try currentConversation()
            try await authoring(id) { _ = try service.leave(id, now: nowMillis()) }
        case .members:
            let id = try currentConversation()
            let state = try service.snapshot(of: id).state
            for member in state.sortedMembers {
                let info = state.members[member]!
                var role = member == state.creator ? "creator" : info.role == .admin ? "admin" : "member"
                let rights = FlagName.names(info.flags)
                if !rights.isEmpty && member != state.creator { role += " (may \(rights))" }
                say("\(names.speaker(member)) \(member.publicKey.fingerprint) \(role)")
            }
        case .history(let count):
            let id = try currentConversation()
            try show(id, last: count ?? Conversations.pageSize)
        case .more:
            let id = try currentConversation()
            let state = try service.snapshot(of: id).state
            let from = shownFrom[id] ?? state.timeline.count
            guard from > 0 else { throw ReplError("no older lines") }
            let start = max(0, from - Conversations.pageSize)
            shownFrom[id] = start
            say(render(id, state, lines: start..<from))
        case .react(let ref, let reactionName):
            let (id, message) = try resolveRef(ref)
            guard
                let reaction = Reaction.allCases.first(where: {
                    $0.name == reactionName.lowercased() || $0.emoji == reactionName
                })
            else {
                throw ReplError(
                    "\(Safe.line(reactionName)) is not a reaction: love ❤️, like 👍, dislike 👎, laugh 😂, emphasize ‼️, question ❓"
                )
            }
            try await authoring(id) { _ = try service.react(reaction, to: message, in: id, now: nowMillis()) }
        case .unreact(let ref):
            let (id, message) = try resolveRef(ref)
            guard try service.snapshot(of: id).state.reactions[message]?[me] != nil else {
                throw ReplError("you have not reacted to \(ref)")
            }
            try await authoring(id) { _ = try service.unreact(message, in: id, now: nowMillis()) }
        case .reply(let ref, let text):
            let (id, message) = try resolveRef(ref)
            try await authoring(id) { _ = try service.send(text, in: id, replyTo: message, now: nowMillis()) }
        case .edit(let ref, let text):
            let (id, message) = try resolveRef(ref)
            try ownMessage(message, in: id)
            try await authoring(id) { _ = try service.edit(message, to: text, in: id, now: nowMillis()) }
        case .delete(let ref):
            let (id, message) = try resolveRef(ref)
            try ownMessage(message, in: id)
            try await authoring(id) { _ = try service.delete(message, in: id, now: nowMillis()) }
        case .receipts(let ref):
            let (id, message) = try resolveRef(ref)
            try ownMessage(message, in: id)
            let state = try service.snapshot(of: id).state
            let lines = state.receiptsView(of: message)
            let mark = StatusMark(state.status(of: message), peersConnected: true)
            var out = ["\(views[id]?.refs[message] ?? ref): \(renderer.status(mark))"]
            if lines.isEmpty { out.append("no recipients") }
            for line in lines {
                switch line.state {
                case .read(let millis):
                    out.append(
                        "  \(names.display(line.member)) read it at \(renderer.clock(millis)) (\(renderer.relative(millis)))"
                    )
                case .delivered: out.append("  \(names.display(line.member)) has it, not read yet")
                case .pending: out.append("  \(names.display(line.member)) does not have it yet")
                }
            }
            say(out)
        default:
            throw ReplError("not handled")
        }
    }

    private func ownMessage(_ message: RecordID, in conversation: ConversationID) throws {
        guard let found = try service.snapshot(of: conversation).state.message(message) else {
            throw ReplError("that line is not a message (system lines cannot be changed)")
        }
        guard found.author == me else {
            throw ReplError("only the author may do that to a message, and it is not yours")
        }
    }

    /// Makes `id` current, shows its last page and marks it read.
    private func open(_ id: ConversationID) throws {
        current = .conversation(id)
        try diff(id, announce: false)
        try show(id, last: Conversations.pageSize)
        if let state = try? service.snapshot(of: id).state, needsReceipt(\.read, state) {
            pendingRead.insert(id)
            scheduleAcks()
        }
    }

    /// Makes `id` current and shows the lines around `message` (a search result), marking them read.
    private func open(_ id: ConversationID, around message: RecordID) throws {
        let state = try service.snapshot(of: id).state
        guard let index = state.timeline.firstIndex(where: { $0.id == message }) else {
            throw ReplError("that message is no longer shown (deleted or retracted since the search)")
        }
        current = .conversation(id)
        try diff(id, announce: false)
        let half = Conversations.pageSize / 2
        let start = max(0, index - half)
        let end = min(state.timeline.count, index + half + 1)
        shownFrom[id] = start
        let ref = views[id]?.refs[message] ?? message.shortHex
        var lines = ["── \(title(state)) ── around \(ref)"]
        lines += render(id, state, lines: start..<end)
        if end < state.timeline.count {
            lines.append(renderer.paint("── \(state.timeline.count - end) newer lines (/history shows the latest) ──", .dim))
        }
        say(lines)
        if needsReceipt(\.read, state) {
            pendingRead.insert(id)
            scheduleAcks()
        }
    }

    private func show(_ id: ConversationID, last count: Int) throws {
        let state = try service.snapshot(of: id).state
        let start = max(0, state.timeline.count - count)
        shownFrom[id] = start
        var lines = ["── \(title(state)) ──"]
        if !state.timeline.contains(where: { if case .message = $0 { true } else { false } }) {
            lines.append("No messages yet — say hello")
        }
        lines += render(id, state, lines: start..<state.timeline.count)
        say(lines)
    }

    // MARK: - Waiting

    private func wait(_ condition: String, _ arguments: [String]) async throws {
        var rest = arguments
        var seconds = 10.0
        if let last = rest.last, let number = Double(last), rest.count > (condition == "synced" ? 0 : 1) {
            seconds = number
            rest.removeLast()
        }
        let usage = "/wait synced|delivered REF|read REF|saved REF|peer NAME|known NAME [SECONDS]"
        let check: () async throws -> Bool
        switch condition {
        case "synced":
            guard rest.isEmpty else { throw ReplError("usage: \(usage)") }
            check = {
                let peers = await self.node.connectedPeers
                return !peers.isEmpty && peers.allSatisfy { self.caughtUp.contains($0) }
            }
        case "delivered", "read":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let (id, message) = try resolveRef(rest[0])
            try ownMessage(message, in: id)
            check = {
                let mark = StatusMark(try self.service.snapshot(of: id).state.status(of: message), peersConnected: true)
                return mark.name == condition || (condition == "delivered" && mark.name == "read")
            }
        case "saved":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let (_, message) = try resolveRef(rest[0])
            check = { self.savedFiles.contains(message) }
        case "peer", "known":
            guard rest.count == 1 else { throw ReplError("usage: \(usage)") }
            let name = rest[0]
            check = {
                guard let person = try? self.resolvePerson(name) else { return false }
                return condition == "known" ? true : await self.node.connectedPeers.contains(person)
            }
        default:
            throw ReplError("\(Safe.line(condition)) is not a condition (usage: \(usage))")
        }
        let deadline = Date().addingTimeInterval(seconds)
        while Date() < deadline {
            if try await check() { return }
            try await Task.sleep(for: .milliseconds(25))
        }
        throw ReplError(
            "timed out after \(seconds.formatted()) s waiting for \(([condition] + arguments).joined(separator: " "))")
    }

    // MARK: - Files

    private func sendFile(_ path: String) async throws {
        let conversation: ConversationID
        switch current {
        case .none: throw ReplError("no conversation open: /open NAME first")
        case .direct(let person):
            throw ReplError("say something to \(names.display(person)) first: the conversation starts with a message")
        case .conversation(let id): conversation = id
        }
        let expanded = (path as NSString).expandingTildeInPath
        let name = URL(fileURLWithPath: expanded).lastPathComponent
        do {
            try await node.sendFile(atPath: expanded, name: name, in: conversation)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
        try diff(conversation, announce: true)
    }

    /// Saves a file message to `path` (into it under the file's own name when it is a directory): at once when
    /// every chunk is here, else once the fetch this starts completes.
    private func save(_ ref: String, to path: String, overwrite: Bool) async throws {
        let (conversation, message) = try resolveRef(ref)
        guard let status = try await node.fileStatus(of: message, in: conversation) else {
            throw ReplError("\(ref) is not a file")
        }
        var target = (path as NSString).expandingTildeInPath
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: target, isDirectory: &isDirectory), isDirectory.boolValue {
            target = (target as NSString).appendingPathComponent(Self.safeFileName(status.summary.name))
        }
        let pending = PendingSave(conversation: conversation, path: target, overwrite: overwrite, ref: ref)
        if status.isComplete {
            try finishSave(message, pending)
            return
        }
        do {
            try await node.fetchFile(message, in: conversation)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
        pendingSaves[message] = pending
        say(
            "fetching \(Safe.line(status.summary.name)) (\(Renderer.byteCount(status.summary.size))) from peers; "
                + "it is saved to \(Safe.line(target)) when complete")
    }

    private func finishSave(_ message: RecordID, _ pending: PendingSave) throws {
        do {
            try service.saveFile(message, in: pending.conversation, to: pending.path, overwrite: pending.overwrite)
        } catch let error as FileError {
            throw ReplError(error.description)
        }
        savedFiles.insert(message)
        say("saved \(pending.ref) to \(Safe.line(pending.path))")
        emit(
            .object([
                ("type", "file"), ("state", "saved"), ("conversation", .string(pending.conversation.hex)),
                ("id", .string(message.hex)), ("ref", .string(pending.ref)), ("path", .string(pending.path)),
            ]))
    }

    private func fileEvent(_ event: FileEvent) {
        switch event {
        case .progress(let message, let bytes, let total):
            guard let pending = pendingSaves[message] else { return }
            emit(
                .object([
                    ("type", "file"), ("state", "fetching"), ("conversation", .string(pending.conversation.hex)),
                    ("id", .string(message.hex)), ("ref", .string(pending.ref)), ("bytes", .int(Int64(bytes))),
                    ("total", .int(Int64(total))),
                ]))
        case .completed(let message):
            guard let pending = pendingSaves.removeValue(forKey: message) else { return }
            do {
                try finishSave(message, pending)
            } catch {
                report("cannot save \(pending.ref): \(error)")
            }
        case .chunkRejected(let peer, _):
            notice("\(names.display(peer)) sent a damaged file chunk; fetching it again")
        }
    }

    /// A file name from the network made safe as one path component: no separators, no control characters, no
    /// leading dots (never a hidden or parent entry).
    static func safeFileName(_ name: String) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                name.unicodeScalars.map { scalar in
                    scalar == "/" || scalar == "\\" || scalar.properties.generalCategory == .control
                        || scalar.properties.generalCategory == .format ? "_" : scalar
                }))
        let trimmed = String(cleaned.drop { $0 == "." || $0 == " " })
        return trimmed.isEmpty ? "file" : String(trimmed.prefix(200))
    }

    // MARK: - Ignored people

    private func loadIgnored() {
        guard let ignoreFile, let text = try? String(contentsOfFile: ignoreFile, encoding: .utf8) else { return }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let bytes = Hex.decode(String(parts[1])), bytes.count == 32 else { continue }
            let author = AuthorID(bytes: bytes)
            if parts[0] == "block" { blocked.insert(author) } else { ignored.insert(author) }
        }
    }

    /// Adds `person` to the ignored (or blocked) people, or removes them, and saves the lists; returns whether
    /// they are in it now.
    private func toggle(_ person: AuthorID, blocking: Bool) -> Bool {
        var set = blocking ? blocked : ignored
        let added = set.remove(person) == nil
        if added { set.insert(person) }
        if blocking { blocked = set } else { ignored = set }
        saveIgnored()
        return added
    }

    private func saveIgnored() {
        guard let ignoreFile else { return }
        let lines = ignored.sorted().map { "ignore \($0.hex)" } + blocked.sorted().map { "block \($0.hex)" }
        _ = FileManager.default.createFile(
            atPath: ignoreFile, contents: Data((lines.joined(separator: "\n") + "\n").utf8),
            attributes: [.posixPermissions: 0o600])
    }
}
