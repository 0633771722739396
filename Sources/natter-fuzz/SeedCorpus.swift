// Generated seeds for the targets whose inputs are not protocol test vectors (`natter-fuzz --write-seeds DIR`):
// one well-formed input per message kind, so libFuzzer starts inside each decoder rather than at its first check.
// The record, file-frame, typing-frame and PRUNE/REROUTE/LEAVING/PRIORITY seeds were written by their own tests
// and are kept as they are.
import NatterCrypto
import NatterModel
import NatterNetwork
import NatterSync

enum SeedCorpus {
    static func all() -> [(FuzzTarget, [(name: String, bytes: [UInt8])])] {
        [
            (.contentOperation, contentOperations),
            (.commit, commits),
            (.profile, profiles),
            (.sync, SyncMessageFuzzing.seeds),
            (.beacon, beacons),
            (.handshake, LinkFuzzing.handshakeSeeds),
            (.channel, LinkFuzzing.channelSeeds),
            (.trace, traces),
        ]
    }

    static let someone = AuthorID(raw: Bytes32([UInt8](repeating: 0x44, count: 32)))
    static let another = AuthorID(raw: Bytes32([UInt8](repeating: 0x55, count: 32)))
    static let target = RecordID(bytes: [UInt8](repeating: 0x66, count: 32))

    /// A trace with one entry of each kind of call, and a header alone.
    static var traces: [(name: String, bytes: [UInt8])] {
        let ref = RecordRef(
            id: target, position: RecordPosition(conversation: .profileFeed(of: someone), author: someone, sequence: 1))
        let conversation = ConversationID(raw: Bytes32([UInt8](repeating: 0x77, count: 32)))
        let header = TraceHeader(
            node: someone, startMillis: 1_764_000_000_000, initialLogDigest: [UInt8](repeating: 0x11, count: 32),
            settings: [("handshake-timeout", 5_000_000_000), ("receipts-enabled", 1)], initialDraws: [1, 2, 3, 4],
            initialRecords: [ref])
        let calls: [TraceCall] = [
            .linkOpened(1, initiator: true), .received(1, [1, 2, 3]), .linkClosed(1), .writable(1, false), .tick,
            .heard(1), .refresh, .refused([another]), .published([.bytes([9, 9]), .held(ref)]),
            .author(markRead: [true, false]), .view(conversation), .view(nil), .review, .writePending, .closeAll,
            .retire(2), .fetchFile(target, in: conversation), .cancelFetch(target), .typing(conversation),
            .stoppedTyping(conversation), .forceWrite,
            .digests(
                TraceDigests(
                    log: [UInt8](repeating: 0x22, count: 32),
                    conversations: [.init(id: conversation, digest: [UInt8](repeating: 0x33, count: 32))])),
            .truncated,
        ]
        let entries = calls.enumerated().map { index, call in
            TraceEntry(
                at: Int64(index) * 1_000_000, call: call, draws: index % 3 == 0 ? [UInt64(index)] : [],
                writes: index == 9 ? [[.wrote(conversation, [.bytes([5])]), .refused]] : [])
        }
        return [
            ("header", TraceCodec.encode(header)),
            ("every-call", entries.reduce(TraceCodec.encode(header)) { $0 + TraceCodec.encode($1) }),
        ]
    }

    static var contentOperations: [(name: String, bytes: [UInt8])] {
        let operations: [(String, ContentOperation)] = [
            ("message", .message(text: "hello, wörld", replyTo: nil)),
            ("message-reply", .message(text: "re", replyTo: target)),
            ("edit", .edit(target: target, text: "edited")),
            ("delete", .delete(target: target)),
            ("react", .react(target: target, reaction: .love)),
            ("unreact", .unreact(target: target)),
            ("receipt", .receipt(readUpTo: VectorClock([someone: 3, another: 1]))),
        ]
        return operations.map { ("operation-\($0.0)", $0.1.encoded()) }
    }

    static var controlOperations: [(String, ControlOperation)] {
        [
            ("create", .create(kind: .group, title: "a group", members: [someone], salt: [UInt8](repeating: 1, count: 16))),
            ("add", .add(members: [someone, another])),
            ("remove", .remove(members: [another])),
            ("leave", .leave),
            ("rename", .rename(title: "renamed")),
            ("set-role", .setRole(member: someone, role: .admin)),
            ("set-flags", .setFlags(member: someone, flags: [.canAdd])),
            ("rekey", .rekey),
        ]
    }

    static var commits: [(name: String, bytes: [UInt8])] {
        var seeds = controlOperations.map { ("control-\($0.0)", $0.1.encoded()) }
        // Bodies of an opening commit: one parent epoch, then the operation.
        let parent = [UInt8](repeating: 0x77, count: 64)
        seeds.append(("body-one-parent-add", [1] + parent + ControlOperation.add(members: [someone]).encoded()))
        // Whole payloads of both forms.
        let header = Array("seed header".utf8)
        seeds.append(
            ("payload-in-epoch", ConversationPayload.sealInEpochCommit(.leave, key: fuzzKey, header: header, nonce: fuzzNonce)))
        let member = try! EncryptionKeyPair(secret: [UInt8](repeating: 8, count: 32))
        let opening = try! ConversationPayload.sealOpeningCommit(
            .rekey, newKey: fuzzKey, parents: [], roster: [(someone, member.publicKey)], header: header, nonce: fuzzNonce)
        seeds.append(("payload-opening", opening))
        let parentKey = try! SymmetricKey(bytes: [UInt8](repeating: 3, count: 32))
        let removal = try! ConversationPayload.sealOpeningCommit(
            .remove(members: [another]), newKey: fuzzKey, parents: [(EpochID(bytes: [UInt8](repeating: 4, count: 32)), parentKey)],
            roster: [(someone, member.publicKey)], notify: [(another, member.publicKey)], header: header,
            nonce: fuzzNonce)
        seeds.append(("payload-removal", removal))
        return seeds
    }

    static var profiles: [(name: String, bytes: [UInt8])] {
        let key = try! EncryptionKeyPair(secret: [UInt8](repeating: 12, count: 32))
        let certificate = EncryptionKeyCertificate(certifying: key.publicKey, by: fuzzAuthorIdentity)
        return [
            ("profile", Profile(name: "Ada", certificate: certificate).encoded()),
            ("profile-unicode", Profile(name: "Zoë 🦊", certificate: certificate).encoded()),
        ]
    }

    static var beacons: [(name: String, bytes: [UInt8])] {
        let beacon = Beacon(tag: NodeTag(bytes: [UInt8](repeating: 0x99, count: 16)), port: 7718)
        return [
            ("beacon-raw", [0] + beacon.seal(key: NetworkKey.defaultNetwork.beaconKey, nonce: fuzzNonce)),
            ("beacon-plaintext", [1] + beacon.plaintext),
        ]
    }
}
