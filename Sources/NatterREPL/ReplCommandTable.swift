import NatterStore

/// The command table: each action the parser produces and the handler that carries it out on the session. Every
/// handler is small and does one thing (Commands*.swift); a handler that writes sends intents to the node and lets
/// the node's events show what happened.
extension ReplAction {
    func run(in repl: isolated ReplSession) async throws {
        switch self {
        case .help(let command): try repl.help(command)
        case .nick(let name): try await repl.nick(name)
        case .whoami: repl.whoami()
        case .peers: await repl.peers()
        case .who: try await repl.who()
        case .whois(let name): try await repl.whois(name)
        case .status: try await repl.status()
        case .connect(let address): try await repl.connect(address)
        case .ignore(let name): try repl.ignore(name)
        case .block(let name): try await repl.block(name)
        case .digest: try await repl.digest()
        case .forceWrite: try await repl.forceWrite()
        case .list(let filter, let all): try await repl.list(filter, all: all)
        case .open(let target): try await repl.open(target)
        case .message(let target, let text): try await repl.message(to: target, text)
        case .say(let text): try await repl.sendPlain(text)
        case .groupCreate(let title, let members): try await repl.createGroup(title, members)
        case .invite(let names):
            let id = try repl.currentConversation()
            try await repl.write([.invite(try names.map(repl.person), to: id)])
        case .kick(let names):
            let id = try repl.currentConversation()
            try await repl.write([.kick(try names.map(repl.person), from: id)])
        case .rename(let title): try await repl.write([.rename(try repl.currentConversation(), to: title == "-" ? nil : title)])
        case .role(let name, let role): try await repl.role(name, role)
        case .grant(let name, let flag): try await repl.rights(name, flag, grant: true)
        case .revoke(let name, let flag): try await repl.rights(name, flag, grant: false)
        case .leave: try await repl.write([.leave(try repl.currentConversation())])
        case .members: try await repl.members()
        case .history(let count): try await repl.show(repl.currentConversation(), last: count ?? Conversations.pageSize)
        case .more: try await repl.more()
        case .mute(let duration): try await repl.mute(duration)
        case .unmute: try await repl.unmute()
        case .archive: try await repl.archive()
        case .react(let ref, let reaction): try await repl.react(ref, reaction)
        case .unreact(let ref): try await repl.unreact(ref)
        case .reply(let ref, let text): try await repl.reply(ref, text)
        case .edit(let ref, let text): try await repl.edit(ref, text)
        case .delete(let ref): try await repl.delete(ref)
        case .receipts(let ref): try await repl.receipts(ref)
        case .search(let query, let all): try await repl.search(query, all: all)
        case .sendFile(let path): try await repl.sendFile(path)
        case .save(let ref, let path, let overwrite): try await repl.save(ref, to: path, overwrite: overwrite)
        case .wait(let condition, let arguments): try await repl.wait(condition, arguments)
        case .quit: break
        }
    }
}
