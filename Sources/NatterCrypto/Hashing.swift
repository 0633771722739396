import CSodium

/// BLAKE2b (`crypto_generichash`): record ids, digests, hints. Fast and keyed when needed.
public enum Blake2b {
    /// Largest output libsodium allows (64 bytes).
    public static let outputBytesMax = 64

    /// The BLAKE2b hash of `message` with `outputBytes` of output (16...64), optionally keyed (key 16...64 bytes).
    public static func hash(_ message: some ByteSource, outputBytes: Int = 32, key: [UInt8]? = nil) -> [UInt8] {
        precondition((16...64).contains(outputBytes), "BLAKE2b output must be 16...64 bytes")
        Sodium.ready()
        var out = [UInt8](repeating: 0, count: outputBytes)
        message.withUnsafeBytes { m in
            out.withUnsafeMutableBytes { o in
                if let key {
                    precondition((16...64).contains(key.count), "BLAKE2b key must be 16...64 bytes")
                    _ = key.withUnsafeBytes { k in
                        crypto_generichash(
                            o.u8, outputBytes, m.u8, UInt64(m.count),
                            k.u8, key.count)
                    }
                } else {
                    _ = crypto_generichash(
                        o.u8, outputBytes, m.u8, UInt64(m.count), nil, 0)
                }
            }
        }
        return out
    }
}

/// Incremental BLAKE2b, for digests over many pieces (the log digest hashes every feed head in order).
public struct Blake2bHasher: ~Copyable {
    // libsodium's state struct is over-aligned and not imported; it lives in memory we allocate (64-byte aligned).
    private let state: UnsafeMutableRawPointer
    private let outputBytes: Int

    /// A hasher producing `outputBytes` (16...64) of output.
    public init(outputBytes: Int = 32) {
        precondition((16...64).contains(outputBytes), "BLAKE2b output must be 16...64 bytes")
        Sodium.ready()
        self.outputBytes = outputBytes
        state = .allocate(byteCount: crypto_generichash_statebytes(), alignment: 64)
        _ = crypto_generichash_init(OpaquePointer(state), nil, 0, outputBytes)
    }

    deinit {
        sodium_memzero(state, crypto_generichash_statebytes())
        state.deallocate()
    }

    /// Feeds `bytes` into the hash.
    public mutating func update(_ bytes: some ByteSource) {
        bytes.withUnsafeBytes { b in
            _ = crypto_generichash_update(OpaquePointer(state), b.u8, UInt64(b.count))
        }
    }

    /// Feeds a big-endian 64-bit integer.
    public mutating func update(bigEndian value: UInt64) {
        withUnsafeBytes(of: value.bigEndian) { update(Array($0)) }
    }

    /// Finishes and returns the digest.
    public consuming func finalize() -> [UInt8] {
        var out = [UInt8](repeating: 0, count: outputBytes)
        out.withUnsafeMutableBytes { _ = crypto_generichash_final(OpaquePointer(state), $0.u8, outputBytes) }
        return out
    }
}

/// Byte containers the hashing and signing functions accept without copying.
public protocol ByteSource {
    func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R
}

extension Array: ByteSource where Element == UInt8 {}
extension ArraySlice: ByteSource where Element == UInt8 {}
extension UnsafeRawBufferPointer: ByteSource {
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R { try body(self) }
}
