public import NatterCrypto

/// How operations travel inside record payloads (docs/protocol.md, "Conversation payloads").
///
/// - content record: `nonce (24) ‖ XChaCha20-Poly1305(epoch key, content operation, ad = header)`
/// - commit, in-epoch form (rename, roles, flags, leave): `0x01 ‖ nonce ‖ AEAD(epoch key, control operation, ad = header)`
/// - commit, opening form (create, add, remove, rekey): `0x02 ‖ salt (16) ‖ slot count (u16) ‖ slots ‖ nonce ‖
///   AEAD(new key, body, ad = header ‖ salt ‖ slots)`, each slot `hint (8) ‖ sealed box of the new key (80)`, body
///   `parent count (u8) ‖ parents (epoch id 32 ‖ key 32) ‖ control operation` — the parents are the history chain.
public enum ConversationPayload {
    /// Why a payload could not be read.
    public enum Failure: Error, Equatable, Sendable {
        /// No key for its epoch, or no slot for us: normal for relays and removed members.
        case noKey
        /// We hold the key but the bytes do not open or parse: the author (or a forger) broke the format.
        case malformed(String)
    }

    static let sealedKeyBytes = SymmetricKey.byteCount + 48
    static let slotBytes = ConversationLimits.hintBytes + sealedKeyBytes

    // MARK: - Content

    public static func sealContent(
        _ operation: ContentOperation, key: SymmetricKey, header: [UInt8], nonce: AEADNonce = .random()
    ) -> [UInt8] {
        nonce.bytes + AEAD.seal(operation.encoded(), key: key, nonce: nonce, associatedData: header)
    }

    public static func openContent(_ payload: [UInt8], key: SymmetricKey, header: [UInt8]) throws(Failure)
        -> ContentOperation
    {
        guard payload.count >= AEADNonce.byteCount + AEAD.tagBytes else { throw .malformed("payload too short") }
        let nonce = try! AEADNonce(bytes: Array(payload[0..<AEADNonce.byteCount]))
        let plain: [UInt8]
        do {
            plain = try AEAD.open(
                Array(payload[AEADNonce.byteCount...]), key: key, nonce: nonce, associatedData: header)
        } catch {
            throw .malformed("does not decrypt under its epoch key")
        }
        do {
            return try ContentOperation.decode(plain)
        } catch {
            throw .malformed(error.description)
        }
    }

    // MARK: - Commits

    /// A commit payload split into its parts, before any key is used.
    public enum Commit: Sendable {
        case inEpoch(nonce: AEADNonce, ciphertext: [UInt8])
        case opening(
            salt: [UInt8], slots: [(hint: [UInt8], sealedKey: [UInt8])], nonce: AEADNonce, ciphertext: [UInt8],
            slotBytes: [UInt8])

        /// The slot hints, in order (members check them against the resulting roster).
        public var hints: [[UInt8]] {
            if case .opening(_, let slots, _, _, _) = self { return slots.map(\.hint) }
            return []
        }

        public var salt: [UInt8]? {
            if case .opening(let salt, _, _, _, _) = self { return salt }
            return nil
        }
    }

    /// The hint that lets `member` find its slot in a commit with `salt`: keyed BLAKE2b-64 of the member's key.
    public static func hint(for member: AuthorID, salt: [UInt8]) -> [UInt8] {
        Blake2b.hash(member.bytes, outputBytes: 16, key: salt).prefix(ConversationLimits.hintBytes).map { $0 }
    }

    public static func sealInEpochCommit(
        _ operation: ControlOperation, key: SymmetricKey, header: [UInt8], nonce: AEADNonce = .random()
    ) -> [UInt8] {
        [1] + nonce.bytes + AEAD.seal(operation.encoded(), key: key, nonce: nonce, associatedData: header)
    }

    /// Seals a fresh epoch `newKey` to each member of `roster` and the operation plus parent keys under it.
    public static func sealOpeningCommit(
        _ operation: ControlOperation, newKey: SymmetricKey, parents: [(EpochID, SymmetricKey)],
        roster: [(AuthorID, EncryptionPublicKey)], salt: [UInt8], header: [UInt8], nonce: AEADNonce = .random()
    ) throws(CryptoError) -> [UInt8] {
        precondition(salt.count == ConversationLimits.saltBytes && parents.count <= 255)
        var slots = [UInt8]()
        appendBigEndian(UInt16(roster.count), to: &slots)
        let key = newKey.secret.exposedCopy()
        for (member, encryptionKey) in roster.sorted(by: { $0.0 < $1.0 }) {
            slots += hint(for: member, salt: salt)
            slots += try SealedBox.seal(key, to: encryptionKey)
        }
        var body: [UInt8] = [UInt8(parents.count)]
        for (epoch, parentKey) in parents {
            body += epoch.bytes
            body += parentKey.secret.exposedCopy()
        }
        body += operation.encoded()
        defer { wipe(&body) }
        let sealed = AEAD.seal(body, key: newKey, nonce: nonce, associatedData: header + salt + slots)
        return [2] + salt + slots + nonce.bytes + sealed
    }

    /// Splits a commit payload (no key needed).
    public static func parseCommit(_ payload: [UInt8]) throws(Failure) -> Commit {
        var reader = OperationReader(payload)
        do {
            switch try reader.byte() {
            case 1:
                // `take` throws on a short payload; the 24 bytes it returns always make a nonce.
                let nonceBytes = try reader.take(AEADNonce.byteCount)
                let nonce = try! AEADNonce(bytes: Array(nonceBytes))
                let ciphertext = Array(try reader.take(payload.count - reader.offset))
                return .inEpoch(nonce: nonce, ciphertext: ciphertext)
            case 2:
                let salt = Array(try reader.take(ConversationLimits.saltBytes))
                let slotStart = reader.offset
                let count = try reader.uint16()
                guard count >= 1, count <= Limits.groupMembersMax else { throw Failure.malformed("slot count") }
                var slots = [(hint: [UInt8], sealedKey: [UInt8])]()
                for _ in 0..<count {
                    let hint = Array(try reader.take(ConversationLimits.hintBytes))
                    slots.append((hint, Array(try reader.take(sealedKeyBytes))))
                }
                let slotBytes = Array(payload[slotStart..<reader.offset])
                let nonceBytes = try reader.take(AEADNonce.byteCount)
                let nonce = try! AEADNonce(bytes: Array(nonceBytes))
                let ciphertext = Array(try reader.take(payload.count - reader.offset))
                return .opening(salt: salt, slots: slots, nonce: nonce, ciphertext: ciphertext, slotBytes: slotBytes)
            case let form:
                throw Failure.malformed("unknown commit form \(form)")
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .malformed("commit payload: \(error)")
        }
    }

    /// The new epoch key from our slot, if the commit has one for us.
    public static func openSlot(_ commit: Commit, member: AuthorID, keyPair: EncryptionKeyPair) -> SymmetricKey? {
        guard case .opening(let salt, let slots, _, _, _) = commit else { return nil }
        let mine = hint(for: member, salt: salt)
        for slot in slots where slot.hint == mine {
            if var key = try? SealedBox.open(slot.sealedKey, with: keyPair), key.count == SymmetricKey.byteCount {
                defer { wipe(&key) }
                return try! SymmetricKey(bytes: key)
            }
        }
        return nil
    }

    /// Decrypts a commit with the key that encrypts it (the epoch key for in-epoch commits, the new key for
    /// opening ones): the operation and, for opening commits, the parent epoch keys.
    public static func openCommit(_ commit: Commit, key: SymmetricKey, header: [UInt8]) throws(Failure)
        -> (ControlOperation, parents: [(EpochID, SymmetricKey)])
    {
        let plain: [UInt8]
        switch commit {
        case .inEpoch(let nonce, let ciphertext):
            guard let opened = try? AEAD.open(ciphertext, key: key, nonce: nonce, associatedData: header) else {
                throw .malformed("does not decrypt under its epoch key")
            }
            plain = opened
            do {
                return (try ControlOperation.decode(plain), [])
            } catch {
                throw .malformed(error.description)
            }
        case .opening(let salt, _, let nonce, let ciphertext, let slotBytes):
            guard
                let opened = try? AEAD.open(
                    ciphertext, key: key, nonce: nonce, associatedData: header + salt + slotBytes)
            else { throw .malformed("body does not decrypt under the sealed key") }
            plain = opened
        }
        var body = plain
        defer { wipe(&body) }
        let count = Int(body.first ?? 0)
        guard !body.isEmpty, body.count >= 1 + count * 64 else { throw .malformed("commit body too short") }
        var parents = [(EpochID, SymmetricKey)]()
        var offset = 1
        for _ in 0..<count {
            let epoch = EpochID(bytes: body[offset..<(offset + 32)])
            parents.append((epoch, try! SymmetricKey(bytes: Array(body[(offset + 32)..<(offset + 64)]))))
            offset += 64
        }
        do {
            return (try ControlOperation.decode(Array(body[offset...])), parents)
        } catch {
            throw .malformed(error.description)
        }
    }
}
