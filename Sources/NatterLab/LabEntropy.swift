import Foundation
import NatterModel

#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// Routes libsodium's randomness to a seeded generator on the thread running a lab simulation, so that everything
/// random inside the node cores (conversation salts, epoch keys, AEAD nonces, the ephemeral keys of sealed boxes)
/// replays exactly from the lab's seed (DESIGN §1).
///
/// libsodium draws every random byte through one replaceable table of functions (`randombytes_set_implementation`).
/// The lab installs its own table once per process; on a thread with a lab generator bound the bytes come from that
/// generator, on every other thread they come from libsodium's system implementation, so nothing else in the
/// process (other tests, a real node) ever sees seeded bytes. The table is looked up with `dlsym` because only
/// `NatterCrypto` links libsodium's headers; the layout is the six function pointers of libsodium's
/// `randombytes_implementation`, stable since 1.0.0.
enum LabEntropy {
    /// A seeded stream of bytes for libsodium, kept by its simulation between calls.
    final class Source {
        var generator: SeededGenerator
        init(seed: UInt64) { generator = SeededGenerator(seed: seed) }
    }

    /// Runs `body` with libsodium's randomness on this thread drawn from `source`.
    ///
    /// Nesting binds the inner source for the inner call and restores the outer one afterwards. `body` must not
    /// hop threads (the simulation is synchronous; GRDB runs an in-memory queue's writes on the calling thread).
    static func bind<T>(_ source: Source, _ body: () throws -> T) rethrows -> T {
        precondition(installed, "libsodium's random implementation could not be replaced (symbols not found)")
        let previous = pthread_getspecific(key)
        pthread_setspecific(key, Unmanaged.passUnretained(source).toOpaque())
        defer { pthread_setspecific(key, previous) }
        return try withExtendedLifetime(source) { try body() }
    }

    /// Whether the table is installed (checked once per process).
    private static let installed: Bool = install()

    /// The thread-local slot holding the bound generator.
    private static let key: pthread_key_t = {
        var key = pthread_key_t()
        precondition(pthread_key_create(&key, nil) == 0, "pthread_key_create failed")
        return key
    }()

    /// libsodium's system implementation's `buf`, for threads without a lab generator.
    nonisolated(unsafe) private static var systemBuf: (@convention(c) (UnsafeMutableRawPointer?, Int) -> Void)?

    /// The table handed to libsodium: six function pointers, never freed (libsodium keeps the pointer).
    nonisolated(unsafe) private static var table: UnsafeMutablePointer<UnsafeRawPointer?>?

    private static func install() -> Bool {
        _ = key
        let handle = dlopen(nil, RTLD_NOW)
        guard let setter = dlsym(handle, "randombytes_set_implementation"),
            let system = dlsym(handle, "randombytes_sysrandom_implementation")
        else { return false }
        let systemTable = system.assumingMemoryBound(to: UnsafeRawPointer?.self)
        guard let buf = systemTable[4] else { return false }
        systemBuf = unsafeBitCast(buf, to: (@convention(c) (UnsafeMutableRawPointer?, Int) -> Void).self)

        let name: @convention(c) () -> UnsafePointer<CChar>? = { LabEntropy.implementationName }
        let random: @convention(c) () -> UInt32 = {
            var value: UInt32 = 0
            withUnsafeMutableBytes(of: &value) { LabEntropy.fill($0.baseAddress, $0.count) }
            return value
        }
        let fillFunction: @convention(c) (UnsafeMutableRawPointer?, Int) -> Void = { LabEntropy.fill($0, $1) }
        let entries = UnsafeMutablePointer<UnsafeRawPointer?>.allocate(capacity: 6)
        entries[0] = unsafeBitCast(name, to: UnsafeRawPointer.self)
        entries[1] = unsafeBitCast(random, to: UnsafeRawPointer.self)
        entries[2] = nil  // stir: optional
        entries[3] = nil  // uniform: libsodium derives it from `random`
        entries[4] = unsafeBitCast(fillFunction, to: UnsafeRawPointer.self)
        entries[5] = nil  // close: optional
        table = entries
        typealias Setter = @convention(c) (UnsafeMutableRawPointer) -> Int32
        return unsafeBitCast(setter, to: Setter.self)(UnsafeMutableRawPointer(entries)) == 0
    }

    nonisolated(unsafe) private static let implementationName: UnsafePointer<CChar>? = {
        let text = "natter-lab"
        let bytes = UnsafeMutablePointer<CChar>.allocate(capacity: text.utf8.count + 1)
        for (index, byte) in text.utf8.enumerated() { bytes[index] = CChar(bitPattern: byte) }
        bytes[text.utf8.count] = 0
        return UnsafePointer(bytes)
    }()

    private static func fill(_ buffer: UnsafeMutableRawPointer?, _ count: Int) {
        guard let buffer, count > 0 else { return }
        if let slot = pthread_getspecific(key) {
            let source = Unmanaged<Source>.fromOpaque(slot).takeUnretainedValue()
            var offset = 0
            while offset < count {
                var word = source.generator.next()
                let take = min(8, count - offset)
                withUnsafeBytes(of: &word) { (buffer + offset).copyMemory(from: $0.baseAddress!, byteCount: take) }
                offset += take
            }
        } else {
            systemBuf!(buffer, count)
        }
    }
}
