// Helpers of the tests that run real `Node`s on loopback TCP: a seeded identity, and a node holding it with its
// profile published, listening on a free loopback port, discovery off.
import NatterCrypto
import NatterModel
import NatterStore

@testable import NatterNode

enum LoopbackNodes {
    /// The identity seed `seed` always gives.
    static func identity(seed: UInt64) throws -> LocalIdentity {
        var random = SeededGenerator(seed: seed)
        return LocalIdentity(
            signing: try IdentityKeyPair(seed: random.bytes(32)),
            encryption: try EncryptionKeyPair(secret: random.bytes(32)))
    }

    /// A node with `identity(seed:)` and an in-memory store, named `name`, dialling `peers`.
    static func node(seed: UInt64, name: String, peers: [PeerAddress]) async throws -> Node {
        let identity = try identity(seed: seed)
        let store = try RecordStore.inMemory()
        try Conversations(store: store, identity: identity).publishProfile(name: name, now: 1)
        return try await Node(
            store: store, identity: identity, networkKey: .defaultNetwork,
            listen: PeerAddress(host: "127.0.0.1", port: 0), peers: peers, discovery: nil)
    }
}
