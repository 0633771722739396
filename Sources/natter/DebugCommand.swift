import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterStore

/// `natter debug …`: tools for tests and diagnosis, not for everyday use.
struct DebugCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "debug", abstract: "Tools for tests and diagnosis.", shouldDisplay: false,
        subcommands: [AppendLoop.self, WriteLoop.self, FeedsCommand.self, FloodCommand.self, AttackCommand.self])

    /// Appends own records until killed, printing `durable SEQ ID` after each commit returns. The crash test
    /// kills it at random moments and checks that every line it printed is still true after a restart.
    struct AppendLoop: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "append-loop", abstract: "Append own records in a loop, reporting each durable one.")

        @OptionGroup var data: DataOption

        @Option(help: "Stop after this many records (default: run until killed).")
        var count: Int?

        func run() throws {
            do {
                let (identity, store) = try data.dataDirectory.open()
                let conversation = ConversationID(bytes: Blake2b.hash(Array("natter/debug/append-loop".utf8)))
                let epoch = EpochID(bytes: Blake2b.hash(Array("natter/debug/epoch".utf8)))
                var written = 0
                print("ready")  // the crash tests time their kill from here, not from the process's start
                fflush(nil)
                while count.map({ written < $0 }) ?? true {
                    let record = try store.appendOwn(
                        conversation: conversation, kind: .content, epoch: epoch, createdAtMillis: nowMillis(),
                        identity: identity.signing
                    ) { header in Array("append-loop record \(header.sequence)".utf8) }
                    print("durable \(record.header.sequence) \(record.id.hex)")
                    fflush(nil)
                    written += 1
                }
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
