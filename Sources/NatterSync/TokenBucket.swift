/// A token bucket with time passed in (no clock inside): `capacity` tokens at most, `refillPerSecond` back each
/// second. Two ways to use it: `take(_:now:)` may run the bucket into debt and `waitTime` says how long until it is
/// out of debt again, which is how the transport pauses reading from a peer that sends faster than its rate
/// (backpressure, not punishment); `takeIfAvailable(now:)` refuses instead, which is how the REPL's send rate and
/// a link's typing frames are limited.
public struct TokenBucket: Sendable, Equatable {
    public let capacity: Double
    public let refillPerSecond: Double
    public private(set) var tokens: Double
    private var updatedAt: Duration

    /// A full bucket at `now` (a bucket first used later is still full then: refills never exceed the capacity).
    public init(capacity: Int, refillPerSecond: Double, now: Duration = .zero) {
        precondition(capacity > 0 && refillPerSecond > 0, "a bucket holds and refills something")
        self.capacity = Double(capacity)
        self.refillPerSecond = refillPerSecond
        tokens = Double(capacity)
        updatedAt = now
    }

    /// Takes `count` tokens at `now` (the balance may go negative).
    public mutating func take(_ count: Int, now: Duration) {
        refill(now: now)
        tokens -= Double(count)
    }

    /// Takes one token if there is a whole one (after refilling for the time passed); returns whether it did.
    public mutating func takeIfAvailable(now: Duration) -> Bool {
        refill(now: now)
        guard tokens >= 1 else { return false }
        tokens -= 1
        return true
    }

    /// The balance at `now`, after refilling for the time passed (negative while in debt).
    public func tokens(now: Duration) -> Double {
        var copy = self
        copy.refill(now: now)
        return copy.tokens
    }

    /// How long from `now` until the balance is positive again; nil when it already is.
    public func waitTime(now: Duration) -> Duration? {
        var copy = self
        copy.refill(now: now)
        guard copy.tokens <= 0 else { return nil }
        let seconds = (1 - copy.tokens) / refillPerSecond
        return .nanoseconds(Int64((seconds * 1e9).rounded(.up)))
    }

    private mutating func refill(now: Duration) {
        guard now > updatedAt else { return }
        let (seconds, attoseconds) = (now - updatedAt).components
        let elapsed = Double(seconds) + Double(attoseconds) / 1e18
        tokens = min(capacity, tokens + elapsed * refillPerSecond)
        updatedAt = now
    }
}
