import NatterCrypto
public import NatterModel
import NatterNode
import NatterStore

/// Why a lab run could not start, in words a person can act on.
public enum LabError: Error, Equatable, Sendable, CustomStringConvertible {
    case invalidConfiguration(String)
    case setupFailed(String)

    public var description: String {
        switch self {
        case .invalidConfiguration(let problem): problem
        case .setupFailed(let reason): "the lab could not set up its nodes: \(reason)"
        }
    }
}

/// The convergence lab: many real natter node cores in one process over a simulated network with faults.
///
/// `Lab.run` simulates one configuration and returns its report; `LabSimulation` does the same in steps, so a test
/// can tamper with the final state before the checkers look at it (a checker that cannot fail is worthless).
public enum Lab {
    /// Runs `configuration` to the end and checks it; records the frames of `sequence` for a diagram.
    public static func run(_ configuration: LabConfiguration, sequence: SequenceWindow? = nil) throws(LabError)
        -> LabReport
    {
        let simulation = try LabSimulation(configuration, sequence: sequence)
        simulation.run()
        return simulation.report()
    }
}

/// One lab run, in steps: `run()`, optionally a planted fault, then `report()`.
public final class LabSimulation {
    let simulation: Simulation
    private var planted: [String] = []

    public init(_ configuration: LabConfiguration, sequence: SequenceWindow? = nil) throws(LabError) {
        if let problem = configuration.problem { throw .invalidConfiguration(problem) }
        if let sequence, let node = sequence.nodes?.first(where: { !(0..<configuration.nodes).contains($0) }) {
            throw .invalidConfiguration("--msc-nodes names n\(node), but the run has \(configuration.nodes) nodes")
        }
        do {
            simulation = try Simulation(configuration, sequence: sequence)
        } catch {
            throw .setupFailed("\(error)")
        }
    }

    /// Simulates setup, workload, heal and settle.
    public func run() {
        simulation.run()
    }

    /// Runs the final checkers and gathers the metrics.
    public func report() -> LabReport {
        LabEntropy.bind(simulation.entropy) {
            simulation.makeReport(extraFailures: simulation.finalChecks())
        }
    }

    /// The group's id, once founded.
    public var group: ConversationID? { simulation.group }

    /// Node `index`'s log digest.
    public func logDigest(of index: Int) throws -> [UInt8] { try simulation.nodes[index].store.logDigest() }

    // MARK: - Planted faults (tests of the checkers)

    /// A bug planted in node `index`: it writes a message to the group and never publishes it, though the author
    /// acknowledged it. The record stays on that node only. Returns the record's id.
    @discardableResult
    public func plantUnpublishedMessage(on index: Int) throws -> RecordID {
        try LabEntropy.bind(simulation.entropy) {
            let node = simulation.nodes[index]
            guard let core = node.core, let group = simulation.group else {
                throw LabError.invalidConfiguration("node \(index) is not up in a group")
            }
            let record = try core.conversations.send("never published", in: group, now: 0)
            simulation.ledger.add(record, author: index, kind: .message, at: simulation.now)
            simulation.ledger.setMustReach(simulation.ledger.count - 1, true)
            return record.id
        }
    }

    /// A network that corrupts one chunk inside a stream, which the lab never does on its own: one byte of the
    /// n-th chunk sent after the workload starts is flipped. Call before `run()`.
    public func corruptChunk(_ n: Int) {
        precondition(n >= 1, "chunks count from 1")
        simulation.corruptChunk = n
    }

    /// Disk corruption, or a second writer: a well-formed record by an identity from outside the run lands in
    /// node `index`'s store behind the core's back.
    public func plantForeignRecord(on index: Int) throws {
        try LabEntropy.bind(simulation.entropy) {
            var keys = SeededGenerator(seed: 0xBAD)
            let stranger = LocalIdentity(
                signing: try IdentityKeyPair(seed: keys.bytes(32)),
                encryption: try EncryptionKeyPair(secret: keys.bytes(32)))
            let scratch = try RecordStore.inMemory()
            let profile = try Conversations(store: scratch, identity: stranger).publishProfile(name: "Stranger", now: 0)
            _ = try simulation.nodes[index].store.ingest([profile.bytes], receivedAtMillis: 0)
        }
    }
}
