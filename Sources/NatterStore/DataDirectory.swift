import Foundation
public import NatterCrypto
public import NatterModel

#if canImport(Glibc)
import Glibc
#endif

/// A node's data directory: identity, network key, database and lock, all in one folder of mode 0700.
///
/// Default location: `$NATTER_HOME`, else `$XDG_DATA_HOME/natter`, else `~/.local/share/natter`.
public struct DataDirectory: Sendable {
    public let path: String

    public init(path: String) {
        self.path = path.count > 1 && path.hasSuffix("/") ? String(path.dropLast()) : path
    }

    /// The directory to use: `explicit` (from `--data`) if given, else the environment's default.
    public static func resolve(explicit: String?, environment: [String: String]) -> DataDirectory {
        if let explicit, !explicit.isEmpty { return DataDirectory(path: explicit) }
        if let home = environment["NATTER_HOME"], !home.isEmpty { return DataDirectory(path: home) }
        if let xdg = environment["XDG_DATA_HOME"], !xdg.isEmpty { return DataDirectory(path: xdg + "/natter") }
        let home = environment["HOME"].flatMap { $0.isEmpty ? nil : $0 } ?? NSHomeDirectory()
        return DataDirectory(path: home + "/.local/share/natter")
    }

    public var identityFile: String { path + "/identity.key" }
    public var networkKeyFile: String { path + "/network.key" }
    public var databaseFile: String { path + "/natter.sqlite" }

    /// Whether `natter init` has run here.
    public var isInitialised: Bool { FileManager.default.fileExists(atPath: identityFile) }

    /// Creates the directory (and parents) with mode 0700 if missing, and makes the new entry durable in its
    /// parent (a power cut right after `init` must not lose the directory).
    public func create() throws(StoreError) {
        let existed = FileManager.default.fileExists(atPath: path)
        do {
            try FileManager.default.createDirectory(
                atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
        } catch {
            throw .fileSystem(path: path, reason: "cannot create directory (\(error.localizedDescription))")
        }
        if !existed { try Self.syncDirectory(parent) }
    }

    /// The directory that holds this one (`.` for a one-word relative path; Foundation's
    /// `deletingLastPathComponent` traps on those).
    var parent: String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    /// fsync on a directory: makes the names created in it durable (file contents are synced separately).
    static func syncDirectory(_ directory: String) throws(StoreError) {
        let fd = open(directory.isEmpty ? "." : directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard fd >= 0 else { throw .fileSystem(path: directory, reason: String(cString: strerror(errno))) }
        defer { close(fd) }
        guard fsync(fd) == 0 else {
            throw .fileSystem(path: directory, reason: "cannot sync directory: \(String(cString: strerror(errno)))")
        }
    }

    // MARK: - Identity

    /// Writes a new identity file (mode 0600); refuses to overwrite an existing one.
    public func writeIdentity(_ identity: LocalIdentity) throws(StoreError) {
        var seed = identity.signing.seed.exposedCopy()
        var secret = identity.encryption.secret.exposedCopy()
        defer {
            wipe(&seed)
            wipe(&secret)
        }
        var text = Array(
            "natter identity v1\nidentity-seed \(Hex.encode(seed))\nencryption-secret \(Hex.encode(secret))\n".utf8)
        defer { wipe(&text) }
        try writeSecretFile(identityFile, contents: text)
    }

    /// Reads the identity, refusing files other users can read.
    public func readIdentity() throws(StoreError) -> LocalIdentity {
        guard isInitialised else { throw .notInitialised(path: path) }
        var text = try readSecretFile(identityFile)
        defer { wipe(&text) }
        var fields = [String: String]()
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n")
        guard lines.first == "natter identity v1" else {
            throw .malformedFile(path: identityFile, reason: "first line must be `natter identity v1`")
        }
        for line in lines.dropFirst() {
            let parts = line.split(separator: " ", maxSplits: 1)
            if parts.count == 2 { fields[String(parts[0])] = String(parts[1]) }
        }
        guard var seed = fields["identity-seed"].flatMap({ Hex.decode($0) }),
            var secret = fields["encryption-secret"].flatMap({ Hex.decode($0) })
        else { throw .malformedFile(path: identityFile, reason: "missing identity-seed or encryption-secret") }
        defer {
            wipe(&seed)
            wipe(&secret)
        }
        do {
            return LocalIdentity(
                signing: try IdentityKeyPair(seed: seed), encryption: try EncryptionKeyPair(secret: secret))
        } catch {
            throw .malformedFile(path: identityFile, reason: error.description)
        }
    }

    // MARK: - Network key

    /// Stores the derived network key (never the passphrase), mode 0600.
    public func writeNetworkKey(_ key: NetworkKey) throws(StoreError) {
        var secret = key.key.secret.exposedCopy()
        defer { wipe(&secret) }
        var text = Array("natter network v1\nkey \(Hex.encode(secret))\n".utf8)
        defer { wipe(&text) }
        try writeSecretFile(networkKeyFile, contents: text)
    }

    /// The network key: the stored one, or the public default network when none was set.
    public func readNetworkKey() throws(StoreError) -> NetworkKey {
        guard FileManager.default.fileExists(atPath: networkKeyFile) else { return .defaultNetwork }
        var text = try readSecretFile(networkKeyFile)
        defer { wipe(&text) }
        let lines = String(decoding: text, as: UTF8.self).split(separator: "\n")
        guard lines.count == 2, lines[0] == "natter network v1", lines[1].hasPrefix("key "),
            var bytes = Hex.decode(lines[1].dropFirst(4)), bytes.count == SymmetricKey.byteCount
        else { throw .malformedFile(path: networkKeyFile, reason: "expected `natter network v1` and a 32-byte key") }
        defer { wipe(&bytes) }
        return NetworkKey(key: try! SymmetricKey(bytes: bytes))
    }

    // MARK: - Files

    private func writeSecretFile(_ file: String, contents: [UInt8]) throws(StoreError) {
        try Self.createSecretFile(file, contents: contents, in: path, ifExists: .alreadyInitialised(path: path))
    }

    /// Creates `file` (in `directory`) with mode 0600 and `contents`, fsyncs it and the directory; never overwrites
    /// (`ifExists` is thrown instead). A file left half-written by a failed write is removed.
    static func createSecretFile(
        _ file: String, contents: [UInt8], in directory: String, ifExists: StoreError
    ) throws(StoreError) {
        let fd = open(file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            if errno == EEXIST { throw ifExists }
            throw .fileSystem(path: file, reason: String(cString: strerror(errno)))
        }
        let written = contents.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
        guard written == contents.count, fsync(fd) == 0 else {
            let reason = String(cString: strerror(errno))
            close(fd)
            unlink(file)
            throw .fileSystem(path: file, reason: "write failed: \(reason)")
        }
        close(fd)
        // The file's name must survive a power cut too, or a second `init` would mint a new identity.
        try syncDirectory(directory)
    }

    private func readSecretFile(_ file: String) throws(StoreError) -> [UInt8] {
        var info = stat()
        guard stat(file, &info) == 0 else { throw .fileSystem(path: file, reason: String(cString: strerror(errno))) }
        let mode = UInt32(info.st_mode) & 0o777
        guard mode & 0o077 == 0 else { throw .insecurePermissions(path: file, mode: mode) }
        guard let data = FileManager.default.contents(atPath: file), data.count < 4096 else {
            throw .fileSystem(path: file, reason: "cannot read (or larger than 4 KiB)")
        }
        return Array(data)
    }
}

/// This node's own keys: the identity (signing) key pair and its X25519 encryption key pair.
public struct LocalIdentity: Sendable {
    public let signing: IdentityKeyPair
    public let encryption: EncryptionKeyPair

    public init(signing: IdentityKeyPair, encryption: EncryptionKeyPair) {
        self.signing = signing
        self.encryption = encryption
    }

    /// Fresh random keys.
    public static func generate() -> LocalIdentity {
        LocalIdentity(signing: .generate(), encryption: .generate())
    }

    public var author: AuthorID { AuthorID(signing.publicKey) }

    /// The identity's certificate for its encryption key.
    public var certificate: EncryptionKeyCertificate {
        EncryptionKeyCertificate(certifying: encryption.publicKey, by: signing)
    }
}
