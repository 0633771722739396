// The record decoder's fuzz target (docs/protocol.md, "Record encoding").
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
        require(error != .nonCanonical, "the decoder read something it would encode differently: \(error)")
        require(verifyError(bytes) == error, "decodeVerified and decode reject for different reasons")
        return .rejected(error)
    }
    require(record.bytes == bytes, "the record does not keep the input bytes")
    var again = RecordCodec.encodeHeader(record.header)
    require(Array(record.headerBytes) == again, "the header bytes are not the header's encoding")
    let length = UInt32(record.payload.count)
    again += [UInt8(length >> 24), UInt8(length >> 16 & 0xFF), UInt8(length >> 8 & 0xFF), UInt8(length & 0xFF)]
    again += record.payload
    again += record.signature.bytes
    require(again == bytes, "re-encoding the decoded fields does not give back the input")
    require((try? record.header.validate()) != nil, "a decoded header breaks a header rule")
    require(record.id.bytes == Blake2b.hash(bytes, outputBytes: 32), "the id is not BLAKE2b-256 of the bytes")
    let verifyError = verifyError(bytes)
    if record.hasValidSignature {
        require(verifyError == nil, "decodeVerified refuses a record whose signature verifies")
        return .verified
    }
    require(verifyError == .badSignature, "decodeVerified accepts a record whose signature does not verify")
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

/// A node's trace (`TraceCodec.decode`): whatever decodes re-encodes to exactly the input.
func fuzzTrace(_ bytes: [UInt8]) -> Bool {
    guard let (header, entries) = try? TraceCodec.decode(bytes) else { return false }  // a refusal is the normal case
    let again = entries.reduce(TraceCodec.encode(header)) { $0 + TraceCodec.encode($1) }
    require(again == bytes, "a trace re-encodes differently")
    return true
}
