import Foundation
import Synchronization

/// Time that moves only when a test moves it: what a REPL session's send rate (`Options.clock`) and its wall clock
/// (`Options.wallClockMillis`: mutes, displayed times) read in tests of time-dependent behaviour, so a refill or a
/// mute's end is reached by `advance`, never by sleeping.
final class ManualClock: Sendable {
    private let elapsed = Mutex<Duration>(.zero)
    /// The wall clock's reading at zero: the real present, so times shown and stored look like today's.
    let originMillis: Int64

    init(originMillis: Int64 = Int64((Date().timeIntervalSince1970 * 1000).rounded())) {
        self.originMillis = originMillis
    }

    /// Time since the clock started (`ReplSession.Options.clock`).
    var now: Duration { elapsed.withLock { $0 } }

    /// Milliseconds since 1970 (`ReplSession.Options.wallClockMillis`).
    var nowMillis: Int64 { originMillis + Int64(now / .milliseconds(1)) }

    func advance(by step: Duration) { elapsed.withLock { $0 += step } }
}
