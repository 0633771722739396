public import NatterModel

/// A member sealed a key that does not open its commit (issue 19, item 8): who was, and who repairs it.
extension Conversations {
    /// A commit opening an epoch head whose slots for `members` do not give them the epoch key.
    public struct WronglySealedEpoch: Equatable, Sendable {
        public let epoch: EpochID
        public let author: AuthorID
        public let members: Set<AuthorID>
    }

    /// The epoch heads of `conversation` whose commit sealed some member a key that does not open it, found by
    /// rebuilding every slot from the key this node holds and the members' profiles (`KeySlots.wronglySealed`), once
    /// per epoch (`slotChecks`). Epochs whose key this node lacks are left out (it cannot tell), and so are epochs
    /// with a member whose profile it lacks (slot i belongs to the i-th member: without every key the order cannot be
    /// rebuilt), until the profile arrives.
    public func wronglySealed(in conversation: ConversationID) throws -> [WronglySealedEpoch] {
        let snapshot = try snapshot(of: conversation)
        var found = [WronglySealedEpoch]()
        for epoch in snapshot.state.epochHeads {
            guard let key = snapshot.keys[epoch], let info = snapshot.state.epochs[epoch],
                let ref = snapshot.engine.ref(of: RecordID(raw: epoch.raw)), let record = try store.record(ref)
            else { continue }
            var members = slotChecks.withLock { $0[epoch] }
            if members == nil {
                let known = try info.roster.compactMap { member in
                    try profile(of: member).map { (member, $0.encryptionKey) }
                }
                // A commit that does not parse has no slots to check (its readers reject it).
                guard known.count == info.roster.count,
                    let commit = try? ConversationPayload.parseCommit(record.payload)
                else { continue }
                let checked = Set(KeySlots.wronglySealed(slots: commit.slots, key: key, roster: known))
                members = checked
                slotChecks.withLock { checks in
                    // Bounded by the heads of the conversations read: an epoch that is no head any more needs none.
                    if checks.count >= Self.slotChecksMax { checks.removeAll() }
                    checks[epoch] = checked
                }
            }
            if let members, !members.isEmpty {
                found.append(WronglySealedEpoch(epoch: epoch, author: record.header.author, members: members))
            }
        }
        return found
    }

    /// Most epochs whose slot check is remembered: past it the memory starts over (a check is cheap to redo).
    static let slotChecksMax = 4_096

    /// Whether this identity is the one `SlotRepair.duty` names to re-key `conversation`, so that a member sealed a
    /// wrong key gets the epoch's key through the re-key's history chain.
    public func owesSlotRepair(in conversation: ConversationID) throws -> Bool {
        let state = try snapshot(of: conversation).state
        return try wronglySealed(in: conversation).contains { broken in
            SlotRepair.duty(epoch: broken.epoch, author: broken.author, wronglySealed: broken.members, in: state)
                == identity.author
        }
    }
}

extension ConversationSnapshot {
    /// Commits that sealed this identity a key that does not open them (`ConversationEngine.wronglySealed`): shown
    /// to the person as unreadable, and reported, until the re-key `SlotRepair` assigns brings the key.
    public var wronglySealed: [RecordID] { engine.wronglySealed }
}
