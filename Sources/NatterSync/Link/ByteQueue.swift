/// A FIFO of bytes for decoders fed in arbitrary chunks: append at the back, read and consume at the front.
///
/// Consuming moves an index instead of shifting the array, and the consumed prefix is dropped only once it is
/// at least half the storage, so feeding bytes one at a time stays linear overall.
struct ByteQueue: Sendable {
    private var storage: [UInt8] = []
    private var start = 0

    /// Bytes waiting to be read.
    var count: Int { storage.count - start }
    var isEmpty: Bool { count == 0 }

    mutating func append(_ bytes: some Sequence<UInt8>) {
        storage.append(contentsOf: bytes)
    }

    /// The byte `offset` places from the front.
    subscript(offset: Int) -> UInt8 {
        precondition(offset >= 0 && offset < count, "ByteQueue read past its end")
        return storage[start + offset]
    }

    /// The big-endian integer in the `width` bytes from `offset`.
    func bigEndian(at offset: Int, width: Int) -> UInt64 {
        precondition(width <= 8 && offset + width <= count, "ByteQueue read past its end")
        var value: UInt64 = 0
        for index in 0..<width { value = value << 8 | UInt64(storage[start + offset + index]) }
        return value
    }

    /// Removes and returns the first `length` bytes.
    mutating func take(_ length: Int) -> [UInt8] {
        precondition(length >= 0 && length <= count, "ByteQueue take past its end")
        let taken = Array(storage[start..<(start + length)])
        skip(length)
        return taken
    }

    /// Drops the first `length` bytes.
    mutating func skip(_ length: Int) {
        precondition(length >= 0 && length <= count, "ByteQueue skip past its end")
        start += length
        if start == storage.count {
            storage.removeAll(keepingCapacity: true)
            start = 0
        } else if start >= 4096, start * 2 >= storage.count {
            storage.removeSubrange(0..<start)
            start = 0
        }
    }

    /// Removes and returns everything.
    mutating func takeAll() -> [UInt8] { take(count) }
}
