public import NatterCrypto

/// How operations travel inside record payloads (docs/protocol.md, "Conversation payloads").
///
/// - content record: `nonce (24) ‖ XChaCha20-Poly1305(epoch key, content operation, ad = header)`
/// - commit, in-epoch form (rename, roles, flags, leave): `0x01 ‖ nonce ‖ AEAD(epoch key, control operation, ad = header)`
/// - commit, opening form (create, add, rekey): `0x03 ‖ ephemeral key E (32) ‖ slot count k (u16) ‖ k slots ‖
///   nonce ‖ AEAD(new key, body, ad = header ‖ E ‖ k ‖ slots)`, each slot `hint (8) ‖ wrapped key (48)` (`KeySlots`),
///   body `parent count (u8) ‖ parents (epoch id 32 ‖ key 32) ‖ k roster tags (8 each) ‖ control operation` — the
///   parents are the history chain. (Form 2, with hints keyed by a salt sent in clear, was retired: a relay could
///   test who held a slot.)
/// - commit, removal form (remove): `0x04 ‖ E ‖ k ‖ k slots ‖ notice ‖ nonce ‖ AEAD(new key, body, ad = header ‖
///   everything after the form byte before the nonce)`, notice `q (u8) ‖ q notice slots (40) ‖ check (32) ‖ length m
///   (u16) ‖ ChaCha20-Poly1305(notice key, operation, ad = header ‖ everything after the form byte before it) (m)`, body
///   as form 3 without the operation (`RemovalNotice`): the members removed read who removed whom.
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
        /// Forms 3 and 4; `authenticated` is every byte between the form byte and the nonce (the body's associated
        /// data after the header), `notice` the removal notice of form 4.
        case opening(
            ephemeral: [UInt8], slots: [(hint: [UInt8], wrapped: [UInt8])], notice: Notice?, nonce: AEADNonce,
            ciphertext: [UInt8], authenticated: [UInt8])

        /// The public ephemeral key of an opening commit: every key for its epoch must give it (`KeySlots.opens`).
        public var ephemeral: [UInt8]? {
            if case .opening(let ephemeral, _, _, _, _, _) = self { return ephemeral }
            return nil
        }

        /// The slots of an opening commit, in order (empty for an in-epoch commit).
        public var slots: [(hint: [UInt8], wrapped: [UInt8])] {
            if case .opening(_, let slots, _, _, _, _) = self { return slots }
            return []
        }

        /// The removal notice of a form-4 commit.
        public var notice: Notice? {
            if case .opening(_, _, let notice, _, _, _) = self { return notice }
            return nil
        }
    }

    /// The notice of a removal commit, split (`RemovalNotice`).
    public struct Notice: Sendable {
        /// One slot per member removed, in the order of their identity keys: `hint (8) ‖ masked notice key (32)`.
        public let slots: [[UInt8]]
        /// C: what the notice key gives (`RemovalNotice.check`).
        public let check: [UInt8]
        /// The operation sealed under the notice key.
        public let sealed: [UInt8]
        /// The payload's bytes between the form byte and `sealed`: the operation's associated data after the header.
        public let authenticated: [UInt8]
    }

    /// What a commit says once decrypted: its operation and, for an opening commit, its history chain (parent
    /// epochs with their keys, not yet checked), its roster tags, and whether it carried a removal notice.
    public struct OpenedCommit: Sendable {
        public let operation: ControlOperation
        public let parents: [(EpochID, SymmetricKey)]
        public let tags: [[UInt8]]
        public let announced: Bool
    }

    public static func sealInEpochCommit(
        _ operation: ControlOperation, key: SymmetricKey, header: [UInt8], nonce: AEADNonce = .random()
    ) -> [UInt8] {
        [1] + nonce.bytes + AEAD.seal(operation.encoded(), key: key, nonce: nonce, associatedData: header)
    }

    /// Seals a fresh epoch `newKey` to each member of `roster` and the operation, parent keys and roster tags under
    /// it. Given `notify` (for a removal: the members it removes), it is written in form 4: the operation goes into a
    /// notice those members read (`RemovalNotice`). Throws for a member whose encryption key is of low order (no
    /// secret can be agreed with it).
    public static func sealOpeningCommit(
        _ operation: ControlOperation, newKey: SymmetricKey, parents: [(EpochID, SymmetricKey)],
        roster: [(AuthorID, EncryptionPublicKey)], notify: [(AuthorID, EncryptionPublicKey)]? = nil, header: [UInt8],
        nonce: AEADNonce = .random()
    ) throws(CryptoError) -> [UInt8] {
        // Counts beyond the layout's are programming errors; an empty or oversized roster is written (the rules and
        // the parser refuse it, and an author's own check refuses to append it).
        precondition(parents.count <= 255 && roster.count <= Int(UInt16.max) && (notify?.count ?? 0) <= 255)
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
        defer { wipe(&body) }
        var authenticated = ephemeral + slots
        let form: UInt8
        if let notify {
            form = 4
            let noticeKey = RemovalNotice.key(of: newKey)
            authenticated.append(UInt8(notify.count))
            for (_, encryptionKey) in notify.sorted(by: { $0.0 < $1.0 }) {
                authenticated += try RemovalNotice.slot(for: encryptionKey, key: newKey)
            }
            authenticated += RemovalNotice.check(of: noticeKey)
            let plain = operation.encoded()
            appendBigEndian(UInt16(plain.count + 16), to: &authenticated)
            authenticated += ChaCha20Poly1305.seal(
                plain, key: noticeKey, counter: 0, associatedData: header + authenticated)
        } else {
            form = 3
            body += operation.encoded()
        }
        let sealed = AEAD.seal(body, key: newKey, nonce: nonce, associatedData: header + authenticated)
        return [form] + authenticated + nonce.bytes + sealed
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
            case let form where form == 3 || form == 4:
                let ephemeral = Array(try reader.take(X25519.byteCount))
                let count = try reader.uint16()
                guard count >= 1, count <= Limits.groupMembersMax else { throw Failure.malformed("slot count") }
                var slots = [(hint: [UInt8], wrapped: [UInt8])]()
                for _ in 0..<count {
                    let hint = Array(try reader.take(KeySlots.hintBytes))
                    slots.append((hint, Array(try reader.take(KeySlots.wrappedKeyBytes))))
                }
                var notice: Notice?
                if form == 4 {
                    let removed = Int(try reader.byte())
                    guard removed >= 1 else { throw Failure.malformed("a removal notice for nobody") }
                    let noticeSlots = try (0..<removed).map { _ throws(OperationFormatError) in
                        Array(try reader.take(RemovalNotice.slotBytes))
                    }
                    let check = Array(try reader.take(RemovalNotice.checkBytes))
                    let length = try reader.uint16()
                    guard length > 16 else { throw Failure.malformed("removal notice too short") }
                    let authenticated = Array(payload[1..<reader.offset])
                    notice = Notice(
                        slots: noticeSlots, check: check, sealed: Array(try reader.take(length)),
                        authenticated: authenticated)
                }
                let authenticated = Array(payload[1..<reader.offset])
                let nonceBytes = try reader.take(AEADNonce.byteCount)
                let nonce = try! AEADNonce(bytes: Array(nonceBytes))
                let ciphertext = Array(try reader.take(payload.count - reader.offset))
                return .opening(
                    ephemeral: ephemeral, slots: slots, notice: notice, nonce: nonce, ciphertext: ciphertext,
                    authenticated: authenticated)
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
    /// opening ones, which the caller has checked with `KeySlots.opens`). A removal's notice is checked — its check
    /// value against the key, one slot per member removed — so that a removed member who reads it reads what the
    /// members do, or the members reject the commit.
    public static func openCommit(_ commit: Commit, key: SymmetricKey, header: [UInt8]) throws(Failure)
        -> OpenedCommit
    {
        let plain: [UInt8]
        let slotCount: Int
        let notice: Notice?
        switch commit {
        case .inEpoch(let nonce, let ciphertext):
            guard let opened = try? AEAD.open(ciphertext, key: key, nonce: nonce, associatedData: header) else {
                throw .malformed("does not decrypt under its epoch key")
            }
            do {
                return OpenedCommit(
                    operation: try ControlOperation.decode(opened), parents: [], tags: [], announced: false)
            } catch {
                throw .malformed(error.description)
            }
        case .opening(_, let slots, let sealedNotice, let nonce, let ciphertext, let authenticated):
            guard
                let opened = try? AEAD.open(
                    ciphertext, key: key, nonce: nonce, associatedData: header + authenticated)
            else { throw .malformed("body does not decrypt under the sealed key") }
            plain = opened
            slotCount = slots.count
            notice = sealedNotice
        }
        var body = plain
        defer { wipe(&body) }
        let count = Int(body.first ?? 0)
        let tagsStart = 1 + count * 64
        let tagsEnd = tagsStart + slotCount * KeySlots.tagBytes
        guard !body.isEmpty, body.count >= tagsEnd else { throw .malformed("commit body too short") }
        var parents = [(EpochID, SymmetricKey)]()
        for index in 0..<count {
            let offset = 1 + index * 64
            let epoch = EpochID(bytes: body[offset..<(offset + 32)])
            parents.append((epoch, try! SymmetricKey(bytes: Array(body[(offset + 32)..<(offset + 64)]))))
        }
        let tags = (0..<slotCount).map { index in
            Array(body[(tagsStart + index * KeySlots.tagBytes)..<(tagsStart + (index + 1) * KeySlots.tagBytes)])
        }
        guard let notice else {
            do {
                let operation = try ControlOperation.decode(Array(body[tagsEnd...]))
                return OpenedCommit(operation: operation, parents: parents, tags: tags, announced: false)
            } catch {
                throw .malformed(error.description)
            }
        }
        guard body.count == tagsEnd else { throw .malformed("a removal's body carries no operation") }
        let noticeKey = RemovalNotice.key(of: key)
        guard RemovalNotice.check(of: noticeKey) == notice.check else {
            throw .malformed("the removal notice's check does not match the key")
        }
        let operation = try openNotice(notice, noticeKey: noticeKey, header: header)
        return OpenedCommit(operation: operation, parents: parents, tags: tags, announced: true)
    }

    /// The operation of a removal notice, with a notice key checked against it (`RemovalNotice.find`, or derived
    /// from the epoch key), and one notice slot per member it removes (what the members removed can check too).
    public static func openNotice(_ notice: Notice, noticeKey: SymmetricKey, header: [UInt8]) throws(Failure)
        -> ControlOperation
    {
        guard
            let plain = try? ChaCha20Poly1305.open(
                notice.sealed, key: noticeKey, counter: 0, associatedData: header + notice.authenticated)
        else { throw .malformed("the removal notice does not decrypt under its key") }
        let operation: ControlOperation
        do {
            operation = try ControlOperation.decode(plain)
        } catch {
            throw .malformed(error.description)
        }
        if case .remove(let members) = operation, members.count != notice.slots.count {
            throw .malformed("the removal notice has not one slot per member removed")
        }
        return operation
    }
}
