import NatterCrypto
import NatterModel
import NatterSync
import Testing

// Goal: show the tree-parent rule of docs/protocol.md §3.3 step 6: the parent is the link that delivered the
// feed's highest new record (a lower record from another link does not move it), and a lost link gives back
// exactly the feeds it was the parent of. Method: `FeedParents` driven by hand.
@testable import NatterNode

@Suite("Feed tree parents")
struct FeedParentsTests {
    static func feed(_ number: UInt8) -> FeedKey {
        FeedKey(
            conversation: ConversationID(bytes: [UInt8](repeating: 1, count: 32)),
            author: AuthorID(bytes: [UInt8](repeating: number, count: 32)))
    }

    @Test("the highest record's link is the parent; a lower one elsewhere does not move it")
    func highestWins() {
        var parents = FeedParents()
        let (a, b) = (LinkID(1), LinkID(2))
        #expect(parents.parent(of: Self.feed(1)) == nil)
        parents.delivered(Self.feed(1), at: 7, by: a)
        parents.delivered(Self.feed(1), at: 6, by: b)
        #expect(parents.parent(of: Self.feed(1)) == a)
        parents.delivered(Self.feed(1), at: 8, by: b)
        #expect(parents.parent(of: Self.feed(1)) == b)
        #expect(parents.parentLinks == [b])
        #expect(parents.count(of: b) == 1 && parents.count(of: a) == 0)
    }

    @Test("a lost link returns the feeds it was the parent of; forgetting one feed leaves the others")
    func lostLink() {
        var parents = FeedParents()
        let (a, b) = (LinkID(1), LinkID(2))
        parents.delivered(Self.feed(1), at: 1, by: a)
        parents.delivered(Self.feed(2), at: 1, by: a)
        parents.delivered(Self.feed(3), at: 1, by: b)
        parents.forget(Self.feed(2))
        #expect(parents.remove(a) == [Self.feed(1)])
        #expect(parents.parent(of: Self.feed(1)) == nil && parents.parent(of: Self.feed(3)) == b)
        #expect(parents.parentLinks == [b] && parents.count == 1)
    }
}
