public import Foundation
import NatterCrypto
import NatterModel
public import NatterNode
import NatterStore
import NatterSync
import Synchronization

/// A command failed: one line a person can act on. The node keeps running.
public struct ReplError: Error, Equatable, CustomStringConvertible {
    public let description: String
    public init(_ description: String) { self.description = description }
}

/// The REPL: reads command lines from a `Console`, sends the intents they stand for to the node, and renders the
/// events the node emits — lines for a person, JSON events for a script (SPEC "REPL", F22; docs/cli.md).
///
/// It never writes the store and never re-derives a conversation: writes are the node's (`Node.submit`, `author`),
/// reads go through `Node.read`, and what changed arrives as deltas (`NodeEvent.conversation`). Commands are a table
/// (`ReplAction.run`) of small handlers; the state lives in components with their own rules (`ConversationViews`,
/// `Presence`, `People`, `Navigation`, `FileSaves`).
public actor ReplSession {
    public struct Options: Sendable {
        public var json = false
        public var interactive = false
        public var colours = false
        /// Ring the terminal bell with notices from other conversations.
        public var bell = true
        /// The zone displayed times are in; nil: the machine's, looked up only when a time is displayed (`Renderer`).
        public var timeZone: TimeZone?
        /// Desktop notifications through `notify-send` when it is on the PATH (`--notify`).
        public var desktopNotifications = false
        /// The PATH searched for `notify-send` (tests point it at a fake one).
        public var notifyPath = ProcessInfo.processInfo.environment["PATH"]
        /// Record-writing commands allowed per second, with a burst (SPEC F16); nil: no limit (`--send-rate 0`).
        public var sendRate: SendRate? = .interactiveDefault
        /// Time for the send rate and `/wait` (tests inject one); `wallClockMillis` gives displayed times.
        public var clock: @Sendable () -> Duration = { ContinuousClock.now - ReplSession.started }
        /// Milliseconds since 1970: displayed times, when a mute ends, when a person was last active (tests inject
        /// one, so a mute's end is reached by moving it rather than by waiting).
        public var wallClockMillis: @Sendable () -> Int64 = { Int64((Date().timeIntervalSince1970 * 1000).rounded()) }

        public init() {}
    }

    /// The instant the process's REPL clock counts from.
    static let started = ContinuousClock.now

    let node: Node
    let me: AuthorID
    let options: Options
    let output: ReplOutput
    var views = ConversationViews()
    var presence = Presence()
    var people: People
    var navigation = Navigation()
    var saves = FileSaves()
    /// People typing per conversation, as the node last reported (SPEC F12).
    var typingNow: [ConversationID: [AuthorID]] = [:]
    /// The conversation this person is typing in, as last told to the node.
    var typingIn: ConversationID?
    let desktop: DesktopNotifier?
    /// The send rate's tokens (nil: no limit).
    private var sendBucket: TokenBucket?
    /// Lines sent without waiting for their answer (a script's burst: the node appends them together), in order.
    private var inFlight: [(ticket: WriteTicket, line: String)] = []
    /// Whether any command failed (the exit status of a script).
    private(set) var failed = false

    public init(node: Node, console: any Console, options: Options, ignoreFile: String?) async {
        self.node = node
        me = await node.identity.author
        self.options = options
        output = ReplOutput(console: console, json: options.json, colours: options.colours)
        people = People(me: me, ignoreFile: ignoreFile)
        desktop = options.desktopNotifications ? DesktopNotifier(path: options.notifyPath) : nil
        sendBucket = options.sendRate.map {
            TokenBucket(capacity: $0.burst, refillPerSecond: $0.perSecond, now: options.clock())
        }
    }

    /// Names and titles for tab completion, kept current as profiles and conversations change; read from the
    /// line editor's thread through `complete(line:word:)`.
    private nonisolated let completionWords = Mutex<(names: [String], titles: [String])>(([], []))

    /// Tab completion (the line editor's `completer`): commands, then names and titles.
    public nonisolated func complete(line: String, word: String) -> [String] {
        let (names, titles) = completionWords.withLock { $0 }
        return ReplCompletion.candidates(line: line, word: word, names: names, titles: titles)
    }

    // MARK: - Running

    /// Takes in the state as it is (nothing of it is announced), then reports what changes from here on.
    public func start() async {
        await node.setBlocked(people.blocked)  // blocked people's links are refused from the start
        do {
            let (names, details, rows) = try await node.read {
                (try $0.names(), try $0.allDetails(), try $0.conversationList(includeArchived: true))
            }
            people.know(names)
            for (id, detail) in details { views.update(id, detail) }
            for row in rows { views.mute(row.id, until: row.mutedUntilMillis) }
        } catch {
            report("cannot read the conversations: \(error)")
        }
        updateCompletion()
        updatePrompt()
    }

    /// Turns node events into lines or JSON events until the node stops.
    public func watch() async {
        for await event in node.events { await handle(event) }
    }

    /// Reads commands until end of input or `/quit`, then waits for the answers of lines still in flight. Returns
    /// whether any command failed.
    public func readCommands() async -> Bool {
        for await line in output.console.lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            if !(await execute(trimmed, pipelined: true)) { break }
            updatePrompt()
        }
        await settleInFlight()
        return failed
    }

    /// Carries out one line; returns false for `/quit`. With `pipelined`, a plain line is handed to the node without
    /// waiting for its answer (`inFlight`), so the lines of a script's burst share the node's transactions; any other
    /// command first waits for those answers.
    @discardableResult
    public func execute(_ line: String, pipelined: Bool = false) async -> Bool {
        if line.hasPrefix("/") { output.console.addHistory(line) }
        switch ReplParser.parse(line) {
        case .failure(let failure):
            report(failure.description)
        case .success(.quit):
            return false
        case .success(.say(let text)) where pipelined:
            do {
                try checkSendRate()
                try await sendPlain(text, pipelined: true, line: line)
            } catch {
                report(String(describing: error))
            }
        case .success(let action):
            await settleInFlight()
            do {
                if action.writesRecords { try checkSendRate() }
                try await action.run(in: self)
            } catch {
                report(String(describing: error))
            }
        }
        return true
    }

    /// Hands intents to the node: waits for what they wrote, or (pipelined) leaves the answer to `settleInFlight`.
    func write(_ intents: [ConversationIntent], pipelined: Bool = false, line: String = "") async throws {
        let ticket = node.submit(intents)
        if pipelined {
            inFlight.append((ticket, line))
            if inFlight.count >= Self.inFlightMax { await settleInFlight(keeping: Self.inFlightMax / 2) }
            return
        }
        for (intent, result) in zip(intents, await ticket.results()) { noteWritten(intent, try result.get()) }
    }

    /// What a command needs at once of what it wrote, before the node's events show it: your last message (`last`).
    private func noteWritten(_ intent: ConversationIntent, _ authored: Authored) {
        switch intent {
        case .send, .sendDirect: navigation.lastOwn = (authored.conversation, authored.id)
        default: break
        }
    }

    /// Lines a script may have in flight before the REPL waits for their answers: enough for the node to append
    /// many per transaction, bounded so a long script cannot queue without limit (`WriteQueue.intentsMax`). At the
    /// bound the REPL waits for the oldest half only: the node always has the next lines queued while it commits
    /// and sends a batch, instead of idling while the REPL reads the next lines (waiting for all of them halved a
    /// script's rate).
    static let inFlightMax = 1_024

    /// Waits for the answers of the lines in flight but the newest `keeping`, reporting each refusal in order.
    func settleInFlight(keeping: Int = 0) async {
        let settled = max(0, inFlight.count - keeping)
        let waiting = Array(inFlight.prefix(settled))
        inFlight.removeFirst(settled)
        for (ticket, line) in waiting {
            for result in await ticket.results() {
                switch result {
                case .success(let authored): navigation.lastOwn = (authored.conversation, authored.id)
                case .failure(let error):
                    report(waiting.count > 1 ? "\(String(describing: error)) (line: \(Safe.preview(line)))" : "\(error)")
                }
            }
        }
    }

    private func checkSendRate() throws {
        guard var bucket = sendBucket else { return }
        let allowed = bucket.takeIfAvailable(now: options.clock())
        sendBucket = bucket
        guard allowed else {
            throw ReplError(
                "Please slow down: at most \(Int(bucket.capacity)) at once, then \(bucket.refillPerSecond.formatted()) a second (natter run --send-rate N raises it)"
            )
        }
    }

    // MARK: - Output

    /// Milliseconds since 1970 on the wall clock (displayed times, mute ends): `Options.wallClockMillis`.
    func nowMillis() -> Int64 { options.wallClockMillis() }

    var renderer: Renderer { Renderer(timeZone: options.timeZone, nowMillis: nowMillis(), colours: options.colours) }

    var names: NameBook { people.book }

    var events: ReplEvents { ReplEvents(names: people.book, me: me) }

    func say(_ lines: [String]) { output.say(lines) }

    func say(_ line: String) { output.say(line) }

    /// One error line; the script's exit status becomes a failure.
    func report(_ message: String) {
        failed = true
        output.error(message, renderer: renderer)
    }

    func notice(_ message: String) { output.notice(message) }

    func title(of conversation: ConversationID) -> String { views.title(of: conversation, names: people.book) }

    func updatePrompt() {
        guard options.interactive else { return }
        var parts = [String]()
        switch navigation.current {
        case .conversation(let id): parts.append(title(of: id))
        case .direct(let person): parts.append(names.display(person))
        case .none: break
        }
        let unread = views.ids.compactMap { views.details(of: $0)?.unread }.reduce(0, +)
        if unread > 0 { parts.append("\(unread) unread") }
        if let syncing = presence.syncing {
            parts.append("syncing \(syncing.received.formatted()) / \(syncing.expected.formatted())")
        }
        let peers = presence.online.count
        parts.append(peers == 1 ? "1 peer" : "\(peers) peers")
        if let typing = typingLine() { parts.append(typing) }
        output.console.setPrompt("[" + parts.joined(separator: " · ") + "] > ")
    }

    /// Keeps the words Tab completes current (names and titles).
    func updateCompletion() {
        let book = people.book
        let words = book.authors.filter { $0 != me }.compactMap { book.raw($0) }
        let titles = views.ids.map { title(of: $0) }
        completionWords.withLock { $0 = (words, titles) }
    }

    // MARK: - Typing (SPEC F12)

    /// The line editor's draft changed (the terminal layer calls this on every edit): typing starts while a
    /// non-command line is edited in an open conversation; it ends when the line is cleared or becomes a command,
    /// when it is sent, or 3 s after the last keystroke (the node decides the timing).
    public func userIsTyping(draft: String) async {
        let typing = !draft.trimmingCharacters(in: .whitespaces).isEmpty && !draft.hasPrefix("/")
        guard typing, let id = navigation.currentConversation else {
            await stopTyping()
            return
        }
        if typingIn != id { await stopTyping() }
        typingIn = id
        await node.userTyping(in: id)
    }

    func stopTyping() async {
        guard let id = typingIn else { return }
        typingIn = nil
        await node.userStoppedTyping(in: id)
    }

    /// "Alice is typing…" for the conversation being viewed, or nil.
    func typingLine() -> String? {
        guard let id = navigation.currentConversation else { return nil }
        return Renderer.typing((typingNow[id] ?? []).map(names.display))
    }
}
