import NatterCrypto

// Load generation for the flood tests and `natter debug flood` (SPEC F16): not used by a node's own path.

/// Well-formed, correctly signed records from throwaway identities, as a flooding node would send them: each
/// author writes a chain of `perAuthor` content records (each depending on its predecessor) in `conversation`.
/// Deterministic for a seed; about 40k records a second on one core (signing dominates). The records are not
/// encrypted (random payloads): a relay cannot tell, and a member refuses them as junk from unknown authors.
public func floodRecords(
    conversation: ConversationID, authors: Int, perAuthor: Int, payloadBytes: Int = 200, seed: UInt64
) throws -> [Record] {
    var rng = SeededGenerator(seed: seed)
    let epoch = EpochID(bytes: rng.bytes(32))
    var records = [Record]()
    records.reserveCapacity(authors * perAuthor)
    for _ in 0..<authors {
        let identity = try IdentityKeyPair(seed: rng.bytes(32))
        let author = AuthorID(identity.publicKey)
        var previous = RecordID.none
        for sequence in 1...UInt64(perAuthor) {
            let header = RecordHeader(
                kind: .content, conversation: conversation, author: author, sequence: sequence, previous: previous,
                epoch: epoch, lamport: sequence, createdAtMillis: 1_700_000_000_000,
                dependencies: sequence == 1 ? VectorClock() : VectorClock([author: sequence - 1]))
            let record = try Record.sign(header: header, payload: rng.bytes(payloadBytes), by: identity)
            records.append(record)
            previous = record.id
        }
    }
    return records
}

/// A conversation id of its own for a test (a hash of the name).
public func floodConversation(_ name: String) -> ConversationID {
    ConversationID(bytes: Blake2b.hash(Array("flood/\(name)".utf8)))
}
