// The decoders of file transfer, fuzzed with the same input as the record decoder (docs/protocol.md §3.2 types
// 8–10, §10.3 operation 7): no input may crash them, and whatever they accept re-encodes to exactly the input (one
// encoding per value). The content-operation decoder runs on every input, so the file descriptor (operation 7)
// and every other operation are covered.
import NatterModel
import NatterSync

/// Runs `bytes` through `ContentOperation.decode` and `FileFrame.decode`; traps if a property breaks.
func fuzzFileDecoders(_ bytes: [UInt8]) {
    if let operation = try? ContentOperation.decode(bytes) {
        fileCheck(operation.encoded() == bytes, "a content operation re-encodes differently")
    }
    if let frame = try? FileFrame.decode(bytes) {
        fileCheck(frame.encoded() == bytes, "a file frame re-encodes differently")
        fileCheck(FileFrame.isFileFrame(bytes), "a decoded file frame is not routed as one")
    }
}

private func fileCheck(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("natter-fuzz: \(message())") }
}
