public import NatterCrypto

/// How operations travel inside record payloads (docs/protocol.md, "Conversation payloads").
///
/// - content record: `nonce (24) ‖ XChaCha20-Poly1305(epoch key, content operation, ad = header)`
/// - commit, in-epoch form (rename, roles, flags, leave): `0x01 ‖ nonce ‖ AEAD(epoch key, control operation, ad = header)`
/// - commit, opening form (create, add, remove, rekey): `0x03 ‖ ephemeral key E (32) ‖ slot count k (u16) ‖ k slots ‖
///   nonce ‖ AEAD(new key, body, ad = header ‖ E ‖ k ‖ slots)`, each slot `hint (8) ‖ wrapped key (48)` (`KeySlots`),
///   body `parent count (u8) ‖ parents (epoch id 32 ‖ key 32) ‖ k roster tags (8 each) ‖ control operation` — the
///   parents are the history chain. (Form 2, with hints keyed by a salt sent in clear, was retired: a relay could
///   test who held a slot.)
public enum ConversationPayload {
    /// Why a payload could not be read.
    public enum Failure: Error, Equatable, Sendable {
        /// No key for its epoch, or no slot for us: normal for relays and removed members.
        case noKey
        /// We hold the key but the bytes do not open or parse: the author (or a forger) broke the format.
        case malformed(String)
    }

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
            ephemeral: [UInt8], slots: [(hint: [UInt8], wrapped: [UInt8])], nonce: AEADNonce, ciphertext: [UInt8],
            slotBytes: [UInt8])

        /// The public ephemeral key of an opening commit: every key for its epoch must give it (`KeySlots.opens`).
        public var ephemeral: [UInt8]? {
            if case .opening(let ephemeral, _, _, _, _) = self { return ephemeral }
            return nil
        }

        /// The slots of an opening commit, in order (empty for an in-epoch commit).
        public var slots: [(hint: [UInt8], wrapped: [UInt8])] {
            if case .opening(_, let slots, _, _, _) = self { return slots }
            return []
        }
    }

    /// What a commit says once decrypted: its operation and, for an opening commit, its history chain (parent
    /// epochs with their keys, not yet checked) and its roster tags.
    public struct OpenedCommit: Sendable {
        public let operation: ControlOperation
        public let parents: [(EpochID, SymmetricKey)]
        public let tags: [[UInt8]]
    }

    public static func sealInEpochCommit(
        _ operation: ControlOperation, key: SymmetricKey, header: [UInt8], nonce: AEADNonce = .random()
    ) -> [UInt8] {
        [1] + nonce.bytes + AEAD.seal(operation.encoded(), key: key, nonce: nonce, associatedData: header)
    }

    /// Seals a fresh epoch `newKey` to each member of `roster` and the operation, parent keys and roster tags under
    /// it. Throws for a member whose encryption key is of low order (no secret can be agreed with it).
    public static func sealOpeningCommit(
        _ operation: ControlOperation, newKey: SymmetricKey, parents: [(EpochID, SymmetricKey)],
        roster: [(AuthorID, EncryptionPublicKey)], header: [UInt8], nonce: AEADNonce = .random()
    ) throws(CryptoError) -> [UInt8] {
        // Counts beyond the layout's are programming errors; an empty or oversized roster is written (the rules and
        // the parser refuse it, and an author's own check refuses to append it).
        precondition(parents.count <= 255 && roster.count <= Int(UInt16.max))
        let ephemeral = KeySlots.ephemeral(of: newKey)
        let owners = roster.sorted { $0.0 < $1.0 }
        var slots = [UInt8]()
        appendBigEndian(UInt16(owners.count), to: &slots)
        for (_, encryptionKey) in owners {
            slots += try KeySlots.slot(for: encryptionKey, key: newKey, ephemeral: ephemeral)
        }
        var body: [UInt8] = [UInt8(parents.count)]
        for (epoch, parentKey) in parents {
            body += epoch.bytes
            body += parentKey.secret.exposedCopy()
        }
        let tagKey = KeySlots.rosterTagKey(newKey)
        for (member, _) in owners { body += KeySlots.rosterTag(member, tagKey: tagKey) }
        body += operation.encoded()
        defer { wipe(&body) }
        let sealed = AEAD.seal(body, key: newKey, nonce: nonce, associatedData: header + ephemeral + slots)
        return [3] + ephemeral + slots + nonce.bytes + sealed
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
            case 3:
                let ephemeral = Array(try reader.take(X25519.byteCount))
                let slotStart = reader.offset
                let count = try reader.uint16()
                guard count >= 1, count <= Limits.groupMembersMax else { throw Failure.malformed("slot count") }
                var slots = [(hint: [UInt8], wrapped: [UInt8])]()
                for _ in 0..<count {
                    let hint = Array(try reader.take(KeySlots.hintBytes))
                    slots.append((hint, Array(try reader.take(KeySlots.wrappedKeyBytes))))
                }
                let slotBytes = Array(payload[slotStart..<reader.offset])
                let nonceBytes = try reader.take(AEADNonce.byteCount)
                let nonce = try! AEADNonce(bytes: Array(nonceBytes))
                let ciphertext = Array(try reader.take(payload.count - reader.offset))
                return .opening(
                    ephemeral: ephemeral, slots: slots, nonce: nonce, ciphertext: ciphertext, slotBytes: slotBytes)
            case let form:
                throw Failure.malformed("unknown commit form \(form)")
            }
        } catch let failure as Failure {
            throw failure
        } catch {
            throw .malformed("commit payload: \(error)")
        }
    }

    /// Decrypts a commit with the key that encrypts it (the epoch key for in-epoch commits, the new key for
    /// opening ones, which the caller has checked with `KeySlots.opens`).
    public static func openCommit(_ commit: Commit, key: SymmetricKey, header: [UInt8]) throws(Failure)
        -> OpenedCommit
    {
        let plain: [UInt8]
        let slotCount: Int
        switch commit {
        case .inEpoch(let nonce, let ciphertext):
            guard let opened = try? AEAD.open(ciphertext, key: key, nonce: nonce, associatedData: header) else {
                throw .malformed("does not decrypt under its epoch key")
            }
            do {
                return OpenedCommit(operation: try ControlOperation.decode(opened), parents: [], tags: [])
            } catch {
                throw .malformed(error.description)
            }
        case .opening(let ephemeral, let slots, let nonce, let ciphertext, let slotBytes):
            guard
                let opened = try? AEAD.open(
                    ciphertext, key: key, nonce: nonce, associatedData: header + ephemeral + slotBytes)
            else { throw .malformed("body does not decrypt under the sealed key") }
            plain = opened
            slotCount = slots.count
        }
        var body = plain
        defer { wipe(&body) }
        let count = Int(body.first ?? 0)
        let tagsStart = 1 + count * 64
        guard !body.isEmpty, body.count >= tagsStart + slotCount * KeySlots.tagBytes else {
            throw .malformed("commit body too short")
        }
        var parents = [(EpochID, SymmetricKey)]()
        for index in 0..<count {
            let offset = 1 + index * 64
            let epoch = EpochID(bytes: body[offset..<(offset + 32)])
            parents.append((epoch, try! SymmetricKey(bytes: Array(body[(offset + 32)..<(offset + 64)]))))
        }
        let tags = (0..<slotCount).map { index in
            Array(body[(tagsStart + index * KeySlots.tagBytes)..<(tagsStart + (index + 1) * KeySlots.tagBytes)])
        }
        do {
            let operation = try ControlOperation.decode(Array(body[(tagsStart + slotCount * KeySlots.tagBytes)...]))
            return OpenedCommit(operation: operation, parents: parents, tags: tags)
        } catch {
            throw .malformed(error.description)
        }
    }
}
