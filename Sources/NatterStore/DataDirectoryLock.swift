#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// An exclusive advisory lock (`flock`) on `natter.lock` in a data directory, held for the life of the process's
/// store. The kernel drops it when the process dies, even by SIGKILL, so a crash never leaves a stale lock.
final class DataDirectoryLock: Sendable {
    private let descriptor: Int32

    /// Takes the lock or throws `StoreError.directoryInUse` naming the holder's pid.
    init(directory: String) throws(StoreError) {
        let path = directory + "/natter.lock"
        let fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw .fileSystem(path: path, reason: String(cString: strerror(errno))) }
        guard flock(fd, LOCK_EX | LOCK_NB) == 0 else {
            let holder = Self.readPID(fd)
            close(fd)
            throw .directoryInUse(path: directory, pid: holder)
        }
        // Record our pid for the error message a second process will print.
        let text = Array("\(getpid())\n".utf8)
        _ = ftruncate(fd, 0)
        _ = text.withUnsafeBytes { pwrite(fd, $0.baseAddress, $0.count, 0) }
        descriptor = fd
    }

    deinit {
        flock(descriptor, LOCK_UN)
        close(descriptor)
    }

    private static func readPID(_ fd: Int32) -> Int32? {
        var buffer = [UInt8](repeating: 0, count: 32)
        let count = buffer.withUnsafeMutableBytes { pread(fd, $0.baseAddress, $0.count, 0) }
        guard count > 0 else { return nil }
        let text = String(decoding: buffer[0..<count], as: UTF8.self).split(separator: "\n").first ?? ""
        return Int32(text)
    }
}
