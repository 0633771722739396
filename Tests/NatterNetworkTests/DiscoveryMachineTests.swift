// Goal: show that the discovery machine beacons on the documented schedule, dials only a beacon's source address at
// the beacon's port and only for nodes not linked, never answers a datagram, and stays within every named limit.
// Method: drive the pure machine with virtual time (`Duration`), seeded generators and string addresses, feeding it
// beacons sealed by hand, garbage and other networks' beacons, and check the actions it returns.
import NatterCrypto
import NatterModel
import Testing

@testable import NatterNetwork

@Suite("Discovery machine", .timeLimit(.minutes(1)))
struct DiscoveryMachineTests {
    typealias Machine = DiscoveryMachine<String>
    typealias Action = DiscoveryAction<String>

    static let network = NetworkKey(key: try! SymmetricKey(bytes: Array(0..<32)))
    static let otherNetwork = NetworkKey(key: try! SymmetricKey(bytes: Array(100..<132)))
    static let ownTag = NodeTag(bytes: [UInt8](repeating: 0xAA, count: 16))

    static func machine(seed: UInt64 = 1) -> Machine {
        Machine(networkKey: network, ownTag: ownTag, tcpPort: 5000, random: SeededGenerator(seed: seed))
    }

    /// A beacon of node `tag` announcing `port`, sealed under `network` with a nonce drawn from `random`.
    static func beacon(
        _ tag: NodeTag, port: UInt16, network: NetworkKey = network, random: inout SeededGenerator
    ) -> [UInt8] {
        Beacon(tag: tag, port: port).seal(key: network.beaconKey, nonce: try! AEADNonce(bytes: random.bytes(24)))
    }

    static func tag(_ n: Int) -> NodeTag {
        NodeTag(bytes: [UInt8(n >> 8), UInt8(n & 0xff)] + [UInt8](repeating: 0x11, count: 14))
    }

    static func sent(_ actions: [Action]) -> [[UInt8]] {
        actions.compactMap { if case .sendBeacon(let bytes) = $0 { bytes } else { nil } }
    }

    static func dials(_ actions: [Action]) -> [(host: String, port: UInt16, tag: NodeTag)] {
        actions.compactMap { if case .dial(let host, let port, let tag) = $0 { (host, port, tag) } else { nil } }
    }

    static func logs(_ actions: [Action]) -> [DiscoveryLog<String>] {
        actions.compactMap { if case .log(let entry) = $0 { entry } else { nil } }
    }

    // MARK: - Schedule

    @Test("a burst of 3 beacons 200 ms apart at start, then one every 15–30 s")
    func burstAtStart() throws {
        var machine = Self.machine()
        let first = machine.start(now: .seconds(100))
        #expect(Self.sent(first).count == 1)
        #expect(machine.nextDeadline() == .seconds(100) + .milliseconds(200))
        #expect(machine.tick(now: .seconds(100) + .milliseconds(199)).isEmpty, "nothing before the deadline")
        #expect(Self.sent(machine.tick(now: .seconds(100) + .milliseconds(200))).count == 1)
        #expect(machine.nextDeadline() == .seconds(100) + .milliseconds(400))
        #expect(Self.sent(machine.tick(now: .seconds(100) + .milliseconds(400))).count == 1)
        let period = try #require(machine.nextDeadline()) - (.seconds(100) + .milliseconds(400))
        #expect(period >= .seconds(15) && period <= .seconds(30))
        // Each beacon is a valid beacon of ours: own tag, own port, fresh nonce.
        let bytes = Self.sent(first)[0]
        #expect(Beacon.open(bytes, key: Self.network.beaconKey) == .success(Beacon(tag: Self.ownTag, port: 5000)))
    }

    @Test("the periodic gap is drawn from 15…30 s, spread over the whole range, and replays from its seed")
    func jitteredPeriod() throws {
        func periods(seed: UInt64) throws -> [Duration] {
            var machine = Self.machine(seed: seed)
            var now = Duration.zero
            _ = machine.start(now: now)
            var gaps: [Duration] = []
            for _ in 0..<502 {
                let next = try #require(machine.nextDeadline())
                gaps.append(next - now)
                now = next
                #expect(Self.sent(machine.tick(now: now)).count == 1)
            }
            return Array(gaps.dropFirst(2))  // the two burst gaps
        }
        let gaps = try periods(seed: 42)
        #expect(gaps.allSatisfy { $0 >= .seconds(15) && $0 <= .seconds(30) })
        #expect(gaps.min()! < .seconds(16) && gaps.max()! > .seconds(29), "jitter covers the range")
        #expect(Set(gaps).count > 400, "gaps differ from one another")
        #expect(try periods(seed: 42) == gaps, "same seed, same schedule")
        #expect(try periods(seed: 43) != gaps)
    }

    @Test("a node it did not know gets one broadcast beacon within 200 ms, at most one such answer per second")
    func answersNewcomers() throws {
        var machine = Self.machine()
        var random = SeededGenerator(seed: 9)
        _ = machine.start(now: .zero)
        for step in 1...2 { _ = machine.tick(now: .milliseconds(200 * Int64(step))) }  // the start burst is over
        let periodic = try #require(machine.nextDeadline())
        #expect(periodic >= .seconds(15))
        // A newcomer: the next beacon moves to within 200 ms (no datagram is sent back to it directly).
        let heard = machine.beaconReceived(
            Self.beacon(Self.tag(1), port: 6001, random: &random), from: "10.0.0.2", now: .seconds(5))
        #expect(Self.sent(heard).isEmpty)
        let answerAt = try #require(machine.nextDeadline())
        #expect(answerAt >= .seconds(5) && answerAt <= .seconds(5) + .milliseconds(200))
        #expect(Self.sent(machine.tick(now: answerAt)).count == 1)
        #expect(try #require(machine.nextDeadline()) >= answerAt + .seconds(15), "then the period again")
        // A known node's beacon changes nothing; another newcomer within a second is not answered.
        let deadline = machine.nextDeadline()
        _ = machine.beaconReceived(
            Self.beacon(Self.tag(1), port: 6001, random: &random), from: "10.0.0.2",
            now: .seconds(5) + .milliseconds(300))
        _ = machine.beaconReceived(
            Self.beacon(Self.tag(2), port: 6002, random: &random), from: "10.0.0.3",
            now: .seconds(5) + .milliseconds(500))
        #expect(machine.nextDeadline() == deadline)
        // A newcomer a second after the last answer is answered again.
        _ = machine.beaconReceived(
            Self.beacon(Self.tag(3), port: 6003, random: &random), from: "10.0.0.4", now: .seconds(6))
        #expect(try #require(machine.nextDeadline()) <= .seconds(6) + .milliseconds(200))
    }

    @Test("an interface change starts a new burst at once")
    func interfaceChange() {
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        _ = machine.tick(now: .milliseconds(200))
        _ = machine.tick(now: .milliseconds(400))
        #expect(machine.nextDeadline()! >= .seconds(15))
        #expect(Self.sent(machine.interfacesChanged(now: .seconds(5))).count == 1)
        #expect(machine.nextDeadline() == .seconds(5) + .milliseconds(200))
        #expect(Self.sent(machine.tick(now: .seconds(5) + .milliseconds(200))).count == 1)
        #expect(Self.sent(machine.tick(now: .seconds(5) + .milliseconds(400))).count == 1)
        #expect(machine.nextDeadline()! >= .seconds(20))
    }

    // MARK: - Dialing

    @Test("a new node's beacon is logged and dialed at its source address with its port, and at nothing else")
    func dialSourceAddress() {
        var random = SeededGenerator(seed: 9)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        let peer = Self.tag(1)
        let actions = machine.beaconReceived(
            Self.beacon(peer, port: 4242, random: &random), from: "10.0.0.7", now: .seconds(1))
        #expect(Self.logs(actions) == [.discovered(tag: peer, host: "10.0.0.7", port: 4242)])
        let dials = Self.dials(actions)
        #expect(dials.count == 1)
        #expect(dials.first?.host == "10.0.0.7" && dials.first?.port == 4242 && dials.first?.tag == peer)
        #expect(Self.sent(actions).isEmpty, "no reply")
        #expect(machine.knownTags == [peer])
    }

    @Test("a burst (and its copies by other paths) makes one dial; linked nodes are not dialed; unlinked ones again")
    func dialOncePerBurstAndOnlyIfNotLinked() {
        var random = SeededGenerator(seed: 9)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        let peer = Self.tag(2)
        var dialCount = 0
        for (ms, source) in [
            (0, "10.0.0.8"), (1, "127.0.0.1"), (200, "10.0.0.8"), (400, "10.0.0.8"), (401, "127.0.0.1"),
        ] {
            let actions = machine.beaconReceived(
                Self.beacon(peer, port: 4000, random: &random), from: source, now: .seconds(1) + .milliseconds(ms))
            dialCount += Self.dials(actions).count
        }
        #expect(dialCount == 1)
        // Not linked (the dial failed): the next beacon at least a second later dials again.
        let later = machine.beaconReceived(
            Self.beacon(peer, port: 4000, random: &random), from: "10.0.0.8", now: .seconds(20))
        #expect(Self.dials(later).count == 1)
        // Linked: beacons cause nothing.
        machine.peerConnected(peer)
        #expect(machine.isConnected(peer))
        for second in [40, 60, 80] {
            let actions = machine.beaconReceived(
                Self.beacon(peer, port: 4000, random: &random), from: "10.0.0.8", now: .seconds(Int64(second)))
            #expect(actions.isEmpty)
        }
        // The link closed: the very next beacon dials.
        machine.peerDisconnected(peer)
        let again = machine.beaconReceived(
            Self.beacon(peer, port: 4000, random: &random), from: "10.0.0.8", now: .seconds(80) + .milliseconds(10))
        #expect(Self.dials(again).map(\.host) == ["10.0.0.8"])
    }

    @Test("the node's own beacons are ignored, from any source")
    func ownTagIgnored() {
        var machine = Self.machine()
        let own = Self.sent(machine.start(now: .zero))[0]
        #expect(machine.beaconReceived(own, from: "127.0.0.1", now: .milliseconds(1)).isEmpty)
        #expect(machine.beaconReceived(own, from: "192.0.2.2", now: .milliseconds(2)).isEmpty)
        var random = SeededGenerator(seed: 5)
        let replayed = Self.beacon(Self.ownTag, port: 6000, random: &random)  // same tag, other port: still us
        #expect(machine.beaconReceived(replayed, from: "10.9.9.9", now: .milliseconds(3)).isEmpty)
        #expect(machine.knownTags.isEmpty)
    }

    @Test("no input ever makes the machine answer a datagram, and every dial goes to that datagram's source")
    func neverRepliesNeverRedirects() {
        var random = SeededGenerator(seed: 77)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        var now = Duration.zero
        var dialCount = 0
        for step in 0..<3000 {
            now += .milliseconds(Int64(random.next() % 400))
            let source = "10.0.\(random.next() % 4).\(random.next() % 50)"
            let datagram: [UInt8]
            switch random.next() % 5 {
            case 0: datagram = random.bytes(Int(random.next() % 100))
            case 1:
                datagram = Self.beacon(
                    Self.tag(Int(random.next() % 40)), port: 9, network: Self.otherNetwork, random: &random)
            case 2:
                var flipped = Self.beacon(Self.tag(Int(random.next() % 40)), port: 9, random: &random)
                flipped[Int(random.next() % 63)] ^= 0x10
                datagram = flipped
            default:
                datagram = Self.beacon(
                    Self.tag(Int(random.next() % 40)), port: UInt16(step % 60000 + 1), random: &random)
            }
            let actions = machine.beaconReceived(datagram, from: source, now: now)
            #expect(Self.sent(actions).isEmpty)
            for dial in Self.dials(actions) {
                dialCount += 1
                #expect(dial.host == source)
                #expect(Beacon.open(datagram, key: Self.network.beaconKey).map(\.port) == .success(dial.port))
            }
            if random.next() % 50 == 0 { _ = machine.tick(now: now) }
        }
        #expect(dialCount > 100, "the run exercised dials")
    }

    // MARK: - Limits

    @Test("beacons beyond the per-source bucket are dropped (logged once), and the bucket refills at 4 per second")
    func rateLimitPerSource() {
        var random = SeededGenerator(seed: 11)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        let now = Duration.seconds(1)
        var dialed = 0
        var rateLogs = 0
        for n in 0..<40 {
            let actions = machine.beaconReceived(
                Self.beacon(Self.tag(n), port: 4000, random: &random), from: "10.0.0.1", now: now)
            dialed += Self.dials(actions).count
            rateLogs += Self.logs(actions).filter { $0 == .rateLimited(source: "10.0.0.1") }.count
        }
        #expect(dialed == DiscoveryLimits.sourceBeaconBurstMax)
        #expect(rateLogs == 1, "logged once per source, not per beacon")
        // Another source is not affected.
        let other = machine.beaconReceived(
            Self.beacon(Self.tag(100), port: 4000, random: &random), from: "10.0.0.2", now: now)
        #expect(Self.dials(other).count == 1)
        // 250 ms later exactly one token is back.
        let t1 = now + DiscoveryLimits.sourceBeaconRefillInterval
        let a = machine.beaconReceived(
            Self.beacon(Self.tag(200), port: 4000, random: &random), from: "10.0.0.1", now: t1)
        let b = machine.beaconReceived(
            Self.beacon(Self.tag(201), port: 4000, random: &random), from: "10.0.0.1", now: t1)
        #expect(Self.dials(a).count == 1)
        #expect(b.isEmpty, "dropped, and not logged a second time")
        // After a long quiet spell the bucket is full again.
        for n in 0..<DiscoveryLimits.sourceBeaconBurstMax {
            let actions = machine.beaconReceived(
                Self.beacon(Self.tag(300 + n), port: 4000, random: &random), from: "10.0.0.1", now: .seconds(60))
            #expect(Self.dials(actions).count == 1)
        }
    }

    @Test("the candidate table keeps at most 256 nodes, evicting the one heard from longest ago")
    func boundedCandidates() {
        var random = SeededGenerator(seed: 12)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        let total = DiscoveryLimits.candidatesMax + 44
        for n in 0..<total {
            _ = machine.beaconReceived(
                Self.beacon(Self.tag(n), port: 4000, random: &random), from: "10.1.\(n / 200).\(n % 200)",
                now: .milliseconds(Int64(n)))
        }
        #expect(machine.knownTags.count == DiscoveryLimits.candidatesMax)
        #expect(Set(machine.knownTags) == Set((44..<total).map(Self.tag)), "the 44 oldest went")
        // An evicted node that beacons again is discovered (and dialed) again; 300 sources were logged already, past
        // the 256 lines discovery logs.
        let back = machine.beaconReceived(
            Self.beacon(Self.tag(0), port: 4000, random: &random), from: "10.9.0.0", now: .seconds(2))
        #expect(Self.logs(back).isEmpty)
        #expect(Self.dials(back).count == 1)
        #expect(machine.knownTags.count == DiscoveryLimits.candidatesMax)
    }

    @Test("fresh tags forged from one address are logged once; another port of that address is news")
    func discoveriesLoggedOncePerSourceAndPort() {
        var random = SeededGenerator(seed: 14)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        var logged = [DiscoveryLog<String>]()
        for n in 0..<40 {
            logged += Self.logs(
                machine.beaconReceived(
                    Self.beacon(Self.tag(n), port: 9, random: &random), from: "10.0.0.66", now: .milliseconds(250 * Int64(n))))
        }
        #expect(logged == [.discovered(tag: Self.tag(0), host: "10.0.0.66", port: 9)])
        let other = machine.beaconReceived(
            Self.beacon(Self.tag(99), port: 7718, random: &random), from: "10.0.0.66", now: .seconds(11))
        #expect(Self.logs(other) == [.discovered(tag: Self.tag(99), host: "10.0.0.66", port: 7718)])
    }

    @Test("eviction prefers nodes that are not linked")
    func evictionPrefersUnlinked() {
        var random = SeededGenerator(seed: 13)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        for n in 0..<DiscoveryLimits.candidatesMax {
            _ = machine.beaconReceived(
                Self.beacon(Self.tag(n), port: 4000, random: &random), from: "10.2.\(n / 200).\(n % 200)",
                now: .milliseconds(Int64(n)))
        }
        machine.peerConnected(Self.tag(0))  // the oldest, but linked
        _ = machine.beaconReceived(
            Self.beacon(Self.tag(999), port: 4000, random: &random), from: "10.3.0.1", now: .seconds(1))
        #expect(machine.knownTags.contains(Self.tag(0)))
        #expect(!machine.knownTags.contains(Self.tag(1)))
        #expect(machine.isConnected(Self.tag(0)))
    }

    @Test("a node not heard from for 90 s is forgotten at the next tick")
    func candidatesExpire() {
        var random = SeededGenerator(seed: 14)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        _ = machine.beaconReceived(
            Self.beacon(Self.tag(1), port: 4000, random: &random), from: "10.0.0.1", now: .seconds(1))
        _ = machine.tick(now: .seconds(90))
        #expect(machine.knownTags == [Self.tag(1)])
        _ = machine.tick(now: .seconds(91))
        #expect(machine.knownTags.isEmpty)
    }

    // MARK: - Logging

    @Test("another network's beacons are logged once per source, not per beacon")
    func wrongNetworkLoggedOncePerSource() {
        var random = SeededGenerator(seed: 15)
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        var entries: [DiscoveryLog<String>] = []
        for n in 0..<30 {
            for source in ["10.0.0.1", "10.0.0.2"] {
                let foreign = Self.beacon(Self.tag(n), port: 4000, network: Self.otherNetwork, random: &random)
                let actions = machine.beaconReceived(foreign, from: source, now: .seconds(Int64(n)))
                #expect(Self.dials(actions).isEmpty)
                entries += Self.logs(actions)
            }
        }
        #expect(
            entries == [
                .rejected(source: "10.0.0.1", reason: .wrongKeyOrTampered),
                .rejected(source: "10.0.0.2", reason: .wrongKeyOrTampered),
            ])
        #expect(machine.knownTags.isEmpty)
        // A different reason from the same source is a different line, also once.
        let garbage1 = machine.beaconReceived(Array("hello".utf8), from: "10.0.0.1", now: .seconds(40))
        let garbage2 = machine.beaconReceived(Array("hello".utf8), from: "10.0.0.1", now: .seconds(41))
        #expect(Self.logs(garbage1) == [.rejected(source: "10.0.0.1", reason: .notABeacon)])
        #expect(garbage2.isEmpty)
        #expect("\(entries[0])".contains("another network key"))
    }

    @Test("rejections are logged for at most 256 sources, then one line says the rest are not")
    func rejectionLogBounded() {
        var machine = Self.machine()
        _ = machine.start(now: .zero)
        var lines: [DiscoveryLog<String>] = []
        for n in 0..<400 {
            lines += Self.logs(machine.beaconReceived([1, 2, 3], from: "10.4.\(n / 200).\(n % 200)", now: .seconds(1)))
        }
        #expect(lines.count == DiscoveryLimits.rejectionsLoggedMax + 1)
        #expect(lines.last == .rejectionLogFull)
    }
}
