// The application messages a link carries (docs/protocol.md §3.2 and §11.3): sync messages (types 1–7 and 11–15:
// SUMMARY … PING, PRUNE, LEAVING, REROUTE, PRIORITY RECORDS, PRIORITY CREDIT), file frames (types 8–10) and TYPING
// (type 16). No input may crash their decoders, and whatever they accept re-encodes to exactly the input (one
// encoding per message). Checking a typing frame's signature or opening its state never crashes either (the receiver
// does both with bytes from any peer).
import NatterCrypto
import NatterSync

/// The sync message decoder.
func fuzzSyncDecoder(_ bytes: [UInt8]) -> Bool {
    guard let reencodes = SyncMessageFuzzing.reencodes(bytes) else { return false }
    require(reencodes, "a sync message re-encodes differently")
    return true
}

/// `FileFrame.decode`.
func fuzzFileFrame(_ bytes: [UInt8]) -> Bool {
    guard let frame = try? FileFrame.decode(bytes) else { return false }
    require(frame.encoded() == bytes, "a file frame re-encodes differently")
    require(FileFrame.isFileFrame(bytes), "a decoded file frame is not routed as one")
    return true
}

/// `TypingFrame.decode`, then its signature check and opening under a fixed epoch key.
func fuzzTypingDecoder(_ bytes: [UInt8]) -> Bool {
    guard let frame = try? TypingFrame.decode(bytes) else { return false }
    require(frame.encoded() == bytes, "a typing frame re-encodes differently")
    require(TypingFrame.isTypingFrame(bytes), "a decoded typing frame is not routed as one")
    _ = frame.isValidlySigned
    _ = frame.open(epochKey: fuzzKey)
    return true
}
