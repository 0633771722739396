import NatterModel
import NatterNode
import NatterStore

/// Commands about conversations: /list, /open, /msg, plain lines, /group create, /role, /grant, /revoke, /members,
/// /more, /mute, /unmute, /archive. (/invite, /kick, /rename, /leave are one intent each: see the command table.)
extension ReplSession {
    func list(_ filter: String?, all: Bool) async throws {
        let rows = try await node.read { try $0.conversationList(filter: filter, includeArchived: all) }
        navigation.listed = rows.map(\.id)
        if rows.isEmpty {
            let archived = all ? 0 : try await node.read { try $0.conversationList(filter: filter, includeArchived: true).count }
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
                    number: index + 1, title: views.details(of: row.id) == nil ? row.title : title(of: row.id),
                    unread: row.unread, lastActivityMillis: row.lastActivityMillis, preview: row.preview,
                    isMember: row.isMember, muted: row.isMuted(at: now), archived: row.archived))
        }
    }

    func open(_ query: String) async throws {
        await stopTyping()
        switch try await resolveTarget(query) {
        case .conversation(let id): try await open(id)
        case .message(let id, let message): try await open(id, around: message)
        case .person(let person):
            let id = try await node.read { try $0.directConversationID(with: person) }
            if views.details(of: id) != nil {
                try await open(id)
            } else {
                guard try await node.read({ try $0.hasProfile(person) }) else {
                    throw ReplError("no profile from \(names.display(person)) yet")
                }
                navigation.current = .direct(person)
                await node.view(nil)
                say(["── \(names.display(person)) ──", "No messages yet — say hello"])
            }
        }
    }

    /// `/msg NAME TEXT`: to a conversation or a person, without switching.
    func message(to query: String, _ text: String) async throws {
        switch try await resolveTarget(query) {
        case .conversation(let id), .message(let id, _): try await write([.send(text, in: id)])
        case .person(let person): try await write([.sendDirect(text, to: person)])
        }
    }

    /// A plain line: to the conversation open (a direct chat's first line founds it).
    func sendPlain(_ text: String, pipelined: Bool = false, line: String = "") async throws {
        await stopTyping()
        switch navigation.current {
        case .none: throw ReplError("no conversation open: /open NAME first, or /msg NAME TEXT")
        case .direct(let person):
            try await write([.sendDirect(text, to: person)])
            let id = try await node.read { try $0.directConversationID(with: person) }
            navigation.current = .conversation(id)
            await node.view(id)
        case .conversation(let id):
            try await write([.send(text, in: id)], pipelined: pipelined, line: line)
        }
    }

    func createGroup(_ title: String?, _ memberNames: [String]) async throws {
        let members = try memberNames.map(person)
        let ticket = node.submit([.createGroup(title: title, members: members)])
        let id = try await ticket.results()[0].get().conversation
        navigation.current = .conversation(id)
        await node.view(id)
        let shown = title.map(Safe.line) ?? members.map(names.display).joined(separator: ", ")
        say("created \(shown); it is now the current conversation")
    }

    func role(_ name: String, _ roleName: String) async throws {
        let id = try currentConversation()
        let role: MemberRole
        switch roleName.lowercased() {
        case "admin": role = .admin
        case "member": role = .member
        default: throw ReplError("\(Safe.line(roleName)) is not a role: admin or member")
        }
        try await write([.setRole(role, of: try person(name), in: id)])
    }

    func rights(_ name: String, _ flagName: String, grant: Bool) async throws {
        let id = try currentConversation()
        guard let flag = FlagName.parse(flagName) else {
            throw ReplError("\(Safe.line(flagName)) is not a right: add, remove or rename")
        }
        let member = try person(name)
        guard try await details(of: id).members[member] != nil else {
            throw ReplError("\(names.display(member)) is not a member here")
        }
        try await write([grant ? .grant(flag, to: member, in: id) : .revoke(flag, from: member, in: id)])
    }

    func members() async throws {
        let id = try currentConversation()
        let details = try await details(of: id)
        for member in details.sortedMembers {
            let info = details.members[member]!
            var role = member == details.creator ? "creator" : info.role == .admin ? "admin" : "member"
            let rights = FlagName.names(info.flags)
            if !rights.isEmpty && member != details.creator { role += " (may \(rights))" }
            say("\(names.speaker(member)) \(member.publicKey.fingerprint) \(role)")
        }
        if !details.isMember { say("you are no longer a member of this conversation") }
    }

    func more() async throws {
        let id = try currentConversation()
        let total = try await node.read { try $0.lineCount(of: id) }
        let from = navigation.shownFrom[id] ?? total
        guard from > 0 else { throw ReplError("no older lines") }
        let start = max(0, from - 50)
        navigation.shownFrom[id] = start
        try await loadRefs(id)
        say(try await render(id, lines: start..<from, total: total).lines)
    }

    /// A conversation's details: as the deltas last said, else read now (a conversation just founded, whose first
    /// delta is still on its way).
    func details(of id: ConversationID) async throws -> ConversationDetails {
        if let details = views.details(of: id) { return details }
        guard let details = try await node.read({ try $0.details(of: id) }) else {
            throw ReplError("that conversation cannot be read here")
        }
        views.update(id, details)
        return details
    }

    func mute(_ duration: String?) async throws {
        let id = try currentConversation()
        let name = title(of: id)
        guard let duration else {
            try await node.mute(id, until: nil)
            views.mute(id, until: .max)
            return say("muted \(name) for ever (/unmute to hear it again)")
        }
        let until = nowMillis() + (try MuteDuration.parse(duration).get())
        try await node.mute(id, until: until)
        views.mute(id, until: until)
        let render = renderer
        let when = render.daysAgo(until) == 0 ? render.clock(until) : "\(render.dayHeader(until)) \(render.clock(until))"
        say("muted \(name) until \(when) (/unmute to hear it sooner)")
    }

    func unmute() async throws {
        let id = try currentConversation()
        guard views.isMuted(id, at: nowMillis()) else { return say("\(title(of: id)) is not muted") }
        try await node.unmute(id)
        views.mute(id, until: nil)
        say("\(title(of: id)) is no longer muted")
    }

    func archive() async throws {
        let id = try currentConversation()
        try await node.archive(id)
        say("archived \(title(of: id)): hidden from /list until something new arrives (/list --all shows it)")
    }
}
