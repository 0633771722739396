// Goal: the node's redial rule (`Redials`): named peers are dialled at once and redialled for ever with a backoff
// that doubles from 250 ms to 2 s and starts over once a dial connects; a closed link is redialled one backoff after
// it closed; peers found by discovery are redialled for 120 s after their link went down, then forgotten. Method: the
// pure rule with time passed in (no clock, no sockets), with the node's own constants.
import Testing

@testable import NatterNode

@Suite("Redials")
struct RedialsTests {
    let alice = PeerAddress(host: "127.0.0.1", port: 7001)
    let bob = PeerAddress(host: "127.0.0.1", port: 7002)

    func redials() -> Redials<Int> {
        Redials(backoff: .shipped, discoveredWindow: Node.discoveredRedialWindow)
    }

    /// Runs one tick at `now`: dials every address due, each failing (nil) or connecting on `connection`.
    func tick(_ redials: inout Redials<Int>, at now: Duration, connection: Int? = nil) -> [PeerAddress] {
        let due = redials.due(now: now)
        for address in due {
            let attempted = redials.attempt(address, now: now)
            #expect(attempted)
            redials.dialled(address, connection: connection, now: now)
        }
        return due
    }

    @Test("a named peer: dialled at once, then failed dials wait 500 ms, 1 s, 2 s, 2 s… (doubling from 250 ms, capped)")
    func namedBackoff() {
        var redials = redials()
        redials.addNamed(alice, now: .zero)
        #expect(tick(&redials, at: .zero) == [alice])
        var now = Duration.zero
        for wait in [500, 1_000, 2_000, 2_000, 2_000] as [Int64] {
            #expect(tick(&redials, at: now + .milliseconds(wait - 1)).isEmpty, "not due before \(wait) ms")
            now += .milliseconds(wait)
            #expect(tick(&redials, at: now) == [alice], "due after \(wait) ms")
        }
        #expect(redials.entries[alice]?.backoff.delay == Node.redialBackoffMax)
    }

    @Test("a connected peer is not redialled; once its link closes it is, one (reset) backoff later")
    func connectedThenClosed() {
        var redials = redials()
        redials.addNamed(alice, now: .zero)
        _ = tick(&redials, at: .zero)  // fails: backoff 500 ms
        #expect(tick(&redials, at: .milliseconds(500), connection: 1) == [alice])  // connects: backoff starts over
        #expect(redials.entries[alice]?.backoff.delay == Node.redialBackoffMin)
        #expect(tick(&redials, at: .seconds(60)).isEmpty, "connected: never due")
        redials.closed(1, now: .seconds(60))
        #expect(tick(&redials, at: .seconds(60) + .milliseconds(249)).isEmpty)
        #expect(tick(&redials, at: .seconds(60) + .milliseconds(250)) == [alice])
        redials.closed(2, now: .seconds(61))  // another connection: nothing changes
        #expect(redials.entries[alice]?.connection == nil)
    }

    @Test("a discovered peer is redialled for 120 s after its link went down, then forgotten; a named one for ever")
    func discoveredWindow() {
        var redials = redials()
        redials.addNamed(bob, now: .zero)
        _ = tick(&redials, at: .zero, connection: 2)
        redials.addDiscovered(alice, connection: 1, now: .seconds(1))
        redials.addDiscovered(bob, connection: 3, now: .seconds(1))  // named stays named: not replaced
        #expect(redials.entries[bob]?.expires == nil && redials.entries[bob]?.connection == 2)
        redials.closed(1, now: .seconds(10))
        redials.closed(2, now: .seconds(10))
        // Both redialled (and failing) until the window, which counts from the last connection (at 1 s), ends.
        var now = Duration.seconds(10)
        while now < .seconds(121) {
            now += .seconds(2)
            _ = tick(&redials, at: now)
        }
        #expect(redials.entries[alice] == nil, "forgotten after the window")
        #expect(redials.entries[bob] != nil, "a named peer is never forgotten")
        // A discovered peer that connects again has its window renewed from then.
        redials.addDiscovered(alice, connection: 4, now: .seconds(200))
        redials.closed(4, now: .seconds(210))
        let redialled = Duration.seconds(210) + Node.redialBackoffMin
        #expect(redials.due(now: redialled).contains(alice))  // (Bob, still failing, may be due too)
        let attempted = redials.attempt(alice, now: redialled)
        #expect(attempted)
        redials.dialled(alice, connection: 5, now: redialled)
        #expect(redials.entries[alice]?.expires == redialled + Node.discoveredRedialWindow)
    }

    @Test("an address forgotten while a dial was in flight is not brought back")
    func forgottenDuringDial() {
        var redials = redials()
        let attempted = redials.attempt(alice, now: .zero)
        #expect(!attempted)
        redials.dialled(alice, connection: 1, now: .zero)
        #expect(redials.entries.isEmpty)
    }
}
