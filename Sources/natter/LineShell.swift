import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterStore

/// The interim line interface of `natter run`: a handful of commands read from standard input and incoming
/// messages printed as lines, enough to drive nodes from scripts until the full REPL lands (docs/cli.md).
actor LineShell {
    let node: Node
    private var caughtUp = Set<AuthorID>()
    private var names: [AuthorID: String] = [:]

    init(node: Node) {
        self.node = node
    }

    /// Prints what arrives and remembers which peers have caught up.
    func watch() async {
        let debug = ProcessInfo.processInfo.environment["NATTER_TRACE"] != nil
        for await event in node.events {
            if debug { FileHandle.standardError.write(Data("trace: event \(event)\n".utf8)) }
            switch event {
            case .caughtUp(let peer): caughtUp.insert(peer)
            case .peerDown(let peer, _): caughtUp.remove(peer)
            case .conversationChanged(let conversation, let changes): await show(conversation, changes)
            case .linkFailed(_, let reason): complain("link failed: \(reason)", prefix: "notice")
            case .notice(let line): complain(line, prefix: "notice")
            default: break
            }
        }
    }

    private func show(_ conversation: ConversationID, _ changes: TimelineChanges) async {
        let service = await node.conversations
        let me = await node.identity.author
        guard let rows = try? service.history(conversation, limit: 200),
            let title = (try? service.conversationList())?.first(where: { $0.id == conversation })?.title
        else { return }
        for row in rows where changes.added.contains(row.id) && row.author != me {
            if let text = row.text {
                say("[\(Safe.line(title))] \(Safe.line(name(row.author, service))): \(Safe.text(text))")
            }
            if let system = row.systemText { say("[\(Safe.line(title))] * \(Safe.line(system))") }
        }
        for id in changes.retracted { say("[\(Safe.line(title))] a line was retracted (\(id.shortHex))") }
    }

    private func name(_ author: AuthorID, _ service: Conversations) -> String {
        if let known = names[author] { return known }
        guard let found = (try? service.profile(of: author))??.name else { return author.publicKey.fingerprint }
        names[author] = found  // only real names are cached: a profile may arrive later
        return found
    }

    private nonisolated func trace(_ line: String) {
        guard ProcessInfo.processInfo.environment["NATTER_TRACE"] != nil else { return }
        FileHandle.standardError.write(Data("trace: \(Date().timeIntervalSince1970) shell: \(line)\n".utf8))
    }

    private nonisolated func say(_ line: String) {
        print(line)
        fflush(nil)
    }

    private nonisolated func complain(_ line: String, prefix: String = "error") {
        FileHandle.standardError.write(Data("\(prefix): \(line)\n".utf8))
    }

    // MARK: - Commands

    /// Reads commands until end of input or `/quit`; returns whether any command failed.
    func readCommands() async -> Bool {
        // A plain read(2) loop on its own thread: each line is handed over as soon as it arrives.
        let lines = AsyncStream<String> { continuation in
            Thread.detachNewThread {
                var pending = [UInt8]()
                var chunk = [UInt8](repeating: 0, count: 4096)
                while true {
                    let count = chunk.withUnsafeMutableBytes { read(0, $0.baseAddress, $0.count) }
                    if count < 0 && errno == EINTR { continue }
                    guard count > 0 else { break }
                    pending += chunk[0..<count]
                    while let newline = pending.firstIndex(of: UInt8(ascii: "\n")) {
                        continuation.yield(String(decoding: pending[..<newline], as: UTF8.self))
                        pending.removeSubrange(...newline)
                    }
                }
                if !pending.isEmpty { continuation.yield(String(decoding: pending, as: UTF8.self)) }
                continuation.finish()
            }
        }
        var failed = false
        for await line in lines {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty { continue }
            if trimmed == "/quit" { break }
            do {
                try await execute(trimmed)
            } catch {
                complain("\(error)")
                failed = true
            }
        }
        return failed
    }

    private func execute(_ line: String) async throws {
        trace("command \(line)")
        defer { trace("command done") }
        let service = await node.conversations
        let words = line.split(separator: " ", omittingEmptySubsequences: true).map(String.init)
        func rest(after count: Int) -> String {
            var remainder = Substring(line)
            for _ in 0..<count {
                remainder = remainder.drop { $0 == " " }
                remainder = remainder.drop { $0 != " " }
            }
            return String(remainder.drop { $0 == " " })
        }
        switch words[0] {
        case "/whoami":
            let identity = await node.identity
            say("\(identity.signing.publicKey.fingerprint) \(name(identity.author, service))")
        case "/peers":
            for peer in await node.connectedPeers { say("peer \(peer.publicKey.fingerprint) \(name(peer, service))") }
        case "/connect":
            guard words.count == 2, let address = PeerAddress(words[1]) else {
                throw ShellError("usage: /connect HOST:PORT")
            }
            await node.connect(address)
        case "/list":
            for row in try service.conversationList() {
                say("\(row.title)\t\(row.unread) unread\t\(row.preview ?? "No messages yet — say hello")")
            }
        case "/group" where words.count >= 4 && words[1] == "create":
            let title = words[2] == "-" ? nil : words[2]
            let members = try words.dropFirst(3).map { try person($0, service) }
            let id = try service.createGroup(title: title, members: members, now: millis())
            await node.publish(
                try service.store.appliedRecords(of: id).filter { $0.header.author == service.identity.author })
            say("created group \(title ?? "(untitled)")")
        case "/msg" where words.count >= 3:
            let text = rest(after: 2)
            if let conversation = try? conversationNamed(words[1], service) {
                await node.publish([try service.send(text, in: conversation, now: millis())])
            } else {
                let peer = try person(words[1], service)
                let before = Set(try service.store.allRecords().map(\.id))
                _ = try service.sendDirect(text, to: peer, now: millis())
                await node.publish(try service.store.allRecords().filter { !before.contains($0.id) })
            }
        case "/history" where words.count == 2:
            let conversation = try conversationNamed(words[1], service)
            for row in try service.history(conversation) {
                if let text = row.text { say("\(Safe.line(name(row.author, service))): \(Safe.text(text))") }
                if let system = row.systemText { say("* \(Safe.line(system))") }
            }
        case "/digest":
            say("log \(Hex.encode(try service.store.logDigest()))")
            for row in try service.conversationList() where row.isMember {
                say("conversation \(row.id.hex) \(Hex.encode(try service.snapshot(of: row.id).state.digest()))")
            }
        case "/wait" where words.count >= 2:
            let seconds = words.count >= 3 ? Double(words.last!) ?? 10 : 10
            let deadline = Date().addingTimeInterval(seconds)
            while Date() < deadline {
                if try await holds(words, service) { return }
                try await Task.sleep(for: .milliseconds(50))
            }
            throw ShellError(
                "timed out after \(Int(seconds)) s waiting for \(words.dropFirst().joined(separator: " "))")
        default:
            throw ShellError(
                "unknown command or wrong arguments: \(words[0]) (commands: /whoami /peers /connect /list "
                    + "/group create /msg /history /digest /wait /quit)")
        }
    }

    private func holds(_ words: [String], _ service: Conversations) async throws -> Bool {
        let peers = await node.connectedPeers
        switch words[1] {
        case "synced": return !peers.isEmpty && peers.allSatisfy { caughtUp.contains($0) }
        case "peer" where words.count >= 3: return peers.contains { name($0, service) == words[2] }
        case "known" where words.count >= 3: return (try? person(words[2], service)) != nil
        default: throw ShellError("usage: /wait synced|peer NAME|known NAME [SECONDS]")
        }
    }

    /// The identity whose profile name (or fingerprint prefix) is `query`; ambiguous names list the candidates.
    private func person(_ query: String, _ service: Conversations) throws -> AuthorID {
        let authors = try service.store.feeds().filter { $0.conversation == .profileFeed(of: $0.author) }.map(\.author)
        let matches = authors.filter {
            name($0, service) == query || $0.publicKey.fingerprint.hasPrefix(query)
        }.filter { $0 != service.identity.author }
        if matches.count == 1 { return matches[0] }
        if matches.isEmpty { throw ShellError("no one called \(query) (see /peers)") }
        throw ShellError(
            "\(query) is ambiguous: "
                + matches.map { "\(name($0, service)) \($0.publicKey.fingerprint)" }
                .joined(separator: ", "))
    }

    private func conversationNamed(_ title: String, _ service: Conversations) throws -> ConversationID {
        let rows = try service.conversationList().filter { $0.title == title }
        guard rows.count == 1 else {
            throw ShellError(rows.isEmpty ? "no conversation \(title)" : "\(title) is ambiguous")
        }
        return rows[0].id
    }

    private nonisolated func millis() -> Int64 { nowMillis() }
}

struct ShellError: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// Rendering of text from the network: control characters and bidirectional overrides escaped, continuation lines
/// indented so a message cannot forge another line.
enum Safe {
    static func line(_ text: String) -> String {
        String(
            text.unicodeScalars.map { scalar -> String in
                if scalar.properties.generalCategory == .control || (0x202A...0x202E).contains(scalar.value)
                    || (0x2066...0x2069).contains(scalar.value)
                {
                    return "\\u{\(String(scalar.value, radix: 16))}"
                }
                return String(scalar)
            }.joined())
    }

    static func text(_ text: String) -> String {
        text.split(separator: "\n", omittingEmptySubsequences: false).map { line(String($0)) }
            .joined(separator: "\n    ")
    }
}
