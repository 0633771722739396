import Foundation

#if canImport(Glibc)
import Glibc
#endif

/// Asks for a secret (a passphrase) on the controlling terminal, `/dev/tty`, with echo off: what is typed never
/// shows, never lands in the shell's history or the process list, and is read even when standard input is a pipe.
public enum SecretPrompt {
    /// The longest secret read: a passphrase, not a document.
    public static let bytesMax = 1024

    /// Why no secret could be read.
    public enum Failure: Error, CustomStringConvertible {
        case noTerminal
        case tooLong
        case interrupted

        public var description: String {
            switch self {
            case .noTerminal: "no terminal to ask for the passphrase: give --passphrase-file PATH"
            case .tooLong: "the passphrase is longer than \(SecretPrompt.bytesMax) bytes"
            case .interrupted: "no passphrase was entered"
            }
        }
    }

    /// Shows `prompt` on the terminal and reads one line with echo off (the terminal's settings come back after,
    /// whatever happens). The line's end is not part of the secret.
    public static func read(prompt: String) throws(Failure) -> String {
        let fd = open("/dev/tty", O_RDWR | O_CLOEXEC | O_NOCTTY)
        guard fd >= 0 else { throw .noTerminal }
        defer { close(fd) }
        var saved = termios()
        guard tcgetattr(fd, &saved) == 0 else { throw .noTerminal }
        var quiet = saved
        quiet.c_lflag &= ~tcflag_t(ECHO | ECHOE | ECHOK | ECHONL)
        write(fd, prompt)
        guard tcsetattr(fd, TCSAFLUSH, &quiet) == 0 else { throw .noTerminal }
        defer {
            tcsetattr(fd, TCSAFLUSH, &saved)
            write(fd, "\n")
        }
        var line = [UInt8]()
        var byte: UInt8 = 0
        while true {
            let count = Glibc.read(fd, &byte, 1)
            if count < 0 && errno == EINTR { continue }
            guard count == 1 else {
                wipe(&line)
                throw .interrupted
            }
            if byte == UInt8(ascii: "\n") || byte == UInt8(ascii: "\r") { break }
            guard line.count < bytesMax else {
                wipe(&line)
                throw .tooLong
            }
            line.append(byte)
        }
        defer { wipe(&line) }
        return String(decoding: line, as: UTF8.self)
    }

    private static func write(_ fd: Int32, _ text: String) {
        let bytes = Array(text.utf8)
        // A prompt that cannot be shown still leaves the read to fail or succeed on its own.
        _ = bytes.withUnsafeBytes { Glibc.write(fd, $0.baseAddress, $0.count) }
    }

    private static func wipe(_ bytes: inout [UInt8]) {
        for index in bytes.indices { bytes[index] = 0 }
    }
}
