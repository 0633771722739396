// The decoders of conversation payloads that any peer's records carry (docs/protocol.md "Conversation payloads",
// "Content operations", "Control operations", "Profile payload"): no input may crash them, and whatever they accept
// re-encodes to exactly the input (one encoding per value). Commit payloads are split without a key, then their
// sealed body — parent keys and the control operation — is read after a fixed key opens it, as a member's node
// reads it.
import NatterCrypto
import NatterModel

/// `ContentOperation.decode`: content records' operations, the file descriptor (operation 7) included.
func fuzzContentOperation(_ bytes: [UInt8]) -> Bool {
    guard let operation = try? ContentOperation.decode(bytes) else { return false }
    require(operation.encoded() == bytes, "a content operation re-encodes differently")
    return true
}

/// The commit payload: its split (`parseCommit`), the control operation decoder, and the sealed body of either form
/// opened with a fixed key (the fuzzer's bytes sealed as the body, so the parent-key reader is reached).
func fuzzCommit(_ bytes: [UInt8]) -> Bool {
    var accepted = false
    if let operation = try? ControlOperation.decode(bytes) {
        require(operation.encoded() == bytes, "a control operation re-encodes differently")
        accepted = true
    }
    if let commit = try? ConversationPayload.parseCommit(bytes) {
        accepted = true
        switch commit {
        case .inEpoch: require(bytes.first == 1, "an in-epoch commit without its form byte")
        case .opening(let ephemeral, let slots, let notice, _, _, let authenticated):
            require(
                (bytes.first == 3 && notice == nil || bytes.first == 4 && notice != nil)
                    && ephemeral.count == X25519.byteCount && !slots.isEmpty, "an opening commit's parts are off")
            require(
                authenticated.starts(with: ephemeral)
                    && authenticated.count >= X25519.byteCount + 2 + slots.count * KeySlots.slotBytes,
                "slots and their bytes disagree")
            if let notice { require(!notice.slots.isEmpty, "a removal notice for nobody") }
        }
    }
    // The body behind the tag, in the in-epoch and the opening form (no slots, so no roster tags).
    let header = Array("natter-fuzz header".utf8)
    let inEpoch = ConversationPayload.Commit.inEpoch(
        nonce: fuzzNonce, ciphertext: AEAD.seal(bytes, key: fuzzKey, nonce: fuzzNonce, associatedData: header))
    if let opened = try? ConversationPayload.openCommit(inEpoch, key: fuzzKey, header: header) {
        require(opened.parents.isEmpty && opened.operation.encoded() == bytes, "an in-epoch commit body re-encodes differently")
    }
    // No slots, so no roster tags: the body is the parent chain, then the operation.
    let ephemeral = [UInt8](repeating: 9, count: X25519.byteCount)
    let authenticated = ephemeral + [0, 0]
    let opening = ConversationPayload.Commit.opening(
        ephemeral: ephemeral, slots: [], notice: nil, nonce: fuzzNonce,
        ciphertext: AEAD.seal(bytes, key: fuzzKey, nonce: fuzzNonce, associatedData: header + authenticated),
        authenticated: authenticated)
    if let opened = try? ConversationPayload.openCommit(opening, key: fuzzKey, header: header) {
        var again: [UInt8] = [UInt8(opened.parents.count)]
        for (epoch, key) in opened.parents { again += epoch.bytes + key.secret.exposedCopy() }
        require(opened.tags.isEmpty, "tags without slots")
        require(again + opened.operation.encoded() == bytes, "an opening commit body re-encodes differently")
        accepted = true
    }
    return accepted
}

/// `Profile.decode` for a fixed author: a profile it accepts re-encodes to the payload, and its certificate verifies
/// (only the fixed author's own key can sign one, so the seeds carry such profiles).
func fuzzProfile(_ bytes: [UInt8]) -> Bool {
    guard let profile = Profile.decode(bytes, author: fuzzAuthor) else { return false }
    require(profile.encoded() == bytes, "a profile re-encodes differently")
    return true
}

/// The author whose profiles the profile target decodes (and whose key signs the seed profile).
let fuzzAuthorIdentity = try! IdentityKeyPair(seed: [UInt8](repeating: 11, count: 32))
let fuzzAuthor = AuthorID(fuzzAuthorIdentity.publicKey)
/// The key and nonce that seal bodies behind tags.
let fuzzKey = try! SymmetricKey(bytes: [UInt8](repeating: 7, count: SymmetricKey.byteCount))
let fuzzNonce = try! AEADNonce(bytes: [UInt8](repeating: 5, count: AEADNonce.byteCount))

/// Traps (a crash libFuzzer reports, with the input saved) when a property does not hold, in every build mode.
func require(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("natter-fuzz: \(message())") }
}
