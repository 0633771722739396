/// A vector clock: author → highest contiguous sequence number. Entries are kept sorted by author with no zero
/// entries, so equal clocks have equal representations and iteration order is deterministic.
///
/// The same type is a conversation's sync frontier and a record's dependencies (its author's clock when it wrote).
public struct VectorClock: Hashable, Sendable, Sequence, CustomStringConvertible {
    /// One author's position.
    public struct Entry: Hashable, Sendable {
        public let author: AuthorID
        public let sequence: UInt64
        public init(author: AuthorID, sequence: UInt64) {
            self.author = author
            self.sequence = sequence
        }
    }

    /// How two clocks relate.
    public enum Ordering: Sendable, Equatable {
        case equal
        /// Every entry ≤ the other's, and at least one <: everything this clock saw, the other saw too.
        case before
        case after
        /// Each has seen something the other has not.
        case concurrent
    }

    /// Sorted by author, strictly ascending, every sequence ≥ 1.
    public private(set) var entries: [Entry]

    /// The empty clock.
    public init() { entries = [] }

    /// A clock from sorted, duplicate-free, non-zero entries; nil if they are not (the decoder reports which rule).
    public init?(sortedEntries: [Entry]) {
        for index in sortedEntries.indices {
            if sortedEntries[index].sequence == 0 { return nil }
            if index > 0 && !(sortedEntries[index - 1].author < sortedEntries[index].author) { return nil }
        }
        entries = sortedEntries
    }

    /// A clock from a dictionary (zero entries dropped).
    public init(_ positions: [AuthorID: UInt64]) {
        entries = positions.filter { $0.value > 0 }.map { Entry(author: $0.key, sequence: $0.value) }
            .sorted { $0.author < $1.author }
    }

    public var count: Int { entries.count }
    public var isEmpty: Bool { entries.isEmpty }
    public func makeIterator() -> IndexingIterator<[Entry]> { entries.makeIterator() }

    private func index(of author: AuthorID) -> (found: Bool, index: Int) {
        var low = 0
        var high = entries.count
        while low < high {
            let mid = (low + high) / 2
            if entries[mid].author < author {
                low = mid + 1
            } else {
                high = mid
            }
        }
        return (low < entries.count && entries[low].author == author, low)
    }

    /// The sequence for `author` (0 if absent). Setting 0 removes the entry.
    public subscript(author: AuthorID) -> UInt64 {
        get {
            let (found, index) = index(of: author)
            return found ? entries[index].sequence : 0
        }
        set {
            let (found, index) = index(of: author)
            switch (found, newValue) {
            case (true, 0): entries.remove(at: index)
            case (true, _): entries[index] = Entry(author: author, sequence: newValue)
            case (false, 0): break
            case (false, _): entries.insert(Entry(author: author, sequence: newValue), at: index)
            }
        }
    }

    /// Pointwise maximum: everything either clock has seen.
    public func merged(with other: VectorClock) -> VectorClock {
        var result = [Entry]()
        result.reserveCapacity(Swift.max(entries.count, other.entries.count))
        walk(other) { author, mine, theirs in
            result.append(Entry(author: author, sequence: Swift.max(mine, theirs)))
        }
        return VectorClock(trusted: result)
    }

    /// Whether this clock has seen at least everything `other` has (pointwise ≥).
    public func dominates(_ other: VectorClock) -> Bool {
        var dominates = true
        walk(other) { _, mine, theirs in
            if mine < theirs { dominates = false }
        }
        return dominates
    }

    /// How this clock relates to `other`.
    public func compare(_ other: VectorClock) -> Ordering {
        var less = false
        var greater = false
        walk(other) { _, mine, theirs in
            if mine < theirs { less = true }
            if mine > theirs { greater = true }
        }
        switch (less, greater) {
        case (false, false): return .equal
        case (true, false): return .before
        case (false, true): return .after
        case (true, true): return .concurrent
        }
    }

    /// What `other` has that this clock lacks, per author in author order: the sequence ranges to fetch.
    public func missing(comparedTo other: VectorClock) -> [FeedRange] {
        var ranges = [FeedRange]()
        walk(other) { author, mine, theirs in
            if theirs > mine { ranges.append(FeedRange(author: author, sequences: (mine + 1)...theirs)) }
        }
        return ranges
    }

    /// The largest sequence of any entry (0 when empty).
    public var maxSequence: UInt64 { entries.map(\.sequence).max() ?? 0 }

    public var description: String {
        "{" + entries.map { "\($0.author.shortHex):\($0.sequence)" }.joined(separator: ", ") + "}"
    }

    private init(trusted entries: [Entry]) { self.entries = entries }

    /// Merge-walks both sorted entry lists, calling `body(author, mine, theirs)` for every author in either.
    private func walk(_ other: VectorClock, _ body: (AuthorID, UInt64, UInt64) -> Void) {
        var i = 0
        var j = 0
        let a = entries
        let b = other.entries
        while i < a.count || j < b.count {
            if j == b.count || (i < a.count && a[i].author < b[j].author) {
                body(a[i].author, a[i].sequence, 0)
                i += 1
            } else if i == a.count || b[j].author < a[i].author {
                body(b[j].author, 0, b[j].sequence)
                j += 1
            } else {
                body(a[i].author, a[i].sequence, b[j].sequence)
                i += 1
                j += 1
            }
        }
    }
}

/// A run of one author's feed: the records `sequences` of `author`.
public struct FeedRange: Hashable, Sendable {
    public let author: AuthorID
    public let sequences: ClosedRange<UInt64>
    public init(author: AuthorID, sequences: ClosedRange<UInt64>) {
        self.author = author
        self.sequences = sequences
    }
}
