import NatterCrypto
import NatterModel

// Goal: give the link tests one harness that wires two machines together through plain byte buffers, so each test
// reads as its scenario and its check. Method: fixed keys from counting bytes, a driver that carries every `.send`
// to the other machine either as one buffer or one byte at a time, and a transcript of everything that crossed.
@testable import NatterSync

/// The bytes of a hex test constant. A malformed constant is a bug in the test itself, so it traps.
func hexBytes(_ hex: String) -> [UInt8] {
    guard let decoded = Hex.decode(hex) else { preconditionFailure("malformed hex constant in a test: \(hex)") }
    return decoded
}

/// The 32 bytes start, start + 1, …, start + 31 (Python's `bytes(range(start, start + 32))`).
func counting(from start: UInt8) -> [UInt8] { (0..<32).map { start &+ UInt8($0) } }

/// A copy of `bytes` with bit `bit` flipped (bit 0 is the least significant bit of byte 0).
func flippingBit(_ bit: Int, of bytes: [UInt8]) -> [UInt8] {
    var copy = bytes
    copy[bit / 8] ^= UInt8(1) << UInt8(bit % 8)
    return copy
}

/// Whether `haystack` contains any `window`-byte run of `needle`.
func containsAnyRun(of needle: [UInt8], in haystack: [UInt8], window: Int = 8) -> Bool {
    guard haystack.count >= window else { return false }
    let runs = Set((0...(needle.count - window)).map { Array(needle[$0..<($0 + window)]) })
    return (0...(haystack.count - window)).contains { runs.contains(Array(haystack[$0..<($0 + window)])) }
}

/// One node's fixed keys. The same values as scripts/noise_crosscheck.py.
struct TestNode {
    let identity: IdentityKeyPair
    let staticKey: NoiseKeyPair
    let ephemeralSecret: [UInt8]

    static let initiator = TestNode(identitySeed: 0x20, staticSecret: 0x60, ephemeralSecret: 0xa0)
    static let responder = TestNode(identitySeed: 0x40, staticSecret: 0x80, ephemeralSecret: 0xc0)
    /// A third node, for impersonation attempts.
    static let mallory = TestNode(identitySeed: 0xe0, staticSecret: 0x10, ephemeralSecret: 0x30)

    init(identitySeed: UInt8, staticSecret: UInt8, ephemeralSecret: UInt8) {
        identity = try! IdentityKeyPair(seed: counting(from: identitySeed))
        staticKey = try! NoiseKeyPair(secret: counting(from: staticSecret))
        self.ephemeralSecret = counting(from: ephemeralSecret)
    }

    func configuration(
        network: NetworkKey = .testNetwork, versions: [UInt16] = LinkHandshake.supportedVersions,
        rekeyIntervalFrames: UInt64 = Limits.rekeyIntervalFrames
    ) -> LinkConfiguration {
        LinkConfiguration(
            identity: identity, staticKey: staticKey, networkKey: network, versions: versions,
            rekeyIntervalFrames: rekeyIntervalFrames)
    }

    /// A machine with this node's fixed ephemeral key, or one drawn from `seed` (a different handshake).
    func machine(
        _ role: LinkHandshake.Role, network: NetworkKey = .testNetwork, versions: [UInt16] = [1],
        rekeyIntervalFrames: UInt64 = Limits.rekeyIntervalFrames, ephemeralSeed: UInt64? = nil
    ) -> LinkHandshake {
        let ephemeral: NoiseKeyPair
        if let ephemeralSeed {
            var generator = SeededGenerator(seed: ephemeralSeed)
            ephemeral = NoiseKeyPair.generate(using: &generator)
        } else {
            ephemeral = try! NoiseKeyPair(secret: ephemeralSecret)
        }
        return LinkHandshake(
            role: role,
            configuration: configuration(
                network: network, versions: versions, rekeyIntervalFrames: rekeyIntervalFrames),
            ephemeralKey: ephemeral)
    }
}

extension NetworkKey {
    /// The network key 00 01 … 1f (the cross-check script's).
    static let testNetwork = NetworkKey(key: try! SymmetricKey(bytes: counting(from: 0x00)))
    /// Another network.
    static let otherNetwork = NetworkKey(key: try! SymmetricKey(bytes: counting(from: 0x01)))
}

/// How bytes travel from one machine to the other.
enum Feeding: CaseIterable, Sendable {
    /// Each `.send` arrives as one buffer.
    case whole
    /// Each `.send` arrives one byte at a time.
    case dripFeed
}

/// Delivers `bytes` to `deliver` as one buffer or byte by byte, collecting what comes back.
func feed<Output>(_ bytes: [UInt8], _ feeding: Feeding, _ deliver: ([UInt8]) -> [Output]) -> [Output] {
    switch feeding {
    case .whole: return deliver(bytes)
    case .dripFeed: return bytes.flatMap { deliver([$0]) }
    }
}

/// What one side of a handshake ended with.
struct SideOutcome {
    var established: LinkEstablished?
    var error: LinkError?
    var sent: [[UInt8]] = []
}

/// Everything a handshake run produced.
struct HandshakeRun {
    var initiator = SideOutcome()
    var responder = SideOutcome()
    /// Every handshake message in the order it crossed, as it was sent (before any tampering).
    var transcript: [[UInt8]] = []
}

/// Runs a handshake between two machines, carrying each `.send` to the other side through `tamper` (which gets the
/// message number, 1-based, and the bytes).
func runHandshake(
    initiator: LinkHandshake, responder: LinkHandshake, feeding: Feeding = .whole,
    tamper: (Int, [UInt8]) -> [UInt8] = { $1 }
) -> HandshakeRun {
    var initiator = initiator
    var responder = responder
    var run = HandshakeRun()
    var initiatorActions = initiator.start()
    var responderActions = responder.start()
    for _ in 0..<8 {  // three messages take four rounds; the bound only stops a runaway loop
        if initiatorActions.isEmpty && responderActions.isEmpty { break }
        var nextResponderActions: [LinkHandshake.Action] = []
        for action in initiatorActions {
            switch action {
            case .send(let bytes):
                run.initiator.sent.append(bytes)
                run.transcript.append(bytes)
                nextResponderActions += feed(tamper(run.transcript.count, bytes), feeding) { responder.receive($0) }
            case .established(let link): run.initiator.established = link
            case .fail(let error): run.initiator.error = error
            }
        }
        var nextInitiatorActions: [LinkHandshake.Action] = []
        for action in responderActions {
            switch action {
            case .send(let bytes):
                run.responder.sent.append(bytes)
                run.transcript.append(bytes)
                nextInitiatorActions += feed(tamper(run.transcript.count, bytes), feeding) { initiator.receive($0) }
            case .established(let link): run.responder.established = link
            case .fail(let error): run.responder.error = error
            }
        }
        initiatorActions = nextInitiatorActions
        responderActions = nextResponderActions
    }
    return run
}

/// The two channels of a successful handshake between the fixed test nodes.
func establishedChannels(rekeyIntervalFrames: UInt64 = Limits.rekeyIntervalFrames)
    -> (initiator: SecureChannel, responder: SecureChannel)
{
    let run = runHandshake(
        initiator: TestNode.initiator.machine(.initiator, rekeyIntervalFrames: rekeyIntervalFrames),
        responder: TestNode.responder.machine(.responder, rekeyIntervalFrames: rekeyIntervalFrames))
    guard let initiator = run.initiator.established, let responder = run.responder.established else {
        preconditionFailure(
            "the reference handshake failed: \(String(describing: run.initiator.error ?? run.responder.error))")
    }
    return (initiator.channel, responder.channel)
}

/// The events of delivering `bytes` to `channel`, whole or byte by byte.
func deliver(_ bytes: [UInt8], to channel: inout SecureChannel, _ feeding: Feeding = .whole) -> [SecureChannel.Event] {
    feed(bytes, feeding) { channel.receive($0) }
}

/// A message of `count` bytes that is easy to tell apart from others.
func patterned(_ count: Int, salt: Int = 0) -> [UInt8] {
    (0..<count).map { UInt8(truncatingIfNeeded: ($0 + salt) % 251) }
}
