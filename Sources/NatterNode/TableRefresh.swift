import NatterModel
import NatterStore

extension Conversations {
    /// Brings the conversation tables up to date (`refreshReducingJunk`) and tells what changed: the events (profiles
    /// first, then each conversation's delta, in order) and the conversations that gained lines (which may owe
    /// receipts), or a notice of why the tables could not be brought up to date.
    func refreshEvents() -> (events: [NodeAction], newLines: [ConversationID]) {
        let refreshed: Refreshed
        do {
            refreshed = try refreshReducingJunk()
        } catch {
            return ([.event(.notice("store: cannot bring the conversation tables up to date (\(error))"))], [])
        }
        var events = profileEvents(refreshed.profiles)
        var newLines = [ConversationID]()
        for conversation in refreshed.deltas.keys.sorted() {
            let delta = refreshed.deltas[conversation]!
            if delta.lines.contains(where: { $0.kind == .new }) { newLines.append(conversation) }
            if !delta.isEmpty { events.append(.event(.conversation(delta))) }
        }
        return (events, newLines)
    }

    /// Brings the conversation tables up to date (`refreshChanged`), then reduces the junk feeds of the conversations
    /// that changed to their frontier and, if any was reduced, refreshes again. Junk records were rejected by the
    /// rules, so dropping them changes no line: the first refresh's deltas stand, and the second adds those of
    /// conversations only it found changed. A failure leaves the conversations marked dirty: the next refresh retries.
    func refreshReducingJunk() throws -> Refreshed {
        var refreshed = try refreshChanged()
        let reduced = try refreshed.deltas.keys.sorted().filter { !(try reduceJunk(in: $0)).isEmpty }
        if !reduced.isEmpty {
            for (conversation, delta) in try refreshChanged().deltas where refreshed.deltas[conversation] == nil {
                refreshed.deltas[conversation] = delta
            }
        }
        return refreshed
    }

    /// The events telling of `authors`' new profiles, in order. A profile that cannot be read now shows as no name
    /// (the fingerprint) until the next one arrives.
    func profileEvents(_ authors: [AuthorID]) -> [NodeAction] {
        authors.sorted().map { .event(.profile($0, name: (try? profile(of: $0))??.name)) }
    }
}
