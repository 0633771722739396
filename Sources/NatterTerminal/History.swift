import Foundation

/// The command history: a bounded list of lines, kept in a file of one entry per line, mode 0600.
///
/// The file is ours, not libedit's (`write_history` encodes it its own way and creates it with the umask's
/// mode): it is rewritten whole, through a temporary file and a rename, each time an entry is added.
struct History {
    let file: URL?
    let limit: Int
    private(set) var entries: [String] = []

    init(file: URL?, limit: Int) {
        self.file = file
        self.limit = max(limit, 0)
    }

    /// Reads the file, keeping its last `limit` entries. A missing or unreadable file is an empty history.
    mutating func load() {
        guard let file, let data = try? Data(contentsOf: file) else { return }
        let lines = String(decoding: data, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true)
        entries = lines.suffix(limit).map(String.init)
    }

    /// Whether `line` may be an entry: not blank, one line, and not a repeat of the newest entry.
    func accepts(_ line: String) -> Bool {
        guard limit > 0, !line.allSatisfy(\.isWhitespace) else { return false }
        guard !line.contains(where: { $0 == "\n" || $0 == "\r" }) else { return false }
        return entries.last != line
    }

    /// Appends `line` (if `accepts(line)`), drops the oldest entries past `limit`, and rewrites the file.
    /// Returns whether the line was added; throws when the file could not be written.
    @discardableResult
    mutating func add(_ line: String) throws -> Bool {
        guard accepts(line) else { return false }
        entries.append(line)
        if entries.count > limit { entries.removeFirst(entries.count - limit) }
        try save()
        return true
    }

    private func save() throws {
        guard let file else { return }
        let directory = file.deletingLastPathComponent()
        try FileManager.default.createDirectory(
            at: directory, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        let temporary = file.path + ".tmp"
        let descriptor = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else { throw CocoaError(.fileWriteNoPermission, userInfo: [NSFilePathErrorKey: temporary]) }
        var bytes = Array(entries.map { $0 + "\n" }.joined().utf8)
        let written = bytes.withUnsafeMutableBytes { buffer in
            fchmod(descriptor, 0o600) == 0 ? writeAll(descriptor, buffer) : false
        }
        close(descriptor)
        guard written, rename(temporary, file.path) == 0 else {
            unlink(temporary)
            throw CocoaError(.fileWriteUnknown, userInfo: [NSFilePathErrorKey: file.path])
        }
    }
}

/// Writes all of `buffer` to `descriptor`, retrying short writes and interruptions.
func writeAll(_ descriptor: Int32, _ buffer: UnsafeMutableRawBufferPointer) -> Bool {
    var offset = 0
    while offset < buffer.count {
        let count = write(descriptor, buffer.baseAddress! + offset, buffer.count - offset)
        if count < 0 {
            if errno == EINTR { continue }
            return false
        }
        offset += count
    }
    return true
}
