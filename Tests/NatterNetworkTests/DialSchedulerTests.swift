// Goal: discovery's dials are bounded per source and in all — a token bucket per source, one dial in flight per
// source, a doubling backoff after a failed dial, a small concurrent cap with a fair queue — so forged beacons from a
// few addresses cannot hold the dials an honest neighbour needs (issue 19, item 3). Method: the pure
// `DialScheduler` with string sources, integer requests and explicit times.
import Testing

@testable import NatterNetwork

@Suite("Dial scheduler")
struct DialSchedulerTests {
    typealias Scheduler = DialScheduler<String, Int>

    @Test("a source dials once at a time; its next request waits for the first to end")
    func onePerSource() {
        var scheduler = Scheduler()
        #expect(scheduler.requested(1, from: "a", now: .zero) == (.started, [1]))
        #expect(scheduler.requested(2, from: "a", now: .zero).outcome == .queued)
        #expect(scheduler.requested(3, from: "a", now: .zero).outcome == .queued, "the newest replaces the waiting one")
        #expect(scheduler.queued == 1)
        #expect(scheduler.finished(from: "a", connected: true, now: .milliseconds(5)) == [3])
        #expect(scheduler.inFlight == 1)
    }

    @Test("a source's burst, then one dial a second")
    func tokenBucket() {
        var scheduler = Scheduler()
        var now = Duration.zero
        for request in 0..<DiscoveryLimits.dialsPerSourceBurst {
            #expect(scheduler.requested(request, from: "a", now: now).outcome == .started)
            _ = scheduler.finished(from: "a", connected: true, now: now)
        }
        #expect(scheduler.requested(99, from: "a", now: now).outcome == .rateLimited)
        now += DiscoveryLimits.dialsPerSourceRefillInterval
        #expect(scheduler.requested(100, from: "a", now: now).outcome == .started)
    }

    @Test("a failed dial blocks its source for a backoff that doubles, and a success forgives it")
    func failureBackoff() {
        var scheduler = Scheduler()
        var now = Duration.zero
        _ = scheduler.requested(1, from: "a", now: now)
        _ = scheduler.finished(from: "a", connected: false, now: now)
        #expect(scheduler.requested(2, from: "a", now: now + .milliseconds(1_999)).outcome == .backingOff)
        now += DiscoveryLimits.dialFailureBackoffMin
        #expect(scheduler.requested(3, from: "a", now: now).outcome == .started)
        _ = scheduler.finished(from: "a", connected: false, now: now)
        #expect(scheduler.requested(4, from: "a", now: now + .milliseconds(3_999)).outcome == .backingOff, "4 s now")
        now += .seconds(4)
        #expect(scheduler.requested(5, from: "a", now: now).outcome == .started)
        _ = scheduler.finished(from: "a", connected: true, now: now)
        #expect(scheduler.requested(6, from: "a", now: now).outcome == .started, "a success forgives")
    }

    @Test("with the cap taken, requests queue per source and start first come first served as dials end")
    func capAndQueue() {
        var scheduler = Scheduler()
        for source in 0..<DiscoveryLimits.dialsInFlightMax {
            #expect(scheduler.requested(source, from: "attacker-\(source)", now: .zero).outcome == .started)
        }
        #expect(scheduler.requested(1_000, from: "honest", now: .zero).outcome == .queued)
        #expect(scheduler.requested(2_000, from: "late", now: .zero).outcome == .queued)
        // The first dial to end frees a place for the oldest waiting request, the honest one.
        #expect(scheduler.finished(from: "attacker-3", connected: false, now: .seconds(1)) == [1_000])
        #expect(scheduler.finished(from: "attacker-4", connected: false, now: .seconds(1)) == [2_000])
        #expect(scheduler.inFlight == DiscoveryLimits.dialsInFlightMax)
    }

    @Test("forged beacons from 8 addresses, 32 a second with fresh tags, leave room for an honest dial at once")
    func floodFromEightAddresses() {
        var scheduler = Scheduler()
        var honestStarted: Duration?
        var inFlight: [(source: String, endsAt: Duration)] = []
        // 10 s of the flood, in steps of 1/32 s; every dial of the flood fails after its 1 s connect timeout, the
        // honest one connects in 2 ms.
        for step in 0..<320 {
            let now = Duration.milliseconds(Int64(step) * 1_000 / 32)
            let ended = inFlight.filter { $0.endsAt <= now }
            inFlight.removeAll { $0.endsAt <= now }
            for dial in ended {
                let connected = dial.source == "honest"
                for started in scheduler.finished(from: dial.source, connected: connected, now: dial.endsAt) {
                    // A waiting request of a flooding source (the honest one never waits here).
                    inFlight.append(("10.0.0.\(started % 8)", now + DiscoveryLimits.dialConnectTimeout))
                }
            }
            let source = "10.0.0.\(step % 8)"
            if scheduler.requested(step, from: source, now: now).outcome == .started {
                inFlight.append((source, now + DiscoveryLimits.dialConnectTimeout))
            }
            #expect(inFlight.filter { $0.source != "honest" }.count <= 8, "one dial per flooding source at most")
            if step == 160, scheduler.requested(-1, from: "honest", now: now).outcome == .started {
                honestStarted = now
                inFlight.append(("honest", now + .milliseconds(2)))
            }
        }
        #expect(honestStarted == .milliseconds(5_000), "the honest dial started the moment it was asked for")
        #expect(scheduler.inFlight == inFlight.count)
    }
}
