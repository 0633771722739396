// Goal: the penalty state machine scores misbehaviour per address and identity, bans repeat offenders for a time
// that doubles up to a cap, reports each ban once, forgives with time, and stays within its bound. Method: the pure
// `PeerPenalties` driven with explicit time (no clock, no sockets).
import NatterCrypto
import NatterModel
import Testing

@testable import NatterNode

@Suite("Peer penalties")
struct PeerPenaltiesTests {
    let malformed = Misbehaviour(.malformedFrame, "transport frame 0 failed authentication")
    let stranger = Misbehaviour(.wrongNetworkKey, "handshake message 1 does not decrypt")
    let address = Offender.address("10.0.0.7")

    @Test("a second malformed link bans the address for 10 s, reported once; then it is free again")
    func secondOffenceBans() {
        var penalties = PeerPenalties()
        #expect(penalties.offended([address], malformed, now: .seconds(1)).isEmpty)
        #expect(penalties.points(of: address, now: .seconds(1)) == 2)
        #expect(!penalties.isBanned(address, now: .seconds(1)))
        let verdicts = penalties.offended([address], malformed, now: .seconds(2))
        #expect(verdicts == [.banned(address, duration: .seconds(10), until: .seconds(12), after: malformed)])
        #expect(penalties.isBanned(address, now: .seconds(11)))
        #expect(penalties.banned(now: .seconds(11)) == [address])
        #expect(penalties.nextDeadline(now: .seconds(2)) == .seconds(12))
        // While banned, further offences (a connection already open) are neither scored nor reported again.
        #expect(penalties.offended([address], malformed, now: .seconds(5)).isEmpty)
        #expect(!penalties.isBanned(address, now: .seconds(12)))
        #expect(penalties.banned(now: .seconds(12)).isEmpty)
    }

    @Test("a stalled handshake costs 1 point, a greedy or non-reading peer 2: four stalls or two greeds ban")
    func stallsAndGreed() {
        var penalties = PeerPenalties()
        let stalled = Misbehaviour(.stalledHandshake, "evicted from a full handshake table")
        for second in 1...3 {
            #expect(penalties.offended([address], stalled, now: .seconds(Int64(second))).isEmpty)
        }
        #expect(penalties.points(of: address, now: .seconds(3)) == 3)
        #expect(penalties.offended([address], stalled, now: .seconds(4)).count == 1, "the fourth stall bans")
        let other = Offender.address("10.0.0.8")
        let greedy = Misbehaviour(.notReading, "the peer does not read")
        #expect(penalties.offended([other], greedy, now: .seconds(5)).isEmpty)
        #expect(penalties.offended([other], greedy, now: .seconds(6)).count == 1)
    }

    @Test("bans double with each repeat, capped at 10 minutes")
    func bansDoubleUpToTheCap() {
        var penalties = PeerPenalties()
        var now = Duration.seconds(100)
        var durations = [Duration]()
        for _ in 0..<9 {
            _ = penalties.offended([address], malformed, now: now)
            for verdict in penalties.offended([address], malformed, now: now + .seconds(1)) {
                if case .banned(_, let duration, let until, _) = verdict {
                    durations.append(duration)
                    now = until
                }
            }
        }
        #expect(durations.map { $0.components.seconds } == [10, 20, 40, 80, 160, 320, 600, 600, 600])
    }

    @Test("another network's node is tolerated three times, banned at the fourth")
    func wrongNetworkKeyIsLight() {
        var penalties = PeerPenalties()
        for second in 1...3 { #expect(penalties.offended([address], stranger, now: .seconds(Int64(second))).isEmpty) }
        #expect(penalties.offended([address], stranger, now: .seconds(4)).count == 1)
    }

    @Test("points decay one per minute: offences an hour apart never ban; ban memory ends after an hour")
    func forgiveness() {
        var penalties = PeerPenalties()
        for hour in 0..<5 {
            #expect(penalties.offended([address], malformed, now: .seconds(Int64(hour) * 3600)).isEmpty)
        }
        #expect(penalties.points(of: address, now: .seconds(4 * 3600 + 60)) == 1)
        #expect(penalties.points(of: address, now: .seconds(4 * 3600 + 120)) == 0)
        penalties.forgetForgiven(now: .seconds(4 * 3600 + 120))
        #expect(penalties.trackedCount == 0)
        // Two bans in a row (10 s, then 20 s); after an hour of good behaviour the next ban is 10 s again.
        var now = Duration.seconds(100_000)
        _ = penalties.offended([address], malformed, now: now)
        _ = penalties.offended([address], malformed, now: now)
        now += .seconds(10)
        _ = penalties.offended([address], malformed, now: now)
        let second = penalties.offended([address], malformed, now: now)
        #expect(second.map(Self.duration) == [.seconds(20)])
        now += .seconds(3600 + 20)
        _ = penalties.offended([address], malformed, now: now)
        let fresh = penalties.offended([address], malformed, now: now)
        #expect(fresh.map(Self.duration) == [.seconds(10)])
    }

    static func duration(_ verdict: PeerPenalties.Verdict) -> Duration {
        switch verdict {
        case .banned(_, let duration, _, _): duration
        }
    }

    @Test("an offence scores the address and the identity; each is banned and reported on its own")
    func addressAndIdentity() throws {
        let author = AuthorID(try IdentityKeyPair(seed: [UInt8](repeating: 7, count: 32)).publicKey)
        let peer = Offender.peer(author)
        var penalties = PeerPenalties()
        _ = penalties.offended([address, peer], malformed, now: .seconds(1))
        let verdicts = penalties.offended([peer, address], malformed, now: .seconds(2))
        #expect(verdicts.count == 2)
        #expect(penalties.banned(now: .seconds(3)) == [address, peer])
        // The same identity from another address: the identity is still banned, the new address is not.
        let other = Offender.address("10.0.0.8")
        #expect(penalties.offended([other, peer], malformed, now: .seconds(4)).isEmpty)
        #expect(penalties.points(of: other, now: .seconds(4)) == 2)
    }

    @Test("the table stays within its bound and keeps bans over mere suspects")
    func bounded() {
        var configuration = PenaltyConfiguration()
        configuration.offendersTrackedMax = 8
        var penalties = PeerPenalties(configuration: configuration)
        _ = penalties.offended([address], malformed, now: .seconds(1))
        _ = penalties.offended([address], malformed, now: .seconds(1))
        for index in 0..<100 {
            _ = penalties.offended([.address("10.1.0.\(index)")], malformed, now: .milliseconds(Int64(2_000 + index)))
            #expect(penalties.trackedCount <= 8)
        }
        #expect(penalties.isBanned(address, now: .seconds(5)))
    }

    @Test("the same inputs give the same verdicts (deterministic)")
    func deterministic() {
        func run() -> [PeerPenalties.Verdict] {
            var penalties = PeerPenalties()
            var verdicts = [PeerPenalties.Verdict]()
            for step in 0..<200 {
                let who = Offender.address("10.2.0.\(step % 7)")
                verdicts += penalties.offended([who], step % 3 == 0 ? stranger : malformed, now: .seconds(Int64(step)))
            }
            return verdicts
        }
        let first = run()
        #expect(!first.isEmpty)
        #expect(first == run())
    }
}
