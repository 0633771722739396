import ArgumentParser
import Foundation
import NatterProbe

/// `natter debug …`: tools for tests and diagnosis, not for everyday use.
struct DebugCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug", abstract: "Tools for tests and diagnosis.", shouldDisplay: false,
        subcommands: [AppendLoop.self, WriteLoop.self, FeedsCommand.self, FloodCommand.self, AttackCommand.self])

    /// Appends own records until killed (`CrashWriters.appendLoop`), printing `ready`, then `durable SEQ ID` after each
    /// commit returns. The crash test kills it at random moments and checks that every line it printed is still true
    /// after a restart.
    struct AppendLoop: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "append-loop", abstract: "Append own records in a loop, reporting each durable one.")

        @OptionGroup var data: DataOption

        @Option(help: "Stop after this many records (default: run until killed).")
        var count: Int?

        func run() throws {
            do {
                let (identity, store) = try data.dataDirectory.open()
                try CrashWriters.appendLoop(identity: identity, store: store, count: count, say: printNow)
            } catch {
                throw fail(error)
            }
        }
    }

    /// Prints every feed's state, one line each.
    struct FeedsCommand: ParsableCommand {
        static let configuration = CommandConfiguration(commandName: "feeds", abstract: "List every feed's state.")

        @OptionGroup var data: DataOption

        func run() throws {
            do {
                let (_, store) = try data.dataDirectory.open()
                for feed in try store.feeds() {
                    print(
                        "\(feed.conversation.hex) \(feed.author.hex) stored \(feed.stored) applied \(feed.applied)"
                            + (feed.forkSequence.map { " forked at \($0)" } ?? "")
                            + (feed.stalledReason.map { " stalled: \($0)" } ?? ""))
                }
            } catch {
                throw fail(error)
            }
        }
    }
}
