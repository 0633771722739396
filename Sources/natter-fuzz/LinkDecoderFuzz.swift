// The bytes a peer sends before and around the sync layer (docs/protocol.md §1 and §2): discovery beacons, the link
// handshake's framing and its three messages' payloads, and the secure channel's framing and record stream. Random
// bytes rarely pass an authentication tag, so the targets also seal the fuzzer's bytes with the right keys (a beacon's
// plaintext under the default network's beacon key; handshake payloads and channel plaintexts by a peer holding the
// network key, `LinkFuzzing`): the decoders behind the tags are fuzzed as a hostile member of the network reaches them.
import NatterCrypto
import NatterNetwork
import NatterSync

/// The first byte picks raw bytes (even: `Beacon.open` on the datagram as received) or a plaintext sealed as an
/// authentic beacon (odd); whatever opens re-seals, with its nonce, to exactly the datagram.
func fuzzBeacon(_ bytes: [UInt8]) -> Bool {
    guard let mode = bytes.first else { return false }
    let rest = Array(bytes.dropFirst())
    let key = NetworkKey.defaultNetwork.beaconKey
    let datagram: [UInt8]
    if mode % 2 == 0 {
        datagram = rest
    } else {
        let header = Beacon.magic + [Beacon.version]
        datagram =
            header + fuzzNonce.bytes
            + AEAD.seal(rest, key: key, nonce: fuzzNonce, associatedData: Beacon.domain + header)
    }
    guard case .success(let beacon) = Beacon.open(datagram, key: key) else { return false }
    require(beacon.port != 0, "a beacon announcing port 0 was accepted")
    let nonce = try! AEADNonce(bytes: Array(datagram[Beacon.headerBytes..<(Beacon.headerBytes + AEADNonce.byteCount)]))
    require(beacon.seal(key: key, nonce: nonce) == datagram, "a beacon re-seals differently")
    return true
}

/// The handshake (`LinkFuzzing.handshake`: raw frames to either role, authentic messages with the fuzzer's payloads).
func fuzzHandshake(_ bytes: [UInt8]) -> Bool {
    LinkFuzzing.handshake(bytes)
    return true
}

/// The secure channel's receiver (`LinkFuzzing.channel`: raw wire bytes, or authentic frames of the fuzzer's
/// plaintexts).
func fuzzChannel(_ bytes: [UInt8]) -> Bool {
    LinkFuzzing.channel(bytes)
    return true
}
