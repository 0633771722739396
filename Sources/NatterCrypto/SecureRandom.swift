import CSodium

/// Cryptographically secure randomness from libsodium (`randombytes_buf`).
///
/// Everything random in natter comes through here or through libsodium's own key generation, so the lab can route
/// all of it to a seeded generator (`randombytes_set_implementation`) and replay runs.
public enum SecureRandom {
    /// `count` random bytes.
    public static func bytes(_ count: Int) -> [UInt8] {
        Sodium.ready()
        var out = [UInt8](repeating: 0, count: count)
        out.withUnsafeMutableBytes { randombytes_buf($0.u8, $0.count) }
        return out
    }

    /// A uniformly random 64-bit integer.
    public static func uint64() -> UInt64 {
        var value: UInt64 = 0
        Sodium.ready()
        withUnsafeMutableBytes(of: &value) { randombytes_buf($0.u8, $0.count) }
        return value
    }

    /// A uniformly random integer in `0..<upperBound` without modulo bias.
    public static func uniform(_ upperBound: UInt32) -> UInt32 {
        precondition(upperBound > 0, "uniform(0) has no value to return")
        Sodium.ready()
        return randombytes_uniform(upperBound)
    }
}

/// A `RandomNumberGenerator` backed by `SecureRandom`, for APIs (shuffles, jitter) that take one.
public struct SecureRandomGenerator: RandomNumberGenerator, Sendable {
    public init() {}
    public mutating func next() -> UInt64 { SecureRandom.uint64() }
}
