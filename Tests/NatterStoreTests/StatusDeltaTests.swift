// Goal: the statuses a conversation's deltas report for this node's messages always end at the truth
// (`ConversationState.status`), however receipts arrive — delivered and read marks of several members, out of order,
// some members silent — and never report a status that did not change. The deltas look only at the messages between
// a member's old and new marks (`DeltaMemory.statusChanges`), so this is the check that nothing in between is missed.
// Method: a seeded group of four replicas; the author sends, the others pull some of what exists and write delivered or
// read receipts at random; after every step the author pulls from a random member and refreshes; what the deltas
// reported is replayed and compared with the state, message by message.
import NatterModel
import Testing

@testable import NatterStore

@Suite("Statuses in deltas")
struct StatusDeltaTests {
    @Test("statuses reported through deltas end at the truth after every refresh, receipts arriving in any order",
        arguments: [UInt64(1), 2, 3, 4, 5])
    func statusesFollowTheTruth(seed: UInt64) throws {
        let replicas = try ["Alice", "Bob", "Carol", "Dave"].enumerated().map { try Replica($1, seed: 40 + seed * 4 + UInt64($0)) }
        try introduce(replicas)
        let alice = replicas[0]
        let others = Array(replicas.dropFirst())
        let chat = try alice.conversations.createGroup(title: "Status", members: others.map(\.id), now: alice.tick())
        try syncAll(replicas)
        _ = try alice.conversations.refresh(chat)
        var random = SeededGenerator(seed: seed)
        var reported = [RecordID: MessageStatus]()
        var mine = [RecordID]()
        var changesReported = 0
        for step in 0..<60 {
            switch Int.random(in: 0..<4, using: &random) {
            case 0:
                mine.append(try alice.conversations.send("message \(step)", in: chat, now: alice.tick()).id)
            default:
                // A member catches up with Alice (or not) and writes a receipt; Carol stays silent on odd seeds.
                let member = others[Int.random(in: 0..<others.count, using: &random)]
                if seed % 2 == 1 && member.name == "Carol" { break }
                if Bool.random(using: &random) { try member.pull(from: alice) }
                if Bool.random(using: &random) {
                    _ = try member.conversations.markRead(chat, now: member.tick())
                } else {
                    _ = try member.conversations.markDelivered(chat, now: member.tick())
                }
            }
            try alice.pull(from: others[Int.random(in: 0..<others.count, using: &random)])
            let delta = try alice.conversations.refresh(chat)
            for change in delta.lines where change.kind == .new {
                if let status = change.line.status { reported[change.line.id] = status }
            }
            for change in delta.statuses {
                #expect(reported[change.message] != change.status, "step \(step): a status reported unchanged")
                reported[change.message] = change.status
                changesReported += 1
            }
            let state = try alice.state(chat)
            for id in mine {
                #expect(reported[id] == state.status(of: id), "seed \(seed), step \(step): \(id)")
            }
        }
        #expect(changesReported > 0, "receipts moved some status")
    }
}
