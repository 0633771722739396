/// Why bytes are not a valid record. Every rejection the codec or the header rules can produce has its own case,
/// so tests and logs name the broken rule.
public enum RecordFormatError: Error, Equatable, Sendable, CustomStringConvertible {
    case tooLarge(Int)
    case truncated(field: String)
    case trailingBytes(Int)
    case unsupportedVersion(UInt8)
    case unknownKind(UInt8)
    case zeroSequence
    case sequenceTooLarge(UInt64)
    case previousAtFirstSequence
    case missingPrevious
    case epochOnPlainRecord
    case missingEpoch
    case tooManyDependencies(Int)
    case unsortedDependencies
    case duplicateDependency
    case zeroDependencySequence
    case ownDependencyMismatch(expected: UInt64, found: UInt64)
    case lamportTooLarge(UInt64)
    case lamportWithoutDependencies(UInt64)
    case lamportBelowSequence(lamport: UInt64)
    case creationTimeOutOfRange(Int64)
    case payloadTooLarge(Int)
    case nonCanonical
    case badSignature

    public var description: String {
        switch self {
        case .tooLarge(let size): return "record of \(size) bytes exceeds the \(Limits.recordBytesMax)-byte cap"
        case .truncated(let field): return "record ends inside its \(field)"
        case .trailingBytes(let count): return "\(count) bytes follow the signature"
        case .unsupportedVersion(let version): return "record version \(version) is not supported (only 1)"
        case .unknownKind(let kind): return "unknown record kind \(kind)"
        case .zeroSequence: return "sequence numbers start at 1"
        case .sequenceTooLarge(let value): return "sequence \(value) exceeds 2^62"
        case .previousAtFirstSequence: return "the first record of a feed must not name a previous record"
        case .missingPrevious: return "a record after the first must name its previous record"
        case .epochOnPlainRecord: return "a plain record must not name an epoch"
        case .missingEpoch: return "a content record must name its key epoch"
        case .tooManyDependencies(let count):
            return "\(count) dependencies exceed the cap of \(Limits.dependenciesMax)"
        case .unsortedDependencies: return "dependencies are not sorted by author"
        case .duplicateDependency: return "an author appears twice among the dependencies"
        case .zeroDependencySequence: return "a dependency names sequence 0"
        case .ownDependencyMismatch(let expected, let found):
            return "the author's own dependency must be \(expected), found \(found)"
        case .lamportTooLarge(let value): return "Lamport number \(value) exceeds 2^62"
        case .lamportWithoutDependencies(let value):
            return "a record without dependencies must have Lamport number 1, not \(value)"
        case .lamportBelowSequence(let lamport):
            return "Lamport number \(lamport) is below what the author's own feed implies"
        case .creationTimeOutOfRange(let value): return "creation time \(value) ms is out of range"
        case .payloadTooLarge(let size): return "payload of \(size) bytes does not fit the record cap"
        case .nonCanonical: return "the encoding is not canonical"
        case .badSignature: return "the signature does not verify for the author"
        }
    }
}
