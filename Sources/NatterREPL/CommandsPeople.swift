import NatterCrypto
import NatterModel
import NatterNode
import NatterStore

/// Commands about people and the node: /help, /whoami, /peers, /who, /whois, /status, /connect, /ignore, /block,
/// /force-write, /digest.
extension ReplSession {
    /// A person named on a command line (`resolvePerson`, never yourself).
    func person(_ name: String) throws -> AuthorID { try resolvePerson(name) }

    func help(_ command: String?) throws {
        switch ReplParser.help(command) {
        case .success(let lines): say(lines)
        case .failure(let failure): throw ReplError(failure.description)
        }
    }

    func nick(_ name: String) async throws {
        try await write([.nick(name)])
        people.named(me, name)
        say("you are now \(Safe.line(name))")
    }

    func whoami() {
        say("\(names.display(me)) \(me.publicKey.fingerprint)")
    }

    func peers() async {
        let peers = await node.connectedPeers
        if peers.isEmpty { say("no peers connected (on a LAN they appear within seconds; /connect HOST:PORT for others)") }
        for peer in peers {
            let sync =
                presence.caughtUp.contains(peer)
                ? "caught up" : presence.progress[peer].map { "syncing \($0.received) / \($0.expected)" } ?? "syncing"
            say("peer \(names.display(peer)) \(peer.publicKey.fingerprint) \(sync)")
        }
        for (peer, seen) in presence.offline where !peers.contains(peer) {
            say("peer \(names.display(peer)) \(peer.publicKey.fingerprint) offline, last seen \(renderer.relative(seen))")
        }
    }

    func who() async throws {
        let others = names.authors.filter { $0 != me }
        if others.isEmpty { say("nobody known yet (people appear when their profile arrives)") }
        for person in others {
            say("\(names.display(person)) \(person.publicKey.fingerprint) \(try await presence(of: person))")
        }
    }

    func whois(_ name: String) async throws {
        let person = try resolvePerson(name, includingMe: true)
        var lines = ["\(names.display(person)) \(person.publicKey.fingerprint)"]
        lines.append(person == me ? "this is you" : try await presence(of: person))
        let shared = views.ids.filter { id in
            guard let details = views.details(of: id), person != me else { return false }
            return details.members[person] != nil && details.isMember
        }.map { title(of: $0) }.sorted()
        if !shared.isEmpty { lines.append("conversations: " + shared.joined(separator: ", ")) }
        if people.blocked.contains(person) {
            lines.append("blocked")
        } else if people.ignored.contains(person) {
            lines.append("ignored")
        }
        say(lines)
    }

    func status() async throws {
        let peers = await node.connectedPeers
        var lines = ["\(names.display(me)) \(me.publicKey.fingerprint), listening on port \(node.port)"]
        lines.append("peers: \(peers.count) connected, \(peers.filter { presence.caughtUp.contains($0) }.count) caught up")
        let (rows, unread) = try await node.read { (try $0.conversationList(), try $0.totalUnread()) }
        lines.append("conversations: \(rows.count), unread: \(unread)")
        for (peer, counts) in presence.progress where !presence.caughtUp.contains(peer) {
            lines.append("syncing with \(names.display(peer)): \(counts.received) / \(counts.expected)")
        }
        say(lines)
    }

    func connect(_ text: String) async throws {
        guard let address = PeerAddress(text) else { throw ReplError("\(Safe.line(text)) is not HOST:PORT") }
        await node.connect(address)
        say("dialling \(address)")
    }

    func ignore(_ name: String) throws {
        let person = try resolvePerson(name)
        let now = try people.toggle(person, blocking: false)
        say(
            now
                ? "ignoring \(names.display(person)): their messages and notices are hidden (/ignore again to stop)"
                : "no longer ignoring \(names.display(person))")
    }

    func block(_ name: String) async throws {
        let person = try resolvePerson(name)
        let now = try people.toggle(person, blocking: true)
        await node.setBlocked(people.blocked)
        say(
            now
                ? "blocked \(names.display(person)): their links are refused and everything from them is hidden "
                    + "(/block again to unblock)"
                : "unblocked \(names.display(person))")
    }

    /// SPEC F20: the user's word lifts the wait for own feed heads (an import, a copied directory: OwnHeadsGuard).
    func forceWrite() async throws {
        if try await node.forceWrite() != nil {
            say("sending resumes from this node's own heads; if another node holds more of them, your feeds fork")
        } else {
            say("nothing waits: this node's own feeds are current as far as it knows")
        }
    }

    func digest() async throws {
        let (log, conversations) = try await node.read { try $0.digests() }
        let hex = Hex.encode(log)
        guard output.json else {
            return say(["log \(hex)"] + conversations.map { "conversation \($0.0.hex) \(Hex.encode($0.1))" })
        }
        output.emit(
            .object([
                ("type", "digest"), ("log", .string(hex)),
                (
                    "conversations",
                    .array(
                        conversations.map {
                            .object([("id", .string($0.0.hex)), ("digest", .string(Hex.encode($0.1)))])
                        })
                ),
            ]))
    }
}
