public import NatterModel

/// Why bytes from the peer are not a valid sync message, or a valid message broke the session's rules. Every case
/// is a faulty or hostile peer: the session closes the link with `SyncError.malformed`, and the node scores the peer.
public enum SyncMessageError: Error, Equatable, Sendable, CustomStringConvertible {
    /// A message of zero bytes (it has no type).
    case empty
    /// The first byte names no message type of protocol version 1.
    case unknownType(UInt8)
    /// The message ends inside this field.
    case truncated(field: String)
    /// Bytes follow the last field.
    case trailingBytes(Int)
    /// A count exceeds its limit (checked before anything is allocated for it).
    case tooMany(field: String, count: Int, limit: Int)
    /// A flags byte has bits set that version 1 does not define, or an impossible combination.
    case invalidFlags(UInt8)
    /// Entries that must be strictly ascending are not.
    case unsorted(field: String)
    /// A count that must be at least one is zero.
    case zeroCount(field: String)
    /// A sequence number is 0 or above 2^62.
    case sequenceOutOfRange(field: String, UInt64)
    /// A feed head with a stored sequence names the all-zero record id.
    case zeroHead
    /// A record in a batch announces more bytes than any record may have.
    case recordTooLarge(Int)
    /// A batch's records add up to more than its lane allows (`Limits.syncBatchBytesMax`, or
    /// `Limits.syncPriorityBatchBytesMax` on the priority lane).
    case batchTooLarge(Int)
    /// A record in a batch is not a structurally valid record.
    case invalidRecord(index: Int, RecordFormatError)
    /// A well-formed message that the session's state does not allow (more batches than the window, a second
    /// DONE, credit never spent, a summary or heads part out of place).
    case unexpected(String)

    public var description: String {
        switch self {
        case .empty: return "an empty sync message"
        case .unknownType(let type): return "unknown sync message type \(type)"
        case .truncated(let field): return "sync message ends inside its \(field)"
        case .trailingBytes(let count): return "\(count) bytes follow the sync message"
        case .tooMany(let field, let count, let limit): return "\(count) \(field) exceed the limit of \(limit)"
        case .invalidFlags(let flags): return "invalid flags \(flags)"
        case .unsorted(let field): return "\(field) are not strictly ascending"
        case .zeroCount(let field): return "no \(field)"
        case .sequenceOutOfRange(let field, let value): return "\(field) \(value) is outside 1...2^62"
        case .zeroHead: return "a feed head names the zero record id"
        case .recordTooLarge(let bytes): return "a record of \(bytes) bytes exceeds the record cap"
        case .batchTooLarge(let bytes): return "a batch of \(bytes) record bytes exceeds the batch cap"
        case .invalidRecord(let index, let error): return "record \(index) of the batch is invalid: \(error)"
        case .unexpected(let what): return "unexpected sync message: \(what)"
        }
    }
}

/// Why a sync session closed its link. Each prints as one line a person can act on.
///
/// `malformed`, `invalidRecord` and `excessiveRequests` are a faulty or hostile peer (score it); `timeout` is the
/// network or a crashed peer (redial).
public enum SyncError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The peer sent a malformed or over-limit message, or one its state does not allow.
    case malformed(SyncMessageError)
    /// Nothing arrived from the peer for this long (at least `Limits.syncSilenceTimeout`).
    case timeout(silence: Duration)
    /// The store rejected a record the peer sent (a bad signature): an honest peer checks every record before it
    /// stores or relays it, so this one is faulty or hostile.
    case invalidRecord(RecordFormatError)
    /// The peer's REQUESTs for records it had been sent or said it held made this side send more than
    /// `Limits.syncResentBytesMax` again within one anti-entropy interval (`bytes`, the last of them of `FeedKey`).
    /// An honest node asks again for what was in flight when another path was faster, or after losing records:
    /// far less (docs/protocol.md §3.3, step 7).
    case excessiveRequests(FeedKey, bytes: Int)

    public var description: String {
        switch self {
        case .malformed(let error):
            return "the peer broke the sync protocol (\(error)): it is faulty or hostile"
        case .timeout(let silence):
            return "nothing heard from the peer for \(silence): the link is dead (network cut or peer crashed)"
        case .invalidRecord(let error):
            return "the peer sent a record the store rejected (\(error)): it relays unchecked records"
        case .excessiveRequests(let feed, let bytes):
            return "the peer asked again for records it was already sent, \(bytes) bytes within "
                + "\(Limits.syncAntiEntropyInterval) (the last of \(feed)): it is greedy or broken"
        }
    }
}
