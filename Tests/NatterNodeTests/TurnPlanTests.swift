// Goal: the driver's turn rules that `Node` and the lab share (`TurnPlan.steps`, `RefreshPacing`): a turn's events come
// first, then one durability sync, then its sends and closes in the core's order (a batch of turns: every event at
// once, one sync for all at its release); a chat turn refreshes the tables at once, a bulk turn (over 64 KiB) at most
// every 250 ms unless a priority delivery stored records, the tick catches up, and the user's own writes always
// refresh. Method: the pure rules, time passed in.
import Testing

@testable import NatterNode

@Suite("Turn plan and refresh pacing")
struct TurnPlanTests {
    /// A step as a letter and its link (`e`vent, `d`urability sync, `s`end, `c`lose).
    func letters(_ steps: [TurnPlan.Step]) -> [String] {
        steps.map { step in
            switch step {
            case .event: "e"
            case .makeDurable: "d"
            case .send(let link, _): "s\(link.raw)"
            case .close(let link): "c\(link.raw)"
            }
        }
    }

    @Test("events first, then one durability sync, then sends and closes in the core's order")
    func stepOrder() {
        let actions: [NodeAction] = [
            .send(LinkID(1), [1]), .event(.notice("a")), .close(LinkID(2)), .send(LinkID(3), [3]), .event(.notice("b")),
        ]
        #expect(letters(TurnPlan.steps(actions)) == ["e", "e", "d", "s1", "c2", "s3"])
        #expect(letters(TurnPlan.steps([])) == ["d"], "every turn ends with its commits durable")
    }

    @Test("a batch shows each turn's events at once and holds its sends and closes for one sync at its release")
    func batchSharesTheSync() {
        var batch = TurnPlan.Batch()
        #expect(letters(batch.add([.event(.notice("a")), .send(LinkID(1), [1]), .close(LinkID(2))])) == ["e"])
        #expect(letters(batch.add([.send(LinkID(3), [3]), .event(.notice("b"))])) == ["e"])
        #expect(letters(batch.add([])) == [])
        #expect(letters(batch.release()) == ["d", "s1", "c2", "s3"], "one sync, then every held step in order")
        #expect(letters(batch.release()) == ["d"], "a release empties the batch")
    }

    @Test("a batch is full once its turns received more than a chat turn's bytes")
    func batchFillsWithBulk() {
        var batch = TurnPlan.Batch()
        batch.received(RefreshPacing.bulkTurnBytes)
        #expect(!batch.isFull)
        batch.received(1)
        #expect(batch.isFull)
        _ = batch.release()
        #expect(!batch.isFull, "a release starts counting again")
    }

    @Test("a chat turn in the viewed conversation refreshes at once; anything else waits 250 ms, or for its priority")
    func pacing() {
        var pacing = RefreshPacing()
        let bulk = RefreshPacing.Turn.received(bytes: RefreshPacing.bulkTurnBytes + 1)
        let chat = RefreshPacing.Turn.received(bytes: RefreshPacing.bulkTurnBytes)
        let viewed = RefreshPacing.Stored(viewed: true)
        let priority = RefreshPacing.Stored(viewedPriority: true)
        #expect(priority.viewed, "a priority delivery of the viewed conversation is of the viewed conversation")
        #expect(pacing.refreshesNow(after: bulk, stored: .background, now: .seconds(1)), "never refreshed yet")
        pacing.refreshed(at: .seconds(1))
        #expect(pacing.refreshesNow(after: chat, stored: viewed, now: .seconds(1)))
        #expect(pacing.refreshesNow(after: .local, stored: .background, now: .seconds(1)))
        let soon = Duration.seconds(1) + .milliseconds(249)
        #expect(!pacing.refreshesNow(after: chat, stored: .background, now: soon), "what nobody views waits")
        #expect(!pacing.refreshesNow(after: bulk, stored: viewed, now: soon))
        #expect(!pacing.refreshesNow(after: .tick, stored: viewed, now: soon))
        #expect(pacing.refreshesNow(after: bulk, stored: priority, now: soon), "a neighbour's chat shows at once")
        #expect(pacing.refreshesNow(after: .tick, stored: priority, now: soon))
        let due = Duration.seconds(1) + .milliseconds(250)
        #expect(pacing.deadline(pending: true) == due)
        #expect(pacing.deadline(pending: false) == nil)
        #expect(pacing.refreshesNow(after: bulk, stored: .background, now: due))
        #expect(pacing.refreshesNow(after: chat, stored: .background, now: due), "a line after a quiet spell shows")
        #expect(pacing.refreshesNow(after: .tick, stored: .background, now: due), "the tick catches up")
    }

    @Test("the redial backoff doubles from its minimum to its cap and starts over")
    func backoff() {
        var backoff = RedialBackoff.shipped
        var waits = [Duration]()
        for _ in 0..<5 {
            waits.append(backoff.delay)
            backoff.attempted()
        }
        #expect(waits == [.milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(2)])
        backoff.reset()
        #expect(backoff.delay == Node.redialBackoffMin)
    }
}
