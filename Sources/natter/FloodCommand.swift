import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterNode
import NatterProbe

/// `natter debug flood`: a flooding node (`Flooder` in NatterProbe), for measuring what a flood does to other nodes
/// (SPEC F16). Prints `linked: N records, largest M bytes` once its link is up, then `written N records in S s (R
/// records/s)`, then stays up (serving sync) until killed.
struct FloodCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "flood", abstract: "Flood a peer with signed records from throwaway identities.")

    @OptionGroup var data: DataOption

    @Option(help: ArgumentHelp("The peer to flood (dialled; no discovery).", valueName: "HOST:PORT"))
    var peer: String

    @Option(help: "Records written per second.")
    var rate = 10_000

    @Option(help: "How long to write (the flood is rate × seconds records, generated before it starts).")
    var seconds = 2.0

    @Option(help: "Conversations nobody else is in, each with its share of the flood.")
    var nobody = 8

    @Option(
        name: .customLong("into"),
        help: ArgumentHelp(
            "A conversation (64 hex digits) to put junk feeds into, with a share each (repeatable).", valueName: "HEX"))
    var into: [String] = []

    @Option(help: "Throwaway authors per conversation.")
    var authors = 10

    @Option(help: "Seed of the throwaway identities and payloads (the same seed writes the same records).")
    var seed: UInt64 = 7_000

    func validate() throws {
        guard PeerAddress(peer) != nil else { throw ValidationError("--peer takes HOST:PORT, not \(peer)") }
        guard rate > 0, seconds > 0, seconds.isFinite, authors > 0, nobody >= 0 else {
            throw ValidationError("--rate, --seconds and --authors take positive numbers, --nobody 0 or more")
        }
        for hex in into where Hex.decode(hex)?.count != 32 {
            throw ValidationError("--into takes a conversation id of 64 hex digits, not \(hex)")
        }
        guard nobody + into.count > 0 else { throw ValidationError("nothing to flood: give --nobody or --into") }
    }

    func run() async throws {
        let flooder = Flooder(
            rate: rate, seconds: seconds, nobody: nobody, into: into.map { ConversationID(bytes: Hex.decode($0)!) },
            authors: authors, seed: seed)
        do {
            let handle = data.dataDirectory
            if !handle.directory.isInitialised { _ = try handle.initialise(name: "Flooder", network: nil) }
            let (identity, store) = try handle.open()
            try await flooder.run(
                identity: identity, store: store, networkKey: try handle.directory.readNetworkKey(),
                peer: PeerAddress(peer)!, say: printNow)
        } catch {
            throw fail(error)
        }
    }
}
