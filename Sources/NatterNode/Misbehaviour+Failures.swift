import NatterSync

// MARK: - Which failures are misbehaviour

extension Misbehaviour {
    /// A handshake failure that an honest peer never causes; nil for cuts, closes and version mismatches.
    init?(handshake error: LinkError) {
        switch error {
        case .wrongNetworkKey: self.init(.wrongNetworkKey, "\(error)")
        case .decryptFailed, .truncated, .frameTooLarge, .messageTooLarge, .malformedPayload, .unexpectedMessage,
            .badIdentityBinding, .weakPeerKey:
            self.init(.failedHandshake, "\(error)")
        case .noCommonVersion, .nonceExhausted, .peerClosedHandshake, .cut, .closed: return nil
        }
    }

    /// A secure-channel failure that an honest peer never causes (TCP does not corrupt, reorder or replay bytes).
    init?(channel error: LinkError) {
        switch error {
        case .decryptFailed, .truncated, .frameTooLarge, .messageTooLarge, .malformedPayload, .unexpectedMessage,
            .badIdentityBinding, .weakPeerKey, .wrongNetworkKey:
            self.init(.malformedFrame, "\(error)")
        case .noCommonVersion, .nonceExhausted, .peerClosedHandshake, .cut, .closed: return nil
        }
    }

    /// A sync failure that is the peer's fault (docs/protocol.md §3.5); nil for a timeout (redial instead).
    init?(sync error: SyncError) {
        switch error {
        case .malformed, .invalidRecord, .excessiveRequests: self.init(.protocolViolation, "\(error)")
        case .timeout: return nil
        }
    }
}
