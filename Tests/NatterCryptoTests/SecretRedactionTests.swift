// Goal: show that no secret-holding type ever renders its secret as text, so logs and test failure messages cannot
// leak keys. Method: build each type from known secret bytes, render it every way Swift renders values (description,
// interpolation, debugDescription / String(reflecting:), dump), and search the text for the secret in hex (both cases,
// in 8-byte windows) and as a decimal byte list.
import NatterCrypto
import Testing

@Suite("Secrets are never printed")
struct SecretRedactionTests {
    /// Every way a value commonly becomes text.
    private func renderings(_ value: Any) -> [String] {
        var dumped = ""
        dump(value, to: &dumped)
        return [String(describing: value), "\(value)", String(reflecting: value), dumped]
    }

    /// The places where `secret` shows in `text`: any 8 consecutive bytes of it in hex (either case), or as 8
    /// consecutive decimal numbers however they are separated (`[1, 2, ...]` and dump's one `- 1` per line alike).
    /// Windows of 8 bytes keep chance matches against pointer addresses in `dump` output negligible.
    private func leaks(of secret: [UInt8], in text: String) -> [String] {
        let lower = text.lowercased()
        let numbers = text.split { !$0.isASCII || !$0.isNumber }.map { Int($0) ?? -1 }
        var found: [String] = []
        for start in 0...(secret.count - 8) {
            let window = secret[start..<(start + 8)]
            if lower.contains(Hex.encode(window)) { found.append(Hex.encode(window)) }
            let decimals = window.map(Int.init)
            if numbers.count >= 8,
                (0...(numbers.count - 8)).contains(where: { Array(numbers[$0..<($0 + 8)]) == decimals })
            {
                found.append(decimals.map(String.init).joined(separator: " "))
            }
        }
        return found
    }

    private func expectNoLeak(of secret: [UInt8], from value: Any, sourceLocation: SourceLocation = #_sourceLocation) {
        for text in renderings(value) {
            let found = leaks(of: secret, in: text)
            #expect(
                found.isEmpty, "secret shown (\(found.count) windows, first \(found.first ?? "")) in: \(text)",
                sourceLocation: sourceLocation)
        }
    }

    @Test("SecretBytes")
    func secretBytes() {
        let secret = Fixtures.counting32.map { $0 &* 7 &+ 0x91 }
        let bytes = SecretBytes(secret)
        #expect(bytes.description == "<secret 32 bytes>")
        #expect(bytes.debugDescription == "<secret 32 bytes>")
        expectNoLeak(of: secret, from: bytes)
        expectNoLeak(of: secret, from: [bytes])
        expectNoLeak(of: secret, from: Optional(bytes) as Any)
    }

    @Test("SymmetricKey, including derived subkeys")
    func symmetricKey() throws {
        let key = try SymmetricKey(bytes: Fixtures.counting32)
        #expect(key.description == "<symmetric key>")
        expectNoLeak(of: Fixtures.counting32, from: key)
        expectNoLeak(of: Fixtures.counting32, from: key.secret)
        let subkey = key.derive(purpose: "natrhand")
        expectNoLeak(of: subkey.secret.exposedCopy(), from: subkey)
    }

    @Test("IdentityKeyPair: neither the seed nor the 64-byte signing key")
    func identityKeyPair() throws {
        let identity = try IdentityKeyPair(seed: Fixtures.rfc8032Test1Seed)
        #expect(identity.description == "IdentityKeyPair(7849-ac30-4968-0be1-ef76, secret redacted)")
        expectNoLeak(of: Fixtures.rfc8032Test1Seed, from: identity)
        expectNoLeak(of: Fixtures.rfc8032Test1Seed, from: identity.seed)
        #expect(identity.seed.debugDescription == "<secret 32 bytes>")
    }

    @Test("EncryptionKeyPair")
    func encryptionKeyPair() throws {
        let keyPair = try EncryptionKeyPair(secret: Fixtures.rfc7748AliceSecret)
        #expect(keyPair.description == "EncryptionKeyPair(secret redacted)")
        expectNoLeak(of: Fixtures.rfc7748AliceSecret, from: keyPair)
        expectNoLeak(of: Fixtures.rfc7748AliceSecret, from: keyPair.secret)
        let agreed = try keyPair.agreement(with: EncryptionPublicKey(bytes: Fixtures.rfc7748BobPublic))
        expectNoLeak(of: agreed.exposedCopy(), from: agreed)
    }

    @Test("NetworkKey, its subkeys and the default key")
    func networkKey() throws {
        let network = NetworkKey(key: try SymmetricKey(bytes: Fixtures.counting32))
        #expect(network.description == "<network key>")
        expectNoLeak(of: Fixtures.counting32, from: network)
        expectNoLeak(of: network.handshakeKey.secret.exposedCopy(), from: network.handshakeKey)
        expectNoLeak(of: network.beaconKey.secret.exposedCopy(), from: network.beaconKey)
        let defaultKey = NetworkKey.defaultNetwork
        expectNoLeak(of: defaultKey.key.secret.exposedCopy(), from: defaultKey)
    }

    @Test("the leak detector itself finds hex, decimal lists and dump output")
    func detectorWorks() {
        let secret = Fixtures.counting32.map { $0 &+ 0x60 }
        #expect(!leaks(of: secret, in: Hex.encode(secret.dropFirst(3).prefix(9)).uppercased()).isEmpty)
        #expect(!leaks(of: secret, in: String(describing: secret)).isEmpty)
        var dumped = ""
        dump(secret, to: &dumped)
        #expect(!leaks(of: secret, in: dumped).isEmpty)
        #expect(leaks(of: secret, in: Hex.encode(secret.prefix(7))).isEmpty)
    }

    @Test("CryptoError messages carry no key material")
    func errors() throws {
        let error = CryptoError.invalidLength(what: "symmetric key", expected: 32, actual: 31)
        #expect(error.description == "symmetric key must be 32 bytes, got 31")
        #expect(throws: CryptoError.invalidLength(what: "symmetric key", expected: 32, actual: 31)) {
            try SymmetricKey(bytes: Array(Fixtures.counting32.dropLast()))
        }
    }
}
