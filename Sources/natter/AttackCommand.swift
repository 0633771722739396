import ArgumentParser
import Foundation
import NatterCrypto
import NatterModel
import NatterNetwork
import NatterNode
import NatterProbe

/// `natter debug attack …`: the hostile peers of issue 19 (`HostilePeers` in NatterProbe), for the tests that run
/// them against real nodes and for measuring what they cost a node (scripts/attack-figures.sh). Each prints one line
/// saying what it did and how the victim answered. Never point them at a node that is not yours.
struct AttackCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "attack", abstract: "Hostile peers, for testing a node's defences.",
        subcommands: [Greedy.self, Slowloris.self, Beacons.self, CausalFill.self])

    /// Runs an attack; one that could not link has printed why, and fails.
    static func attacking(_ attack: () throws -> Void) throws {
        do {
            try attack()
        } catch is HostilePeers.CannotLink {
            throw ExitCode.failure
        }
    }

    struct Greedy: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "greedy", abstract: "Repeat REQUEST-from-1 with CREDIT, never reading.",
            discussion: "Prints `greedy: closed by the victim after S s and N requests (…)` or `greedy: still linked …`.")

        @Option(help: ArgumentHelp("The victim.", valueName: "HOST:PORT")) var peer: String
        @Option(help: ArgumentHelp("The feed's conversation (64 hex digits).", valueName: "HEX")) var conversation: String
        @Option(help: ArgumentHelp("The feed's author (64 hex digits).", valueName: "HEX")) var author: String
        @Option(help: "How long to attack, in seconds.") var seconds = 20.0
        @Option(help: "Milliseconds between two REQUEST + CREDIT pairs.") var intervalMilliseconds = 10
        @Flag(help: "Read and discard what the victim sends (a greedy reader rather than a stalled one).")
        var read = false
        @Option(help: "REQUESTs to send at most (then CREDIT alone); 0: one with every CREDIT.") var requests = 0

        func run() throws {
            guard let address = PeerAddress(peer), let conversation = Hex.decode(conversation),
                let author = Hex.decode(author), conversation.count == 32, author.count == 32
            else { throw ValidationError("--peer HOST:PORT, --conversation and --author of 64 hex digits") }
            try AttackCommand.attacking {
                try HostilePeers.greedy(
                    address, conversation: ConversationID(bytes: conversation), author: AuthorID(raw: Bytes32(author)),
                    seconds: seconds, intervalMilliseconds: intervalMilliseconds, read: read, requests: requests,
                    say: printNow)
            }
        }
    }

    struct Slowloris: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "slowloris", abstract: "Hold handshake slots with silent connections.",
            discussion: "Prints `slowloris: N connections opened in S s, M closed by the victim`.")

        @Option(help: ArgumentHelp("The victim.", valueName: "HOST:PORT")) var peer: String
        @Option(help: ArgumentHelp("Source addresses of this host, comma-separated.", valueName: "ADDRESSES"))
        var from: String
        @Option(help: "Connections per source address.") var perAddress = 8
        @Option(help: "Seconds between renewals of every connection.") var renew = 4.0
        @Option(help: "How long to attack, in seconds.") var seconds = 30.0

        func run() throws {
            guard let address = PeerAddress(peer) else { throw ValidationError("--peer takes HOST:PORT") }
            HostilePeers.slowloris(
                address, from: from.split(separator: ",").map(String.init), perAddress: perAddress, renew: renew,
                seconds: seconds, say: printNow)
        }
    }

    struct Beacons: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "beacons", abstract: "Flood forged discovery beacons with fresh tags.")

        @Option(help: ArgumentHelp("Source addresses of this host, comma-separated.", valueName: "ADDRESSES"))
        var from: String
        @Option(help: ArgumentHelp("Where the beacons go (a broadcast address).", valueName: "ADDRESS")) var to: String
        @Option(help: "The discovery port.") var port = DiscoveryLimits.defaultPort
        @Option(help: "The TCP port the beacons announce.") var announce: Int
        @Option(help: "Beacons per second, over all sources.") var rate = 32.0
        @Option(help: "How long to send, in seconds.") var seconds = 20.0

        func run() throws {
            guard (1...65535).contains(announce), rate > 0 else { throw ValidationError("--announce 1…65535, --rate > 0") }
            try HostilePeers.beacons(
                from: from.split(separator: ",").map(String.init), to: to, port: port, announce: announce, rate: rate,
                seconds: seconds, say: printNow)
        }
    }

    struct CausalFill: ParsableCommand {
        static let configuration = CommandConfiguration(
            commandName: "causal-fill", abstract: "Fill the causal buffer with feeds starting at sequence 2.")

        @Option(help: ArgumentHelp("The victim.", valueName: "HOST:PORT")) var peer: String
        @Option(help: "Records to send (all out of order); the victim may still hold the last 3 batches when it prints.")
        var records = 5_000
        @Option(help: "Throwaway authors (a feed each).") var authors = 4
        @Option(help: "How long to stay linked, in seconds.") var seconds = 30.0

        func run() throws {
            guard let address = PeerAddress(peer), records > 0, authors > 0 else {
                throw ValidationError("--peer HOST:PORT, positive --records and --authors")
            }
            try AttackCommand.attacking {
                try HostilePeers.causalFill(
                    address, records: records, authors: authors, seconds: seconds, say: printNow)
            }
        }
    }
}
