import NatterCrypto
import Testing

// Goal: show that natter's link handshake and secure channel are byte-for-byte the protocol another Noise
// implementation computes, so the HKDF (HMAC-SHA512 keyed with 64 bytes), the PSK and ephemeral mixing, Split, Rekey,
// the payloads and the framing are all as documented. Method: the vectors below were produced by
// `python3 scripts/noise_crosscheck.py` (PyPI noiseprotocol 0.3.1 over `cryptography` 48, Python 3.11), which runs
// both peers with the fixed keys of `TestNode` and the network key 00…1f; our two machines, given the same keys,
// must produce exactly the same bytes.
@testable import NatterSync

@Suite("Cross-check against noiseprotocol 0.3.1")
struct CrossCheckTests {
    // Output of scripts/noise_crosscheck.py, verbatim.
    static let psk = "6daec8d481c553d437379e9f39ac10130478b7098e9bbfc7e63127929767ff85"
    static let handshake1 =
        "0033605a725d2a4adfeeb1a29e17edd621c1b7593ee8cdbc44ac6c4ab6e2f805d23c6ea0f1cb0a86e4f932bf2e2549b3186a1c31d1"
    static let handshake2 =
        "00c2dc2cca31e8e43bbd91dff7e475cca3347eb478107d5bd765aba4ae4a30c35d443a7c4b977ed1b1ad6c156a5a2525e6bc24ed481f"
        + "4a99f584e499f8825a4dfa72aa0053f74886fa5dc3357611d9562f7e91851dc2abac10bb51ad6b2ad28607b7b48001acf5efe325c9"
        + "0da481f88ca7c14930e0bc795785e55b385f18ff1e22684b8c772d257bdc6d273732734d292ea38c3a4aab56f5baa04e0e93b8d099"
        + "c7676d21f9b758d60df266f73a38dbcb67990e06c245f7fa83407635b086d73fb7e9b9bb"
    static let handshake3 =
        "00a07b87740910d14612f6485189826023899bfb2cdff6525a781361c2938beaa97243c0bac2132a5b91aebb88cc14d1aeacd9242cdb"
        + "78741c70b58ccde9e3e8a11248e45bbaab069d180ab70346ca39f32de7d3873516c01b63f55edc35897ff24360a748733b40cd33e5"
        + "030b9eefb2a6d8028af3c4521490a533608f40c8f7cd85f16f5f667265abc66e7c5ba4453626d21e10c87770876c95d8257b6b5d11"
        + "6a07"
    static let handshakeHash =
        "a71257bcc86f7991918f9929d8a0f88ed827230c09b5701c5bc008f35ad0a14059846aee1ea87eaf550355ca2b2b92b75c187d45b4f1"
        + "f40c32c4c6fbd365a5e6"
    static let initiatorHello =
        "002d569bd629a14732959120cf6c4eca77e986512b11cbed5d9dfadd9f3d6ad4f7e8e190fcd4bdbda617c7b1313ffb"
    static let responderHello =
        "002dfd7cf8e0cda225cc1d5d8a43eb412bfa254db259729ee323fb4f4f4061bcd7f2d9bab9c8e546cba8cd39b5ae3a"
    static let initiatorBigLength = 70041
    static let initiatorBigSHA512 =
        "3ffaab862e0e1bd31ba1c8ef7ca1b95a3c9257264401be2bcd370ce52e20ebcd441b12b4260d27c257ab7d7eb0cd00b6d6f99353f6b0"
        + "f736ed9a967c2f042ec7"
    static let responderLast = "001f78ee0b1fc362f6a3a968ff9a28dc6f6a816d3c5aead6924f18db44b0671a86"
    static let responderGoodbye = "0015059254323933019d6fb1df78b58666b24214132882"
    static let initiatorGoodbye = "0015b62b5c8899bbe1e4e067000c917c46695fb9887f89"

    /// The script's REKEY_INTERVAL_FRAMES: small, so its transport vectors cross rekeys in both directions.
    static let rekeyIntervalFrames: UInt64 = 2

    @Test("the PSK is the network key's handshake subkey, as the script derives it with hashlib.blake2b")
    func psk() {
        // crypto_kdf_derive_from_key(32, 0, "natrhand", 00…1f), recomputed in the script as keyed BLAKE2b with
        // salt = id || 0^8 and personal = context || 0^8.
        #expect(Hex.encode(NetworkKey.testNetwork.handshakeKey.secret.exposedCopy()) == Self.psk)
    }

    @Test("handshake and transport bytes equal noiseprotocol's, in both roles")
    func sameBytes() throws {
        var initiator = TestNode.initiator.machine(.initiator, rekeyIntervalFrames: Self.rekeyIntervalFrames)
        var responder = TestNode.responder.machine(.responder, rekeyIntervalFrames: Self.rekeyIntervalFrames)

        let message1 = try #require(sent(initiator.start()).first)
        #expect(Hex.encode(message1) == Self.handshake1)
        #expect(responder.start().isEmpty)
        let message2 = try #require(sent(responder.receive(message1)).first)
        #expect(Hex.encode(message2) == Self.handshake2)
        let afterMessage2 = initiator.receive(message2)
        let message3 = try #require(sent(afterMessage2).first)
        #expect(Hex.encode(message3) == Self.handshake3)
        var initiatorLink = try #require(established(afterMessage2))
        var responderLink = try #require(established(responder.receive(message3)))
        #expect(Hex.encode(initiatorLink.handshakeHash) == Self.handshakeHash)
        #expect(Hex.encode(responderLink.handshakeHash) == Self.handshakeHash)

        func exchange(_ sender: inout SecureChannel, _ receiver: inout SecureChannel, _ message: [UInt8]) throws
            -> [UInt8]
        {
            let wire = try sender.send(message)
            #expect(receiver.receive(wire) == [.message(message)])
            return wire
        }
        let hello = Array("hello from the initiator".utf8)
        #expect(Hex.encode(try exchange(&initiatorLink.channel, &responderLink.channel, hello)) == Self.initiatorHello)
        let reply = Array("hello from the responder".utf8)
        #expect(Hex.encode(try exchange(&responderLink.channel, &initiatorLink.channel, reply)) == Self.responderHello)
        let big = (0..<70_000).map { UInt8($0 % 251) }
        let bigWire = try exchange(&initiatorLink.channel, &responderLink.channel, big)
        #expect(bigWire.count == Self.initiatorBigLength)
        #expect(Hex.encode(SHA512.hash(bigWire)) == Self.initiatorBigSHA512)
        let last = Array("last words".utf8)
        #expect(Hex.encode(try exchange(&responderLink.channel, &initiatorLink.channel, last)) == Self.responderLast)

        let responderGoodbye = try responderLink.channel.sendGoodbye()
        #expect(Hex.encode(responderGoodbye) == Self.responderGoodbye)
        #expect(initiatorLink.channel.receive(responderGoodbye) == [.goodbye])
        let initiatorGoodbye = try initiatorLink.channel.sendGoodbye()
        #expect(Hex.encode(initiatorGoodbye) == Self.initiatorGoodbye)
        #expect(responderLink.channel.receive(initiatorGoodbye) == [.goodbye])
    }
}
