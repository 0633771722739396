/// Why a link handshake or a secure channel stopped. Every case ends the link; each prints as one line saying what
/// happened and what to check.
///
/// Sorted by what the node should do about the peer: `wrongNetworkKey` is a stranger (drop quietly, rate-limit the
/// address); `decryptFailed`, `truncated`, `frameTooLarge`, `messageTooLarge`, `malformedPayload`,
/// `unexpectedMessage`, `badIdentityBinding` and `weakPeerKey` are a broken or hostile peer (close and score it);
/// `noCommonVersion` needs an upgrade; `cut` is the network or a crash (redial); `nonceExhausted` and `closed` are
/// the end of a link's life.
public enum LinkError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Where in the link something failed.
    public enum Stage: Equatable, Sendable, CustomStringConvertible {
        /// Handshake message 1, 2 or 3.
        case handshakeMessage(Int)
        /// The transport frame with this number (0 is the first in its direction).
        case transportFrame(UInt64)

        public var description: String {
            switch self {
            case .handshakeMessage(let number): return "handshake message \(number)"
            case .transportFrame(let number): return "transport frame \(number)"
            }
        }
    }

    /// Handshake message 1 did not decrypt: the peer holds another network key (or sent garbage). Nothing about
    /// either identity has been revealed.
    case wrongNetworkKey
    /// A message failed authentication after the network key was proven: altered in transit, replayed, reordered,
    /// or from a broken peer.
    case decryptFailed(Stage)
    /// The bytes end before the fields the message needs, or the stream ended inside a frame.
    case truncated(Stage)
    /// A handshake frame announced more bytes than `Limits.handshakeMessageBytesMax`.
    case frameTooLarge(Stage, bytes: Int, limit: Int)
    /// An application message is larger than `Limits.applicationMessageBytesMax` (announced by the peer, or handed
    /// to `send`).
    case messageTooLarge(bytes: Int, limit: Int)
    /// A payload decrypted but its layout is wrong (see docs/protocol.md §2).
    case malformedPayload(Stage, String)
    /// A message arrived that the link does not expect in its state: a replayed handshake message, bytes after the
    /// handshake finished, data after a goodbye.
    case unexpectedMessage(String)
    /// The peer's identity binding does not verify for its Noise static key and this handshake.
    case badIdentityBinding(Stage)
    /// The peers share no protocol version.
    case noCommonVersion(ours: [UInt16], theirs: [UInt16])
    /// The peer sent a low-order X25519 key (the shared secret would be all zeros).
    case weakPeerKey(Stage)
    /// A direction has used all 2^64 - 1 Noise nonces; the link must be re-established.
    case nonceExhausted
    /// The peer closed the connection between handshake messages, before sending this one. During message 2 this
    /// is how a responder with another network key refuses an initiator (it learns nothing and answers nothing).
    case peerClosedHandshake(Stage)
    /// The stream ended without the peer's goodbye: a crash or a network cut, not a clean close.
    case cut
    /// The link is already closed or failed; nothing more can be sent or received on it.
    case closed

    public var description: String {
        switch self {
        case .wrongNetworkKey:
            return "handshake message 1 does not decrypt: the peer uses a different network key (check the "
                + "network passphrase or key file on both nodes)"
        case .decryptFailed(let stage):
            return "\(stage) failed authentication: altered, replayed or reordered in transit, or a faulty peer"
        case .truncated(let stage):
            return "\(stage) ends before its last field: the peer stopped mid-message or sent a short frame"
        case .frameTooLarge(let stage, let bytes, let limit):
            return "\(stage) announces \(bytes) bytes, above the \(limit)-byte cap: not a natter peer, or a faulty one"
        case .messageTooLarge(let bytes, let limit):
            return "application message of \(bytes) bytes exceeds the \(limit)-byte cap: split it into smaller ones"
        case .malformedPayload(let stage, let what):
            return "\(stage) payload is malformed (\(what)): the peer is faulty or speaks another protocol"
        case .unexpectedMessage(let what):
            return "unexpected message: \(what)"
        case .badIdentityBinding(let stage):
            return "\(stage) carries an identity binding that does not verify for this handshake: the peer is "
                + "impersonating someone or replaying a binding"
        case .noCommonVersion(let ours, let theirs):
            return "no common protocol version: we speak \(ours), the peer speaks \(theirs); upgrade the older node"
        case .weakPeerKey(let stage):
            return "\(stage) carries a low-order X25519 key, refused: the peer is hostile or broken"
        case .nonceExhausted:
            return "the link has used all its nonces; reconnect to get fresh keys"
        case .peerClosedHandshake(let stage):
            return "the peer closed the connection before \(stage): it may use a different network key (check the "
                + "network passphrase or key file), or not speak natter"
        case .cut:
            return "the connection ended without a goodbye: the peer crashed or the network dropped the link"
        case .closed:
            return "the link is closed: nothing more can be sent or received on it"
        }
    }
}
