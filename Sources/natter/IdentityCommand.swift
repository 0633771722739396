import ArgumentParser
import Foundation
import NatterCrypto
import NatterStore
import NatterTerminal

/// `natter identity export|import`: move an identity to another data directory or machine (SPEC F20), sealed under
/// a passphrase (docs/cli.md; the file format is docs/protocol.md §9.3).
struct IdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "identity",
        abstract: "Export this node's identity to a file, or import one into a new data directory.",
        subcommands: [ExportIdentityCommand.self, ImportIdentityCommand.self])
}

/// Where a passphrase comes from: `--passphrase-file PATH`, else the terminal.
struct PassphraseOption: ParsableArguments {
    @Option(
        help: ArgumentHelp(
            "Read the passphrase from the first line of PATH ('-' for standard input) instead of asking.",
            valueName: "PATH"))
    var passphraseFile: String?

    /// The passphrase: the file's first line, or typed at the terminal (twice when `confirm`).
    func read(prompt: String, confirm: Bool) throws -> String {
        let passphrase: String
        if let passphraseFile {
            passphrase = try firstLine(of: passphraseFile, what: "a passphrase")
        } else {
            passphrase = try SecretPrompt.read(prompt: prompt)
            if confirm, try SecretPrompt.read(prompt: "The same passphrase again: ") != passphrase {
                throw ValidationError("the two passphrases differ; nothing was written")
            }
        }
        guard !passphrase.isEmpty else { throw IdentityFileError.emptyPassphrase }
        return passphrase
    }
}

/// The first line of `file` ('-': of standard input), without its end: how scripts hand natter a passphrase.
func firstLine(of file: String, what: String) throws -> String {
    let text: String?
    if file == "-" {
        text = readLine(strippingNewline: true)
    } else {
        // Unreadable, missing or not UTF-8: reported below as one line naming the file.
        let contents = FileManager.default.contents(atPath: file).flatMap { $0.count <= 65_536 ? $0 : nil }
        text = contents.flatMap { String(data: $0, encoding: .utf8) }?
            .split(separator: "\n", omittingEmptySubsequences: false).first.map(String.init)
    }
    guard let text else { throw StoreError.fileSystem(path: file, reason: "cannot read \(what) (at most 64 KiB)") }
    return text
}

struct ExportIdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "export",
        abstract: "Write this node's identity, encryption and network keys to FILE, sealed under a passphrase.",
        discussion: "FILE is created with mode 0600 and never overwritten. Keep it and its passphrase apart.")

    @OptionGroup var data: DataOption
    @OptionGroup var passphrase: PassphraseOption
    @Argument(help: ArgumentHelp("The file to create.", valueName: "FILE")) var file: String

    func run() throws {
        let directory = data.dataDirectory.directory
        do {
            // Everything that can fail without the passphrase fails before anyone types it.
            let fingerprint = try directory.readIdentity().signing.publicKey.fingerprint
            guard !FileManager.default.fileExists(atPath: file) else {
                throw StoreError.fileSystem(path: file, reason: "already exists (an export never overwrites a file)")
            }
            let secret = try passphrase.read(prompt: "Passphrase for the export: ", confirm: true)
            _ = try directory.exportIdentity(to: file, passphrase: secret)
            print("exported \(fingerprint) to \(file) (mode 0600)")
            print("import it on the new machine with: natter identity import \(file)")
        } catch {
            throw fail(error)
        }
    }
}

struct ImportIdentityCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "import",
        abstract: "Create a new data directory around the identity sealed in FILE.",
        discussion: """
            The node writes nothing until a peer that knows this identity has synced with it (so it never forks its \
            own feeds); with no such peer, /force-write in the REPL lets it write.
            """)

    @OptionGroup var data: DataOption
    @OptionGroup var passphrase: PassphraseOption
    @Argument(help: ArgumentHelp("An export written by `natter identity export`.", valueName: "FILE")) var file: String

    func run() throws {
        let directory = data.dataDirectory.directory
        do {
            try directory.requireNewForImport()
            let sealed = try DataDirectory.readExport(file)
            let export = try sealed.open(passphrase: try passphrase.read(prompt: "Passphrase: ", confirm: false))
            _ = try directory.importIdentity(export)
            print("imported \(export.identity.signing.publicKey.fingerprint) into \(directory.path)")
            print("network     \(export.network.isDefault ? "default (public)" : "private")")
            print("it writes once a peer that knows this identity has synced with it (natter run --peer HOST:PORT)")
        } catch {
            throw fail(error)
        }
    }
}
