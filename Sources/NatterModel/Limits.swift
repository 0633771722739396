/// Every bound of the record model, each with its reason. Decoders check these before allocating anything.
public enum Limits {
    /// Largest encoded record: 64 KiB. A 10,000-character message in any script (at most 40,000 UTF-8 bytes by the
    /// text rules) plus envelope, dependencies and AEAD overhead fits; file contents never travel in records.
    public static let recordBytesMax = 64 * 1024

    /// Most entries in a record's dependency vector. A record carries its author's vector clock of the
    /// conversation, one entry per author who ever wrote there; 512 entries (20 KiB) leaves room for a full group
    /// of `groupMembersMax` plus as many former members within the record cap.
    public static let dependenciesMax = 512

    /// Largest group (members at once). Every opening commit seals the epoch key to each member (a 56-byte slot and
    /// an 8-byte roster tag), so 256 members take 16 KiB of a commit: the largest commit possible (255 parents, 255
    /// members named, 512 dependencies) is 62,069 bytes, inside `recordBytesMax` (KeySlotTests).
    public static let groupMembersMax = 256

    /// Largest sequence number: 2^62. Far beyond any real feed, and it keeps every counter inside SQLite's signed
    /// 64-bit integers with room for arithmetic, so no sum or `+1` can overflow.
    public static let sequenceMax: UInt64 = 1 << 62

    /// Largest Lamport number: 2^62, for the same reason. Because a record's Lamport number must be exactly one
    /// more than its largest dependency's, reaching it would take 2^62 records.
    public static let lamportMax: UInt64 = 1 << 62

    /// Latest creation time accepted: 9999-12-31T23:59:59.999Z in milliseconds. Creation times are shown, never
    /// used for order; the bound only keeps them printable.
    public static let createdAtMillisMax: Int64 = 253_402_300_799_999
}
