// Goal: give the NatterCrypto tests one way to write byte constants and tamper with bytes, so each test reads as its
// vector and its check. Method: hex constants go through the module's own `Hex.decode` (itself tested in HexTests)
// and trap when malformed, because a bad constant is a mistake in the test, not a finding.
import NatterCrypto

/// The bytes of a hex test constant. A malformed constant is a bug in the test itself, so it traps.
func hexBytes(_ hex: String) -> [UInt8] {
    guard let decoded = Hex.decode(hex) else { preconditionFailure("malformed hex constant in a test: \(hex)") }
    return decoded
}

/// A copy of `bytes` with bit `bit` flipped (bit 0 is the least significant bit of byte 0).
func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
    return copy
}

/// Fixed keys shared by several test files. Every value was computed outside natter; see each comment.
enum Fixtures {
    /// RFC 8032 section 7.1, TEST 1: Ed25519 seed (secret key) and public key.
    static let rfc8032Test1Seed = hexBytes("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    static let rfc8032Test1PublicKey = hexBytes("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a")
    /// RFC 8032 section 7.1, TEST 2: Ed25519 seed and public key.
    static let rfc8032Test2Seed = hexBytes("4ccd089b28ff96da9db6c346ec114e0f5b8a319f35aba624da8cf6ed4fb8a6fb")
    static let rfc8032Test2PublicKey = hexBytes("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c")

    /// RFC 7748 section 6.1: Alice's and Bob's X25519 secrets and public keys, and their raw shared secret.
    static let rfc7748AliceSecret = hexBytes("77076d0a7318a57d3c16c17251b26645df4c2f87ebc0992ab177fba51db92c2a")
    static let rfc7748AlicePublic = hexBytes("8520f0098930a754748b7ddcb43ef75a0dbf3a0d26381af4eba4a98eaa9b4e6a")
    static let rfc7748BobSecret = hexBytes("5dab087e624a8a4b79e17f8b83800ee66f3bb1292618b6fd1c2f8b27ff88e0eb")
    static let rfc7748BobPublic = hexBytes("de9edb7d7b7dc1b4d35b61c2ece435373f8343c85b78674dadfc7e146f882b4f")
    static let rfc7748SharedSecret = hexBytes("4a5d9d5ba4ce2de1728e3bf480350f25e07e21c947d19e3376f09b3c1e161742")

    /// The bytes 0x00, 0x01, ..., 0x1f: the master key of the KDF vectors.
    static let counting32 = (0..<32).map { UInt8($0) }
}
