// Goal: a forged-beacon flood on the LAN neither keeps two honest nodes from linking nor keeps a flooded node from
// stopping (issue 19, item 3). Method: a network namespace of our own (`ns-sec-net-bf-…`: a veth pair, the honest
// address and 8 flooding addresses on one end, nftables dropping TCP to port 9, so every dial of a forged beacon waits
// for its connect timeout), `natter debug attack beacons` flooding 32 beacons a second with fresh tags from the 8
// addresses, and two `natter run` processes with discovery on, started inside the flood. Every process is stopped by
// PID and the namespace removed at the end; every wait is bounded (figures: scripts/attack-figures.sh).
import Foundation
import NatterTestSupport
import Testing

#if canImport(Glibc)
import Glibc
#endif

@Suite("A beacon flood in a network namespace", .serialized, .timeLimit(.minutes(3)))
struct BeaconFloodTests {
    static let ip = "/usr/sbin/ip"
    static let nft = "/usr/sbin/nft"

    /// Root, iproute2 and nftables: what building the namespace takes.
    static var available: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: ip)
            && FileManager.default.isExecutableFile(atPath: nft)
    }

    /// The namespace: `v0` holds 10.77.`subnet`.1 (the honest nodes' address) and .101–.108 (the flood's).
    struct FloodNamespace {
        let name = "ns-sec-net-bf-\(String(UInt32.random(in: 0...0xFFFFFF), radix: 16))"
        let subnet = Int.random(in: 100...199)

        var honest: String { "10.77.\(subnet).1" }
        var flooders: [String] { (101...108).map { "10.77.\(subnet).\($0)" } }
        var broadcast: String { "10.77.\(subnet).255" }

        init() throws {
            try Self.run(BeaconFloodTests.ip, ["netns", "add", name])
            do {
                try Self.run(BeaconFloodTests.ip, ["-n", name, "link", "set", "lo", "up"])
                try Self.run(BeaconFloodTests.ip, ["-n", name, "link", "add", "v0", "type", "veth", "peer", "name", "v1"])
                try Self.run(BeaconFloodTests.ip, ["-n", name, "addr", "add", "\(honest)/24", "brd", "+", "dev", "v0"])
                for address in flooders {
                    try Self.run(BeaconFloodTests.ip, ["-n", name, "addr", "add", "\(address)/24", "dev", "v0"])
                }
                for link in ["v0", "v1"] { try Self.run(BeaconFloodTests.ip, ["-n", name, "link", "set", link, "up"]) }
                // The port the forged beacons announce drops every packet: each dial waits for its timeout.
                try Self.run(
                    BeaconFloodTests.ip,
                    ["netns", "exec", name, BeaconFloodTests.nft, "add table inet flood; add chain inet flood input "
                        + "{ type filter hook input priority 0; }; add rule inet flood input tcp dport 9 drop"])
            } catch {
                remove()
                throw error
            }
        }

        /// The arguments that run `command` inside the namespace.
        func exec(_ command: [String]) -> [String] { ["netns", "exec", name] + command }

        func remove() { try? Self.run(BeaconFloodTests.ip, ["netns", "del", name]) }

        static func run(_ tool: String, _ arguments: [String]) throws {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: tool)
            process.arguments = arguments
            try process.run()
            process.waitUntilExit()
            guard process.terminationStatus == 0 else {
                throw ProcessFailure("\(tool) \(arguments.joined(separator: " ")) failed")
            }
        }
    }

    @Test(
        "two honest nodes link during the flood; /quit and SIGTERM end flooded nodes",
        .enabled(if: available, "needs root, iproute2 and nftables to build a network namespace"))
    func honestNodesLinkAndStop() async throws {
        let lab = try FloodNamespace()
        defer { lab.remove() }
        let natter = try builtExecutable("natter").path
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-bf-\(UUID().uuidString)").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let ip = URL(fileURLWithPath: Self.ip)
        let flood = try NatterProcess(
            ip,
            lab.exec([
                natter, "debug", "attack", "beacons", "--from", lab.flooders.joined(separator: ","), "--to",
                lab.broadcast, "--announce", "9", "--rate", "32", "--seconds", "150",
            ]))
        defer { flood.kill() }
        // The flood is on before the honest nodes start: their first beacons arrive among forged ones.
        try await Task.sleep(for: .seconds(2))
        let nodes = try ["Ann", "Ben"].map { name in
            try NatterProcess(
                ip, lab.exec([natter, "run", "--data", "\(root)/\(name)", "--name", name, "--listen", "0.0.0.0:0"]))
        }
        defer { for node in nodes { node.kill() } }
        // Before issue 19 neither linked while the flood lasted: each fresh tag was a dial, dialled one at a time with
        // a 3 s timeout from a queue of the newest 64, so the honest one was dropped before its turn.
        for node in nodes { try await node.waitFor("is online", seconds: 20) }
        #expect(flood.process.isRunning, "the nodes linked while the flood went on")
        #expect(nodes.allSatisfy { $0.printed.filter { $0.contains("announces TCP port 9") }.count <= 8 },
            "one line per flooding address, not one per forged tag")

        // Before issue 19 a flooded node took about 170 s to stop: the queued dials ran out one by one.
        nodes[0].send("/quit")
        #expect(try await waitForExit(nodes[0].process, seconds: 20), "/quit ends a flooded node")
        kill(nodes[1].process.processIdentifier, SIGTERM)
        #expect(try await waitForExit(nodes[1].process, seconds: 20), "SIGTERM ends a flooded node")
    }
}
