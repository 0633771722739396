// Goal: the node's redial rule (`Redials`): named peers are dialled at once and redialled for ever with a backoff
// that doubles from 250 ms to 2 s and starts over once a dial's handshake ends; a closed link is redialled one
// backoff after it closed; peers found by discovery are redialled for 120 s after their link went down, then
// forgotten, and not at all when their dial never linked; an address whose person is linked by another connection
// is not dialled. Method: the pure rule with time passed in (no clock, no sockets), with the node's own constants.
import NatterModel
import Testing

@testable import NatterNode

@Suite("Redials")
struct RedialsTests {
    let alice = PeerAddress(host: "127.0.0.1", port: 7001)
    let bob = PeerAddress(host: "127.0.0.1", port: 7002)
    let alicePerson = AuthorID(bytes: [UInt8](repeating: 1, count: 32))

    func redials() -> Redials<Int> {
        Redials(backoff: .shipped, discoveredWindow: Node.discoveredRedialWindow)
    }

    /// Bob named and dialled on connection 2, Alice found by discovery and dialled on connection 1, both at 0.
    func bobNamedAliceDiscovered() -> Redials<Int> {
        var redials = redials()
        redials.addNamed(bob, now: .zero)
        redials.addDiscovered(alice, connection: 1, now: .zero)
        #expect(tick(&redials, at: .zero, connection: 2) == [bob])
        return redials
    }

    /// Runs one tick at `now` with `linked` the people linked: dials every address due, each failing (nil) or
    /// connecting on `connection`.
    func tick(
        _ redials: inout Redials<Int>, at now: Duration, connection: Int? = nil, linked: Set<AuthorID> = []
    ) -> [PeerAddress] {
        let due = redials.due(now: now, isLinked: linked.contains)
        for address in due {
            let attempted = redials.attempt(address, now: now)
            #expect(attempted)
            redials.dialled(address, connection: connection)
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
        #expect(tick(&redials, at: .milliseconds(500), connection: 1) == [alice])  // connects
        #expect(redials.entries[alice]?.backoff.delay == .seconds(1), "a connection is not a link yet")
        redials.linked(1, person: alicePerson, now: .milliseconds(501))
        #expect(redials.entries[alice]?.backoff.delay == Node.redialBackoffMin, "linked: the backoff starts over")
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
        redials.linked(1, person: alicePerson, now: .seconds(1))
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
        // A discovered peer that links again has its window renewed from then.
        redials.addDiscovered(alice, connection: 4, now: .seconds(200))
        redials.linked(4, person: alicePerson, now: .seconds(200))
        redials.closed(4, now: .seconds(210))
        let redialled = Duration.seconds(210) + Node.redialBackoffMin
        #expect(redials.due(now: redialled) { _ in false }.contains(alice))  // (Bob, still failing, may be due too)
        let attempted = redials.attempt(alice, now: redialled)
        #expect(attempted)
        redials.dialled(alice, connection: 5)
        #expect(redials.entries[alice]?.expires == .seconds(200) + Node.discoveredRedialWindow, "not linked yet")
        redials.linked(5, person: alicePerson, now: redialled + .milliseconds(3))
        #expect(redials.entries[alice]?.expires == redialled + .milliseconds(3) + Node.discoveredRedialWindow)
    }

    @Test("while an address's person is linked by another connection it is not dialled; once they are not, it is")
    func personLinkedElsewhere() {
        var redials = bobNamedAliceDiscovered()
        let bobPerson = AuthorID(bytes: [UInt8](repeating: 2, count: 32))
        redials.linked(1, person: alicePerson, now: .zero)
        redials.linked(2, person: bobPerson, now: .zero)
        // Both lost to links the other side dialled (closed as redundant, or replaced).
        redials.closed(1, now: .seconds(1))
        redials.closed(2, now: .seconds(1))
        let both: Set = [alicePerson, bobPerson]
        for second in 2...300 {
            let due = tick(&redials, at: .seconds(Int64(second)), linked: both)
            #expect(due.isEmpty, "linked elsewhere at \(second) s")
        }
        #expect(redials.entries[alice] != nil, "a discovered peer's window counts from its person's last link")
        // Their other links go down: both are dialled at once (the backoff started over when they linked).
        #expect(tick(&redials, at: .seconds(301)) == [alice, bob])
    }

    @Test("a discovered dial that never linked is not redialled; a named one keeps its doubling backoff")
    func connectedButNeverLinked() {
        var redials = bobNamedAliceDiscovered()
        redials.closed(1, now: .milliseconds(10))  // refused by the peer (its cap, a ban) before any handshake ended
        redials.closed(2, now: .milliseconds(10))
        #expect(redials.entries[alice] == nil, "its next beacon asks again")
        // Bob: every dial connects and is turned away; the waits still double to the cap.
        var now = Duration.milliseconds(10)
        for (wait, connection) in zip([500, 1_000, 2_000, 2_000] as [Int64], 3...) {
            #expect(tick(&redials, at: now + .milliseconds(wait - 1)).isEmpty, "not due before \(wait) ms")
            now += .milliseconds(wait)
            #expect(tick(&redials, at: now, connection: connection) == [bob])
            redials.closed(connection, now: now)
        }
    }

    @Test("an address forgotten while a dial was in flight is not brought back")
    func forgottenDuringDial() {
        var redials = redials()
        let attempted = redials.attempt(alice, now: .zero)
        #expect(!attempted)
        redials.dialled(alice, connection: 1)
        #expect(redials.entries.isEmpty)
    }
}
