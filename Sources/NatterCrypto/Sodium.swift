import CSodium

/// One-time libsodium initialisation. Every entry point of this module calls `Sodium.ready()` first, so callers
/// never have to remember to initialise the library.
enum Sodium {
    /// `sodium_init` is idempotent and thread-safe; a lazily initialised global runs it exactly once.
    private static let initialised: Bool = sodium_init() >= 0

    @inline(__always)
    static func ready() {
        precondition(initialised, "libsodium failed to initialise (sodium_init returned -1)")
    }
}

/// Failures of cryptographic operations on untrusted input. Each case says what to check.
public enum CryptoError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A key, nonce or signature had the wrong length.
    case invalidLength(what: String, expected: Int, actual: Int)
    /// Authenticated decryption failed: wrong key, wrong associated data, or tampered ciphertext.
    case authenticationFailed
    /// A sealed box could not be opened with this key pair.
    case sealedBoxOpenFailed
    /// X25519 produced an all-zero shared secret (a low-order public key).
    case weakPublicKey
    /// Argon2id could not allocate its memory.
    case passwordHashFailed
    /// A certificate's signature did not verify for this identity.
    case invalidCertificate

    public var description: String {
        switch self {
        case .invalidLength(let what, let expected, let actual):
            return "\(what) must be \(expected) bytes, got \(actual)"
        case .authenticationFailed:
            return "decryption failed: wrong key or the data was altered"
        case .sealedBoxOpenFailed:
            return "sealed box does not open with this key"
        case .weakPublicKey:
            return "the peer's public key is of low order and was refused"
        case .passwordHashFailed:
            return "Argon2id failed (not enough memory?)"
        case .invalidCertificate:
            return "the encryption key is not certified by this identity"
        }
    }
}

@inline(__always)
func requireLength(_ bytes: some Collection<UInt8>, _ expected: Int, _ what: String) throws(CryptoError) {
    guard bytes.count == expected else {
        throw CryptoError.invalidLength(what: what, expected: expected, actual: bytes.count)
    }
}

/// A valid pointer for zero-length buffers: libsodium's parameters are non-null even when the length is zero.
nonisolated(unsafe) private let emptyByte: UnsafeMutablePointer<UInt8> = {
    let pointer = UnsafeMutablePointer<UInt8>.allocate(capacity: 1)
    pointer.initialize(to: 0)
    return pointer
}()

extension UnsafeRawBufferPointer {
    /// The bytes as a non-null `UInt8` pointer (a dummy one when empty), for libsodium.
    var u8: UnsafePointer<UInt8> {
        guard let base = baseAddress, count > 0 else { return UnsafePointer(emptyByte) }
        return base.assumingMemoryBound(to: UInt8.self)
    }
}

extension UnsafeMutableRawBufferPointer {
    /// The bytes as a non-null mutable `UInt8` pointer (a dummy one when empty), for libsodium.
    var u8: UnsafeMutablePointer<UInt8> {
        guard let base = baseAddress, count > 0 else { return emptyByte }
        return base.assumingMemoryBound(to: UInt8.self)
    }
}
