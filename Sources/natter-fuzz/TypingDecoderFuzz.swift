// The TYPING frame decoder (docs/protocol.md §3.2, type 16), fuzzed with the same input as the record decoder: no
// input may crash it, what it accepts re-encodes to exactly the input, and checking the signature or opening the
// state of whatever it accepts never crashes either (the receiver does both with bytes from any peer).
import NatterCrypto
import NatterSync

/// Runs `bytes` through `TypingFrame.decode`; traps if a property breaks.
func fuzzTypingDecoder(_ bytes: [UInt8]) {
    guard let frame = try? TypingFrame.decode(bytes) else { return }
    if frame.encoded() != bytes { fatalError("natter-fuzz: a typing frame re-encodes differently") }
    if !TypingFrame.isTypingFrame(bytes) { fatalError("natter-fuzz: a decoded typing frame is not routed as one") }
    _ = frame.isValidlySigned
    _ = frame.open(epochKey: fuzzEpochKey)
}

private let fuzzEpochKey = try! SymmetricKey(bytes: [UInt8](repeating: 7, count: SymmetricKey.byteCount))
