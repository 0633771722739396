import CSodium
import Foundation

/// Keys derived from passphrases a person types: Argon2id v1.3 (`crypto_pwhash`) over the passphrase's UTF-8 bytes
/// after Unicode NFC normalisation, so "café" gives one key however the accent was typed. Network keys (fixed salt
/// and cost) and sealed identity exports (a random salt and the cost stored in the file) both derive theirs here.
public enum PassphraseKey {
    /// Argon2id's salt length (`crypto_pwhash_SALTBYTES`).
    public static let saltBytes = 16
    /// The least cost a reader accepts: libsodium's minimum passes (`crypto_pwhash_OPSLIMIT_MIN`).
    public static let opsLimitMin: UInt64 = 1
    /// The most passes a reader accepts from a file: ten times libsodium's "sensitive" cost, so a damaged or hostile
    /// file cannot keep the reader computing for hours.
    public static let opsLimitMax: UInt64 = 40
    /// The least memory a reader accepts (`crypto_pwhash_MEMLIMIT_MIN`, 8 KiB).
    public static let memLimitMin = 8 * 1024
    /// The most memory a reader accepts from a file: 1 GiB, libsodium's "sensitive" cost; more would fail or swap on
    /// the small machines natter runs on.
    public static let memLimitMax = 1024 * 1024 * 1024

    /// The 32-byte key for `passphrase` with `salt` (16 bytes), `opsLimit` passes and `memLimit` bytes of memory.
    /// Throws `.passwordHashFailed` when the cost is outside the limits above or Argon2id cannot get its memory.
    public static func derive(
        _ passphrase: String, salt: [UInt8], opsLimit: UInt64, memLimit: Int
    ) throws(CryptoError) -> SymmetricKey {
        try requireLength(salt, saltBytes, "Argon2id salt")
        guard (opsLimitMin...opsLimitMax).contains(opsLimit), (memLimitMin...memLimitMax).contains(memLimit) else {
            throw .passwordHashFailed
        }
        Sodium.ready()
        var password = Array(passphrase.precomposedStringWithCanonicalMapping.utf8)
        defer { wipe(&password) }
        var failed = false
        let secret = SecretBytes(count: SymmetricKey.byteCount) { out in
            failed =
                password.withUnsafeBytes { pw in
                    crypto_pwhash(
                        out.u8, UInt64(SymmetricKey.byteCount),
                        UnsafeRawPointer(pw.u8).assumingMemoryBound(to: CChar.self),
                        UInt64(pw.count), salt, opsLimit, memLimit, crypto_pwhash_alg_argon2id13())
                } != 0
        }
        guard !failed else { throw .passwordHashFailed }
        return SymmetricKey(secret: secret)
    }
}
