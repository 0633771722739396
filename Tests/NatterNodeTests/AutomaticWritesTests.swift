// Goal: the node's own writes (receipts, due re-keys) follow their timing rules whatever the message rate. Method: the
// pure `AutomaticWrites` machine driven with time as an input; no clock, no node.
import NatterModel
import NatterStore
import Testing

@testable import NatterNode

@Suite("Automatic writes: receipt timing")
struct AutomaticWritesTests {
    let chat = ConversationID(bytes: [UInt8](repeating: 1, count: 32))
    let other = ConversationID(bytes: [UInt8](repeating: 2, count: 32))

    func machine() -> AutomaticWrites { AutomaticWrites(configuration: ReceiptConfiguration()) }

    @Test("the first receipt waits the delay; one read receipt covers delivered too")
    func firstReceipt() {
        var writes = machine()
        writes.receiptNeeded(in: chat, read: false, members: 2, now: .zero)
        writes.receiptNeeded(in: chat, read: true, members: 2, now: .milliseconds(10))
        #expect(writes.nextDeadline == .milliseconds(150))
        #expect(writes.take(now: .milliseconds(149)).isEmpty)
        #expect(writes.take(now: .milliseconds(150)) == [.markRead(chat)])
        #expect(writes.nextDeadline == nil)
    }

    @Test("while messages keep arriving, a conversation gets at most one receipt per interval, however fast they come")
    func boundedWhateverTheRate() {
        for members in [2, 25, 64] {
            for gap in [10, 100, 500] {  // a message every `gap` ms for 60 s
                var writes = machine()
                var receipts = 0
                var now = Duration.zero
                while now < .seconds(60) {
                    writes.receiptNeeded(in: chat, read: true, members: members, now: now)
                    now += .milliseconds(gap)
                    receipts += writes.take(now: now).count
                }
                let interval = ReceiptConfiguration().interval(members: members)
                let bound = Int((Duration.seconds(60) / interval).rounded(.up)) + 1
                #expect(receipts <= bound, "\(members) members, a message every \(gap) ms: \(receipts) > \(bound)")
                let messages = 60_000 / gap
                #expect(receipts >= min(messages, bound) / 2, "receipts still flow: \(receipts) of at most \(bound)")
            }
        }
    }

    @Test("the interval grows with the members, from the two-person minimum to a cap")
    func intervalScales() {
        let configuration = ReceiptConfiguration()
        #expect(configuration.interval(members: 2) == .milliseconds(150))
        #expect(configuration.interval(members: 25) == .milliseconds(1_920))
        #expect(configuration.interval(members: 64) == .milliseconds(5_040))
        #expect(configuration.interval(members: 256) == .seconds(10))
    }

    @Test("an own record covers a due delivered receipt; a read receipt written by hand covers read")
    func ownRecordsCover() {
        var writes = machine()
        writes.receiptNeeded(in: chat, read: false, members: 3, now: .zero)
        writes.wrote(in: chat, readReceipt: false, now: .milliseconds(50))
        #expect(writes.take(now: .seconds(1)).isEmpty)
        writes.receiptNeeded(in: chat, read: true, members: 3, now: .seconds(2))
        writes.wrote(in: chat, readReceipt: true, now: .seconds(2) + .milliseconds(50))
        #expect(writes.take(now: .seconds(3)).isEmpty)
        // The hand-written read receipt counts for the interval: the next one waits for it (2.21 s), then for the
        // grid of the interval (160 ms for three members): 2.24 s.
        writes.receiptNeeded(in: chat, read: true, members: 3, now: .seconds(2) + .milliseconds(60))
        #expect(ReceiptConfiguration().interval(members: 3) == .milliseconds(160))
        #expect(writes.nextDeadline == .milliseconds(2_240))
    }

    @Test("members write their receipts at the same wall-clock instants, whenever the message reached each")
    func receiptsOnOneGrid() {
        // Three members of a 25-person group (interval 1.92 s), their cores started at different wall-clock times;
        // messages reach them at different moments. Each writes at most once per interval, on multiples of it.
        let interval = ReceiptConfiguration().interval(members: 25).wholeMilliseconds
        let origins: [Int64] = [1_700_000_000_123, 1_700_000_004_567, 1_700_000_009_001]
        var written = [[Int64]](repeating: [], count: origins.count)
        let start = origins.max()! + 10_000  // wall-clock time when the group starts talking
        for (index, origin) in origins.enumerated() {
            var writes = AutomaticWrites(configuration: ReceiptConfiguration(), clockOriginMillis: origin)
            // A message every 500 ms, reaching member `index` 37 ms × index after the first.
            var now = Duration.milliseconds(start - origin + 37 * Int64(index))
            while now < .milliseconds(start - origin + 30_000) {
                writes.receiptNeeded(in: chat, read: true, members: 25, now: now)
                now += .milliseconds(500)
                // A busy node's tick comes late: the grid holds all the same.
                let late = now + .milliseconds(40 * Int64(index))
                if let due = writes.nextDeadline, due <= late, !writes.take(now: late).isEmpty {
                    written[index].append(origin + due.wholeMilliseconds)
                    writes.wrote(in: chat, readReceipt: true, now: late)  // the node writes it then (`NodeCore.author`)
                }
            }
        }
        for times in written {
            #expect(times.count >= 13, "a receipt every interval or so: \(times.count)")
            #expect(times.allSatisfy { $0 % interval == 0 }, "on the grid: \(times.map { $0 % interval })")
            #expect(zip(times, times.dropFirst()).allSatisfy { $1 - $0 >= interval }, "one per interval")
        }
        // The members' receipts meet: most instants are shared by all three.
        let shared = Set(written[0]).intersection(written[1]).intersection(written[2])
        #expect(shared.count >= written.map(\.count).min()! - 2)
    }

    @Test("re-keys come before receipts; conversations in a fixed order; off means nothing")
    func orderAndOff() {
        var writes = machine()
        writes.receiptNeeded(in: other, read: false, members: 2, now: .zero)
        writes.receiptNeeded(in: chat, read: true, members: 2, now: .zero)
        writes.rekeyNeeded(in: other, now: .zero)
        #expect(writes.take(now: .seconds(1)) == [.rekey(other), .markRead(chat), .markDelivered(other)])
        var off = ReceiptConfiguration()
        off.enabled = false
        var silent = AutomaticWrites(configuration: off)
        silent.receiptNeeded(in: chat, read: true, members: 2, now: .zero)
        silent.rekeyNeeded(in: chat, now: .zero)
        #expect(silent.take(now: .seconds(10), all: true).isEmpty)
    }
}
