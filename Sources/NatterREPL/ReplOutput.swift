import NatterModel
import NatterNode
import NatterStore

/// Where the REPL's output goes: lines for a person, or one JSON object per event for a script (`--json`,
/// docs/cli.md). Holds no state beyond its console and options.
struct ReplOutput: Sendable {
    let console: any Console
    let json: Bool
    let colours: Bool

    /// Command output: lines for a person, `output` events for a script.
    func say(_ lines: [String]) {
        for line in lines {
            console.show(json ? JSON.object([("type", "output"), ("text", .string(line))]).encoded : line)
        }
    }

    func say(_ line: String) { say([line]) }

    /// A line for a person only (a script reads the matching event instead).
    func show(_ lines: [String]) {
        guard !json else { return }
        for line in lines { console.show(line) }
    }

    /// A JSON event (scripts only).
    func emit(_ event: JSON) {
        if json { console.show(event.encoded) }
    }

    /// One error line (standard error when scripted; an `error` event too with `--json`).
    func error(_ message: String, renderer: Renderer) {
        console.showError(colours ? renderer.paint("error: \(message)", .error) : "error: \(message)")
        emit(.object([("type", "error"), ("message", .string(message))]))
    }

    func notice(_ message: String) {
        console.showError("notice: \(message)")
        emit(.object([("type", "notice"), ("message", .string(message))]))
    }
}

/// The JSON event shapes (docs/cli.md, "--json events"), built from what the node reported.
struct ReplEvents {
    let names: NameBook
    let me: AuthorID

    func fingerprint(_ author: AuthorID) -> JSON { .string(author.publicKey.fingerprint) }

    /// `json` with a `confusable` flag beside each fingerprint (`NameBook.flagged`): every event that names someone
    /// goes through it.
    func flagged(_ json: JSON) -> JSON { names.flagged(json) }

    func person(_ type: String, _ author: AuthorID, _ fields: [(String, JSON)]) -> JSON {
        flagged(
            .object(
                [("type", .string(type)), ("name", .text(names.raw(author))), ("fingerprint", fingerprint(author))]
                    + fields))
    }

    func people(_ members: [AuthorID]) -> JSON {
        flagged(.array(members.map { .object([("name", .text(names.raw($0))), ("fingerprint", fingerprint($0))]) }))
    }

    /// A `message` event: a line new, edited, deleted or retracted.
    func message(
        _ message: TimelineMessage, line: ConversationLine, conversation: ConversationID, title: String, ref: String,
        replyRef: String?, change: String, peersConnected: Bool
    ) -> JSON {
        flagged(.object([
            ("type", "message"), ("change", .string(change)), ("conversation", .string(conversation.hex)),
            ("title", .string(title)), ("id", .string(message.id.hex)), ("ref", .string(ref)),
            ("author", .text(names.raw(message.author))), ("fingerprint", fingerprint(message.author)),
            ("own", .bool(message.author == me)), ("text", message.deleted ? .null : .string(message.text)),
            ("time_ms", .int(message.displayedAtMillis)), ("reply_to", .text(replyRef)),
            ("edited", .bool(message.edited)), ("deleted", .bool(message.deleted)),
            ("retracted", .bool(line.retracted)),
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
                    ? .string(StatusMark(line.status, peersConnected: peersConnected).name) : .null
            ),
        ]))
    }

    /// A `status` event: one of this node's messages moved on.
    func status(_ status: MessageStatus, of message: RecordID, conversation: ConversationID, ref: String) -> JSON {
        .object([
            ("type", "status"), ("conversation", .string(conversation.hex)), ("id", .string(message.hex)),
            ("ref", .string(ref)), ("status", .string(StatusMark(status, peersConnected: true).name)),
            ("recipients", .int(Int64(status.recipients.count))),
            ("delivered_to", .int(Int64(status.deliveredTo.count))), ("read_by", .int(Int64(status.readBy.count))),
        ])
    }

    /// A `reaction` event.
    func reaction(_ change: ReactionChange, conversation: ConversationID, ref: String) -> JSON {
        let counts = change.summary.map { count -> JSON in
            .object([
                ("reaction", .string(count.reaction.name)), ("emoji", .string(count.reaction.emoji)),
                ("count", .int(Int64(count.count))), ("mine", .bool(count.mine)),
            ])
        }
        return flagged(.object([
            ("type", "reaction"), ("conversation", .string(conversation.hex)), ("id", .string(change.message.hex)),
            ("ref", .string(ref)), ("name", .text(names.raw(change.person))), ("fingerprint", fingerprint(change.person)),
            ("reaction", .text(change.reaction?.name)), ("emoji", .text(change.reaction?.emoji)),
            ("counts", .array(counts)),
        ]))
    }

    /// A `member` or `rename` event for a system line.
    func system(_ event: SystemEvent, conversation: ConversationID) -> JSON {
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
            fields = [("type", "member"), ("change", "rights")] + fields + [("members", people([member])), ("rights", rights)]
        case .renamed(let title): fields = [("type", "rename")] + fields + [("title", .text(title))]
        case .rekeyed: fields = [("type", "member"), ("change", "rekeyed")] + fields
        }
        return flagged(
            .object(
                fields + [
                    ("id", .string(event.id.hex)), ("by", .text(names.raw(event.author))),
                    ("by_fingerprint", fingerprint(event.author)), ("time_ms", .int(event.displayedAtMillis)),
                ]))
    }
}
