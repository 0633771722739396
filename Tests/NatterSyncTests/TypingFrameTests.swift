// Goal: a TYPING frame (docs/protocol.md §3.2, type 16) has exactly the documented layout; only its author can make
// one (any changed byte outside the hop count breaks the signature, and another identity cannot sign for the author);
// only a holder of the epoch key reads its state; forwarders may lower the hop count without breaking it; and every
// malformed frame is refused with a named error. Method: frames sealed with fixed keys and nonces, then mutated.
import NatterCrypto
import NatterModel
import Testing

@testable import NatterSync

@Suite("Typing frames")
struct TypingFrameTests {
    let alice = try! IdentityKeyPair(seed: [UInt8](repeating: 1, count: 32))
    let mallory = try! IdentityKeyPair(seed: [UInt8](repeating: 2, count: 32))
    let conversation = ConversationID(raw: Bytes32([UInt8](repeating: 3, count: 32)))
    let epoch = EpochID(raw: Bytes32([UInt8](repeating: 4, count: 32)))
    let key = try! SymmetricKey(bytes: [UInt8](repeating: 5, count: 32))
    let nonce = try! AEADNonce(bytes: [UInt8](repeating: 6, count: 24))

    func frame(_ state: TypingFrame.State = .typing, by identity: IdentityKeyPair? = nil) -> TypingFrame {
        TypingFrame.seal(
            state, conversation: conversation, epoch: epoch, epochKey: key, sequence: 1_700_000_000_000,
            nonce: nonce, identity: identity ?? alice)
    }

    @Test("layout: 211 bytes, type 16, hops, ids, sequence, nonce, sealed state, signature; round trip")
    func layout() throws {
        let bytes = frame().encoded()
        #expect(bytes.count == 211 && TypingFrame.byteCount == 211)
        #expect(bytes[0] == 16 && bytes[1] == Limits.typingHopsMax)
        #expect(Array(bytes[2..<34]) == conversation.bytes)
        #expect(Array(bytes[34..<66]) == alice.publicKey.bytes)
        #expect(Array(bytes[66..<98]) == epoch.bytes)
        #expect(Array(bytes[98..<106]) == [0, 0, 0x01, 0x8B, 0xCF, 0xE5, 0x68, 0x00])  // 1_700_000_000_000
        #expect(Array(bytes[106..<130]) == nonce.bytes)
        let decoded = try TypingFrame.decode(bytes)
        #expect(decoded == frame())
        #expect(decoded.isValidlySigned)
        #expect(decoded.open(epochKey: key) == .typing)
        #expect(frame(.stopped).open(epochKey: key) == .stopped)
        #expect(TypingFrame.isTypingFrame(bytes) && !TypingFrame.isTypingFrame([7]) && !TypingFrame.isTypingFrame([]))
    }

    @Test("only the epoch key opens the state; the sealed byte is not the state in clear")
    func confidentiality() throws {
        let other = try SymmetricKey(bytes: [UInt8](repeating: 9, count: 32))
        #expect(frame().open(epochKey: other) == nil)
        #expect(frame().sealedState != [1] + frame().sealedState.dropFirst())  // 17 bytes of ciphertext and tag
        #expect(frame(.typing).sealedState != frame(.stopped).sealedState)
    }

    @Test("every byte but the hop count is signed; another identity cannot sign for the author")
    func signatures() throws {
        let bytes = frame().encoded()
        for index in bytes.indices where index != 1 {
            var changed = bytes
            changed[index] ^= 0x01
            if let decoded = try? TypingFrame.decode(changed) {
                #expect(!decoded.isValidlySigned, "byte \(index) is not covered by the signature")
            }
        }
        var forwarded = try TypingFrame.decode(bytes)
        forwarded.hops = 1
        #expect(forwarded.isValidlySigned && forwarded.open(epochKey: key) == .typing)
        // Mallory (a member with the key) signs a frame and puts Alice's identity on it: refused.
        var forged = frame(by: mallory).encoded()
        forged.replaceSubrange(34..<66, with: alice.publicKey.bytes)
        #expect(try TypingFrame.decode(forged).isValidlySigned == false)
        #expect(frame(by: mallory).isValidlySigned)
    }

    @Test("malformed frames are refused with a named error")
    func malformed() throws {
        let bytes = frame().encoded()
        #expect(throws: SyncMessageError.empty) { try TypingFrame.decode([]) }
        #expect(throws: SyncMessageError.unknownType(3)) { try TypingFrame.decode([3] + bytes.dropFirst()) }
        #expect(throws: SyncMessageError.truncated(field: "signature")) { try TypingFrame.decode(Array(bytes.dropLast())) }
        #expect(throws: SyncMessageError.trailingBytes(1)) { try TypingFrame.decode(bytes + [0]) }
        var noHops = bytes
        noHops[1] = 0
        #expect(throws: SyncMessageError.self) { try TypingFrame.decode(noHops) }
        var tooManyHops = bytes
        tooManyHops[1] = Limits.typingHopsMax + 1
        #expect(throws: SyncMessageError.self) { try TypingFrame.decode(tooManyHops) }
        var zeroSequence = bytes
        zeroSequence.replaceSubrange(98..<106, with: [UInt8](repeating: 0, count: 8))
        #expect(throws: SyncMessageError.sequenceOutOfRange(field: "sequence", 0)) {
            try TypingFrame.decode(zeroSequence)
        }
    }
}
