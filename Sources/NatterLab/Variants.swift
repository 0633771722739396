import Foundation
import GRDB
import NatterModel
import NatterNode
import NatterStore

/// A deliberately broken node (always n1), to prove that a checker fires: a checker that cannot fail is worthless
/// (docs/lab.md, "Checkers"). Each variant breaks what one checker watches, in the lab's driving of that node —
/// nothing of it is in the node's code, so no shipped node can run one. Only `natter lab run --variant` and the
/// tests set one; a sweep never does.
public enum LabVariant: String, Sendable, CaseIterable {
    /// n1 loses the body of one record it applied (as a disk that drops a row would), while its feed still counts
    /// it held: the no-loss checker must fire.
    case dropRecord = "drop-record"
    /// n1 hands every record to its application as soon as it is stored, before its dependencies are applied:
    /// the causal-order checker must fire.
    case earlyApply = "early-apply"
    /// n1's rules ignore removals, so it accepts the messages of removed members: the conversation-digest checker
    /// must fire (with `--churn`, which removes members and races a message against each removal).
    case acceptRemoved = "accept-removed"

    /// The node the variant breaks.
    static let node = 1
}

extension Simulation {
    /// Applies the variant after node `index` handled an input (nothing for a correct node).
    func breakAfterInput(_ index: Int) {
        guard index == LabVariant.node, let variant = configuration.variant, phase != .setup, let group else { return }
        switch variant {
        case .earlyApply:
            // Every record stored but not applied yet is reported applied now. (`try?`: this is the deliberately
            // broken node; a read that fails only breaks it less this turn.)
            let store = nodes[index].store
            guard let feeds = try? store.feeds(of: group) else { return }
            for feed in feeds where feed.applied < feed.stored {
                let early = (try? store.records(
                    conversation: group, author: feed.author, from: feed.applied + 1,
                    limit: Int(feed.stored - feed.applied))) ?? []
                for record in early { noteApplied(record.ref, by: index) }
            }
        case .dropRecord, .acceptRemoved:
            break
        }
    }

    /// Applies the variant when node `index` applied the record at ledger position `position`.
    func breakOnApplied(_ position: Int, by index: Int) {
        guard index == LabVariant.node, configuration.variant == .dropRecord, !droppedRecord, phase == .workload
        else { return }
        let entry = ledger[position]
        guard entry.kind == .message, entry.author != index else { return }
        // The row stays (its feed counts it held, so nobody sends it again); its body goes, as a junk feed's does.
        let position = entry.ref.position
        do {
            try nodes[index].store.writer.write { db in
                try db.execute(
                    sql: "UPDATE record SET bytes = X'' WHERE conversation = ? AND author = ? AND sequence = ?",
                    arguments: [
                        Data(position.conversation.bytes), Data(position.author.bytes), Int64(position.sequence),
                    ])
            }
            nodes[index].store.invalidateCaches()  // the body is gone from memory too
            droppedRecord = true
            faultTrace.append("\(formatSeconds(now)) variant: \(nodes[index].name) drops \(entry.kind) \(entry.id)")
        } catch {
            fail("the drop-record variant could not drop \(entry.id): \(error)")
        }
    }

    /// The conversation state node `index` shows: its snapshot's, or for the accept-removed variant the state
    /// its applied records give when removals are ignored.
    func shownState(of index: Int, in group: ConversationID) throws -> ConversationState {
        let node = nodes[index]
        guard index == LabVariant.node, configuration.variant == .acceptRemoved, let core = node.core else {
            return try node.core!.conversations.snapshot(of: group).state
        }
        let context = try core.conversations.snapshot(of: group).context
        let reader = ConversationReader(member: node.author, keyPair: node.identity.encryption)
        let entries = reader.read(try node.store.appliedRecords(of: group)).entries.filter { entry in
            if case .control(.remove, _) = entry.body { return false }
            return true
        }
        return ConversationRules.derive(entries, context: context)
    }
}
