import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterNetwork
import NatterNode
import NatterStore

/// `natter run` (and plain `natter`): start the node — listen, dial named peers, sync — with a minimal line
/// interface on standard input until the full REPL arrives (docs/cli.md).
struct RunCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Start the node (creates the data directory on first start).")

    /// The default TCP port of a natter node.
    static let defaultPort = 7718

    @OptionGroup var data: DataOption

    @Option(help: "Display name to use if this is the first start (default: your login name).")
    var name: String?

    @Option(help: ArgumentHelp("Where to listen (another port is chosen if it is taken).", valueName: "HOST:PORT"))
    var listen: String = "0.0.0.0:\(RunCommand.defaultPort)"

    @Option(
        name: .customLong("peer"),
        help: ArgumentHelp(
            "A peer to dial and keep dialling, remembered for later starts (repeatable).", valueName: "HOST:PORT"))
    var peers: [String] = []

    @Flag(help: "Run without the line interface: a relay for a spare machine (stop it with SIGINT or SIGTERM).")
    var headless = false

    @Flag(help: "Do not send or listen for discovery beacons (then only --peer and /connect make links).")
    var noDiscovery = false

    @Option(help: "The UDP port for discovery beacons (every node of a LAN must use the same).")
    var discoveryPort: Int = 7719

    func validate() throws {
        guard PeerAddress(listen) != nil || listen.hasSuffix(":0") else {
            throw ValidationError("--listen takes HOST:PORT, e.g. 0.0.0.0:7718")
        }
        for peer in peers where PeerAddress(peer) == nil {
            throw ValidationError("--peer takes HOST:PORT, not \(peer)")
        }
    }

    func run() async throws {
        let handle = data.dataDirectory
        let node: Node
        do {
            if !handle.directory.isInitialised {
                _ = try handle.initialise(name: name ?? defaultName(), network: nil)
                print("created \(handle.directory.path)")
            }
            let (identity, store) = try handle.open()
            let networkKey = try handle.directory.readNetworkKey()
            // PeerAddress refuses port 0; here it means "any free port".
            let listenAddress = PeerAddress(listen) ?? PeerAddress(host: String(listen.dropLast(2)), port: 0)
            // Named peers are remembered: this start dials them and every earlier one.
            try store.rememberPeers(peers.compactMap(PeerAddress.init).map(\.description), atMillis: nowMillis())
            let remembered = try store.namedPeers().compactMap(PeerAddress.init)
            node = try await Node(
                store: store, identity: identity, networkKey: networkKey, listen: listenAddress, peers: remembered,
                discovery: noDiscovery ? nil : DiscoveryConfiguration(port: discoveryPort))
            try await node.conversations.refreshChanged()
            let profileName = try handle.profile(of: identity.author, in: store)?.name ?? "no name"
            let requested = listenAddress.port
            if requested != 0 && node.port != requested {
                print("notice: port \(requested) is taken; listening on \(node.port) instead")
            }
            print(
                "natter node \(identity.signing.publicKey.fingerprint) (\(profileName)) listening on port \(node.port)")
            fflush(nil)
        } catch {
            throw fail(error)
        }
        let shell = LineShell(node: node)
        let running = Task { await node.run() }
        let watching = Task { await shell.watch() }
        installSignalHandlers(node: node)
        let failed: Bool
        if headless {
            await running.value
            failed = false
        } else {
            failed = await shell.readCommands()
            // End of input: let pending writes leave, then stop.
            try? await Task.sleep(for: .milliseconds(300))
        }
        running.cancel()
        watching.cancel()
        await node.shutdown()
        if failed { throw ExitCode.failure }
    }

    private func installSignalHandlers(node: Node) {
        for signalNumber in [SIGINT, SIGTERM] {
            signal(signalNumber, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: signalNumber, queue: .main)
            source.setEventHandler {
                // Every acknowledged record is already committed (synchronous=FULL): closing links is all that is left.
                Task {
                    await node.shutdown()
                    Foundation.exit(0)
                }
            }
            source.resume()
            SignalSources.keep(source)
        }
    }
}

/// Keeps signal sources alive for the life of the process.
enum SignalSources {
    nonisolated(unsafe) private static var sources: [any DispatchSourceSignal] = []
    static func keep(_ source: any DispatchSourceSignal) { sources.append(source) }
}
