/// A time-ordered queue of simulation events: a binary min-heap on (time, insertion number), so events at the same
/// instant run in the order they were scheduled and a run replays exactly.
struct EventQueue<Event> {
    private struct Entry {
        let time: Duration
        let order: UInt64
        let event: Event

        func precedes(_ other: Entry) -> Bool {
            time < other.time || (time == other.time && order < other.order)
        }
    }

    private var heap: [Entry] = []
    private var scheduled: UInt64 = 0

    var count: Int { heap.count }
    var isEmpty: Bool { heap.isEmpty }
    /// The time of the next event.
    var nextTime: Duration? { heap.first?.time }

    mutating func push(_ event: Event, at time: Duration) {
        heap.append(Entry(time: time, order: scheduled, event: event))
        scheduled += 1
        var child = heap.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard heap[child].precedes(heap[parent]) else { break }
            heap.swapAt(child, parent)
            child = parent
        }
    }

    mutating func pop() -> (time: Duration, event: Event)? {
        guard !heap.isEmpty else { return nil }
        let first = heap[0]
        let last = heap.removeLast()
        if !heap.isEmpty {
            heap[0] = last
            var parent = 0
            while true {
                let left = 2 * parent + 1
                let right = left + 1
                var smallest = parent
                if left < heap.count, heap[left].precedes(heap[smallest]) { smallest = left }
                if right < heap.count, heap[right].precedes(heap[smallest]) { smallest = right }
                if smallest == parent { break }
                heap.swapAt(parent, smallest)
                parent = smallest
            }
        }
        return (first.time, first.event)
    }
}
