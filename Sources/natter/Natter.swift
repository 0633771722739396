import ArgumentParser
import Foundation
import NatterNode

/// The `natter` command. Subcommands live in their own files; this type only wires them together.
@main
struct Natter: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "natter",
        abstract: "A serverless chat node for local networks.",
        discussion: "Without a subcommand, natter starts the node on the default data directory (see `natter run`).",
        subcommands: [
            RunCommand.self, InitCommand.self, IdCommand.self, IdentityCommand.self, DigestCommand.self, BenchCommand.self,
            DebugCommand.self, LabCommand.self,
        ],
        defaultSubcommand: RunCommand.self
    )
}

/// The `--data DIR` option every command that touches a node's files takes.
struct DataOption: ParsableArguments {
    @Option(
        name: .customLong("data"),
        help: ArgumentHelp(
            "The node's data directory.",
            discussion: "Default: $NATTER_HOME, else $XDG_DATA_HOME/natter, else ~/.local/share/natter.",
            valueName: "DIR"))
    var directory: String?

    var dataDirectory: DataDirectoryHandle {
        DataDirectoryHandle(explicit: directory)
    }
}

/// Prints `error: message` on standard error and exits with status 1: every failure is one line a person can act on.
func fail(_ error: any Error) -> ExitCode {
    FileHandle.standardError.write(Data("error: \(String(describing: error))\n".utf8))
    return ExitCode.failure
}

/// Prints a line at once (a test or a script waits for it while the command goes on).
func printNow(_ line: String) {
    print(line)
    fflush(nil)
}
