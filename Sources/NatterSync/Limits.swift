/// Every bound of the sync layer, each with its reason. Decoders check these before buffering or allocating.
public enum Limits {
    /// Largest Noise message: 65535 bytes, ciphertext and tag included. The Noise specification fixes it, and it
    /// is what a transport frame's u16 length prefix can express.
    public static let noiseMessageBytesMax = 65_535

    /// Largest plaintext in one transport frame: 65535 - 16 = 65519 bytes (one Noise message less its tag).
    public static let transportPlaintextBytesMax = noiseMessageBytesMax - 16

    /// Largest handshake message: 1024 bytes. Version 1's messages are at most 194 bytes; the slack lets a later
    /// version add fields to message 1 (which version 1 ignores) while a peer without the network key still cannot
    /// make a node buffer more than a kilobyte before it is refused.
    public static let handshakeMessageBytesMax = 1024

    /// Most protocol versions one node offers in handshake message 1: 16. A node supports a handful of adjacent
    /// versions during an upgrade; the bound keeps the list, and message 1, small.
    public static let versionsOfferedMax = 16

    /// Largest application message on a secure channel: 1 MiB. A sync batch holds many 64 KiB records, and the
    /// receiver buffers a whole message before handing it on, so the cap bounds that buffer; it is checked against
    /// the announced length before anything is allocated.
    public static let applicationMessageBytesMax = 1 << 20

    /// Transport frames per direction between rekeys: 2^16. Rekeying is one-way, so whoever steals a link's
    /// current keys (from a memory dump, say) reads nothing older than the last rekey. Both ends rekey after the same
    /// count of frames (the count is the implicit Noise nonce), so no signal is needed; at full 64 KiB frames that
    /// is one rekey per 4 GiB, and even at tiny frames a negligible cost.
    public static let rekeyIntervalFrames: UInt64 = 1 << 16
}
