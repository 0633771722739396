// Goal: show that two nodes on two hosts of one LAN find each other with production settings (reach `.lan`), by IPv4
// broadcast and, with IPv4 addresses removed, by IPv6 link-local multicast alone. Method: three network namespaces
// of our own (two hosts and a bridge, veth between them, random names, removed in `defer`), this test binary re-run
// inside each host namespace as a child that runs a `DiscoveryService` for a few seconds and prints what it saw.
import Foundation
import NatterCrypto
import Testing

@testable import NatterNetwork

#if canImport(Glibc)
import Glibc
#endif

@Suite("Discovery between network namespaces", .serialized, .timeLimit(.minutes(2)))
struct DiscoveryNamespaceTests {
    static let childVariable = "NATTER_DISCOVERY_NS_CHILD"

    /// Root, iproute2, and not already a child.
    static var namespacesAvailable: Bool {
        geteuid() == 0 && FileManager.default.isExecutableFile(atPath: NamespaceLab.ip)
            && ProcessInfo.processInfo.environment[childVariable] == nil
    }

    @Test(
        "IPv4: two hosts on a bridge dial each other's address at the other's TCP port",
        .enabled(if: namespacesAvailable, "needs root and iproute2 (ip netns) to build network namespaces"))
    func ipv4Broadcast() throws {
        let lab = try NamespaceLab(.subnet)
        defer { lab.remove() }
        let (a, b) = try lab.runPair(ipv6: false)
        print(
            "namespaces, IPv4 subnet broadcast: first dial after \(a.firstDialMilliseconds) ms and \(b.firstDialMilliseconds) ms"
        )
        #expect(a.dials.contains { $0.tag == b.tag && $0.host == "10.77.\(lab.subnet).2" && $0.port == b.tcpPort })
        #expect(b.dials.contains { $0.tag == a.tag && $0.host == "10.77.\(lab.subnet).1" && $0.port == a.tcpPort })
        for child in [a, b] {
            #expect(child.dials.allSatisfy { $0.tag != child.tag }, "own beacons ignored")
            // No default route in a namespace: 255.255.255.255 is skipped, and the socket survives.
            #expect(child.logs.contains { $0.contains("cannot send to 255.255.255.255") }, "\(child.logs)")
            #expect(!child.logs.contains { $0.contains("socket failed") }, "\(child.logs)")
        }
    }

    @Test(
        "IPv6 only: with no IPv4 address, two hosts find each other by link-local multicast",
        .enabled(if: namespacesAvailable, "needs root and iproute2 (ip netns) to build network namespaces"))
    func ipv6Multicast() throws {
        let lab = try NamespaceLab(.ipv6Only)
        defer { lab.remove() }
        let (a, b) = try lab.runPair(ipv6: true)
        print(
            "namespaces, IPv6 multicast: first dial after \(a.firstDialMilliseconds) ms and \(b.firstDialMilliseconds) ms"
        )
        #expect(a.dials.contains { $0.tag == b.tag && $0.host.hasPrefix("fe80::") && $0.host.contains("%") })
        #expect(b.dials.contains { $0.tag == a.tag && $0.host.hasPrefix("fe80::") && $0.host.contains("%") })
        #expect(a.dials.allSatisfy { $0.port == b.tcpPort })
        for child in [a, b] {
            #expect(child.logs.contains { $0.contains("IPv6 multicast") }, "\(child.logs)")
            #expect(!child.logs.contains { $0.contains("socket failed") }, "\(child.logs)")
        }
    }

    @Test(
        "IPv4 limited broadcast: with /32 addresses and a default route, 255.255.255.255 alone reaches the peer",
        .enabled(if: namespacesAvailable, "needs root and iproute2 (ip netns) to build network namespaces"))
    func ipv4LimitedBroadcast() throws {
        let lab = try NamespaceLab(.limitedBroadcastOnly)
        defer { lab.remove() }
        let (a, b) = try lab.runPair(ipv6: false)
        #expect(a.dials.contains { $0.tag == b.tag && $0.host == "10.77.\(lab.subnet).2" && $0.port == b.tcpPort })
        #expect(b.dials.contains { $0.tag == a.tag && $0.host == "10.77.\(lab.subnet).1" && $0.port == a.tcpPort })
        for child in [a, b] {
            #expect(child.logs.contains { $0.contains("beaconing to 255.255.255.255:") }, "\(child.logs)")
            #expect(!child.logs.contains { $0.contains("cannot send") }, "\(child.logs)")
            #expect(!child.logs.contains { $0.contains("socket failed") }, "\(child.logs)")
        }
    }

    @Test(
        "a firewall dropping a node's beacons costs it its voice, not its ears: it still hears and dials its peer",
        .enabled(if: namespacesAvailable, "needs root and iproute2 (ip netns) to build network namespaces"),
        .enabled(if: FileManager.default.isExecutableFile(atPath: NamespaceLab.nft), "needs nftables (nft)"))
    func firewallDropsOwnBeacons() throws {
        let lab = try NamespaceLab(.subnet)
        defer { lab.remove() }
        let port = Int.random(in: 20_000..<60_000)
        try lab.dropOutgoingUDP(host: lab.hosts[0], port: port)
        let (a, b) = try lab.runPair(ipv6: false, port: port)
        #expect(a.dials.contains { $0.tag == b.tag && $0.host == "10.77.\(lab.subnet).2" && $0.port == b.tcpPort })
        #expect(b.dials.isEmpty, "A's beacons never left A")
        #expect(a.logs.contains { $0.contains("sending to 10.77.\(lab.subnet).255:\(port) failed") }, "\(a.logs)")
        #expect(!a.logs.contains { $0.contains("socket failed") }, "the receiving socket stayed open: \(a.logs)")
    }

    // MARK: - The child

    @Test(
        "(child process of the namespace tests)",
        .enabled(
            if: ProcessInfo.processInfo.environment[childVariable] != nil,
            "runs only inside a namespace, started by the namespace tests"))
    func namespaceChild() async throws {
        let environment = ProcessInfo.processInfo.environment
        let key = try #require(Hex.decode(environment["NATTER_DISCOVERY_NS_KEY"] ?? ""))
        let port = try #require(Int(environment["NATTER_DISCOVERY_NS_PORT"] ?? ""))
        let tcpPort = try #require(Int(environment["NATTER_DISCOVERY_NS_TCP_PORT"] ?? ""))
        let ipv6 = environment["NATTER_DISCOVERY_NS_IPV6"] == "1"
        let schedule = DiscoverySchedule(periodMin: .seconds(1), periodMax: .milliseconds(1500))
        let service = DiscoveryService(
            networkKey: NetworkKey(key: try SymmetricKey(bytes: key)), tcpPort: tcpPort,
            configuration: DiscoveryConfiguration(port: port, reach: .lan, ipv6: ipv6, schedule: schedule))
        func emit(_ line: String) {
            print("NATTER-NS \(line)")
            fflush(nil)
        }
        emit("tag \(Hex.encode(service.tag.bytes)) \(tcpPort)")
        let started = ContinuousClock.now
        let run = Task { try await service.run() }
        let dials = Task {
            for await dial in service.dialRequests {

                let (seconds, attoseconds) = (ContinuousClock.now - started).components
                let elapsed = seconds * 1000 + attoseconds / 1_000_000_000_000_000
                emit("dial \(Hex.encode(dial.tag.bytes)) \(dial.host) \(dial.port) \(elapsed)")

            }
        }
        let logs = Task { for await entry in service.logs { emit("log \(entry)") } }
        try await Task.sleep(for: .seconds(4))
        await service.shutdown()
        try await run.value
        await dials.value
        await logs.value
        emit("done")
    }
}

// MARK: - Support

/// Two host namespaces joined by veth pairs to a bridge in a third namespace; nothing touches the host's own stack.
struct NamespaceLab {
    static let ip = "/usr/sbin/ip"
    static let nft = "/usr/sbin/nft"

    let suffix: String
    let subnet: Int
    var hosts: [String] { ["ntd\(suffix)a", "ntd\(suffix)b"] }
    var bridge: String { "ntd\(suffix)br" }

    /// One child's report.
    struct Child {
        var tag = ""
        var tcpPort = 0
        var dials: [(tag: String, host: String, port: Int)] = []
        /// Milliseconds from the child's start to its first dial request (-1: none).
        var firstDialMilliseconds = -1
        var logs: [String] = []
        var done = false
    }

    /// How the hosts' eth0 is addressed.
    enum Addressing {
        /// 10.77.n.1/24 and 10.77.n.2/24: beacons reach the peer by the subnet's broadcast address.
        case subnet
        /// 10.77.n.1/32 and 10.77.n.2/32 with a default route on eth0: no subnet broadcast address, so only
        /// 255.255.255.255 reaches the peer.
        case limitedBroadcastOnly
        /// No IPv4 address at all: only IPv6 link-local multicast reaches the peer.
        case ipv6Only
    }

    init(_ addressing: Addressing) throws {
        suffix = String(UInt32.random(in: 0..<0xFFFFFF), radix: 16)
        subnet = Int.random(in: 1...254)
        do {
            try build(addressing)
        } catch {
            remove()
            throw error
        }
    }

    private func build(_ addressing: Addressing) throws {
        for namespace in hosts + [bridge] { try Self.sh(["netns", "add", namespace]) }
        try Self.sh(["-n", bridge, "link", "add", "br0", "type", "bridge", "mcast_snooping", "0"])
        try Self.sh(["-n", bridge, "link", "set", "br0", "up"])
        for (index, host) in hosts.enumerated() {
            let peer = "v\(index)"
            try Self.sh(["-n", host, "link", "add", "eth0", "type", "veth", "peer", "name", peer, "netns", bridge])
            try Self.sh(["-n", bridge, "link", "set", peer, "master", "br0"])
            try Self.sh(["-n", bridge, "link", "set", peer, "up"])
            // Link-local IPv6 addresses usable at once (no duplicate address detection delay).
            try Self.sh(["netns", "exec", host, "sysctl", "-qw", "net.ipv6.conf.eth0.accept_dad=0"])
            switch addressing {
            case .subnet: try Self.sh(["-n", host, "addr", "add", "10.77.\(subnet).\(index + 1)/24", "dev", "eth0"])
            case .limitedBroadcastOnly:
                try Self.sh(["-n", host, "addr", "add", "10.77.\(subnet).\(index + 1)/32", "dev", "eth0"])
            case .ipv6Only: break
            }
            try Self.sh(["-n", host, "link", "set", "lo", "up"])
            try Self.sh(["-n", host, "link", "set", "eth0", "up"])
            if addressing == .limitedBroadcastOnly {
                try Self.sh(["-n", host, "route", "add", "default", "dev", "eth0"])
            }
        }
        if addressing == .ipv6Only {
            // Wait (bounded) for the link-local addresses: the kernel adds them when the links come up.
            for host in hosts {
                let deadline = Date().addingTimeInterval(5)
                while !(try Self.sh(["-n", host, "-6", "addr", "show", "dev", "eth0", "scope", "link"])).contains(
                    "fe80")
                    && Date() < deadline
                {
                    usleep(50_000)
                }
            }
        }
    }

    /// Makes `host`'s firewall drop every outgoing UDP datagram to `port` (sendmsg then fails with EPERM).
    func dropOutgoingUDP(host: String, port: Int) throws {
        try Self.sh(["netns", "exec", host, Self.nft, "add", "table", "inet", "natter"])
        try Self.sh([
            "netns", "exec", host, Self.nft, "add", "chain", "inet", "natter", "out",
            "{ type filter hook output priority 0; }",
        ])
        try Self.sh([
            "netns", "exec", host, Self.nft, "add", "rule", "inet", "natter", "out", "udp", "dport", "\(port)", "drop",
        ])
    }

    /// Deletes the three namespaces (and with them the veths and the bridge). Never throws: it runs in `defer`.
    func remove() {
        for namespace in hosts + [bridge] { _ = try? Self.sh(["netns", "del", namespace], check: false) }
    }

    /// Runs one child per host namespace, at once, and parses what they print (bounded: 30 s).
    func runPair(ipv6: Bool, port: Int = Int.random(in: 20_000..<60_000)) throws -> (Child, Child) {
        let key = Hex.encode(SymmetricKey.generate().secret.withUnsafeBytes { Array($0) })
        let executable = try FileManager.default.destinationOfSymbolicLink(atPath: "/proc/self/exe")
        var processes: [(Process, Pipe)] = []
        for (index, host) in hosts.enumerated() {
            let process = Process()
            process.executableURL = URL(fileURLWithPath: Self.ip)
            process.arguments = [
                "netns", "exec", host, executable, "--testing-library", "swift-testing", "--filter", "namespaceChild",
            ]
            var environment = ProcessInfo.processInfo.environment
            environment[DiscoveryNamespaceTests.childVariable] = "1"
            environment["NATTER_DISCOVERY_NS_KEY"] = key
            environment["NATTER_DISCOVERY_NS_PORT"] = "\(port)"
            environment["NATTER_DISCOVERY_NS_TCP_PORT"] = "\(44001 + index)"
            environment["NATTER_DISCOVERY_NS_IPV6"] = ipv6 ? "1" : "0"
            process.environment = environment
            let pipe = Pipe()
            process.standardOutput = pipe
            process.standardError = FileHandle.nullDevice
            try process.run()
            processes.append((process, pipe))
        }
        // Read both outputs to the end (the children exit after 4 s); stop them, by pid, if they overstay.
        let deadline = Date().addingTimeInterval(30)
        var outputs: [String] = []
        for (process, pipe) in processes {
            let watchdog = DispatchWorkItem { if process.isRunning { process.terminate() } }
            DispatchQueue.global().asyncAfter(
                deadline: .now() + max(0, deadline.timeIntervalSinceNow), execute: watchdog)
            let data = pipe.fileHandleForReading.readDataToEndOfFile()
            process.waitUntilExit()
            watchdog.cancel()
            outputs.append(String(decoding: data, as: UTF8.self))
        }
        let children = outputs.map(Self.parse)
        for (child, output) in zip(children, outputs) {
            #expect(child.done, "child finished cleanly; output:\n\(output)")
        }
        return (children[0], children[1])
    }

    static func parse(_ output: String) -> Child {
        var child = Child()
        for line in output.split(separator: "\n") {
            guard let start = line.range(of: "NATTER-NS ") else { continue }
            let words = line[start.upperBound...].split(separator: " ").map(String.init)
            switch words.first {
            case "tag" where words.count >= 3:
                child.tag = words[1]
                child.tcpPort = Int(words[2]) ?? 0
            case "dial" where words.count == 5:
                child.dials.append((words[1], words[2], Int(words[3]) ?? 0))
                if child.firstDialMilliseconds < 0 { child.firstDialMilliseconds = Int(words[4]) ?? -1 }
            case "log": child.logs.append(words.dropFirst().joined(separator: " "))
            case "done": child.done = true
            default: break
            }
        }
        return child
    }

    struct CommandFailed: Error, CustomStringConvertible {
        let command: String
        let output: String
        var description: String { "\(command) failed: \(output)" }
    }

    /// Runs `ip` with `arguments`; throws on failure when `check` (the default). Returns standard output.
    @discardableResult
    static func sh(_ arguments: [String], check: Bool = true) throws -> String {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: ip)
        process.arguments = arguments
        let pipe = Pipe()
        process.standardOutput = pipe
        process.standardError = pipe
        try process.run()
        let data = pipe.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let output = String(decoding: data, as: UTF8.self)
        if check && process.terminationStatus != 0 {
            throw CommandFailed(command: "ip " + arguments.joined(separator: " "), output: output)
        }
        return output
    }
}
