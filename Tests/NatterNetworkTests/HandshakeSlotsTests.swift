// Goal: the handshake table admits what it has room for, gives each address at most its share, and when full lets a
// new connection take the place of the stalest handshake — silent ones first — but never of one younger than the
// eviction age. Method: the pure `HandshakeSlots` with small numbers and explicit times.
import Testing

@testable import NatterNetwork

@Suite("Handshake slots")
struct HandshakeSlotsTests {
    typealias Slots = HandshakeSlots<Int>

    func seconds(_ value: Double) -> Duration { .milliseconds(Int64(value * 1000)) }

    @Test("an address holds at most its share; a full table of young handshakes refuses")
    func sharesAndFullTable() {
        var slots = Slots(capacity: 4, perAddressMax: 2, evictableAfter: .seconds(1))
        #expect(slots.admit(1, host: "a", now: .zero) == .admitted(evicting: nil))
        #expect(slots.admit(2, host: "a", now: .zero) == .admitted(evicting: nil))
        #expect(slots.admit(3, host: "a", now: .zero) == .addressFull)
        #expect(slots.admit(4, host: "b", now: .zero) == .admitted(evicting: nil))
        #expect(slots.admit(5, host: "c", now: .zero) == .admitted(evicting: nil))
        #expect(slots.isUnderLoad && slots.count == 4)
        #expect(slots.admit(6, host: "d", now: seconds(0.9)) == .tableFull, "none is a second old yet")
        slots.remove(1)
        #expect(slots.admit(7, host: "a", now: seconds(0.9)) == .admitted(evicting: nil), "a freed slot is taken")
    }

    @Test("when full, the oldest silent handshake is evicted before older ones that spoke")
    func evictsStalestSilentFirst() {
        var slots = Slots(capacity: 3, perAddressMax: 3, evictableAfter: .seconds(1))
        _ = slots.admit(1, host: "a", now: .zero)
        _ = slots.admit(2, host: "b", now: seconds(0.5))
        _ = slots.admit(3, host: "c", now: seconds(1))
        slots.spoke(1)
        #expect(
            slots.admit(4, host: "d", now: seconds(2)) == .admitted(evicting: (2, true, seconds(1.5))),
            "2 is the oldest silent one; 1 is older but spoke")
        #expect(!slots.contains(2) && slots.contains(4))
        slots.spoke(3)
        slots.spoke(4)
        #expect(
            slots.admit(5, host: "e", now: seconds(2.5)) == .admitted(evicting: (1, false, seconds(2.5))),
            "with none silent, the oldest stalled one goes")
        #expect(slots.count == 3)
    }

    @Test("load: half the table or more")
    func load() {
        var slots = Slots(capacity: 4, perAddressMax: 4, evictableAfter: .seconds(1))
        _ = slots.admit(1, host: "a", now: .zero)
        #expect(!slots.isUnderLoad)
        _ = slots.admit(2, host: "a", now: .zero)
        #expect(slots.isUnderLoad)
    }
}
