// Goal: catch a broken or constant random source, not certify its quality. Method: draws that would collide or leave
// a value unseen only with negligible probability (below 2^-100), so the tests are deterministic in practice.
import NatterCrypto
import Testing

@Suite("SecureRandom sanity")
struct RandomnessTests {
    @Test("bytes has the requested length and two 32-byte draws differ")
    func bytes() {
        #expect(SecureRandom.bytes(0).isEmpty)
        #expect(SecureRandom.bytes(1).count == 1)
        #expect(SecureRandom.bytes(1000).count == 1000)
        #expect(SecureRandom.bytes(32) != SecureRandom.bytes(32))
        #expect(SecureRandom.bytes(32) != [UInt8](repeating: 0, count: 32))
    }

    @Test("uint64 draws differ")
    func uint64() {
        let draws = (0..<16).map { _ in SecureRandom.uint64() }
        #expect(Set(draws).count == draws.count)
    }

    @Test("uniform stays below its bound and reaches every value", arguments: [1, 2, 10, 97] as [UInt32])
    func uniform(upperBound: UInt32) {
        // 8000 draws miss one of at most 97 values with probability below 97 * (96/97)^8000 < 2^-110.
        let draws = (0..<8000).map { _ in SecureRandom.uniform(upperBound) }
        #expect(draws.allSatisfy { $0 < upperBound })
        #expect(Set(draws).count == Int(upperBound))
    }

    @Test("uniform with a huge bound stays in range")
    func uniformHuge() {
        let bound = UInt32.max - 1
        #expect((0..<1000).allSatisfy { _ in SecureRandom.uniform(bound) < bound })
    }

    @Test("the RandomNumberGenerator adapter feeds standard library APIs")
    func generator() {
        var generator = SecureRandomGenerator()
        let values = (0..<1000).map { _ in Int.random(in: 3..<9, using: &generator) }
        #expect(values.allSatisfy { (3..<9).contains($0) })
        #expect(Set(values).count == 6)
        #expect(generator.next() != generator.next())
    }

    @Test("generated keys and nonces are fresh each time")
    func freshKeys() {
        #expect(IdentityKeyPair.generate().publicKey != IdentityKeyPair.generate().publicKey)
        #expect(EncryptionKeyPair.generate().publicKey != EncryptionKeyPair.generate().publicKey)
        #expect(!SymmetricKey.generate().secret.constantTimeEquals(SymmetricKey.generate().secret))
        #expect(!NetworkKey.generate().key.secret.constantTimeEquals(NetworkKey.generate().key.secret))
        #expect(AEADNonce.random() != AEADNonce.random())
    }
}
