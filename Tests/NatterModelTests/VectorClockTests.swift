// Goal: vector clocks behave as the join semilattice sync relies on (merge, dominance, comparison, missing ranges)
// and always keep their canonical form: entries sorted by author, no duplicates, no zero sequences.
// Method: hand-picked unit cases, then properties over seeded random clocks drawn from a small author pool (so that
// equal, ordered and concurrent pairs all occur), checked against a dictionary model.
import NatterModel
import Testing

private let pool: [AuthorID] = (0..<8).map { AuthorID(raw: Fixtures.bytes32("clock author \($0)")) }.sorted()
private let a = pool[0]
private let b = pool[1]
private let c = pool[2]

extension SeededGenerator {
    /// A random clock over the pool: each author absent or at a small sequence (sometimes a huge one).
    mutating func clock() -> VectorClock {
        var positions = [AuthorID: UInt64]()
        for author in pool where chance(60) {
            positions[author] =
                chance(90) ? UInt64.random(in: 0...4, using: &self) : UInt64.random(in: 1...(1 << 62), using: &self)
        }
        return VectorClock(positions)
    }
}

/// The canonical-form invariant every clock must keep.
private func expectCanonical(_ clock: VectorClock, sourceLocation: SourceLocation = #_sourceLocation) {
    let entries = clock.entries
    #expect(entries.allSatisfy { $0.sequence > 0 }, "zero entry in \(clock)", sourceLocation: sourceLocation)
    #expect(
        zip(entries, entries.dropFirst()).allSatisfy { $0.author < $1.author }, "unsorted \(clock)",
        sourceLocation: sourceLocation)
    #expect(clock.count == entries.count && clock.isEmpty == entries.isEmpty, sourceLocation: sourceLocation)
}

private func dictionary(_ clock: VectorClock) -> [AuthorID: UInt64] {
    Dictionary(uniqueKeysWithValues: clock.map { ($0.author, $0.sequence) })
}

// MARK: - Unit cases

@Suite("Vector clock unit cases")
struct VectorClockUnitTests {
    @Test func emptyClock() {
        let empty = VectorClock()
        #expect(empty.isEmpty && empty.count == 0 && empty.maxSequence == 0)
        #expect(empty[a] == 0)
        #expect(empty.compare(empty) == .equal)
        #expect(empty.dominates(empty))
        #expect(empty.missing(comparedTo: empty).isEmpty)
    }

    @Test func subscriptKeepsEntriesSortedWithoutZeros() {
        var clock = VectorClock()
        clock[c] = 3
        clock[a] = 1
        clock[b] = 2
        #expect(clock.entries.map(\.author) == [a, b, c])
        #expect(clock[a] == 1 && clock[b] == 2 && clock[c] == 3)
        clock[b] = 7
        #expect(clock.entries.map(\.sequence) == [1, 7, 3])
        clock[b] = 0
        #expect(clock.entries.map(\.author) == [a, c] && clock[b] == 0)
        clock[pool[5]] = 0  // setting an absent author to 0 changes nothing
        #expect(clock.count == 2)
        #expect(clock.maxSequence == 3)
        expectCanonical(clock)
    }

    @Test func dictionaryInitDropsZerosAndSorts() {
        let clock = VectorClock([c: 1, a: 0, b: 5])
        #expect(clock.entries == [.init(author: b, sequence: 5), .init(author: c, sequence: 1)])
    }

    @Test func sortedEntriesInitAcceptsOnlyCanonicalInput() {
        #expect(VectorClock(sortedEntries: []) == VectorClock())
        let sorted = [VectorClock.Entry(author: a, sequence: 1), .init(author: b, sequence: 2)]
        #expect(VectorClock(sortedEntries: sorted)?.entries == sorted)
        #expect(VectorClock(sortedEntries: sorted.reversed()) == nil, "unsorted")
        #expect(
            VectorClock(sortedEntries: [.init(author: a, sequence: 1), .init(author: a, sequence: 2)]) == nil,
            "duplicate")
        #expect(VectorClock(sortedEntries: [.init(author: a, sequence: 0)]) == nil, "zero")
        #expect(
            VectorClock(sortedEntries: [.init(author: a, sequence: 1), .init(author: b, sequence: 0)]) == nil,
            "zero after a valid entry")
    }

    @Test func compareNamesAllFourRelations() {
        let x = VectorClock([a: 1, b: 2])
        #expect(x.compare(VectorClock([a: 1, b: 2])) == .equal)
        #expect(x.compare(VectorClock([a: 1, b: 3])) == .before)
        #expect(x.compare(VectorClock([a: 1, b: 2, c: 1])) == .before)
        #expect(x.compare(VectorClock([a: 1])) == .after)
        #expect(x.compare(VectorClock([a: 2, b: 1])) == .concurrent)
        #expect(x.compare(VectorClock([c: 1])) == .concurrent)
    }

    @Test func missingListsRangesInAuthorOrder() {
        let mine = VectorClock([a: 3, b: 5])
        let theirs = VectorClock([a: 1, b: 8, c: 2])
        #expect(
            mine.missing(comparedTo: theirs) == [
                FeedRange(author: b, sequences: 6...8), FeedRange(author: c, sequences: 1...2),
            ])
        #expect(theirs.missing(comparedTo: mine) == [FeedRange(author: a, sequences: 2...3)])
    }

    @Test func mergeTakesPointwiseMaximum() {
        let merged = VectorClock([a: 3, b: 1]).merged(with: VectorClock([b: 4, c: 2]))
        #expect(merged == VectorClock([a: 3, b: 4, c: 2]))
    }
}

// MARK: - Properties

@Suite("Vector clock properties")
struct VectorClockPropertyTests {
    static let iterations = 1_000

    @Test func mergeIsCommutativeAssociativeIdempotentAndDominatesBoth() {
        var rng = SeededGenerator(seed: 0xC10C_0001)
        for _ in 0..<Self.iterations {
            let (x, y, z) = (rng.clock(), rng.clock(), rng.clock())
            let xy = x.merged(with: y)
            #expect(xy == y.merged(with: x))
            #expect(xy.merged(with: z) == x.merged(with: y.merged(with: z)))
            #expect(x.merged(with: x) == x)
            #expect(xy.dominates(x) && xy.dominates(y))
            expectCanonical(xy)
            // It is the least upper bound: pointwise maximum, per the dictionary model.
            for author in pool {
                #expect(xy[author] == max(x[author], y[author]))
            }
            // Anything dominating both dominates the merge.
            if z.dominates(x) && z.dominates(y) { #expect(z.dominates(xy)) }
        }
    }

    @Test func compareIsConsistentWithDominates() {
        var rng = SeededGenerator(seed: 0xC10C_0002)
        var seen = [VectorClock.Ordering: Int]()
        for _ in 0..<Self.iterations {
            let x = rng.clock()
            let y = rng.chance(15) ? x : rng.clock()
            let ordering = x.compare(y)
            seen[ordering, default: 0] += 1
            switch ordering {
            case .equal: #expect(x == y && x.dominates(y) && y.dominates(x))
            case .before: #expect(x != y && y.dominates(x) && !x.dominates(y))
            case .after: #expect(x != y && x.dominates(y) && !y.dominates(x))
            case .concurrent: #expect(!x.dominates(y) && !y.dominates(x))
            }
            let reverse: VectorClock.Ordering =
                switch ordering {
                case .before: .after
                case .after: .before
                default: ordering
                }
            #expect(y.compare(x) == reverse)
            // Dominance is pointwise ≥ over every author of either clock.
            #expect(x.dominates(y) == pool.allSatisfy { x[$0] >= y[$0] })
        }
        #expect(seen.count == 4, "every relation occurs: \(seen)")
    }

    @Test func missingRangesAreExactlyWhatMakesTheClockDominate() {
        var rng = SeededGenerator(seed: 0xC10C_0003)
        for _ in 0..<Self.iterations {
            let mine = rng.clock()
            let theirs = rng.clock()
            let ranges = mine.missing(comparedTo: theirs)
            // Ranges: author order, one per author, each starting right after what this clock has.
            #expect(zip(ranges, ranges.dropFirst()).allSatisfy { $0.author < $1.author })
            var applied = mine
            for range in ranges {
                #expect(range.sequences.lowerBound == mine[range.author] + 1)
                #expect(range.sequences.upperBound == theirs[range.author])
                applied[range.author] = range.sequences.upperBound
            }
            #expect(applied.dominates(theirs))
            #expect(applied == mine.merged(with: theirs), "nothing more than needed is fetched")
            // Exactly the authors where the other clock is ahead.
            #expect(Set(ranges.map(\.author)) == Set(pool.filter { theirs[$0] > mine[$0] }))
            #expect(ranges.isEmpty == mine.dominates(theirs))
        }
    }

    @Test func subscriptMatchesADictionaryModel() {
        var rng = SeededGenerator(seed: 0xC10C_0004)
        var clock = VectorClock()
        var model = [AuthorID: UInt64]()
        for _ in 0..<(Self.iterations * 5) {
            let author = pool.randomElement(using: &rng)!
            let value: UInt64 = rng.chance(30) ? 0 : UInt64.random(in: 1...9, using: &rng)
            clock[author] = value
            model[author] = value == 0 ? nil : value
            expectCanonical(clock)
            #expect(dictionary(clock) == model)
            #expect(clock == VectorClock(model), "equal clocks have equal representations")
            #expect(clock.maxSequence == (model.values.max() ?? 0))
        }
    }

    @Test func sortedEntriesInitAcceptsExactlyCanonicalLists() {
        var rng = SeededGenerator(seed: 0xC10C_0005)
        for _ in 0..<Self.iterations {
            // Random lists of entries over a few authors, sometimes sorted, sometimes with zeros or repeats.
            let count = Int.random(in: 0...5, using: &rng)
            var entries = (0..<count).map { _ in
                VectorClock.Entry(
                    author: pool[Int.random(in: 0..<4, using: &rng)], sequence: UInt64.random(in: 0...3, using: &rng))
            }
            if rng.chance(50) { entries.sort { $0.author < $1.author } }
            let canonical =
                entries.allSatisfy { $0.sequence > 0 }
                && zip(entries, entries.dropFirst()).allSatisfy { $0.author < $1.author }
            let clock = VectorClock(sortedEntries: entries)
            #expect((clock != nil) == canonical, "\(entries)")
            if let clock { #expect(clock.entries == entries) }
        }
    }
}
