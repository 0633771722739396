import NatterModel
import NatterNode
import NatterStore

/// The node's events turned into what a person sees (lines, notices, the prompt) and what a script reads (JSON
/// events). Everything comes from the event itself — a conversation's deltas carry the lines, reactions and
/// statuses that changed — so rendering a new line costs that line, whatever the conversation's length.
extension ReplSession {
    func handle(_ event: NodeEvent) async {
        switch event {
        case .peerUp(let peer, let link):
            guard presence.up(peer, link) else { break }  // another link to someone already online
            output.emit(events.person("peer", peer, [("state", "up")]))
            output.show([renderer.paint("\(names.display(peer)) is online", .dim)])
        case .peerDown(let peer, let link):
            guard presence.down(peer, link, at: nowMillis()) else { break }  // replaced, or another link remains
            output.emit(events.person("peer", peer, [("state", "down")]))
            output.show([renderer.paint("\(names.display(peer)) went offline", .dim)])
        case .caughtUp(let peer):
            presence.synced(peer)
            output.emit(events.person("sync", peer, [("caught_up", true)]))
        case .syncProgress(let peer, let received, let expected):
            presence.syncing(peer, received: received, expected: expected)
            output.emit(
                events.person(
                    "sync", peer,
                    [("caught_up", false), ("received", .int(Int64(received))), ("expected", .int(Int64(expected)))]))
        case .profile(let person, let name):
            people.named(person, name)
            output.emit(events.person("profile", person, [("online", .bool(presence.online.contains(person)))]))
            updateCompletion()
        case .conversation(let delta):
            await render(delta)
        case .file(let event):
            await fileEvent(event)
        case .linkFailed(_, let reason):
            notice("link failed: \(reason)")
        case .notice(let line):
            notice(line)
        case .misbehaved, .applied, .redundantLink:
            // A misbehaviour's linkFailed was shown (a ban follows as a notice); lines come as deltas; a redundant
            // link is a second one to someone linked already.
            break
        case .typing(let conversation, let typists):
            typingChanged(conversation, typists)
        }
        updatePrompt()
    }

    // MARK: - Conversations

    private func render(_ delta: ConversationDelta) async {
        let conversation = delta.conversation
        if let details = delta.details {
            let isNew = views.details(of: conversation) == nil
            views.update(conversation, details)
            // A conversation new to this session: its first delta brings every line it has, so its labels start
            // from these.
            if isNew { views.loadRefs(conversation, ids: []) }
            updateCompletion()
            if case .direct(let person) = navigation.current, details.kind == .direct, details.members[person] != nil {
                navigation.current = .conversation(conversation)
            }
        }
        guard views.details(of: conversation) != nil else { return }
        if !delta.lines.isEmpty && !views.hasRefs(conversation) {
            do {
                try await loadRefs(conversation)
            } catch {
                notice("cannot read the lines of \(title(of: conversation)): \(error)")
            }
        }
        for change in delta.lines { views.noteLine(change.line.id, in: conversation) }
        let viewing = navigation.currentConversation == conversation
        for change in delta.lines { render(change, in: conversation, viewing: viewing) }
        for change in delta.reactions { render(change, in: conversation, viewing: viewing) }
        for change in delta.statuses {
            let ref = views.label(of: change.message, in: conversation)
            output.emit(events.status(change.status, of: change.message, conversation: conversation, ref: ref))
            if viewing {
                let mark = StatusMark(change.status, peersConnected: true)
                output.show([renderer.paint("      \(ref) ", .dim) + renderer.status(mark)])
            }
        }
    }

    private func render(_ change: LineChange, in conversation: ConversationID, viewing: Bool) {
        let line = change.line
        switch line.item {
        case .message(let message):
            if change.kind == .new && message.author == me { navigation.lastOwn = (conversation, message.id) }
            if people.isHidden(message.author) { return }
            if change.kind == .new { typingNow[conversation]?.removeAll { $0 == message.author } }  // their line came
            let name: String =
                switch change.kind {
                case .new: "new"
                case .edited: "edit"
                case .deleted: "delete"
                case .retracted: "retracted"
                }
            output.emit(messageEvent(message, line, in: conversation, change: name))
            if viewing {
                if change.kind == .new { showHeaderIfNewDay(message.displayedAtMillis, in: conversation) }
                output.show(renderer.message(messageLine(line, in: conversation)))
            } else if change.kind == .new {
                let ref = views.label(of: message.id, in: conversation)
                let text = message.deleted ? "message deleted" : Safe.preview(String(message.text.prefix(200)))
                let notice = "\(ref) \(names.speaker(message.author)): \(text)"
                if message.author != me {
                    notify(conversation, from: message.author, kind: "message", ref: ref, text: notice)
                } else {
                    output.show([renderer.notice(conversation: title(of: conversation), text: notice)])  // your /msg
                }
            }
        case .system(let event):
            guard change.kind == .new else { return }
            output.emit(events.system(event, conversation: conversation))
            let text = Renderer.describe(event.change, by: names.speaker(event.author), name: names.speaker)
            if viewing {
                showHeaderIfNewDay(event.displayedAtMillis, in: conversation)
                output.show([renderer.system(event.displayedAtMillis, text)])
            } else {
                output.show([renderer.notice(conversation: title(of: conversation), text: renderer.paint(text, .system))])
            }
        }
    }

    private func render(_ change: ReactionChange, in conversation: ConversationID, viewing: Bool) {
        guard !people.isHidden(change.person) else { return }
        let ref = views.label(of: change.message, in: conversation)
        output.emit(events.reaction(change, conversation: conversation, ref: ref))
        let what = change.reaction.map { "reacted \($0.emoji) to \(ref)" } ?? "removed their reaction from \(ref)"
        let line = "\(names.speaker(change.person)) \(what)"
        if !viewing && change.reaction != nil && change.messageAuthor == me {
            notify(conversation, from: change.person, kind: "reaction", ref: ref, text: line)
        }
        if viewing { output.show([renderer.system(nowMillis(), line)]) }
    }

    /// A `message` event for a script.
    func messageEvent(_ message: TimelineMessage, _ line: ConversationLine, in conversation: ConversationID, change: String)
        -> JSON
    {
        events.message(
            message, line: line, conversation: conversation, title: title(of: conversation),
            ref: views.label(of: message.id, in: conversation),
            replyRef: message.replyTo.map { views.label(of: $0, in: conversation) }, change: change,
            peersConnected: !presence.online.isEmpty)
    }

    /// A line as the renderer draws it.
    func messageLine(_ line: ConversationLine, in conversation: ConversationID) -> MessageLine {
        guard case .message(let message) = line.item else { preconditionFailure("a message line") }
        var drawn = MessageLine(
            ref: views.label(of: message.id, in: conversation), millis: message.displayedAtMillis,
            author: names.speaker(message.author), own: message.author == me,
            text: message.deleted ? nil : message.text, edited: message.edited)
        drawn.retracted = line.retracted
        if line.retracted { drawn.text = message.versions.last }
        if let file = message.file, !message.deleted { drawn.file = (file.name, file.mediaType, file.size) }
        if let quote = line.quote { drawn.replyQuote = (names.speaker(quote.author), quote.text) }
        if message.author == me && !line.retracted {
            drawn.status = StatusMark(line.status, peersConnected: !presence.online.isEmpty)
        }
        drawn.reactions = line.reactions
        return drawn
    }

    func showHeaderIfNewDay(_ millis: Int64, in conversation: ConversationID) {
        defer { views.shown(millis, in: conversation) }
        if let last = views.lastShownMillis(in: conversation), renderer.sameDay(last, millis) { return }
        output.show([renderer.header(millis)])
    }

    /// A notice for a conversation the person is not viewing (SPEC F15): one line (with the bell in a terminal
    /// unless `--no-bell`), a `notice` event for scripts, and a desktop notification when asked for (`--notify`);
    /// nothing at all while the conversation is muted, or for your own lines and hidden people.
    private func notify(_ conversation: ConversationID, from author: AuthorID, kind: String, ref: String, text: String) {
        let muted = views.isMuted(conversation, at: nowMillis())
        guard
            let policy = NoticePolicy.decide(
                viewing: navigation.currentConversation == conversation, fromMe: author == me,
                hidden: people.isHidden(author), muted: muted, interactive: options.interactive,
                bellAllowed: options.bell, desktopAllowed: desktop?.executable != nil)
        else { return }
        let conversationTitle = title(of: conversation)
        output.emit(
            .object([
                ("type", "notice"), ("message", .string("[\(conversationTitle)] \(text)")), ("kind", .string(kind)),
                ("conversation", .string(conversation.hex)), ("ref", .string(ref)),
            ]))
        output.show([renderer.notice(conversation: conversationTitle, text: text) + (policy.bell ? "\u{7}" : "")])
        if policy.desktop { desktop?.notify(title: "natter · \(conversationTitle)", body: text) }
    }

    // MARK: - Typing

    /// The node reported who is typing in a conversation: a `typing` event (for scripts), and the prompt.
    private func typingChanged(_ conversation: ConversationID, _ typists: [AuthorID]) {
        let shown = typists.filter { $0 != me && !people.isHidden($0) }
        let now = nowMillis()
        for person in shown { presence.active(person, at: now) }
        guard (typingNow[conversation] ?? []) != shown else { return }
        typingNow[conversation] = shown.isEmpty ? nil : shown
        output.emit(
            .object([
                ("type", "typing"), ("conversation", .string(conversation.hex)),
                ("title", .string(views.details(of: conversation) == nil ? "" : title(of: conversation))),
                ("people", events.people(shown)),
            ]))
    }
}
