import ArgumentParser
import Foundation
import NatterCrypto
import NatterStore

/// `natter init`: create a data directory with a new identity.
struct InitCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "init",
        abstract: "Create a data directory with a new identity (files of mode 0600).")

    @OptionGroup var data: DataOption

    @Option(help: "Your display name (default: your login name).")
    var name: String?

    @Option(
        help: ArgumentHelp(
            "A passphrase that isolates your network (all nodes must use the same).",
            discussion: "Visible to other local users in the process list; prefer --network-file."))
    var network: String?

    @Option(
        help: ArgumentHelp(
            "Read the network passphrase from the first line of FILE ('-' for standard input).",
            valueName: "FILE"))
    var networkFile: String?

    func validate() throws {
        if network != nil && networkFile != nil {
            throw ValidationError("give either --network or --network-file, not both")
        }
    }

    func run() throws {
        let handle = data.dataDirectory
        do {
            let networkKey = try readNetworkKey()
            let (identity, _) = try handle.initialise(name: name ?? defaultName(), network: networkKey)
            print("created \(handle.directory.path)")
            print("fingerprint \(identity.signing.publicKey.fingerprint)")
            print("network     \(networkKey == nil ? "default (public)" : "private (from passphrase)")")
        } catch {
            throw fail(error)
        }
    }

    private func readNetworkKey() throws -> NetworkKey? {
        var passphrase = network
        if let networkFile { passphrase = try firstLine(of: networkFile, what: "a passphrase") }
        guard let passphrase else { return nil }
        guard !passphrase.isEmpty else { throw ValidationError("the network passphrase is empty") }
        return try NetworkKey.fromPassphrase(passphrase)
    }
}

/// The login name, for a first start without `--name`.
func defaultName() -> String {
    let environment = ProcessInfo.processInfo.environment
    return environment["USER"] ?? environment["LOGNAME"] ?? "natter user"
}
