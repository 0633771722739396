import ArgumentParser

/// What a REPL line asks for, once parsed: plain data the session carries out.
enum ReplAction: Sendable, Equatable {
    case help(String?)
    case nick(String)
    case whoami
    case peers
    case who
    case whois(String)
    case list(String?, all: Bool)
    case open(String)
    case message(to: String, text: String)
    case say(String)
    case groupCreate(title: String?, members: [String])
    case invite([String])
    case kick([String])
    case rename(String)
    case role(name: String, role: String)
    case leave
    case members
    case history(Int?)
    case more
    case react(ref: String, reaction: String)
    case unreact(String)
    case reply(ref: String, text: String)
    case edit(ref: String, text: String)
    case delete(String)
    case receipts(String)
    case connect(String)
    case grant(name: String, flag: String)
    case revoke(name: String, flag: String)
    case ignore(String)
    case block(String)
    case status
    case digest
    case forceWrite
    case wait(condition: String, arguments: [String])
    case sendFile(path: String)
    case save(ref: String, path: String, overwrite: Bool)
    case search(String, all: Bool)
    case mute(String?)
    case unmute
    case archive
    case quit
}

/// One REPL command: its ArgumentParser definition and the action it stands for.
protocol ReplCommand: ParsableCommand {
    /// How many words precede the message text, which is taken raw (never parsed as options); nil when the
    /// command takes no raw text.
    static var rawTextAfter: Int? { get }
    /// Flags that may come before the fixed words (`/save --force REF PATH`); they do not count as fixed words.
    static var leadingFlags: Set<String> { get }
    var action: ReplAction { get }
}

extension ReplCommand {
    static var rawTextAfter: Int? { nil }
    static var leadingFlags: Set<String> { [] }
}

/// The REPL's command tree, parsed with `parseAsRoot` on the words of a line (never exits the program).
struct ReplRoot: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "/",
        abstract: "natter's commands. Plain lines go to the current conversation.",
        subcommands: ReplRoot.commands)

    static let commands: [any ReplCommand.Type] = [
        HelpLine.self, NickLine.self, WhoamiLine.self, PeersLine.self, WhoLine.self, WhoisLine.self, ListLine.self,
        OpenLine.self, MsgLine.self, GroupLine.self, InviteLine.self, KickLine.self, RenameLine.self, RoleLine.self,
        LeaveLine.self, MembersLine.self, HistoryLine.self, MoreLine.self, ReactLine.self, UnreactLine.self,
        ReplyLine.self, EditLine.self, DeleteLine.self, ReceiptsLine.self, SendFileLine.self, SaveLine.self,
        SearchLine.self, MuteLine.self, UnmuteLine.self, ArchiveLine.self, ConnectLine.self, GrantLine.self,
        RevokeLine.self, IgnoreLine.self, BlockLine.self, StatusLine.self, DigestLine.self, WaitLine.self,
        ForceWriteLine.self, QuitLine.self,
    ]

    static func command(named name: String) -> (any ReplCommand.Type)? {
        commands.first { $0.configuration.commandName == name }
    }
}

// MARK: - People and the node

struct HelpLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "help", abstract: "List the commands, or show how to use one.")
    @Argument(help: "A command (without the slash).") var command: String?
    var action: ReplAction { .help(command) }
}

struct NickLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "nick", abstract: "Change your display name.")
    static let rawTextAfter: Int? = 0
    @Argument(help: "Your new name (the rest of the line).") var name: String
    var action: ReplAction { .nick(name) }
}

struct WhoamiLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "whoami", abstract: "Your name and fingerprint.")
    var action: ReplAction { .whoami }
}

struct PeersLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "peers", abstract: "The peers connected now, with fingerprints.")
    var action: ReplAction { .peers }
}

struct WhoLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "who", abstract: "Everyone you know of, online or when last seen.")
    var action: ReplAction { .who }
}

struct WhoisLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "whois", abstract: "A person's fingerprint, presence and shared conversations.")
    @Argument(help: "A name or fingerprint prefix.") var name: String
    var action: ReplAction { .whois(name) }
}

struct StatusLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "status", abstract: "The node: identity, port, peers, sync, unread.")
    var action: ReplAction { .status }
}

struct ConnectLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "connect", abstract: "Dial a peer once.")
    @Argument(help: ArgumentHelp("Where the peer listens.", valueName: "HOST:PORT")) var address: String
    var action: ReplAction { .connect(address) }
}

struct IgnoreLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "ignore", abstract: "Hide a person's messages and notices (again to stop).")
    @Argument(help: "A name or fingerprint prefix.") var name: String
    var action: ReplAction { .ignore(name) }
}

struct BlockLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "block", abstract: "Ignore a person and refuse their links (again to unblock).")
    @Argument(help: "A name or fingerprint prefix.") var name: String
    var action: ReplAction { .block(name) }
}

struct ForceWriteLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "force-write",
        abstract: "Write although this node has not yet learned its own feeds from a peer (may fork them).")
    var action: ReplAction { .forceWrite }
}

struct DigestLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest", abstract: "Digests of the record log and of each conversation (SPEC F21).")
    var action: ReplAction { .digest }
}

struct WaitLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "wait",
        abstract: "Block until a condition holds (fails after the timeout, default 10 s).",
        usage: "/wait synced|delivered REF|read REF|peer NAME|known NAME [SECONDS]")
    @Argument(help: "synced, delivered, read, peer or known.") var condition: String
    @Argument(help: "REF or NAME, then optionally SECONDS.") var arguments: [String] = []
    var action: ReplAction { .wait(condition: condition, arguments: arguments) }
}

struct QuitLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "quit", abstract: "Finish pending work and stop the node.")
    var action: ReplAction { .quit }
}

// MARK: - Conversations

struct ListLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "list", abstract: "Conversations by last activity, with unread counts.")
    @Flag(help: "Archived conversations too.") var all = false
    @Argument(help: "Only titles containing this.") var filter: String?
    var action: ReplAction { .list(filter, all: all) }
}

struct OpenLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "open", abstract: "Switch to a conversation and show its last lines (or the lines around a message).",
        usage: "/open NAME|#N|REF")
    @Argument(help: "A title, a person's name, #N from /list, or a message's label (from /search).") var target: String
    var action: ReplAction { .open(target) }
}

struct MsgLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "msg", abstract: "Send to a person or a conversation without switching to it.")
    static let rawTextAfter: Int? = 1
    @Argument(help: "A person or a conversation title.") var name: String
    @Argument(help: "The message (the rest of the line, taken as it is).") var text: String
    var action: ReplAction { .message(to: name, text: text) }
}

struct GroupLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "group", abstract: "Create a group: /group create TITLE NAME… (TITLE - for none).",
        usage: "/group create TITLE NAME…")
    @Argument(help: "create") var verb: String
    @Argument(help: "The title, or - for an untitled group.") var title: String
    @Argument(help: "One or more people.") var members: [String]

    func validate() throws {
        guard verb == "create" else { throw ValidationError("only /group create TITLE NAME… exists") }
        guard !members.isEmpty else { throw ValidationError("name at least one other member") }
    }

    var action: ReplAction { .groupCreate(title: title == "-" ? nil : title, members: members) }
}

struct InviteLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "invite", abstract: "Add people to the current group.")
    @Argument(help: "One or more people.") var names: [String]
    func validate() throws { if names.isEmpty { throw ValidationError("name someone to add") } }
    var action: ReplAction { .invite(names) }
}

struct KickLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "kick", abstract: "Remove people from the current group.")
    @Argument(help: "One or more members.") var names: [String]
    func validate() throws { if names.isEmpty { throw ValidationError("name someone to remove") } }
    var action: ReplAction { .kick(names) }
}

struct RenameLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "rename", abstract: "Rename the current group (- removes the title).")
    static let rawTextAfter: Int? = 0
    @Argument(help: "The new title (the rest of the line).") var title: String
    var action: ReplAction { .rename(title) }
}

struct RoleLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "role", abstract: "Make a member an admin or a plain member (creator only).")
    @Argument(help: "A member.") var name: String
    @Argument(help: "admin or member.") var role: String
    var action: ReplAction { .role(name: name, role: role) }
}

struct GrantLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "grant", abstract: "Let a member add, remove or rename (creator only).")
    @Argument(help: "A member.") var name: String
    @Argument(help: "add, remove or rename.") var flag: String
    var action: ReplAction { .grant(name: name, flag: flag) }
}

struct RevokeLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "revoke", abstract: "Take back a right given with /grant (creator only).")
    @Argument(help: "A member.") var name: String
    @Argument(help: "add, remove or rename.") var flag: String
    var action: ReplAction { .revoke(name: name, flag: flag) }
}

struct LeaveLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "leave", abstract: "Leave the current group.")
    var action: ReplAction { .leave }
}

struct MembersLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "members", abstract: "Members of the current conversation, with roles and rights.")
    var action: ReplAction { .members }
}

struct HistoryLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "history", abstract: "Show the last N lines of the current conversation (default 50).")
    @Argument(help: "How many lines.") var count: Int?
    func validate() throws {
        if let count, count < 1 { throw ValidationError("N must be at least 1") }
    }
    var action: ReplAction { .history(count) }
}

struct MoreLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "more", abstract: "Show the 50 lines before those already shown.")
    var action: ReplAction { .more }
}

// MARK: - Messages

struct ReactLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "react", abstract: "React to a message: love, like, dislike, laugh, emphasize, question.")
    @Argument(help: "The message's label.") var ref: String
    @Argument(help: "A reaction name or its emoji.") var reaction: String
    var action: ReplAction { .react(ref: ref, reaction: reaction) }
}

struct UnreactLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "unreact", abstract: "Remove your reaction from a message.")
    @Argument(help: "The message's label.") var ref: String
    var action: ReplAction { .unreact(ref) }
}

struct ReplyLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "reply", abstract: "Answer a message, quoting it.")
    static let rawTextAfter: Int? = 1
    @Argument(help: "The message's label.") var ref: String
    @Argument(help: "The answer (the rest of the line).") var text: String
    var action: ReplAction { .reply(ref: ref, text: text) }
}

struct EditLine: ReplCommand {
    static let configuration = CommandConfiguration(commandName: "edit", abstract: "Change the text of your message.")
    static let rawTextAfter: Int? = 1
    @Argument(help: "The message's label.") var ref: String
    @Argument(help: "The new text (the rest of the line).") var text: String
    var action: ReplAction { .edit(ref: ref, text: text) }
}

struct DeleteLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete", abstract: "Delete your message (\"message deleted\" remains).")
    @Argument(help: "The message's label.") var ref: String
    var action: ReplAction { .delete(ref) }
}

struct ReceiptsLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "receipts", abstract: "Who read your message (and when), who has it, who not yet.")
    @Argument(help: "The message's label.") var ref: String
    var action: ReplAction { .receipts(ref) }
}

// MARK: - Features of issue 7

struct SendFileLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "send-file", abstract: "Send a file to the current conversation (members fetch it on demand).")
    @Argument(help: "The file (the rest of the line, spaces allowed).") var path: String
    static let rawTextAfter: Int? = 0
    var action: ReplAction { .sendFile(path: path) }
}

struct SaveLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "save",
        abstract: "Fetch a received file and save it to PATH (a directory: under the file's name there).")
    static let rawTextAfter: Int? = 1
    static let leadingFlags: Set<String> = ["--force"]
    @Flag(name: .customLong("force"), help: "Replace PATH if it exists.") var force = false
    @Argument(help: "The file message's label.") var ref: String
    @Argument(help: "Where to save it (the rest of the line, spaces allowed).") var path: String
    var action: ReplAction { .save(ref: ref, path: path, overwrite: force) }
}

struct SearchLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "search",
        abstract: "Search the messages you can read: the current conversation, or all with --all.",
        usage: "/search [--all] <words>")
    static let rawTextAfter: Int? = 0
    @Argument(help: "Words to look for (all must occur; word* matches a prefix); --all first searches everywhere.")
    var text: String
    /// `--all` is the first word of the raw text (the rest is taken as typed, never parsed as options).
    var action: ReplAction {
        let words = text.split(separator: " ", maxSplits: 1, omittingEmptySubsequences: true)
        if words.first == "--all" { return .search(words.count > 1 ? String(words[1]) : "", all: true) }
        return .search(text, all: false)
    }
}

struct MuteLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "mute", abstract: "Silence the current conversation's notices, for a while or for ever.")
    @Argument(help: "For how long: 30m, 1h, 1h30m, 2d, 1w (default: for ever).") var duration: String?
    var action: ReplAction { .mute(duration) }
}

struct UnmuteLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "unmute", abstract: "Turn the current conversation's notices back on.")
    var action: ReplAction { .unmute }
}

struct ArchiveLine: ReplCommand {
    static let configuration = CommandConfiguration(
        commandName: "archive", abstract: "Hide the current conversation from /list until something new arrives.")
    var action: ReplAction { .archive }
}

extension ReplAction {
    /// Commands that write records (sends, in F16's sense): the REPL's send rate applies to them.
    var writesRecords: Bool {
        switch self {
        case .nick, .message, .say, .groupCreate, .invite, .kick, .rename, .role, .leave, .react, .unreact, .reply,
            .edit, .delete, .grant, .revoke:
            true
        default:
            false
        }
    }
}

// MARK: - Parsing a line

/// Turns a line into an action, or a one-line error a person can act on.
enum ReplParser {
    struct Failure: Error, Equatable, CustomStringConvertible {
        let description: String
    }

    /// Words of a line: split on spaces and tabs; "double quotes" group words (for titles and names with spaces).
    /// Each word comes with the index just after it in the line, so the raw rest can be cut from the original.
    static func words(_ line: String) -> [(word: String, end: String.Index)] {
        var out = [(String, String.Index)]()
        var index = line.startIndex
        while index < line.endIndex {
            while index < line.endIndex, line[index] == " " || line[index] == "\t" { index = line.index(after: index) }
            guard index < line.endIndex else { break }
            var word = ""
            if line[index] == "\"", line[line.index(after: index)...].contains("\"") {
                index = line.index(after: index)
                while line[index] != "\"" {
                    word.append(line[index])
                    index = line.index(after: index)
                }
                index = line.index(after: index)
            } else {
                while index < line.endIndex, line[index] != " " && line[index] != "\t" {
                    word.append(line[index])
                    index = line.index(after: index)
                }
            }
            out.append((word, index))
        }
        return out
    }

    /// Parses one line: a command (leading slash) or text for the current conversation.
    static func parse(_ line: String) -> Result<ReplAction, Failure> {
        guard line.hasPrefix("/") else { return .success(.say(line)) }
        let body = String(line.dropFirst())
        let words = Self.words(body)
        guard let first = words.first?.word, !first.isEmpty else {
            return .failure(Failure(description: "empty command (/help lists the commands)"))
        }
        guard let type = ReplRoot.command(named: first) else {
            return .failure(Failure(description: "unknown command /\(first) (/help lists the commands)"))
        }
        var arguments = words.map(\.word)
        let flags = words.dropFirst().prefix { type.leadingFlags.contains($0.word) }.count
        if let fixed = type.rawTextAfter.map({ $0 + flags }), words.count > fixed + 1 {
            // The text after the fixed words, exactly as typed: "-1 ok" stays a message, never an option.
            let raw = body[words[fixed].end...].drop { $0 == " " || $0 == "\t" }
            arguments = Array(arguments.prefix(fixed + 1)) + ["--", String(raw)]
        }
        do {
            // ArgumentParser answers `--help` with its own help command.
            guard let command = try ReplRoot.parseAsRoot(arguments) as? any ReplCommand else {
                return .success(.help(first))
            }
            return .success(command.action)
        } catch {
            if ReplRoot.exitCode(for: error) == .success { return .success(.help(first)) }
            let message = ReplRoot.message(for: error).split(separator: "\n").first.map(String.init) ?? "bad command"
            return .failure(Failure(description: "\(message) (usage: \(usage(type)))"))
        }
    }

    /// "/msg <name> <text>": the usage line of a command, as typed in the REPL.
    static func usage(_ type: any ReplCommand.Type) -> String {
        if let custom = type.configuration.usage { return custom }
        let generated = ReplRoot.usageString(for: type)
        let trimmed = generated.hasPrefix("/ ") ? String(generated.dropFirst(2)) : generated
        return "/" + trimmed
    }

    /// `/help`: every command with its one-line abstract; `/help CMD`: its usage and arguments.
    static func help(_ command: String?) -> Result<[String], Failure> {
        guard let command else {
            var lines = ["Commands (plain lines go to the current conversation; /help CMD for one):"]
            for type in ReplRoot.commands {
                let name = "/" + type.configuration.commandName!
                lines.append(name.padding(toLength: 12, withPad: " ", startingAt: 0) + type.configuration.abstract)
            }
            return .success(lines)
        }
        let name = command.hasPrefix("/") ? String(command.dropFirst()) : command
        guard let type = ReplRoot.command(named: name) else {
            return .failure(Failure(description: "no command /\(name) (/help lists the commands)"))
        }
        var lines = ["usage: \(usage(type))", type.configuration.abstract]
        let help = ReplRoot.helpMessage(for: type, columns: 100).split(
            separator: "\n", omittingEmptySubsequences: false)
        if let start = help.firstIndex(where: { $0.hasPrefix("ARGUMENTS:") }) {
            lines += help[start...].map(String.init).filter { !$0.isEmpty && !$0.contains("-h, --help") }
                .filter { !$0.hasPrefix("OPTIONS:") }
        }
        return .success(lines)
    }
}

// MARK: - Completion

/// Tab completion for the line editor: command names at the start of a line, then people's names and
/// conversation titles (quoted when they contain a space). Pure, so the editor's thread can call it with a
/// snapshot of the words.
enum ReplCompletion {
    static func candidates(line: String, word: String, names: [String], titles: [String]) -> [String] {
        let before = line.hasSuffix(word) ? String(line.dropLast(word.count)) : line
        if before.trimmingCharacters(in: .whitespaces).isEmpty && word.hasPrefix("/") {
            return ReplRoot.commands.compactMap { type in
                type.configuration.commandName.map { "/" + $0 }
            }.filter { $0.hasPrefix(word) }.sorted()
        }
        let wanted = word.lowercased().replacingOccurrences(of: "\"", with: "")
        let words = Set(names + titles).map { $0.contains(" ") ? "\"\($0)\"" : $0 }
        return words.filter { $0.lowercased().replacingOccurrences(of: "\"", with: "").hasPrefix(wanted) }.sorted()
    }
}
