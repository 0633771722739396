import ArgumentParser
import Foundation
import NatterProbe

extension DebugCommand {
    /// Writes every kind of thing a node writes, in a seeded random mix, until killed (`CrashWriters.writeLoop`):
    /// prints `ready` once the store is open, then `durable WHAT CONVERSATION SEQUENCE ID` after each write returns and
    /// `refreshed` after each refresh. The SIGKILL campaign (CrashCampaignTests) kills it at random moments and checks
    /// that every line it printed is still true after a restart.
    struct WriteLoop: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "write-loop", abstract: "Write records of every kind in a seeded mix, reporting each durable one.")

        @OptionGroup var data: DataOption

        @Option(help: "Seed of the mix of writes.")
        var seed: UInt64 = 1

        @Option(help: "Stop after this many writes (default: run until killed).")
        var count: Int?

        func run() throws {
            do {
                let (identity, store) = try data.dataDirectory.open()
                try CrashWriters.writeLoop(identity: identity, store: store, seed: seed, count: count, say: printNow)
            } catch {
                throw fail(error)
            }
        }
    }
}
