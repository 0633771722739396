/// Tests that load the machine for long (the flood) and tests paced in real time (typing: keystrokes every 500 ms
/// must keep an indicator on) take turns: Swift Testing runs suites in parallel, and a paced test starved by a flood
/// fails for nothing it did.
actor MachineTurns {
    static let shared = MachineTurns()
    private var busy = false
    private var waiting: [CheckedContinuation<Void, Never>] = []

    /// Runs `body` while no other turn-taking test runs.
    func exclusive<T: Sendable>(_ body: @Sendable () async throws -> T) async rethrows -> T {
        if busy {
            await withCheckedContinuation { waiting.append($0) }
        } else {
            busy = true
        }
        defer {
            if waiting.isEmpty { busy = false } else { waiting.removeFirst().resume() }
        }
        return try await body()
    }
}
