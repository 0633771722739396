import ArgumentParser
import Foundation
import Logging
import NatterCrypto
import NatterModel
import NatterNetwork
import NatterNode
import NatterREPL
import NatterStore
import NatterTerminal
import ServiceLifecycle
import Synchronization

/// `natter run` (and plain `natter`): start the node — listen, dial named peers, sync — and its REPL on standard
/// input (docs/cli.md).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Start the node (creates the data directory on first start).")

    /// The default TCP port of a natter node.
    static let defaultPort = 7718

    @OptionGroup var data: DataOption

    @Option(help: "Your display name, if this is the first start (a terminal asks for it; scripts must give it).")
    var name: String?

    @Option(help: ArgumentHelp("Where to listen (another port is chosen if it is taken).", valueName: "HOST:PORT"))
    var listen: String = "0.0.0.0:\(RunCommand.defaultPort)"

    @Option(
        name: .customLong("peer"),
        help: ArgumentHelp(
            "A peer to dial and keep dialling, remembered for later starts (repeatable).", valueName: "HOST:PORT"))
    var peers: [String] = []

    @Flag(help: "Run without the REPL: a relay for a spare machine (stop it with SIGINT or SIGTERM).")
    var headless = false

    @Flag(help: "Do not send or listen for discovery beacons (then only --peer and /connect make links).")
    var noDiscovery = false

    @Option(help: "The UDP port for discovery beacons (every node of a LAN must use the same).")
    var discoveryPort: Int = 7719

    @Flag(help: "Print one JSON object per line for every event and command result (docs/cli.md has the schema).")
    var json = false

    @Flag(help: "No terminal bell with notices from conversations you are not viewing.")
    var noBell = false

    @Flag(help: "Desktop notifications too (through notify-send, when it is installed).")
    var notify = false

    @Option(
        help: ArgumentHelp(
            "Messages and other sends allowed per second, with a burst of as many (default 4, burst 20; 0: no limit).",
            valueName: "N"))
    var sendRate: Double?

    @Option(
        help: ArgumentHelp("New records accepted per second from one peer (default 2000, burst 20000).", valueName: "N")
    )
    var peerRecordRate: Double?

    @Option(
        help: ArgumentHelp("New records accepted per second from one author (default 500, burst 5000).", valueName: "N")
    )
    var authorRecordRate: Double?

    @Option(
        help: ArgumentHelp(
            "Neighbours' live records accepted per second from one peer's priority lane (default 200, burst 1000).",
            valueName: "N"))
    var peerPriorityRate: Double?

    @Option(help: ArgumentHelp("Conversations held only as a relay, at most (default 256).", valueName: "N"))
    var relayConversations: Int?

    @Option(help: ArgumentHelp("Record bytes held only as a relay, at most, in MiB (default 64).", valueName: "MIB"))
    var relayMib: Int?

    @Option(
        help: ArgumentHelp(
            "Record what the node's core receives and decides to FILE, for `natter lab replay` (no plaintext).",
            valueName: "FILE"))
    var trace: String?

    @Option(help: ArgumentHelp("The trace's bound in MiB; at it recording stops (default 32).", valueName: "MIB"))
    var traceMib: Int?

    /// The quotas as the options set them (SPEC F16; defaults in `QuotaConfiguration`).
    var quotas: QuotaConfiguration {
        var quotas = QuotaConfiguration()
        if let peerRecordRate {
            quotas.peerRecordsPerSecond = peerRecordRate
            quotas.peerRecordsBurst = max(1, Int(peerRecordRate * 10))
        }
        if let authorRecordRate {
            quotas.authorRecordsPerSecond = authorRecordRate
            quotas.authorRecordsBurst = max(1, Int(authorRecordRate * 10))
        }
        if let peerPriorityRate {
            quotas.peerPriorityRecordsPerSecond = peerPriorityRate
            quotas.peerPriorityRecordsBurst = max(1, Int(peerPriorityRate * 5))
        }
        if let relayConversations { quotas.relayConversationsMax = relayConversations }
        if let relayMib { quotas.relayBytesMax = relayMib << 20 }
        return quotas
    }

    func validate() throws {
        guard PeerAddress(listen) != nil || listen.hasSuffix(":0") else {
            throw ValidationError("--listen takes HOST:PORT, e.g. 0.0.0.0:7718")
        }
        for peer in peers where PeerAddress(peer) == nil {
            throw ValidationError("--peer takes HOST:PORT, not \(peer)")
        }
        if let sendRate, !(sendRate >= 0 && sendRate.isFinite) {
            throw ValidationError("--send-rate takes a number of sends per second (0 for no limit)")
        }
        for (name, rate) in [
            ("--peer-record-rate", peerRecordRate), ("--author-record-rate", authorRecordRate),
            ("--peer-priority-rate", peerPriorityRate),
        ] {
            if let rate, !(rate > 0 && rate.isFinite) { throw ValidationError("\(name) takes a positive number") }
        }
        if let traceMib, traceMib < 1 { throw ValidationError("--trace-mib takes a number of MiB, 1 or more") }
        if traceMib != nil, trace == nil { throw ValidationError("--trace-mib needs --trace FILE") }
        for (name, count) in [("--relay-conversations", relayConversations), ("--relay-mib", relayMib)] {
            if let count, count < 0 { throw ValidationError("\(name) takes a number, 0 or more") }
        }
    }

    func run() async throws {
        let interactive = Terminal.isInteractive
        let handle = data.dataDirectory
        let node: Node
        do {
            if !handle.directory.isInitialised {
                let chosen = try firstStartName(interactive: interactive)
                _ = try handle.initialise(name: chosen, network: nil)
                announce("created \(handle.directory.path)")
            }
            let (identity, store) = try handle.open()
            let networkKey = try handle.directory.readNetworkKey()
            // PeerAddress refuses port 0; here it means "any free port".
            let listenAddress = PeerAddress(listen) ?? PeerAddress(host: String(listen.dropLast(2)), port: 0)
            // Named peers are remembered: this start dials them and every earlier one.
            try store.rememberPeers(peers.compactMap(PeerAddress.init).map(\.description), atMillis: WallClock.nowMillis())
            let remembered = try store.namedPeers().compactMap(PeerAddress.init)
            node = try await Node(
                store: store, identity: identity, networkKey: networkKey, listen: listenAddress, peers: remembered,
                discovery: noDiscovery ? nil : DiscoveryConfiguration(port: discoveryPort), quotas: quotas,
                trace: trace.map {
                    TraceOptions(path: $0, bytesMax: (traceMib ?? TraceLimits.bytesDefault >> 20) << 20)
                })
            let profileName = try handle.profile(of: identity.author, in: store)?.name ?? "no name"
            let requested = listenAddress.port
            if requested != 0 && node.port != requested {
                announce("notice: port \(requested) is taken; listening on \(node.port) instead")
            }
            let fingerprint = identity.signing.publicKey.fingerprint
            if json {
                print(
                    JSON.object([
                        ("type", "started"), ("name", .string(profileName)), ("fingerprint", .string(fingerprint)),
                        ("port", .int(Int64(node.port))),
                    ]).encoded)
            } else {
                print("natter node \(fingerprint) (\(Safe.line(profileName))) listening on port \(node.port)")
                if interactive && !headless {
                    print("Type /help for the commands, /list for your conversations.")
                }
            }
            fflush(nil)
        } catch {
            throw fail(error)
        }
        var options = ReplSession.Options()
        options.json = json
        options.interactive = interactive && !headless && !json
        options.colours = interactive && Terminal.usesColor && !json
        options.bell = !noBell
        options.desktopNotifications = notify
        if let sendRate { options.sendRate = SendRate.fromOption(sendRate) }
        var editor: EditorConsole?
        if options.interactive {
            do {
                editor = try EditorConsole(historyFile: URL(fileURLWithPath: handle.directory.path + "/history"))
            } catch {
                announce("notice: line editing is off (\(error)); reading plain lines")
            }
        }
        let console: any Console = editor ?? PlainConsole(interactive: options.interactive)
        let session = await ReplSession(
            node: node, console: console, options: options,
            ignoreFile: handle.directory.path + "/ignored")
        editor?.setCompleter { line, word in session.complete(line: line, word: word) }
        defer { editor?.close() }
        await session.start()
        let watching = Task { await session.watch() }
        // Typing indicators (SPEC F12): every edit of the line editor's buffer.
        let drafts = editor?.drafts
        let typing = Task {
            guard let drafts else { return }
            for await draft in drafts { await session.userIsTyping(draft: draft) }
        }
        defer { typing.cancel() }
        // The node runs as a Service: SIGINT and SIGTERM trigger a graceful shutdown (goodbyes on every link, then
        // exit 0); the end of standard input does the same for the REPL.
        var logger = Logger(label: "natter.run")
        logger.logLevel = .warning
        let group = ServiceGroup(
            configuration: ServiceGroupConfiguration(
                services: [node], gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        let outcome = ShellOutcome()
        if !headless {
            Task {
                if await session.readCommands() { outcome.failed.withLock { $0 = true } }
                // End of input: receipts are written; let what is pending leave before the links close.
                try? await Task.sleep(for: .milliseconds(300))
                await group.triggerGracefulShutdown()
            }
        }
        do {
            try await group.run()
        } catch {
            throw fail(error)
        }
        watching.cancel()
        if outcome.failed.withLock({ $0 }) { throw ExitCode.failure }
    }

    /// The display name for a first start: `--name`, else asked for in a terminal (empty: the login name).
    private func firstStartName(interactive: Bool) throws -> String {
        if let name { return name }
        if headless { return defaultName() }
        guard interactive else {
            throw ValidationError(
                "this is the first start of \(data.dataDirectory.directory.path): give your display name with --name NAME"
            )
        }
        print("Welcome to natter. Your display name (Enter for \(defaultName())): ", terminator: "")
        fflush(nil)
        let answer = readLine(strippingNewline: true)?.trimmingCharacters(in: .whitespaces) ?? ""
        return answer.isEmpty ? defaultName() : answer
    }

    /// A start-up line: standard output for a person, standard error under --json (stdout holds only JSON).
    private func announce(_ line: String) {
        if json {
            FileHandle.standardError.write(Data((line + "\n").utf8))
        } else {
            print(line)
        }
    }
}

/// Whether a REPL command failed (read after the node stopped).
final class ShellOutcome: Sendable {
    let failed = Mutex(false)
}
