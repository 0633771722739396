import Foundation
public import NatterCrypto
public import NatterModel
public import NatterStore

/// Resolves a node's data directory and opens what a command needs from it: its identity and its store.
public struct DataDirectoryHandle: Sendable {
    public let directory: DataDirectory

    public init(explicit: String?) {
        directory = DataDirectory.resolve(explicit: explicit, environment: ProcessInfo.processInfo.environment)
    }

    /// Identity and store of an initialised directory; the store is locked for this process.
    public func open() throws -> (LocalIdentity, RecordStore) {
        let identity = try directory.readIdentity()
        let store = try RecordStore.open(directory: directory.path)
        try store.bind(to: identity.author, directory: directory.path)
        return (identity, store)
    }

    /// Creates a new node here: directory, identity, optional network key, database, and a signed profile.
    public func initialise(name: String, network: NetworkKey?) throws -> (LocalIdentity, RecordStore) {
        let cleanName = try DisplayName.validate(name)
        try directory.create()
        if directory.isInitialised { throw StoreError.alreadyInitialised(path: directory.path) }
        // Lock before writing anything, so two concurrent inits cannot interleave.
        let store = try RecordStore.open(directory: directory.path)
        let identity = LocalIdentity.generate()
        if let network { try directory.writeNetworkKey(network) }
        try directory.writeIdentity(identity)
        try store.bind(to: identity.author, directory: directory.path)
        try publishProfile(name: cleanName, identity: identity, store: store)
        return (identity, store)
    }

    /// Appends a profile record (display name and certified encryption key) to the identity's public feed.
    public func publishProfile(name: String, identity: LocalIdentity, store: RecordStore) throws {
        let profile = Profile(name: name, certificate: identity.certificate)
        _ = try store.appendOwn(
            conversation: .profileFeed(of: identity.author), kind: .plain, epoch: .none,
            createdAtMillis: WallClock.nowMillis(), identity: identity.signing
        ) { _ in profile.encoded() }
    }

    /// The latest applied profile of `author`, if any.
    public func profile(of author: AuthorID, in store: RecordStore) throws -> Profile? {
        let feed = ConversationID.profileFeed(of: author)
        guard let state = try store.feeds(of: feed).first(where: { $0.author == author }), state.applied > 0 else {
            return nil
        }
        let records = try store.records(conversation: feed, author: author, from: state.applied, limit: 1)
        return records.first.flatMap { Profile.decode($0.payload, author: author) }
    }
}
