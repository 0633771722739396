public import NatterCrypto

/// An author's public profile: display name and certified encryption key. Published as a plain record in the
/// author's profile feed (`ConversationID.profileFeed(of:)`), so every node learns names and where to seal keys.
///
/// Encoding (docs/protocol.md, "Profile payload"): version `1` (u8), name length (u16) and UTF-8 name, the X25519
/// encryption key (32 bytes), and the identity's certificate signature over it (64 bytes).
public struct Profile: Hashable, Sendable {
    public static let version: UInt8 = 1

    public let name: String
    public let encryptionKey: EncryptionPublicKey
    public let certificateSignature: Signature

    /// A profile for `name` (validated with `DisplayName.validate`) and the identity's certified encryption key.
    public init(name: String, certificate: EncryptionKeyCertificate) {
        self.name = name
        self.encryptionKey = certificate.encryptionKey
        self.certificateSignature = certificate.signature
    }

    /// The payload bytes.
    public func encoded() -> [UInt8] {
        var out: [UInt8] = [Self.version]
        let nameBytes = Array(name.utf8)
        appendBigEndian(UInt16(nameBytes.count), to: &out)
        out += nameBytes
        out += encryptionKey.bytes
        out += certificateSignature.bytes
        return out
    }

    /// Decodes a profile payload written by `author` and checks the certificate; nil if anything is off.
    public static func decode(_ payload: [UInt8], author: AuthorID) -> Profile? {
        guard payload.count >= 3, payload[0] == version else { return nil }
        let nameLength = Int(UInt16(payload[1]) << 8 | UInt16(payload[2]))
        guard nameLength <= DisplayName.bytesMax, payload.count == 3 + nameLength + 32 + 64 else { return nil }
        let nameBytes = Array(payload[3..<(3 + nameLength)])
        guard let name = String(validating: nameBytes, as: UTF8.self),
            (try? DisplayName.validate(name)) == name
        else { return nil }
        let keyStart = 3 + nameLength
        guard let key = try? EncryptionPublicKey(bytes: Array(payload[keyStart..<(keyStart + 32)])),
            let signature = try? Signature(bytes: Array(payload[(keyStart + 32)...])),
            let certificate = try? EncryptionKeyCertificate(
                identity: author.publicKey, encryptionKey: key, signature: signature)
        else { return nil }
        return Profile(name: name, certificate: certificate)
    }
}

/// Rules for display names: what people call themselves, shown to everyone.
public enum DisplayName {
    /// At most 64 characters (grapheme clusters): a name, not a message.
    public static let charactersMax = 64
    /// At most 256 UTF-8 bytes, so a name can never crowd a record.
    public static let bytesMax = 256

    /// Why a name was refused, in words a person can act on.
    public enum Problem: Error, Equatable, Sendable, CustomStringConvertible {
        case empty
        case tooLong
        public var description: String {
            switch self {
            case .empty: return "Name cannot be empty"
            case .tooLong: return "Name is too long (max \(charactersMax) characters)"
            }
        }
    }

    /// The cleaned name: control characters removed, whitespace trimmed.
    public static func validate(_ raw: String) throws(Problem) -> String {
        let cleaned = String(
            String.UnicodeScalarView(
                raw.unicodeScalars.filter {
                    !($0.properties.generalCategory == .control
                        || $0.properties.generalCategory == .format
                            && $0.value >= 0x202A && $0.value <= 0x202E)
                }))
        let trimmed = cleaned.trimmingSpaces()
        guard !trimmed.isEmpty else { throw .empty }
        guard trimmed.count <= charactersMax, trimmed.utf8.count <= bytesMax else { throw .tooLong }
        return trimmed
    }
}

extension String {
    /// Trims Unicode whitespace and newlines at both ends (no Foundation in the pure modules).
    func trimmingSpaces() -> String {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return String(scalars[first...last])
    }
}
