import NatterModel
import Testing

// Goal: show that the session's timers run on virtual time alone: a quiet link sends heartbeats, a silent peer is
// declared dead within the named timeout, anti-entropy rounds start on schedule, and `nextDeadline` names each
// moment. Method: one session fed ticks and messages at chosen instants; no clock is read anywhere.
@testable import NatterSync

@Suite("Sync timers")
struct SyncTimerTests {
    static let ping = SyncMessage.ping.encoded()

    static func started() -> SyncSession<InMemoryRecordSource> {
        var session = SyncSession(source: InMemoryRecordSource())
        let actions = session.start(now: .zero)
        #expect(actions == [.send(SyncMessage.summary(isFinal: true, entries: []).encoded())])
        return session
    }

    @Test("a quiet link sends a ping every heartbeat interval")
    func heartbeat() {
        var session = Self.started()
        #expect(session.nextDeadline() == Limits.syncHeartbeatInterval)
        #expect(session.tick(now: .seconds(1)).isEmpty)
        #expect(session.tick(now: Limits.syncHeartbeatInterval) == [.send(Self.ping)])
        #expect(session.nextDeadline() == Limits.syncHeartbeatInterval * 2)
        // A ping from the peer keeps the link alive.
        #expect(session.receive(message: Self.ping, now: .seconds(3)).isEmpty)
        #expect(session.tick(now: .seconds(4)) == [.send(Self.ping)])
        #expect(session.tick(now: .seconds(6)) == [.send(Self.ping)])
        #expect(session.nextDeadline() == .seconds(8))
        #expect(session.isClosed == false)
    }

    @Test("a silent peer is declared dead by virtual time")
    func silenceTimeout() {
        var session = Self.started()
        _ = session.receive(message: Self.ping, now: .seconds(1))
        _ = session.tick(now: .seconds(2))
        _ = session.tick(now: .seconds(4))
        _ = session.tick(now: .seconds(6))
        #expect(session.nextDeadline() == .seconds(7))
        #expect(session.tick(now: .milliseconds(6_999)).isEmpty)
        #expect(session.tick(now: .seconds(7)) == [.close(.timeout(silence: Limits.syncSilenceTimeout))])
        #expect(session.isClosed && session.nextDeadline() == nil)
        // Closed: every later input is ignored.
        #expect(session.receive(message: Self.ping, now: .seconds(8)).isEmpty)
        #expect(session.tick(now: .seconds(9)).isEmpty)
    }

    @Test("bytes that arrived but wait to be handled (a busy node) keep the link alive; real silence still ends it")
    func heardButNotHandled() {
        var session = Self.started()
        _ = session.receive(message: Self.ping, now: .seconds(1))
        // The node was busy from 1 s to 8 s; the peer's pings arrived at 3 s and 5 s and wait in its inbox.
        session.heard(at: .seconds(3))
        session.heard(at: .seconds(5))
        session.heard(at: .seconds(4))  // an older arrival never moves the clock back
        #expect(session.nextDeadline()! <= .seconds(11))
        #expect(!session.tick(now: .seconds(8)).contains { if case .close = $0 { true } else { false } })
        #expect(session.tick(now: .seconds(11)) == [.close(.timeout(silence: Limits.syncSilenceTimeout))])
        #expect(session.isClosed)
        session.heard(at: .seconds(12))  // closed: ignored
        #expect(session.nextDeadline() == nil)
    }

    @Test("anti-entropy rounds start every interval")
    func antiEntropySchedule() {
        var session = Self.started()
        var summaries = 0
        var now = Duration.zero
        while now < Limits.syncAntiEntropyInterval * 3 {
            now = session.nextDeadline()!
            _ = session.receive(message: Self.ping, now: now)
            for case .send(let bytes) in session.tick(now: now) where bytes.first == SyncMessage.Tag.summary.rawValue {
                summaries += 1
            }
        }
        #expect(summaries == 3)
        #expect(session.nextDeadline()! <= now + Limits.syncHeartbeatInterval)
    }

    @Test("the dead link is noticed within a few seconds")
    func limitsAreLive() {
        #expect(Limits.syncSilenceTimeout <= .seconds(10))
        #expect(Limits.syncHeartbeatInterval * 2 < Limits.syncSilenceTimeout)
    }
}
