import NatterModel
import NatterNode
import NatterStore

/// Commands about messages: /react, /unreact, /reply, /edit, /delete, /receipts, /search.
extension ReplSession {
    func react(_ ref: String, _ reactionName: String) async throws {
        let (id, message) = try await resolveRef(ref)
        guard let reaction = Reaction.allCases.first(where: { $0.name == reactionName.lowercased() || $0.emoji == reactionName })
        else {
            throw ReplError(
                "\(Safe.line(reactionName)) is not a reaction: love ❤️, like 👍, dislike 👎, laugh 😂, emphasize ‼️, question ❓"
            )
        }
        try await write([.react(reaction, to: message, in: id)])
    }

    func unreact(_ ref: String) async throws {
        let (id, message) = try await resolveRef(ref)
        let line = try await node.read { try $0.line(message, in: id) }
        guard line?.reactions.contains(where: \.mine) == true else { throw ReplError("you have not reacted to \(ref)") }
        try await write([.unreact(message, in: id)])
    }

    func reply(_ ref: String, _ text: String) async throws {
        let (id, message) = try await resolveRef(ref)
        try await write([.send(text, in: id, replyTo: message)])
    }

    func edit(_ ref: String, _ text: String) async throws {
        let (id, message) = try await resolveRef(ref)
        _ = try await ownMessage(message, in: id)
        try await write([.edit(message, to: text, in: id)])
    }

    func delete(_ ref: String) async throws {
        let (id, message) = try await resolveRef(ref)
        _ = try await ownMessage(message, in: id)
        try await write([.delete(message, in: id)])
    }

    /// `/receipts REF`: who read your message and when, who has it, who does not yet (SPEC F7).
    func receipts(_ ref: String) async throws {
        let (id, message) = try await resolveRef(ref)
        let line = try await ownMessage(message, in: id)
        let receipts = try await node.read { try $0.receipts(of: message, in: id) }
        var out = ["\(views.label(of: message, in: id)): \(renderer.status(StatusMark(line.status, peersConnected: true)))"]
        if receipts.isEmpty { out.append("no recipients") }
        for receipt in receipts {
            switch receipt.state {
            case .read(let millis):
                let when =
                    renderer.daysAgo(millis) == 0
                    ? renderer.clock(millis) : "\(renderer.relative(millis)) \(renderer.clock(millis))"
                out.append("  \(names.display(receipt.member)) read it at \(when)")
            case .delivered: out.append("  \(names.display(receipt.member)) has it, not read yet")
            case .pending: out.append("  \(names.display(receipt.member)) does not have it yet")
            }
        }
        say(out)
    }

    /// `/search [--all] WORDS`: the current conversation (all when none is open, or with --all), newest first;
    /// each result's label opens the conversation around it (`/open REF`).
    func search(_ query: String, all: Bool) async throws {
        let scope = all ? nil : navigation.currentConversation
        let hits: [SearchHit]
        do {
            hits = try await node.read { try $0.search(query, in: scope) }.filter { !people.isHidden($0.sender) }
        } catch let error as SearchError {
            throw ReplError(error.description)
        }
        let place = scope.map { "in \(title(of: $0))" } ?? "in all conversations"
        navigation.searchResults = hits.map { ($0.conversation, $0.message) }
        for conversation in Set(hits.map(\.conversation)) { try await loadRefs(conversation) }
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
            let ref = views.label(of: hit.message, in: hit.conversation)
            let conversationTitle = views.details(of: hit.conversation) == nil
                ? Safe.line(hit.conversationTitle) : title(of: hit.conversation)
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
                events.flagged(
                    .object([
                        ("conversation", .string(hit.conversation.hex)), ("title", .string(conversationTitle)),
                        ("id", .string(hit.message.hex)), ("ref", .string(ref)),
                        ("author", .text(names.raw(hit.sender))), ("fingerprint", events.fingerprint(hit.sender)),
                        ("time_ms", .int(hit.displayedAtMillis)), ("snippet", .string(hit.snippet)),
                        ("highlights", .array(highlights)),
                    ])))
        }
        if output.json {
            output.emit(
                .object([
                    ("type", "search"), ("query", .string(query)), ("conversation", .text(scope?.hex)),
                    ("results", .array(results)),
                ]))
        } else {
            say(lines)
        }
    }
}
