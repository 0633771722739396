// Goal: what arrives while a node is busy is carried out as one turn (`TurnPlan.Batch`): each input's records are
// stored and shown as it is handled, and what the inputs send on — the records relayed — waits for one durability
// sync at the batch's end, instead of a sync per input (issue 18: a 25-member group's receipts arrive together, and
// a sync each held a person's next line back). A person's line waiting is written before the batch, and one typed
// during it after the input in hand. Method: four `Node` actors in this process on loopback TCP, no discovery:
// Alice, Bob and Carol dial a relay that is not a member of their chats. The relay's thread is held
// (`Node.holdTurns`) until two direct messages to Carol, one from Alice and one from Bob, wait in its inbox; its turn
// steps are recorded (`observeTurns`), and the line typed mid-batch is submitted from its first applied event.
import Foundation
import NatterModel
import NatterStore
import NatterTestSupport
import Synchronization
import Testing

@testable import NatterNode

extension RecordedNode {
    /// The records this node reported applied, in the order it did.
    func appliedOrder() -> [RecordID] {
        events.withLock { list in
            list.flatMap { entry -> [RecordID] in
                if case .applied(let refs) = entry.event { refs.map(\.id) } else { [] }
            }
        }
    }
}

@Suite("A batch of transport inputs is one turn")
struct TurnBatchLoopbackTests {
    /// A step as a letter: `a` an applied event, `e` another event, `d` the durability sync, `s` a send, `c` a close.
    static func letter(_ step: TurnPlan.Step) -> Character {
        switch step {
        case .event(.applied): "a"
        case .event: "e"
        case .makeDurable: "d"
        case .send: "s"
        case .close: "c"
        }
    }

    /// The relay and three nodes dialling it, once Alice and Bob hold Carol's profile.
    static func relayAndThree(root: String) async throws -> [RecordedNode] {
        let relay = try await RecordedNode(root: root, name: "Relay", peers: [])
        var nodes = [relay]
        for name in ["Alice", "Bob", "Carol"] {
            nodes.append(try await RecordedNode(root: root, name: name, peers: [relay.node.port]))
        }
        let carolID = await nodes[3].author
        for sender in nodes[1...2] {
            let node = sender.node
            #expect(try await eventually(seconds: 30) { try await node.read { try $0.hasProfile(carolID) } })
        }
        return nodes
    }

    /// A flag set from one task and read from another.
    final class Flag: Sendable {
        private let value = Mutex(false)
        func set() { value.withLock { $0 = true } }
        var isSet: Bool { value.withLock { $0 } }
    }

    /// Holds `relay`'s thread (from a task) until `release` is set; returns once the hold has begun.
    static func hold(_ relay: Node, until release: Flag) async throws -> Task<Void, Never> {
        let holding = Flag()
        let task = Task {
            await relay.holdTurns {
                holding.set()
                return release.isSet
            }
        }
        #expect(try await eventually(seconds: 10) { holding.isSet })
        return task
    }

    /// What the relay carried out, recorded by `observeTurns`: its steps as letters, with the records of each applied
    /// event.
    final class Recorded: Sendable {
        let steps = Mutex<[(letter: Character, applied: [RecordID])]>([])
        /// Run once, on the relay's thread, at the first applied event after `arm` (a line typed mid-batch).
        private let onApplied = Mutex<(@Sendable () -> Void)?>(nil)

        func note(_ step: TurnPlan.Step) {
            var applied = [RecordID]()
            if case .event(.applied(let refs)) = step {
                applied = refs.map(\.id)
                onApplied.withLock { action in
                    defer { action = nil }
                    return action
                }?()
            }
            steps.withLock { $0.append((TurnBatchLoopbackTests.letter(step), applied)) }
        }

        /// Forgets the steps so far; `action` runs at the next applied event.
        func clear(arming action: (@Sendable () -> Void)? = nil) {
            steps.withLock { $0 = [] }
            onApplied.withLock { $0 = action }
        }
    }

    /// Alice and Bob each send Carol a direct message while the relay is held; `meanwhile` runs once both wait in the
    /// relay's inbox, before it is released, and `midBatch` on the relay's thread at its first applied event after.
    /// Returns the two messages' ids once Carol holds them.
    static func pileUp(
        _ nodes: [RecordedNode], recorded: Recorded, meanwhile: @Sendable () async throws -> Void = {},
        midBatch: (@Sendable () -> Void)? = nil
    ) async throws -> [RecordID] {
        let (relay, alice, bob, carol) = (nodes[0], nodes[1], nodes[2], nodes[3])
        let carolID = await carol.author
        await relay.node.observeTurns { recorded.note($0) }
        let release = Flag()
        let hold = try await hold(relay.node, until: release)
        // The relay's thread is held: every step recorded from here on comes after the hold.
        recorded.clear(arming: midBatch)
        // Both written at once: a relay held longer than a link's silence timeout (6 s) would be taken for dead.
        let tickets = [
            alice.node.submit([.sendDirect("from Alice", to: carolID)]),
            bob.node.submit([.sendDirect("from Bob", to: carolID)]),
        ]
        var records = [Record]()
        for ticket in tickets { records.append(try await ticket.results()[0].get().record) }
        let sent = records.map(\.id)
        // Both wait whole in the relay's inbox, each on its own link (a heartbeat is far smaller than a message).
        let relayNode = relay.node
        let size = records.map(\.bytes.count).min()!
        #expect(try await eventually(seconds: 20) { relayNode.bytesWaiting().filter { $0 >= size }.count >= 2 })
        try await meanwhile()
        release.set()
        _ = await hold.result
        #expect(try await eventually(seconds: 30) { Set(carol.appliedOrder()).isSuperset(of: sent) })
        return sent
    }

    static func temporaryRoot() -> String {
        FileManager.default.temporaryDirectory.appendingPathComponent("natter-batch-\(UUID().uuidString)").path
    }

    @Test("inputs that piled up are shown as they are handled, then one sync, then every record relayed")
    func pileUpSyncsOnce() async throws {
        let root = Self.temporaryRoot()
        // `try?`: a temporary directory left behind harms no test.
        defer { try? FileManager.default.removeItem(atPath: root) }
        let nodes = try await Self.relayAndThree(root: root)
        defer { Task { for node in nodes { await node.stop() } } }
        let recorded = Recorded()
        let sent = try await Self.pileUp(nodes, recorded: recorded)
        let steps = recorded.steps.withLock { $0 }
        let letters = String(steps.map(\.letter))
        let shown = sent.map { id in steps.firstIndex { $0.applied.contains(id) } ?? -1 }
        try #require(!shown.contains(-1), "both records applied at the relay: \(letters)")
        let (first, last) = (shown.min()!, shown.max()!)
        // The relay may gather what it relays into a later push (a link's push interval), so sends are not counted;
        // what a batch must not do is sync, or send, between its inputs.
        let between = steps[first...last].map(\.letter)
        #expect(!between.contains("d"), "one sync for both inputs, not one each: \(letters)")
        #expect(!between.contains("s"), "nothing sent before the batch's sync: \(letters)")
        #expect(steps[last...].contains { $0.letter == "d" }, "the batch ends with its sync: \(letters)")
    }

    /// The relay's own direct line to Carol, submitted by `submit` (given the line's intent) during `pileUp`, and the
    /// order in which the relay carried out it and the two inputs: the indexes of their events in its stream.
    static func lineAndInputs(
        submit: (_ write: @escaping @Sendable () -> Void) -> (
            meanwhile: @Sendable () async throws -> Void, midBatch: (@Sendable () -> Void)?
        )
    ) async throws -> [Int] {
        let root = temporaryRoot()
        // `try?`: a temporary directory left behind harms no test.
        defer { try? FileManager.default.removeItem(atPath: root) }
        let nodes = try await relayAndThree(root: root)
        defer { Task { for node in nodes { await node.stop() } } }
        let relay = nodes[0]
        let relayNode = relay.node
        let carolID = await nodes[3].author
        let ticket = Mutex<WriteTicket?>(nil)
        let hooks = submit {
            ticket.withLock { $0 = relayNode.submit([.sendDirect("from the relay", to: carolID)]) }
        }
        let sent = try await pileUp(nodes, recorded: Recorded(), meanwhile: hooks.meanwhile, midBatch: hooks.midBatch)
        let submitted = try #require(ticket.withLock { $0 })
        let own = try await submitted.results()[0].get().record.id
        // The relay's own events, in the order it carried them out: the two inputs' applied records, and the line it
        // wrote (shown by the refresh that follows its write).
        func order() -> [Int] {
            let events = relay.events.withLock { list in list.map(\.event) }
            return [own, sent[0], sent[1]].map { id in
                events.firstIndex { event in
                    switch event {
                    case .applied(let refs): refs.contains { $0.id == id }
                    case .conversation(let delta): delta.lines.contains { $0.line.item.id == id }
                    default: false
                    }
                } ?? -1
            }
        }
        // The events reach the recorder through the node's stream, a little after the node carried them out.
        #expect(try await eventually(seconds: 20) { !order().contains(-1) })
        return order()
    }

    @Test("a line waiting when a batch is taken up is written before the batch")
    func lineWaitingGoesFirst() async throws {
        let order = try await Self.lineAndInputs { write in ({ write() }, nil) }
        #expect(!order.contains(-1), "every record applied at the relay: \(order)")
        #expect(order[0] < min(order[1], order[2]), "the relay's line waited for the batch: \(order)")
    }

    @Test("a line typed while a batch is carried out is written after the input in hand, not after the batch")
    func lineMidBatchGoesNext() async throws {
        let order = try await Self.lineAndInputs { write in ({}, write) }
        #expect(!order.contains(-1), "every record applied at the relay: \(order)")
        let inputs = order.dropFirst()
        #expect(
            inputs.min()! < order[0] && order[0] < inputs.max()!,
            "the relay's line between the batch's two inputs: \(order)")
    }
}
