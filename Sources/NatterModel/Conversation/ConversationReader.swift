public import NatterCrypto

/// Turns a conversation's records into entries for the rules, opening what this member can open.
///
/// Keys come from two places: our own slot in an epoch-opening commit, and the history chain — a commit whose key
/// we hold names its parent epochs' keys, so a member sealed only the newest key walks back to the first. Anyone can
/// write a commit into any conversation, sealed to anyone, naming any parents with any keys, so **a key is taken only
/// when it authenticates against the commit it claims to open** (`KeySlots.opens`: the commit's ephemeral key is a
/// function of its epoch key): a parent key only once the parent commit is at hand and checks out. A planted commit
/// thus cannot replace a real epoch's key, whatever order the records come in (issue 19, item 5). A removal sealed
/// without us is read through its notice when we hold one of the epochs it leaves (`RemovalNotice`).
public struct ConversationReader: Sendable {
    public let member: AuthorID
    public let keyPair: EncryptionKeyPair

    public init(member: AuthorID, keyPair: EncryptionKeyPair) {
        self.member = member
        self.keyPair = keyPair
    }

    /// Entries for `records` (one conversation, any order) and every epoch key this member could obtain, starting
    /// from `knownKeys` (keys found earlier, so a later call needs only the new records and the unreadable ones:
    /// a parent key is taken only when its commit is among `records`, which those are).
    public func read(_ records: [Record], knownKeys: [EpochID: SymmetricKey] = [:])
        -> (entries: [ConversationEntry], keys: [EpochID: SymmetricKey])
    {
        var keys = knownKeys
        var commits = [RecordID: ConversationPayload.Commit]()
        var bodies = [RecordID: ConversationEntry.Body]()
        var wronglySealed = Set<RecordID>()
        for record in records where record.header.kind == .commit {
            do {
                let commit = try ConversationPayload.parseCommit(record.payload)
                commits[record.id] = commit
                guard let ephemeral = commit.ephemeral, keys[EpochID(raw: record.id.raw)] == nil else { continue }
                switch KeySlots.open(slots: commit.slots, ephemeral: ephemeral, keyPair: keyPair) {
                case .key(let key): keys[EpochID(raw: record.id.raw)] = key
                case .wrong: wronglySealed.insert(record.id)
                case .none: break
                }
            } catch {
                bodies[record.id] = .malformed("\(error)")
            }
        }
        // Walk the history chain until no new key appears.
        var opened = Set<RecordID>()
        var progress = true
        while progress {
            progress = false
            for record in records where commits[record.id] != nil && !opened.contains(record.id) {
                guard case .opening = commits[record.id]!, let key = keys[EpochID(raw: record.id.raw)] else { continue }
                opened.insert(record.id)
                progress = true
                do {
                    let content = try ConversationPayload.openCommit(
                        commits[record.id]!, key: key, header: Array(record.headerBytes))
                    for (epoch, parentKey) in content.parents where keys[epoch] == nil {
                        // Unchecked, a parent key could be anyone's: taken only if it opens the parent commit.
                        guard let parent = commits[RecordID(raw: epoch.raw)]?.ephemeral,
                            KeySlots.opens(parentKey, ephemeral: parent)
                        else { continue }
                        keys[epoch] = parentKey
                    }
                    bodies[record.id] = .control(
                        content.operation,
                        opening: EpochOpening(
                            parents: content.parents.map(\.0), tags: content.tags,
                            tagKey: KeySlots.rosterTagKey(key), announced: content.announced))
                } catch {
                    bodies[record.id] = .malformed("\(error)")
                }
            }
        }
        // A removal sealed without us: its notice says who removed whom, if we are among those it removes.
        for record in records where bodies[record.id] == nil && !wronglySealed.contains(record.id) {
            guard let commit = commits[record.id], let notice = commit.notice, let ephemeral = commit.ephemeral,
                keys[EpochID(raw: record.id.raw)] == nil,
                let noticeKey = RemovalNotice.find(
                    slots: notice.slots, check: notice.check, ephemeral: ephemeral, keyPair: keyPair)
            else { continue }
            do {
                bodies[record.id] = .notice(
                    try ConversationPayload.openNotice(notice, noticeKey: noticeKey, header: Array(record.headerBytes)))
            } catch {
                bodies[record.id] = .malformed("\(error)")
            }
        }
        var entries = [ConversationEntry]()
        entries.reserveCapacity(records.count)
        for record in records {
            let body: ConversationEntry.Body
            if let known = bodies[record.id] {
                body = known
            } else if wronglySealed.contains(record.id) {
                body = .wronglySealed
            } else if let key = keys[record.header.epoch] {
                body = open(record, commit: commits[record.id], key: key)
            } else {
                body = .unreadable
            }
            entries.append(ConversationEntry(id: record.id, header: record.header, body: body))
        }
        return (entries, keys)
    }

    private func open(_ record: Record, commit: ConversationPayload.Commit?, key: SymmetricKey)
        -> ConversationEntry.Body
    {
        let header = Array(record.headerBytes)
        do {
            switch record.header.kind {
            case .content:
                return .content(try ConversationPayload.openContent(record.payload, key: key, header: header))
            case .commit:
                guard let commit, case .inEpoch = commit else { return .unreadable }
                return .control(
                    try ConversationPayload.openCommit(commit, key: key, header: header).operation, opening: nil)
            case .plain:
                return .malformed("plain record in a conversation")
            }
        } catch {
            switch error {
            case .noKey: return .unreadable
            case .malformed(let reason): return .malformed(reason)
            }
        }
    }
}
