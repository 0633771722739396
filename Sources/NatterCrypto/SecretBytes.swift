import CSodium

/// Secret key material: zeroed when the last reference goes, never printed.
///
/// A class rather than an array so that there is one copy to wipe; `description` and `debugDescription` are
/// redacted so secrets cannot leak into logs or test failure messages.
public final class SecretBytes: @unchecked Sendable, CustomStringConvertible, CustomDebugStringConvertible {
    // Immutable after init, so sharing across threads is safe (hence @unchecked Sendable).
    private let storage: UnsafeMutableRawBufferPointer

    /// Number of secret bytes.
    public var count: Int { countValue }

    /// Copies `bytes` into fresh storage. The caller should zero its own copy if it has one.
    public init(_ bytes: some Collection<UInt8>) {
        Sodium.ready()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(bytes.count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        _ = UnsafeMutableRawBufferPointer(rebasing: buffer[0..<bytes.count]).initializeMemory(
            as: UInt8.self, from: bytes)
        storage = buffer
        countValue = bytes.count
    }

    /// `count` bytes filled by `fill`, which must write every byte.
    init(count: Int, fill: (UnsafeMutableRawBufferPointer) -> Void) {
        Sodium.ready()
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: max(count, 1), alignment: 16)
        buffer.initializeMemory(as: UInt8.self, repeating: 0)
        fill(UnsafeMutableRawBufferPointer(rebasing: buffer[0..<count]))
        storage = buffer
        countValue = count
    }

    private let countValue: Int

    deinit {
        sodium_memzero(storage.baseAddress!, storage.count)
        storage.deallocate()
    }

    /// Runs `body` with the secret bytes. Do not let the pointer escape.
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[0..<countValue]))
    }

    /// A copy of the secret as an array, for writing to a 0600 file. The caller owns (and should wipe) the copy.
    public func exposedCopy() -> [UInt8] {
        Array(UnsafeRawBufferPointer(rebasing: storage[0..<countValue]))
    }

    /// Constant-time comparison.
    public func constantTimeEquals(_ other: SecretBytes) -> Bool {
        guard countValue == other.countValue else { return false }
        return withUnsafeBytes { a in
            other.withUnsafeBytes { b in sodium_memcmp(a.u8, b.u8, countValue) == 0 }
        }
    }

    public var description: String { "<secret \(countValue) bytes>" }
    public var debugDescription: String { description }
}

/// Overwrites an array's bytes with zeros in a way the optimiser cannot remove.
public func wipe(_ bytes: inout [UInt8]) {
    bytes.withUnsafeMutableBytes { sodium_memzero($0.u8, $0.count) }
}
