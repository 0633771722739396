import Foundation

/// The system's wall clock, for what stamps a record outside the core (a new profile, the crash tests' writers, a
/// remembered peer). The core never reads it: its drivers pass time in.
public enum WallClock {
    /// Milliseconds since 1970, rounded.
    public static func nowMillis() -> Int64 {
        Int64((Date().timeIntervalSince1970 * 1000).rounded())
    }
}
