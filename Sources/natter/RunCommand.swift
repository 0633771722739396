import ArgumentParser
import NatterStore

/// `natter run` (and plain `natter`): start the node. Until the network node and the REPL exist it initialises
/// the data directory on first start and reports the node's state.
struct RunCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run", abstract: "Start the node (creates the data directory on first start).")

    @OptionGroup var data: DataOption

    @Option(help: "Display name to use if this is the first start (default: your login name).")
    var name: String?

    func run() throws {
        let handle = data.dataDirectory
        do {
            if !handle.directory.isInitialised {
                _ = try handle.initialise(name: name ?? defaultName(), network: nil)
                print("created \(handle.directory.path)")
            }
            let (identity, store) = try handle.open()
            let profile = try handle.profile(of: identity.author, in: store)
            let stats = try store.statistics()
            print("natter node \(identity.signing.publicKey.fingerprint) (\(profile?.name ?? "no name"))")
            print("data \(handle.directory.path): \(stats.recordsHeld) records, \(stats.conversations) conversations")
            print("The network node and the chat REPL are not built yet; this build manages identity and the log.")
        } catch {
            throw fail(error)
        }
    }
}
