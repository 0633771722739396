// Goal: an identity export carries exactly the identity, encryption and network keys, sealed under its passphrase, in
// the layout docs/protocol.md §9.3 gives (so a second implementation can read it), and every bad file — wrong
// passphrase, truncated at any length, any byte damaged, foreign, newer — is refused with its own one-line reason;
// an import creates a new data directory that waits for its own heads, and refuses to touch an existing one.
// Method: the documented test vector rebuilt from its inputs; every truncation and every single-byte change of a
// real export; imports into temporary directories, inspected afterwards.
import Foundation
import NatterCrypto
import NatterModel
import Testing

@testable import NatterStore

@Suite("Identity export and import")
struct IdentityExportTests {
    /// The documented vector's inputs and file, read from docs/protocol.md.
    private struct Vector {
        var fields: [String: String] = [:]
        var file: [UInt8] = []

        init() throws {
            let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
                .deletingLastPathComponent()
            let text = try String(contentsOf: root.appendingPathComponent("docs/protocol.md"), encoding: .utf8)
            let inputs = try #require(Self.block("text idexport-inputs", in: text), "no idexport-inputs block")
            for line in inputs.split(separator: "\n") {
                let parts = line.split(separator: ":", maxSplits: 1).map { $0.trimmingCharacters(in: .whitespaces) }
                fields[parts[0]] = parts[1]
            }
            let hex = try #require(Self.block("hex idexport-file", in: text), "no idexport-file block")
            file = try #require(Hex.decode(hex.filter { !$0.isWhitespace }), "idexport-file is not hex")
        }

        static func block(_ info: String, in text: String) -> String? {
            guard let start = text.range(of: "```" + info + "\n"),
                let end = text.range(of: "```", range: start.upperBound..<text.endIndex)
            else { return nil }
            return String(text[start.upperBound..<end.lowerBound])
        }

        func bytes(_ key: String) throws -> [UInt8] {
            try #require(fields[key].flatMap { Hex.decode($0) }, "vector field \(key)")
        }

        var export: IdentityExport {
            get throws {
                IdentityExport(
                    identity: LocalIdentity(
                        signing: try IdentityKeyPair(seed: try bytes("seed")),
                        encryption: try EncryptionKeyPair(secret: try bytes("encryption-secret"))),
                    network: NetworkKey(key: try SymmetricKey(bytes: try bytes("network-key"))))
            }
        }

        func sealed() throws -> [UInt8] {
            try export.sealed(
                passphrase: try #require(fields["passphrase"]), salt: try bytes("salt"),
                nonce: try AEADNonce(bytes: try bytes("nonce")), opsLimit: try #require(UInt64(fields["passes"] ?? "")),
                memLimit: try #require(Int(fields["memory-kib"] ?? "")) * 1024)
        }
    }

    @Test("the documented vector is what the code writes, and opens to its inputs")
    func documentedVector() throws {
        let vector = try Vector()
        let built = try vector.sealed()
        #expect(built.count == IdentityExport.fileBytes)
        #expect(Hex.encode(built) == Hex.encode(vector.file), "docs/protocol.md §9.3's file differs from the code's")
        let opened = try IdentityExport.Sealed(vector.file).open(passphrase: try #require(vector.fields["passphrase"]))
        #expect(opened.identity.signing.seed.exposedCopy() == (try vector.bytes("seed")))
        #expect(opened.identity.encryption.secret.exposedCopy() == (try vector.bytes("encryption-secret")))
        #expect(!opened.network.isDefault)
        #expect(opened.network.key.secret.exposedCopy() == (try vector.bytes("network-key")))
    }

    @Test("a real export round-trips the keys; the default network stays the default")
    func roundTrip() throws {
        let identity = LocalIdentity.generate()
        for network in [NetworkKey.defaultNetwork, .generate()] {
            let file = try IdentityExport(identity: identity, network: network).sealed(passphrase: "café au lait")
            #expect(file.count == IdentityExport.fileBytes)
            #expect(Array(file.prefix(8)) == Array("NATTERID".utf8))
            // NFC: the passphrase typed with a combining accent opens it too.
            let opened = try IdentityExport.Sealed(file).open(passphrase: "cafe\u{301} au lait")
            #expect(opened.identity.author == identity.author)
            #expect(opened.identity.encryption.publicKey == identity.encryption.publicKey)
            #expect(opened.network.isDefault == network.isDefault)
            #expect(opened.network.key.secret.constantTimeEquals(network.key.secret))
        }
    }

    @Test("wrong passphrase, every truncation, every damaged byte, a foreign or newer file: each its own error")
    func badFiles() throws {
        let vector = try Vector()
        let file = vector.file
        #expect(throws: IdentityFileError.wrongPassphrase) {
            try IdentityExport.Sealed(file).open(passphrase: "correct horse battery stapler")
        }
        for length in 0..<file.count {
            #expect(throws: IdentityFileError.truncated(bytes: length)) {
                try IdentityExport.Sealed(Array(file[..<length]))
            }
        }
        #expect(throws: IdentityFileError.damaged("188 bytes, expected 187")) { try IdentityExport.Sealed(file + [0]) }
        #expect(throws: IdentityFileError.notAnExport) { try IdentityExport.Sealed(Array("natter identity v1\n".utf8)) }
        var newer = file
        newer[8] = 2
        #expect(throws: IdentityFileError.unsupportedVersion(2)) { try IdentityExport.Sealed(newer) }
        for offset in 9..<file.count {
            var damaged = file
            damaged[offset] ^= 0x01
            do {
                _ = try IdentityExport.Sealed(damaged)
                Issue.record("byte \(offset) changed and the file was accepted before the passphrase")
            } catch .damaged {
            } catch {
                Issue.record("byte \(offset) changed: \(error), not `damaged`")
            }
        }
        // Damage that also fixes the checksum (deliberate tampering) still fails, as the AEAD sees it.
        var tampered = Array(file[..<(file.count - 16)])
        tampered[100] ^= 0x80
        tampered += Blake2b.hash(tampered, outputBytes: 16)
        #expect(throws: IdentityFileError.wrongPassphrase) {
            try IdentityExport.Sealed(tampered).open(passphrase: try #require(vector.fields["passphrase"]))
        }
    }

    @Test("export writes a 0600 file and never overwrites; import creates a waiting directory and writes no record")
    func exportThenImport() throws {
        let root = FileManager.default.temporaryDirectory.appendingPathComponent("natter-ie-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: root) }
        let source = DataDirectory(path: root + "/source")
        try source.create()
        let identity = LocalIdentity.generate()
        try source.writeIdentity(identity)
        let file = root + "/me.natterid"
        try source.exportIdentity(to: file, passphrase: "a long passphrase")
        let mode = try FileManager.default.attributesOfItem(atPath: file)[.posixPermissions] as? Int
        #expect(mode == 0o600)
        let before = try Data(contentsOf: URL(fileURLWithPath: file))
        #expect(throws: StoreError.self) { try source.exportIdentity(to: file, passphrase: "another") }
        #expect(try Data(contentsOf: URL(fileURLWithPath: file)) == before, "an export never overwrites")

        let export = try DataDirectory.readExport(file).open(passphrase: "a long passphrase")
        let target = DataDirectory(path: root + "/target")
        let store = try target.importIdentity(export)
        #expect(try target.readIdentity().author == identity.author)
        #expect(store.ownHeadsDoubt == .imported)
        #expect(try store.statistics().recordsHeld == 0, "an import writes no record, not even a profile")
        #expect(!FileManager.default.fileExists(atPath: target.networkKeyFile), "default network: no network.key")

        // Into a directory that holds an identity (its own, even): refused, nothing changed.
        let identityBefore = try Data(contentsOf: URL(fileURLWithPath: source.identityFile))
        #expect(throws: StoreError.self) { _ = try source.importIdentity(export) }
        #expect(try Data(contentsOf: URL(fileURLWithPath: source.identityFile)) == identityBefore)
        // Into a directory that holds anything else: refused, and what is there stays.
        let other = DataDirectory(path: root + "/other")
        try other.create()
        _ = FileManager.default.createFile(atPath: other.path + "/notes.txt", contents: Data("mine".utf8))
        #expect(throws: StoreError.self) { _ = try other.importIdentity(export) }
        #expect(try FileManager.default.contentsOfDirectory(atPath: other.path) == ["notes.txt"])
    }
}
