public import NatterModel

/// Failures of the store and the data directory that a person or the node must act on. Untrusted records never
/// produce these: they become `IngestOutcome.rejected` values instead.
public enum StoreError: Error, Sendable, CustomStringConvertible {
    /// Another process holds the data directory's lock.
    case directoryInUse(path: String, pid: Int32?)
    /// The data directory or a file in it could not be created, read or written.
    case fileSystem(path: String, reason: String)
    /// No identity yet: `natter init` has not run for this directory.
    case notInitialised(path: String)
    /// `natter init` on a directory that already has an identity.
    case alreadyInitialised(path: String)
    /// A secret file readable by other users.
    case insecurePermissions(path: String, mode: UInt32)
    /// A file exists but is not in the expected format.
    case malformedFile(path: String, reason: String)
    /// The database belongs to another identity (a copied or mixed-up directory).
    case identityMismatch(path: String)
    /// This node's own feed is forked or frozen; writing more would make it worse.
    case ownFeedFrozen(conversation: ConversationID)
    /// This node's own feeds may continue on other nodes (an imported identity, a copied or restored directory):
    /// writing now could fork them. Lifted once a peer has synced with the node, or by the user (`/force-write`).
    case ownHeadsUnconfirmed(OwnHeadsDoubt)
    /// A conversation has more authors than one record's dependency vector can name.
    case tooManyAuthors(conversation: ConversationID, count: Int)
    /// An own record could not be built (a bug in the caller: invalid header or oversized payload).
    case invalidOwnRecord(RecordFormatError)
    /// SQLite reported an error.
    case database(String)

    public var description: String {
        switch self {
        case .directoryInUse(let path, let pid):
            let who = pid.map { "natter process \($0)" } ?? "another natter process"
            return "data directory \(path) is in use by \(who); stop it first or choose another with --data DIR"
        case .fileSystem(let path, let reason): return "\(path): \(reason)"
        case .notInitialised(let path): return "no identity in \(path): run `natter init` first (or pass --data DIR)"
        case .alreadyInitialised(let path): return "\(path) already holds an identity; use `natter id` to see it"
        case .insecurePermissions(let path, let mode):
            return "\(path) is readable by other users (mode \(String(mode, radix: 8))): run `chmod 600 \(path)`"
        case .malformedFile(let path, let reason): return "\(path) is damaged: \(reason)"
        case .identityMismatch(let path):
            return "the database in \(path) was written by another identity; do not mix data directories"
        case .ownFeedFrozen(let conversation):
            return "your feed in conversation \(conversation.shortHex) is forked (this identity wrote elsewhere); "
                + "refusing to write more there"
        case .ownHeadsUnconfirmed(let doubt):
            return "sending waits: \(doubt.explanation); writing now could fork your own feeds. It resumes once a peer "
                + "that knows this identity has synced with this node (or write anyway: /force-write)"
        case .tooManyAuthors(let conversation, let count):
            return "conversation \(conversation.shortHex) has \(count) authors, more than a record can depend on"
        case .invalidOwnRecord(let error): return "could not build your record: \(error)"
        case .database(let message): return "database error: \(message)"
        }
    }
}
