/// The conversation rules (SPEC F1–F11, DESIGN §4) as one pure function: the state of a conversation from the set
/// of its records, identical on every replica that holds the same records, whatever order they arrived in.
///
/// Method: records are considered in the total order (Lamport number, record id), which extends causality.
/// 1. *Control records* (commits) are checked one by one against the group state **at their causal position**
///    — the fold of the valid commits that happened before them — and against strong removal by valid removals
///    earlier in the order. Valid epoch-opening commits open epochs whose roster is the resulting membership.
/// 2. *Content records* are checked against the state at their causal position and against strong removal by
///    every valid removal: a removed member's records concurrent with their removal are rejected (retracted).
/// 3. Edits, deletes, reactions and receipts are applied to the messages they name; the timeline is the valid
///    messages and system events in order.
public enum ConversationRules {
    /// Derives the state from `entries` (any order; duplicates by id are ignored).
    public static func derive(_ entries: [ConversationEntry], context: ConversationContext) -> ConversationState {
        var derivation = Derivation(context: context)
        derivation.process(Derivation.sortedUnique(entries))
        return derivation.state
    }
}

/// The rules maintained incrementally: entries that come after everything seen so far (the usual case: new
/// records) are checked and applied on their own, and content that sorts earlier (concurrent records) is inserted
/// where it sorts (`Derivation.insertLate`); anything that could change an earlier decision — a control or a delete
/// earlier in the order, a newly readable entry, or a removal that retracts earlier lines — re-derives from
/// scratch. Either way the state equals `ConversationRules.derive` of all entries (a property test checks it).
/// A position in a `ConversationEngine`'s log of changed lines.
public struct ChangeCursor: Sendable {
    /// The engine (and its copies) the position belongs to.
    let lineage: EngineLineage
    let rebuilds: Int
    let count: Int
}

/// One entry of a `ConversationEngine`'s change log: a line and what happened to it.
public struct LineTouch: Hashable, Sendable {
    public enum Change: Hashable, Sendable {
        /// A timeline item (message or system line) was created.
        case created
        case edited
        case deleted
        /// A message became invalid through a late record (a concurrent removal of its author): retracted.
        case retracted
        /// This person's reaction to the message changed (set, replaced or removed).
        case reaction(AuthorID)
    }

    public let id: RecordID
    public let change: Change
}

/// The identity of an engine and of the copies made from it (a reference: never reused while a cursor holds it).
final class EngineLineage: Sendable {}

public struct ConversationEngine: Sendable {
    private var derivation: Derivation
    private var bodies: [RecordID: ConversationEntry] = [:]
    private let lineage = EngineLineage()
    /// How many times `add` had to re-derive from scratch (for tests and metrics).
    public private(set) var rebuilds = 0

    public init(context: ConversationContext) {
        derivation = Derivation(context: context)
    }

    public var state: ConversationState { derivation.state }
    public var context: ConversationContext { derivation.context }
    /// Whether a commit by someone who was a member where it stands cannot be read here (sealed without this
    /// identity: removed, or left out of a new epoch). Commits of non-members do not count: anyone may write records
    /// into any conversation, and every member rejects theirs (non-member injection must lock no one out).
    public var hasUnreadableCommit: Bool { !derivation.sealedWithoutUs.isEmpty }

    /// Whether this identity must take itself for removed: some commit of a member is unreadable here
    /// (`hasUnreadableCommit`) and nothing shows otherwise. What shows otherwise is a valid record this identity can
    /// read, by someone other than that commit's author, written after it: had the commit removed us, the rules
    /// would have made its author's successors write under an epoch without us. A commit that leaves out a member
    /// who stays (a missing slot, which every member who reads it rejects) thus locks that member out only until
    /// another member writes.
    public var isLockedOut: Bool { derivation.sealedWithoutUs.contains { !derivation.isContradicted($0) } }

    /// Commits that sealed this identity a key that does not open them, oldest first: what this member reports
    /// while it waits for the re-key `SlotRepair` assigns (the key then arrives through that commit's history chain).
    public var wronglySealed: [RecordID] { derivation.wronglySealed }

    /// Whether some entry added to the engine is by an author outside `people`: O(authors), no entry visited.
    public func hasAuthor(outside people: Set<AuthorID>) -> Bool {
        derivation.bySequence.keys.contains { !people.contains($0) }
    }

    /// The id and position of a record added to the engine (a line's record), or nil.
    public func ref(of id: RecordID) -> RecordRef? {
        bodies[id].map { RecordRef(id: id, position: $0.header.position) }
    }

    /// Where the log of changed lines stands now (see `changes(since:)`).
    public var changeCursor: ChangeCursor {
        ChangeCursor(lineage: lineage, rebuilds: rebuilds, count: derivation.touched.count)
    }

    /// The lines created or changed since `cursor`, in the order it happened (timeline items created, edited or
    /// deleted, retracted messages, and messages whose reactions changed; repeats possible), or nil when the engine
    /// re-derived since: then anything may have changed.
    public func changes(since cursor: ChangeCursor) -> ArraySlice<LineTouch>? {
        guard cursor.lineage === lineage, cursor.rebuilds == rebuilds, cursor.count <= derivation.touched.count
        else { return nil }
        return derivation.touched[cursor.count...]
    }

    /// Adds entries (any order; known ids are replaced when their body changed, e.g. became readable).
    /// Returns true when it re-derived everything.
    @discardableResult
    public mutating func add(_ entries: [ConversationEntry]) -> Bool {
        var fresh = [ConversationEntry]()
        var changed = false
        for entry in Derivation.sortedUnique(entries) {
            if let known = bodies[entry.id] {
                if !sameBody(known.body, entry.body) {
                    bodies[entry.id] = entry
                    changed = true
                }
                continue
            }
            bodies[entry.id] = entry
            fresh.append(entry)
        }
        guard changed || !fresh.isEmpty else { return false }
        let last = derivation.lastPosition
        // Entries this identity cannot read that sort before what was processed (concurrent records, e.g. a flood's
        // junk feeds) only join `state.unreadable`, whatever their position: taken in without re-deriving
        // everything, which every such arrival would otherwise cost.
        if !changed, let last {
            let isLate = { (entry: ConversationEntry) in entry.position < last && entry.isUnreadable }
            let late = fresh.filter(isLate)
            if !late.isEmpty {
                derivation.absorbLate(late)
                fresh.removeAll(where: isLate)
                guard !fresh.isEmpty else { return false }
            }
            // Readable content that sorts before what was processed (concurrent records: in a busy group, most
            // arrivals) goes in at its place, unless it could change a decision already taken.
            let lateContent = fresh.prefix { $0.position < last }
            if !lateContent.isEmpty, derivation.insertLate(Array(lateContent)) {
                fresh.removeFirst(lateContent.count)
                guard !fresh.isEmpty else { return false }
            }
        }
        if changed || (last != nil && fresh[0].position < last!) || !derivation.canAppend(fresh) {
            rebuild()
            return true
        }
        derivation.process(fresh)
        return false
    }

    /// Why the rules would reject content `entry` if it were added now, or nil; the engine is unchanged. For what
    /// this node is about to write: its dependencies are the applied frontier, so it sorts after everything added
    /// and only the content check at that position is run — O(controls), where adding it to a copy of the engine
    /// would copy every entry of the conversation. Anything else is checked on a copy, exactly as `add` would.
    public func contentRejection(of entry: ConversationEntry) -> String? {
        if case .content(let operation) = entry.body, bodies[entry.id] == nil,
            derivation.lastPosition.map({ $0 < entry.position }) ?? true
        {
            var probe = derivation  // shares storage; only its small fold cache may be copied
            let before = probe.stateBefore(entry)
            return probe.contentProblem(entry, operation, before)
        }
        var copy = self
        copy.add([entry])
        return copy.state.rejected[entry.id]
    }

    private mutating func rebuild() {
        rebuilds += 1
        derivation = Derivation(context: derivation.context)
        derivation.process(Derivation.sortedUnique(Array(bodies.values)))
    }

    private func sameBody(_ a: ConversationEntry.Body, _ b: ConversationEntry.Body) -> Bool {
        switch (a, b) {
        case (.content(let x), .content(let y)): x == y
        case (.control(let x, let o1), .control(let y, let o2)): x == y && o1 == o2
        case (.notice(let x), .notice(let y)): x == y
        case (.unreadable, .unreadable), (.wronglySealed, .wronglySealed): true
        case (.malformed(let x), .malformed(let y)): x == y
        default: false
        }
    }
}

/// A valid control record with its operation.
struct ValidControl {
    let entry: ConversationEntry
    let operation: ControlOperation
    let opening: EpochOpening?
}

/// Group state from a set of valid control records (membership, roles, flags, title, creator).
struct GroupFold {
    var kind: ConversationKind?
    var genesisAuthor: AuthorID?
    var title: String?
    var members: [AuthorID: MemberInfo] = [:]
    var creator: AuthorID?

    /// Folds `controls` (sorted by position). Membership: a person is a member if some add of them is causally
    /// after every removal or leave of them (a removal concurrent with an add wins: strong removal).
    init(_ controls: [ValidControl]) {
        var adds = [AuthorID: [ConversationEntry]]()
        var removals = [AuthorID: [ConversationEntry]]()
        var roleChanges = [(AuthorID, MemberRole, EntryPosition)]()
        var flagChanges = [(AuthorID, MemberFlags, EntryPosition)]()
        for control in controls {
            let entry = control.entry
            switch control.operation {
            case .create(let kind, let title, let members, _):
                if self.kind == nil {
                    self.kind = kind
                    self.title = title
                    genesisAuthor = kind == .group ? entry.author : nil
                }
                for member in members + [entry.author] { adds[member, default: []].append(entry) }
            case .add(let members):
                for member in members { adds[member, default: []].append(entry) }
            case .remove(let members):
                for member in members { removals[member, default: []].append(entry) }
            case .leave:
                removals[entry.author, default: []].append(entry)
            case .rename(let title):
                self.title = title
            case .setRole(let member, let role):
                roleChanges.append((member, role, entry.position))
            case .setFlags(let member, let flags):
                flagChanges.append((member, flags, entry.position))
            case .rekey:
                break
            }
        }
        for (person, personAdds) in adds {
            let personRemovals = removals[person] ?? []
            guard let add = personAdds.first(where: { add in personRemovals.allSatisfy { $0.precedes(add) } }) else {
                continue
            }
            var info = MemberInfo(role: .member, flags: [], joined: add.position)
            for (member, role, position) in roleChanges where member == person && add.position < position {
                info.role = role
            }
            for (member, flags, position) in flagChanges where member == person && add.position < position {
                info.flags = flags
            }
            members[person] = info
        }
        if let founder = genesisAuthor {
            if members[founder] != nil {
                creator = founder
            } else {
                // Hand-over: the longest-standing admin, else the longest-standing member (ties by identity).
                let joined = members
                let order: (AuthorID, AuthorID) -> Bool = { a, b in (joined[a]!.joined, a) < (joined[b]!.joined, b) }
                let admins = members.keys.filter { members[$0]!.role == .admin }.sorted(by: order)
                creator = admins.first ?? members.keys.sorted(by: order).first
            }
        }
    }

    func canManage(_ author: AuthorID, flag: MemberFlags) -> Bool {
        guard kind == .group, let info = members[author] else { return false }
        return author == creator || info.role == .admin || info.flags.contains(flag)
    }
}

/// The derivation: entries are processed in batches that each come after everything processed before.
struct Derivation: Sendable {
    let context: ConversationContext
    /// The position of the last entry processed: a batch that sorts after it is appended, anything else re-derives
    /// (the entries themselves are the engine's `bodies`).
    private(set) var lastPosition: EntryPosition?
    /// Unreadable commits whose authors were members where they stand (`ConversationEngine.hasUnreadableCommit`).
    private(set) var sealedWithoutUs: [ConversationEntry] = []
    /// Commits that sealed this identity a key that does not open them (`ConversationEngine.wronglySealed`).
    private(set) var wronglySealed: [RecordID] = []
    var state = ConversationState()
    var valid: [ValidControl] = []
    var displayed: [RecordID: Int64] = [:]
    var bySequence: [AuthorID: [UInt64: RecordID]] = [:]
    private var foldCache: [[Bool]: GroupFold] = [:]
    private var contentValid: [ConversationEntry] = []
    /// Content that a valid removal of its author, concurrent with it, would retract if it became known: every
    /// content entry that passed `standingProblem` (accepted, or rejected for a later reason, such as a reply to a
    /// message this reader cannot read: a retraction replaces that reason).
    private var retractable: [ConversationEntry] = []
    private var contentByID: [RecordID: ConversationEntry] = [:]
    private var order: [EntryPosition] = []
    /// Each timeline item's index in `order` (and in `state.timeline`).
    private var orderIndex: [RecordID: Int] = [:]
    /// Every line this derivation created or changed, in order, with repeats: new items, edits and deletions,
    /// reaction changes (by message) and retracted messages. A reader that remembers how far it read learns what
    /// changed since (`ConversationEngine.changes(since:)`).
    private(set) var touched: [LineTouch] = []
    /// How many of `valid` and `contentValid` the receipts were computed over: both only grow, and receipts are
    /// merges (pointwise maxima) and appends in `contentValid` order, so a batch adds only its own.
    private var receiptsThrough = (controls: 0, content: 0)

    init(context: ConversationContext) {
        self.context = context
    }

    static func sortedUnique(_ entries: [ConversationEntry]) -> [ConversationEntry] {
        var seen = Set<RecordID>()
        return entries.filter { seen.insert($0.id).inserted }.sorted { $0.position < $1.position }
    }

    /// Whether `batch` (sorted, after everything processed) can be applied without revisiting earlier decisions:
    /// no control in it may retract content already decided (strong removal reaching back) — accepted, or rejected
    /// for a reason the retraction check comes before (`retractable`).
    func canAppend(_ batch: [ConversationEntry]) -> Bool {
        for entry in batch {
            let operation: ControlOperation
            switch entry.body {
            case .control(let control, _), .notice(let control): operation = control
            default: continue
            }
            let removed: [AuthorID]
            switch operation {
            case .remove(let members): removed = members
            case .leave: removed = [entry.author]
            default: continue
            }
            if retractable.contains(where: { removed.contains($0.author) && $0.isConcurrent(with: entry) }) {
                return false
            }
        }
        return true
    }

    /// Processes `batch` (sorted by position, every entry after those already processed): its controls first,
    /// then its content, exactly as a derivation over everything would decide them.
    mutating func process(_ batch: [ConversationEntry]) {
        if let last = batch.last { lastPosition = last.position }
        computeDisplayTimes(batch)
        let before = state.items.count
        let touchedBefore = touched.count
        for entry in batch {
            switch entry.body {
            case .control(let operation, let opening):
                checkControl(entry, operation, opening)
            case .notice(let operation):
                checkControl(entry, operation, nil, notice: true)
            case .unreadable, .wronglySealed:
                noteUnreadable(entry)
            case .malformed(let reason):
                reject(entry, "malformed: \(reason)")
            case .content:
                break
            }
        }
        let final = GroupFold(valid)
        state.kind = final.kind
        state.title = final.title
        state.creator = final.creator
        state.members = final.members
        chooseCurrentEpoch()
        for entry in batch {
            if case .content(let operation) = entry.body { checkContent(entry, operation) }
        }
        computeReceipts()
        var added = [EntryPosition]()
        if state.items.count != before {
            added = batch.filter { state.items[$0.id] != nil }.map(\.position)
            for (offset, position) in added.enumerated() { orderIndex[position.id] = order.count + offset }
            order += added
        }
        // The timeline follows `order`: items this batch changed (the log's new entries that name an item already
        // there) are rewritten in place, new ones appended (a batch comes after everything processed, so its items
        // sort last) — not the whole timeline copied per batch.
        for id in Set(touched[touchedBefore...].map(\.id)) {
            if let index = orderIndex[id], index < state.timeline.count { state.timeline[index] = state.items[id]! }
        }
        state.timeline += added.map { state.items[$0.id]! }
        assert(state.timeline.count == order.count, "the timeline mirrors the order")
    }

    /// Takes in content entries (sorted) that sort before entries already processed, as a derivation over
    /// everything would; returns false, changing nothing, when one of them could change a decision already taken: a
    /// control, a delete (reactions sorting after it that were accepted would have been refused), or a reaction to
    /// a deleted message (the delete may sort after it). Every processed entry that sorts after one of these is
    /// concurrent with it (the store applies a record only after its dependencies), so none depends on it, and all
    /// controls are processed already, as a derivation over everything checks them before any content. What else
    /// depends on order — a message's edits, an author's reactions and receipts — follows the author's own records,
    /// all earlier and processed. Re-deriving instead cost every snapshot of a busy group its whole history.
    mutating func insertLate(_ batch: [ConversationEntry]) -> Bool {
        for entry in batch {
            switch entry.body {
            case .content(.delete), .control, .notice, .unreadable, .wronglySealed:
                return false
            case .content(.react(let target, _)), .content(.unreact(let target)):
                if state.message(target)?.deleted == true { return false }
            case .content, .malformed:
                continue
            }
        }
        let touchedBefore = touched.count
        computeDisplayTimes(batch)
        for entry in batch {
            switch entry.body {
            case .content(let operation): checkContent(entry, operation)
            case .malformed(let reason): reject(entry, "malformed: \(reason)")
            case .control, .notice, .unreadable, .wronglySealed: break  // never reached: refused above
            }
        }
        computeReceipts()
        // New items join `order` and the timeline where they sort; the items after the first of them move up.
        let added = batch.filter { state.items[$0.id] != nil }.map(\.position)
        if let first = added.first {
            var start = 0
            var end = order.count
            while start < end {
                let middle = (start + end) / 2
                if order[middle] < first { start = middle + 1 } else { end = middle }
            }
            var tailOrder = [EntryPosition]()
            var tailTimeline = [TimelineItem]()
            tailOrder.reserveCapacity(order.count - start + added.count)
            tailTimeline.reserveCapacity(tailOrder.capacity)
            var old = start
            var new = 0
            while old < order.count || new < added.count {
                if new < added.count, old == order.count || added[new] < order[old] {
                    tailOrder.append(added[new])
                    tailTimeline.append(state.items[added[new].id]!)
                    new += 1
                } else {
                    tailOrder.append(order[old])
                    tailTimeline.append(state.timeline[old])
                    old += 1
                }
            }
            order.replaceSubrange(start..., with: tailOrder)
            state.timeline.replaceSubrange(start..., with: tailTimeline)
            for index in start..<order.count { orderIndex[order[index].id] = index }
        }
        for id in Set(touched[touchedBefore...].map(\.id)) {
            if let index = orderIndex[id], index < state.timeline.count { state.timeline[index] = state.items[id]! }
        }
        assert(state.timeline.count == order.count, "the timeline mirrors the order")
        return true
    }

    // MARK: - Display times

    /// Takes in unreadable entries that sort before entries already processed, as a derivation over everything
    /// would: an unreadable entry only joins `state.unreadable` (it is no control, no content, no item), and no
    /// processed entry depends on it (the store applies a record only after its dependencies), so its display time
    /// comes from its own dependencies, all here already.
    mutating func absorbLate(_ entries: [ConversationEntry]) {
        computeDisplayTimes(entries)
        for entry in entries { noteUnreadable(entry) }
    }

    /// An entry this identity cannot read; a commit counts towards `sealedWithoutUs` when its author was a member
    /// at its causal position (every valid commit that precedes it is processed by then: it sorts before it).
    mutating func noteUnreadable(_ entry: ConversationEntry) {
        state.unreadable.insert(entry.id)
        if case .wronglySealed = entry.body {
            wronglySealed.append(entry.id)
        } else if entry.header.kind == .commit, stateBefore(entry).members[entry.author] != nil {
            sealedWithoutUs.append(entry)
        }
    }

    /// Whether a valid record this identity reads, by someone other than `commit`'s author, comes after `commit`
    /// (`ConversationEngine.isLockedOut`). Newest first: such records are usually the latest.
    func isContradicted(_ commit: ConversationEntry) -> Bool {
        let shows = { (entry: ConversationEntry) in entry.author != commit.author && commit.precedes(entry) }
        return contentValid.reversed().contains(where: shows) || valid.reversed().contains { shows($0.entry) }
    }

    /// Creation times clamped to be monotone along causality: max(own, predecessors').
    mutating func computeDisplayTimes(_ batch: [ConversationEntry]) {
        for entry in batch {
            bySequence[entry.author, default: [:]][entry.header.sequence] = entry.id
        }
        for entry in batch {
            var time = entry.header.createdAtMillis
            for dependency in entry.header.dependencies {
                if let id = bySequence[dependency.author]?[dependency.sequence], let earlier = displayed[id] {
                    time = max(time, earlier)
                }
            }
            displayed[entry.id] = time
        }
    }

    // MARK: - Folds at causal positions

    /// The group state at `entry`'s causal position: the fold of the valid control records before it.
    mutating func stateBefore(_ entry: ConversationEntry) -> GroupFold {
        let mask = valid.map { $0.entry.precedes(entry) }
        if let cached = foldCache[mask] { return cached }
        let fold = GroupFold(zip(valid, mask).filter(\.1).map(\.0))
        if foldCache.count > 4096 { foldCache.removeAll() }
        foldCache[mask] = fold
        return fold
    }

    func isRemoved(_ author: AuthorID, concurrentWith entry: ConversationEntry) -> Bool {
        valid.contains { control in
            let removes: Bool
            switch control.operation {
            case .remove(let members): removes = members.contains(author)
            case .leave: removes = control.entry.author == author
            default: removes = false
            }
            return removes && control.entry.isConcurrent(with: entry)
        }
    }

    /// Records `entry` as rejected for `reason`, with the epoch whose key reading it took (`rejectedUnder`): its
    /// own for an epoch-opening commit, else the one its header names.
    mutating func reject(_ entry: ConversationEntry, _ reason: String) {
        state.rejected[entry.id] = reason
        if case .control(_, .some) = entry.body {
            state.rejectedUnder[entry.id] = EpochID(raw: entry.id.raw)
        } else {
            state.rejectedUnder[entry.id] = entry.header.epoch
        }
    }

    // MARK: - Control records

    /// Checks a control record and applies it if valid. `notice`: this identity read a removal through its notice
    /// only (it holds not the new key), so everything but the slots and the parents is checked.
    mutating func checkControl(
        _ entry: ConversationEntry, _ operation: ControlOperation, _ opening: EpochOpening?, notice: Bool = false
    ) {
        if let reason = controlProblem(entry, operation, opening, notice: notice) {
            reject(entry, reason)
            return
        }
        valid.append(ValidControl(entry: entry, operation: operation, opening: opening))
        if operation.opensEpoch, let opening {
            let before = stateBefore(entry)
            let roster = resultingRoster(before, entry, operation).sorted()
            state.epochs[EpochID(raw: entry.id.raw)] = EpochInfo(
                id: EpochID(raw: entry.id.raw), roster: roster, parents: opening.parents, position: entry.position)
        }
        let change: SystemEvent.Change
        switch operation {
        case .create(let kind, let title, let members, _): change = .created(kind: kind, title: title, members: members)
        case .add(let members): change = .added(members)
        case .remove(let members): change = .removed(members)
        case .leave: change = .left
        case .rename(let title): change = .renamed(title)
        case .setRole(let member, let role): change = .roleChanged(member, role)
        case .setFlags(let member, let flags): change = .flagsChanged(member, flags)
        case .rekey: change = .rekeyed
        }
        state.items[entry.id] =
            (.system(
                SystemEvent(
                    id: entry.id, author: entry.author, position: entry.position,
                    displayedAtMillis: displayed[entry.id]!,
                    change: change)))
        touched.append(LineTouch(id: entry.id, change: .created))
    }

    func resultingRoster(_ before: GroupFold, _ entry: ConversationEntry, _ operation: ControlOperation) -> Set<
        AuthorID
    > {
        let current = Set(before.members.keys)
        switch operation {
        case .create(_, _, let members, _): return Set(members + [entry.author])
        case .add(let members): return current.union(members)
        case .remove(let members): return current.subtracting(members)
        case .leave: return current.subtracting([entry.author])
        case .rename, .setRole, .setFlags, .rekey: return current
        }
    }

    mutating func controlProblem(
        _ entry: ConversationEntry, _ operation: ControlOperation, _ opening: EpochOpening?, notice: Bool = false
    ) -> String? {
        let author = entry.author
        if opening?.announced == true || notice, !operation.isRemoval { return "only a removal carries a notice" }
        if case .create(let kind, let title, let members, let salt) = operation {
            guard let opening, opening.parents.isEmpty, entry.header.epoch == .none else {
                return "a genesis opens the first epoch"
            }
            guard !members.contains(author), members.count < Limits.groupMembersMax else {
                return "invalid founding members"
            }
            guard GroupTitle.clean(title) == .some(title) else { return "invalid title" }
            switch kind {
            case .group:
                guard ConversationContext.groupID(creator: author, salt: salt) == context.conversation else {
                    return "genesis does not match the conversation id"
                }
            case .direct:
                guard let parties = context.directParties, members.count == 1, title == nil,
                    parties == Set([author, members[0]])
                else { return "not a direct conversation between these two" }
                if valid.contains(where: { $0.entry.author == author }) { return "a second genesis by one author" }
            }
            if let existing = valid.first?.operation, case .create(let existingKind, _, _, _) = existing,
                existingKind != kind || kind == .group
            {
                return "the conversation already exists"
            }
            return rosterProblem(opening, roster: Set(members + [author]))
        }
        let before = stateBefore(entry)
        guard before.kind != nil else { return "no conversation at this point" }
        guard before.members[author] != nil else { return "not a member at this point" }
        if case .remove = operation {
        } else if isRemoved(author, concurrentWith: entry) {
            return "removed concurrently"
        }
        switch operation {
        case .create:
            return "unreachable"
        case .add(let members):
            guard before.canManage(author, flag: .canAdd) else { return "not allowed to add members" }
            guard members.allSatisfy({ before.members[$0] == nil }) else { return "already a member" }
            guard before.members.count + members.count <= Limits.groupMembersMax else { return "group is full" }
        case .remove(let members):
            guard before.kind == .group else { return "members of a direct conversation cannot be removed" }
            for member in members {
                guard let target = before.members[member] else { return "not a member" }
                guard member != author else { return "use leave to remove yourself" }
                guard member != before.creator else { return "the creator cannot be removed" }
                if author == before.creator { continue }
                guard before.canManage(author, flag: .canRemove), target.role == .member else {
                    return "not allowed to remove this member"
                }
            }
        case .leave:
            break
        case .rename(let title):
            guard before.canManage(author, flag: .canRename) else { return "not allowed to rename the group" }
            guard GroupTitle.clean(title) == .some(title) else { return "invalid title" }
        case .setRole(let member, _), .setFlags(let member, _):
            guard before.kind == .group, author == before.creator else { return "only the creator sets roles" }
            guard before.members[member] != nil, member != before.creator else { return "not a member" }
        case .rekey:
            break
        }
        // Read through its notice: the slots and the parents are beyond this reader.
        if notice { return nil }
        if operation.opensEpoch {
            guard let opening, !opening.parents.isEmpty, opening.parents.first == entry.header.epoch else {
                return "an epoch-opening commit must name its parent epochs"
            }
            for parent in opening.parents {
                guard let info = state.epochs[parent], valid.contains(where: { $0.entry.id.raw == parent.raw }),
                    precedesPosition(info.position, entry)
                else { return "unknown parent epoch" }
            }
            if operation.isRemoval, !opening.announced { return "a removal must carry its notice" }
            return rosterProblem(opening, roster: resultingRoster(before, entry, operation))
        }
        return epochProblem(entry, before)
    }

    func precedesPosition(_ position: EntryPosition, _ entry: ConversationEntry) -> Bool {
        guard let commit = valid.first(where: { $0.entry.id == position.id })?.entry else { return false }
        return commit.precedes(entry)
    }

    /// The slots of an opening commit must be sealed to exactly the resulting roster: its roster tags, one per slot
    /// in slot order, are those of the roster's members in the order of their keys (none left out, none added).
    func rosterProblem(_ opening: EpochOpening?, roster: Set<AuthorID>) -> String? {
        guard let opening else { return "missing key slots" }
        guard opening.tags == roster.sorted().map({ KeySlots.rosterTag($0, tagKey: opening.tagKey) }) else {
            return "keys sealed to the wrong members"
        }
        return nil
    }

    /// The epoch rule for records encrypted under an existing epoch: the epoch is valid and known to the author,
    /// the author is in it, and it contains nobody removed before the record (no reuse of an epoch after a removal).
    func epochProblem(_ entry: ConversationEntry, _ before: GroupFold) -> String? {
        guard let epoch = state.epochs[entry.header.epoch], precedesPosition(epoch.position, entry) else {
            return "unknown epoch"
        }
        guard epoch.roster.contains(entry.author) else { return "author is not in the epoch it uses" }
        guard epoch.roster.allSatisfy({ before.members[$0] != nil }) else {
            return "uses an epoch from before a removal"
        }
        return nil
    }

    // MARK: - Epoch choice

    mutating func chooseCurrentEpoch() {
        let ids = state.epochs.keys.sorted()
        let parents = Set(state.epochs.values.flatMap(\.parents))
        state.epochHeads = ids.filter { !parents.contains($0) }
        let roster = state.members.keys.sorted()
        let matching = ids.filter { state.epochs[$0]!.roster == roster }
        // Among epochs with exactly the current roster, drop those another matching epoch descends from; of the
        // concurrent rest, the smallest commit id is current.
        let candidates = matching.filter { candidate in
            let commit = valid.first { $0.entry.id.raw == candidate.raw }!.entry
            return !matching.contains { other in
                other != candidate && commit.precedes(valid.first { $0.entry.id.raw == other.raw }!.entry)
            }
        }
        state.currentEpoch = candidates.min()
        state.rekeyDuty = rekeyDuty(roster: roster)
    }

    /// Who must re-key, or nil. A re-key is due when no epoch matches the roster, and also when some epoch head
    /// leaves out a member (concurrent commits: an add beside a re-key, two adds): a member reads an epoch only
    /// through its own slot or the history chain of a later epoch it holds, so a head sealed without it stays
    /// unreadable to it for good while the others read it, and their states differ (their rejections follow what
    /// they read). The re-key chains every head its author holds. The duty falls to the member in the most heads
    /// (ties: the smallest identity), who holds their keys: with no concurrency that is the smallest member, as
    /// before. Heads with no member left count for nothing (nobody can chain them, and nobody still reads them).
    /// Each such re-key leaves fewer heads without someone, so the duty ends.
    func rekeyDuty(roster: [AuthorID]) -> AuthorID? {
        guard !roster.isEmpty else { return nil }
        let heads = state.epochHeads.compactMap { state.epochs[$0].map { Set($0.roster) } }
            .filter { head in roster.contains(where: head.contains) }
        let leavesOut = heads.contains { head in !roster.allSatisfy(head.contains) }
        guard state.currentEpoch == nil || leavesOut else { return nil }
        let held = roster.map { member in (member, heads.filter { $0.contains(member) }.count) }
        return held.max { a, b in a.1 != b.1 ? a.1 < b.1 : a.0 > b.0 }?.0
    }

    // MARK: - Content records

    mutating func checkContent(_ entry: ConversationEntry, _ operation: ContentOperation) {
        let before = stateBefore(entry)
        var problem = standingProblem(entry, before)
        if problem == nil {
            retractable.append(entry)
            problem = operationProblem(entry, operation, before)
        }
        if let reason = problem {
            reject(entry, reason)
            if reason.hasPrefix("retracted"), let message = newMessage(entry, operation) {
                state.retracted[entry.id] = message
                touched.append(LineTouch(id: entry.id, change: .retracted))
            }
            return
        }
        contentValid.append(entry)
        contentByID[entry.id] = entry
        switch operation {
        case .message, .file:
            state.recipientsAtSend[entry.id] = before.members.keys.filter { $0 != entry.author }.sorted()
            state.items[entry.id] = .message(newMessage(entry, operation)!)
            // A feed's records are processed in sequence order, so each author's list stays ascending.
            state.messageSequences[entry.author, default: []].append(entry.header.sequence)
            touched.append(LineTouch(id: entry.id, change: .created))
        case .edit(let target, let text):
            updateMessage(target, .edited) { message in
                message.versions.append(text)
                if message.versions.count > ConversationLimits.editVersionsMax { message.versions.removeFirst() }
                message.editCount += 1
            }
        case .delete(let target):
            updateMessage(target, .deleted) { message in
                message.deleted = true
                message.versions = []
                message.file = nil
            }
            state.reactions[target] = nil
        case .react(let target, let reaction):
            if state.message(target)?.deleted == false {
                state.reactions[target, default: [:]][entry.author] = reaction
                touched.append(LineTouch(id: target, change: .reaction(entry.author)))
            }
        case .unreact(let target):
            state.reactions[target]?[entry.author] = nil
            if state.reactions[target]?.isEmpty == true { state.reactions[target] = nil }
            touched.append(LineTouch(id: target, change: .reaction(entry.author)))
        case .receipt:
            break
        }
    }

    /// The timeline line a message or file operation starts (nil for other operations). A file message has no text.
    func newMessage(_ entry: ConversationEntry, _ operation: ContentOperation) -> TimelineMessage? {
        let (text, replyTo, file): (String, RecordID?, FileDescriptor?)
        switch operation {
        case .message(let body, let reply): (text, replyTo, file) = (body, reply, nil)
        case .file(let descriptor, let reply): (text, replyTo, file) = ("", reply, descriptor)
        default: return nil
        }
        return TimelineMessage(
            id: entry.id, author: entry.author, sequence: entry.header.sequence, position: entry.position,
            displayedAtMillis: displayed[entry.id]!, replyTo: replyTo, versions: [text], editCount: 0, deleted: false,
            file: file)
    }

    mutating func updateMessage(_ id: RecordID, _ kind: LineTouch.Change, _ change: (inout TimelineMessage) -> Void) {
        guard case .message(var message) = state.items[id] else { return }
        change(&message)
        state.items[id] = .message(message)
        touched.append(LineTouch(id: id, change: kind))
    }

    mutating func contentProblem(_ entry: ConversationEntry, _ operation: ContentOperation, _ before: GroupFold)
        -> String?
    {
        standingProblem(entry, before) ?? operationProblem(entry, operation, before)
    }

    /// Whether the author may write at all where `entry` stands: a member, not removed concurrently (retracted).
    func standingProblem(_ entry: ConversationEntry, _ before: GroupFold) -> String? {
        guard before.kind != nil else { return "no conversation at this point" }
        guard before.members[entry.author] != nil else { return "not a member at this point" }
        if isRemoved(entry.author, concurrentWith: entry) { return "retracted: the author was removed concurrently" }
        return nil
    }

    /// The rules for the operation itself, once the author's standing is checked.
    mutating func operationProblem(_ entry: ConversationEntry, _ operation: ContentOperation, _ before: GroupFold)
        -> String?
    {
        if let problem = epochProblem(entry, before) { return problem }
        func ownMessage(_ target: RecordID) -> String? {
            guard let message = state.message(target), let targetEntry = contentByID[target],
                targetEntry.precedes(entry)
            else { return "names an unknown message" }
            guard message.author == entry.author else { return "only the author may change a message" }
            guard !message.deleted else { return "message deleted" }
            return nil
        }
        switch operation {
        case .message(let text, let replyTo):
            guard MessageText.isClean(text) else { return "text breaks the text rules" }
            if let replyTo, state.message(replyTo) == nil { return "replies to an unknown message" }
        case .file(_, let replyTo):
            if let replyTo, state.message(replyTo) == nil { return "replies to an unknown message" }
        case .edit(let target, let text):
            guard MessageText.isClean(text) else { return "text breaks the text rules" }
            if state.message(target)?.file != nil { return "a file message cannot be edited" }
            return ownMessage(target)
        case .delete(let target):
            return ownMessage(target)
        case .react(let target, _), .unreact(let target):
            if valid.contains(where: { $0.entry.id == target }) { return "cannot react to system messages" }
            guard let message = state.message(target), let targetEntry = contentByID[target],
                targetEntry.precedes(entry)
            else { return "names an unknown message" }
            if message.deleted { return "message deleted" }
        case .receipt(let readUpTo):
            guard entry.header.dependencies.dominates(readUpTo) else { return "reads beyond what it has" }
        }
        return nil
    }

    // MARK: - Receipts

    /// Folds the controls and content accepted since the last call into the receipts (`receiptsThrough`).
    mutating func computeReceipts() {
        var marks = state.receipts
        let fresh = valid[receiptsThrough.controls...].map(\.entry) + contentValid[receiptsThrough.content...]
        receiptsThrough = (valid.count, contentValid.count)
        for entry in fresh {
            var mark = marks[entry.author] ?? ReaderMarks(delivered: VectorClock(), read: VectorClock())
            var own = entry.header.dependencies
            own[entry.author] = max(own[entry.author], entry.header.sequence)
            mark.delivered = mark.delivered.merged(with: own)
            if case .content(.receipt(let readUpTo)) = entry.body {
                mark.read = mark.read.merged(with: readUpTo)
                state.readReceipts[entry.author, default: []].append((readUpTo, displayed[entry.id]!))
            }
            marks[entry.author] = mark
        }
        state.receipts = marks
    }
}
