// The record decoder's fuzz target (docs/protocol.md, "Record encoding"). Built with `-DFUZZING` and
// `--sanitize=fuzzer` it is a libFuzzer target (scripts/fuzz.sh); built plainly it replays a corpus, so the crashes
// libFuzzer found stay reproducible without its toolchain flags: `swift run natter-fuzz Tests/Fuzz/record-corpus`.
import NatterCrypto
import NatterModel

/// What became of one input.
enum FuzzOutcome {
    case rejected(RecordFormatError)
    case decoded
    case verified
}

/// Runs `bytes` through `Record.decode` and `Record.decodeVerified` and traps if any property of the codec breaks:
/// no input may crash the decoder; a decoded record re-encodes, from its fields alone, to exactly the input;
/// `decodeVerified` fails exactly when `decode` fails (for the same reason) or the signature does not verify; and
/// `.nonCanonical` is never reached (the fixed-width layout makes it unreachable, so reaching it is a codec bug).
func fuzzRecordDecoder(_ bytes: [UInt8]) -> FuzzOutcome {
    let record: Record
    do throws(RecordFormatError) {
        record = try Record.decode(bytes)
    } catch {
        check(error != .nonCanonical, "the decoder read something it would encode differently: \(error)")
        check(verifyError(bytes) == error, "decodeVerified and decode reject for different reasons")
        return .rejected(error)
    }
    check(record.bytes == bytes, "the record does not keep the input bytes")
    var again = RecordCodec.encodeHeader(record.header)
    check(Array(record.headerBytes) == again, "the header bytes are not the header's encoding")
    let length = UInt32(record.payload.count)
    again += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
    again += record.payload
    again += record.signature.bytes
    check(again == bytes, "re-encoding the decoded fields does not give back the input")
    check((try? record.header.validate()) != nil, "a decoded header breaks a header rule")
    check(record.id.bytes == Blake2b.hash(bytes, outputBytes: 32), "the id is not BLAKE2b-256 of the bytes")
    let verifyError = verifyError(bytes)
    if record.hasValidSignature {
        check(verifyError == nil, "decodeVerified refuses a record whose signature verifies")
        return .verified
    }
    check(verifyError == .badSignature, "decodeVerified accepts a record whose signature does not verify")
    return .decoded
}

private func verifyError(_ bytes: [UInt8]) -> RecordFormatError? {
    do throws(RecordFormatError) {
        _ = try Record.decodeVerified(bytes)
        return nil
    } catch {
        return error
    }
}

/// Traps (a crash libFuzzer reports, with the input saved) when a property does not hold, in every build mode.
private func check(_ condition: Bool, _ message: @autoclosure () -> String) {
    if !condition { fatalError("natter-fuzz: \(message())") }
}

#if FUZZING

/// libFuzzer's entry point: one input per call.
@_cdecl("LLVMFuzzerTestOneInput")
public func llvmFuzzerTestOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
    let bytes = data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? []
    _ = fuzzRecordDecoder(bytes)
    fuzzFileDecoders(bytes)
    fuzzTypingDecoder(bytes)
    fuzzSyncDecoder(bytes)
    return 0
}

#else

import Foundation

/// Replays every file of the directories (or files) given as arguments through the decoder. Rejected inputs are
/// the normal case and do not fail the run; a broken property crashes it.
@main
struct CorpusReplayer {
    static func main() {
        let paths = CommandLine.arguments.dropFirst()
        guard !paths.isEmpty else {
            printError("usage: natter-fuzz DIRECTORY-OR-FILE … (replays a record corpus through the decoder)")
            exit(2)
        }
        var counts = (files: 0, decoded: 0, verified: 0)
        var rejections = [String: Int]()
        for path in paths {
            for file in files(at: path) {
                guard let data = FileManager.default.contents(atPath: file) else {
                    printError("natter-fuzz: cannot read \(file)")
                    exit(2)
                }
                counts.files += 1
                fuzzFileDecoders(Array(data))
                fuzzTypingDecoder(Array(data))
                fuzzSyncDecoder(Array(data))
                switch fuzzRecordDecoder(Array(data)) {
                case .rejected(let error): rejections[ruleName(error), default: 0] += 1
                case .decoded: counts.decoded += 1
                case .verified: counts.verified += 1
                }
            }
        }
        let rejected = rejections.values.reduce(0, +)
        print(
            "replayed \(counts.files) inputs: \(counts.verified) valid records, "
                + "\(counts.decoded) decoded with a bad signature, \(rejected) rejected")
        for (rule, count) in rejections.sorted(by: { $0.key < $1.key }) {
            print("  \(rule): \(count)")
        }
    }

    /// The error's case name, to show which rules a corpus reaches.
    private static func ruleName(_ error: RecordFormatError) -> String {
        switch error {
        case .tooLarge: "tooLarge"
        case .truncated(let field): "truncated(\(field))"
        case .trailingBytes: "trailingBytes"
        case .unsupportedVersion: "unsupportedVersion"
        case .unknownKind: "unknownKind"
        case .zeroSequence: "zeroSequence"
        case .sequenceTooLarge: "sequenceTooLarge"
        case .previousAtFirstSequence: "previousAtFirstSequence"
        case .missingPrevious: "missingPrevious"
        case .epochOnPlainRecord: "epochOnPlainRecord"
        case .missingEpoch: "missingEpoch"
        case .tooManyDependencies: "tooManyDependencies"
        case .unsortedDependencies: "unsortedDependencies"
        case .duplicateDependency: "duplicateDependency"
        case .zeroDependencySequence: "zeroDependencySequence"
        case .ownDependencyMismatch: "ownDependencyMismatch"
        case .lamportTooLarge: "lamportTooLarge"
        case .lamportWithoutDependencies: "lamportWithoutDependencies"
        case .lamportBelowSequence: "lamportBelowSequence"
        case .creationTimeOutOfRange: "creationTimeOutOfRange"
        case .payloadTooLarge: "payloadTooLarge"
        case .nonCanonical: "nonCanonical"
        case .badSignature: "badSignature"
        }
    }

    /// The regular files directly in `path` (sorted, for a stable order), or `path` itself if it is a file.
    private static func files(at path: String) -> [String] {
        var isDirectory: ObjCBool = false
        guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
            printError("natter-fuzz: no such file or directory: \(path)")
            exit(2)
        }
        guard isDirectory.boolValue else { return [path] }
        let names = (try? FileManager.default.contentsOfDirectory(atPath: path)) ?? []
        return names.sorted().map { path + "/" + $0 }.filter { file in
            var isDirectory: ObjCBool = false
            return FileManager.default.fileExists(atPath: file, isDirectory: &isDirectory) && !isDirectory.boolValue
        }
    }

    private static func printError(_ message: String) {
        FileHandle.standardError.write(Array((message + "\n").utf8).withUnsafeBytes { Data($0) })
    }
}

#endif
