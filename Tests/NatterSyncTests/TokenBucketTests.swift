// Goal: the token bucket that limits the transport's inbound rate (debt and wait times), the REPL's send rate and a
// link's typing frames (whole tokens or refusal) keeps its burst and its rate exactly. Method: explicit time.
import Testing

@testable import NatterSync

@Suite("Token bucket")
struct TokenBucketTests {
    @Test("a bucket allows its burst, then one token per refill interval; debt delays by the exact time")
    func takeIntoDebt() {
        var bucket = TokenBucket(capacity: 100, refillPerSecond: 10, now: .zero)
        bucket.take(100, now: .zero)
        #expect(bucket.waitTime(now: .zero) == .milliseconds(100))
        #expect(bucket.waitTime(now: .milliseconds(100)) == nil)
        bucket.take(50, now: .seconds(1))  // 10 back, then 50 taken: 40 in debt
        #expect(bucket.waitTime(now: .seconds(1)) == .milliseconds(4100))
        // Refills never exceed the capacity.
        #expect(bucket.waitTime(now: .seconds(1000)) == nil)
        bucket.take(0, now: .seconds(1000))
        #expect(bucket.tokens == 100)
    }

    @Test("taking only whole tokens: the burst, then the rate (the REPL's send rate, typing frames)")
    func takeIfAvailable() {
        var bucket = TokenBucket(capacity: 3, refillPerSecond: 2)
        let times: [Duration] = [
            .seconds(1), .seconds(1), .seconds(1), .seconds(1), .milliseconds(1_400), .milliseconds(1_500),
            .milliseconds(1_500), .seconds(60), .seconds(60), .seconds(60), .seconds(60),
        ]
        let taken = times.map { bucket.takeIfAvailable(now: $0) }
        #expect(taken == [true, true, true, false, false, true, false, true, true, true, false])
    }
}
