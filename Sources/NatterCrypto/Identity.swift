import CSodium

/// What a signature is for. The label is signed together with the message, so a signature made for one purpose
/// can never be replayed as another (a record signature is not a key certificate, and so on).
public struct SignatureDomain: Sendable, Hashable, CustomStringConvertible {
    /// The ASCII label, at most 255 bytes.
    public let label: String

    /// A domain with this label, which must be ASCII and at most 255 bytes.
    public init(_ label: String) {
        precondition(label.utf8.count <= 255 && label.allSatisfy(\.isASCII), "domain labels are short ASCII")
        self.label = label
    }

    /// Signatures over records (`natter/v1/record`).
    public static let record = SignatureDomain("natter/v1/record")
    /// An identity certifying its X25519 encryption key (`natter/v1/enc-key`).
    public static let encryptionKey = SignatureDomain("natter/v1/enc-key")

    public var description: String { label }

    /// `len(label) || label || message`: the bytes actually signed.
    func framed(_ message: some ByteSource) -> [UInt8] {
        let labelBytes = Array(label.utf8)
        return message.withUnsafeBytes { m in
            var framed = [UInt8]()
            framed.reserveCapacity(1 + labelBytes.count + m.count)
            framed.append(UInt8(labelBytes.count))
            framed.append(contentsOf: labelBytes)
            framed.append(contentsOf: m)
            return framed
        }
    }
}

/// An Ed25519 signature (64 bytes).
public struct Signature: Sendable, Hashable {
    public static let byteCount = 64
    /// The raw signature bytes.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, Self.byteCount, "signature")
        self.bytes = bytes
    }
}

/// The public half of an identity: an Ed25519 verification key (32 bytes). It names the author of every record.
public struct IdentityPublicKey: Sendable, Hashable, Comparable, CustomStringConvertible {
    public static let byteCount = 32
    /// The raw key bytes.
    public let bytes: [UInt8]

    public init(bytes: [UInt8]) throws(CryptoError) {
        try requireLength(bytes, Self.byteCount, "identity public key")
        self.bytes = bytes
    }

    /// Whether `signature` is this identity's signature over `message` in `domain`.
    ///
    /// libsodium's verification is strict: non-canonical signature scalars and small-order keys are refused, so a
    /// third party cannot derive a second valid signature (and hence a second record id) from a given one.
    public func isValidSignature(_ signature: Signature, for message: some ByteSource, in domain: SignatureDomain)
        -> Bool
    {
        Sodium.ready()
        let framed = domain.framed(message)
        return signature.bytes.withUnsafeBufferPointer { s in
            bytes.withUnsafeBufferPointer { pk in
                crypto_sign_verify_detached(s.baseAddress!, framed, UInt64(framed.count), pk.baseAddress!) == 0
            }
        }
    }

    /// A short fingerprint for people to compare out of band: the first 10 bytes of BLAKE2b-256 of the key, as
    /// five groups of four hex digits (`3f2a-91c0-…`).
    public var fingerprint: String {
        let digest = Blake2b.hash(bytes, outputBytes: 32)
        let hex = Hex.encode(Array(digest.prefix(10)))
        return stride(from: 0, to: hex.count, by: 4).map { start in
            let a = hex.index(hex.startIndex, offsetBy: start)
            return String(hex[a..<hex.index(a, offsetBy: 4)])
        }.joined(separator: "-")
    }

    public var description: String { "identity \(fingerprint)" }

    public static func < (lhs: Self, rhs: Self) -> Bool { lhs.bytes.lexicographicallyPrecedes(rhs.bytes) }
}

/// An identity: the Ed25519 signing key pair that authors records and certifies the encryption key.
public struct IdentityKeyPair: Sendable, CustomStringConvertible {
    /// Length of the seed that determines the key pair.
    public static let seedByteCount = 32

    public let publicKey: IdentityPublicKey
    /// The 32-byte seed (the secret from which libsodium derives the 64-byte signing key).
    public let seed: SecretBytes
    private let secretKey: SecretBytes

    /// A fresh random identity.
    public static func generate() -> IdentityKeyPair {
        var seed = SecureRandom.bytes(seedByteCount)
        defer { wipe(&seed) }
        // The seed has the right length by construction.
        return try! IdentityKeyPair(seed: seed)
    }

    /// The identity determined by `seed` (32 bytes): used to load a stored identity and for test vectors.
    public init(seed: [UInt8]) throws(CryptoError) {
        try requireLength(seed, Self.seedByteCount, "identity seed")
        Sodium.ready()
        var pk = [UInt8](repeating: 0, count: Int(crypto_sign_publickeybytes()))
        let sk = SecretBytes(count: Int(crypto_sign_secretkeybytes())) { sk in
            _ = crypto_sign_seed_keypair(&pk, sk.u8, seed)
        }
        self.publicKey = try IdentityPublicKey(bytes: pk)
        self.seed = SecretBytes(seed)
        self.secretKey = sk
    }

    /// Signs `message` in `domain`. Ed25519 signing is deterministic: the same input gives the same signature.
    public func sign(_ message: some ByteSource, in domain: SignatureDomain) -> Signature {
        let framed = domain.framed(message)
        var signature = [UInt8](repeating: 0, count: Signature.byteCount)
        secretKey.withUnsafeBytes { sk in
            _ = crypto_sign_detached(
                &signature, nil, framed, UInt64(framed.count), sk.u8)
        }
        return try! Signature(bytes: signature)
    }

    public var description: String { "IdentityKeyPair(\(publicKey.fingerprint), secret redacted)" }
}

/// Lower-case hexadecimal, for files, fingerprints and test vectors.
public enum Hex {
    private static let digits = Array("0123456789abcdef".utf8)

    /// Lower-case hex of `bytes`. Written straight into the string's storage: the REPL's JSON events hex-encode
    /// every id they name, 5 % of a receiving node's time in `natter bench --throughput` when this built an array.
    public static func encode(_ bytes: some Sequence<UInt8>) -> String {
        bytes.withContiguousStorageIfAvailable(encode(buffer:)) ?? Array(bytes).withUnsafeBufferPointer(encode(buffer:))
    }

    private static func encode(buffer: UnsafeBufferPointer<UInt8>) -> String {
        String(unsafeUninitializedCapacity: buffer.count * 2) { out in
            for (index, byte) in buffer.enumerated() {
                out[2 * index] = digits[Int(byte >> 4)]
                out[2 * index + 1] = digits[Int(byte & 0x0f)]
            }
            return buffer.count * 2
        }
    }

    /// The bytes of a hex string (upper or lower case, no separators), or nil if it is not hex.
    public static func decode(_ text: some StringProtocol) -> [UInt8]? {
        let chars = Array(text.utf8)
        guard chars.count % 2 == 0 else { return nil }
        var out = [UInt8]()
        out.reserveCapacity(chars.count / 2)
        var index = 0
        while index < chars.count {
            guard let high = nibble(chars[index]), let low = nibble(chars[index + 1]) else { return nil }
            out.append(high << 4 | low)
            index += 2
        }
        return out
    }

    private static func nibble(_ c: UInt8) -> UInt8? {
        switch c {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return c - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): return c - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return c - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
