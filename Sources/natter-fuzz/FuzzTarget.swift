// natter's libFuzzer targets: one per decoder of bytes that arrive from the network (docs/protocol.md), in one
// executable. Built with `-DFUZZING` and `--sanitize=fuzzer` it is a libFuzzer binary that fuzzes the target named
// by `NATTER_FUZZ_TARGET` (scripts/fuzz.sh runs each in turn); built plainly it replays corpora, so what libFuzzer
// found stays reproducible without its toolchain flags: `natter-fuzz TARGET FILE-OR-DIRECTORY…`, or
// `natter-fuzz --all Tests/Fuzz` for every target's seed corpus (CI, scripts/test.sh).

/// A fuzz target: its name is its seed corpus's directory under `Tests/Fuzz`.
enum FuzzTarget: String, CaseIterable, Sendable {
    /// Records (`Record.decode`, `decodeVerified`).
    case record
    /// Content operations, the file descriptor included.
    case contentOperation = "content-operation"
    /// Commit payloads: the split, the sealed body, control operations.
    case commit
    /// Profile payloads.
    case profile
    /// Sync messages (types 1–7, 11–15).
    case sync
    /// File frames (types 8–10).
    case fileFrame = "file-frame"
    /// TYPING frames (type 16).
    case typingFrame = "typing-frame"
    /// Discovery beacons.
    case beacon
    /// The link handshake: framing, messages, payloads.
    case handshake
    /// The secure channel: framing, record stream.
    case channel
    /// A node's trace file (`natter lab replay`): not from the network, but a file anyone may hand over.
    case trace

    /// Runs one input; true when the decoder accepted it (for the replayer's counts). Traps when a property breaks.
    func run(_ bytes: [UInt8]) -> Bool {
        switch self {
        case .record:
            if case .rejected = fuzzRecordDecoder(bytes) { return false }
            return true
        case .contentOperation: return fuzzContentOperation(bytes)
        case .commit: return fuzzCommit(bytes)
        case .profile: return fuzzProfile(bytes)
        case .sync: return fuzzSyncDecoder(bytes)
        case .fileFrame: return fuzzFileFrame(bytes)
        case .typingFrame: return fuzzTypingDecoder(bytes)
        case .beacon: return fuzzBeacon(bytes)
        case .handshake: return fuzzHandshake(bytes)
        case .channel: return fuzzChannel(bytes)
        case .trace: return fuzzTrace(bytes)
        }
    }

    static var names: String { allCases.map(\.rawValue).joined(separator: ", ") }
}

#if FUZZING

import Glibc

/// The target this process fuzzes, from `NATTER_FUZZ_TARGET` (read once).
let selectedTarget: FuzzTarget = {
    let name = getenv("NATTER_FUZZ_TARGET").map { String(cString: $0) } ?? ""
    guard let target = FuzzTarget(rawValue: name) else {
        fatalError("natter-fuzz: set NATTER_FUZZ_TARGET to one of \(FuzzTarget.names) (got \"\(name)\")")
    }
    return target
}()

/// libFuzzer's entry point: one input per call.
@_cdecl("LLVMFuzzerTestOneInput")
public func llvmFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    _ = selectedTarget.run(bytes)
    return 0
}

#endif
