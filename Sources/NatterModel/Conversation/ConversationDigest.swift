import NatterCrypto

extension ConversationState {
    /// A digest of the state every member shares — roster, roles, epochs, timeline, reactions, receipts, rejections
    /// — and nothing viewer-specific (unread counts, mute, archive, receive times). Equal on every member that holds
    /// the same records. Layout: docs/protocol.md, "Conversation digest".
    public func digest() -> [UInt8] {
        var out = [UInt8]()
        func add(_ bytes: [UInt8]) {
            appendBigEndian(UInt32(bytes.count), to: &out)
            out += bytes
        }
        func add(_ text: String?) { add(text.map { [1] + Array($0.utf8) } ?? [0]) }
        func add(_ value: UInt64) { appendBigEndian(value, to: &out) }
        func add(_ clock: VectorClock) {
            var bytes = [UInt8]()
            bytes.appendClock(clock)
            add(bytes)
        }
        out += Array("natter/v1/conversation-digest".utf8)
        out.append(kind?.rawValue ?? 0)
        add(title)
        add(creator?.bytes ?? [])
        for member in sortedMembers {
            let info = members[member]!
            add(member.bytes)
            out += [info.role.rawValue, info.flags.rawValue]
            add(info.joined.lamport)
            add(info.joined.id.bytes)
        }
        add("epochs")
        for epoch in epochs.keys.sorted() {
            let info = epochs[epoch]!
            add(epoch.bytes)
            add(info.roster.flatMap(\.bytes))
            add(info.parents.flatMap(\.bytes))
        }
        add(currentEpoch?.bytes ?? [])
        add("timeline")
        for item in timeline {
            switch item {
            case .message(let message):
                out.append(1)
                add(message.id.bytes)
                add(UInt64(bitPattern: message.displayedAtMillis))
                add(message.replyTo?.bytes ?? [])
                for version in message.versions { add(version) }
                add(UInt64(message.editCount))
                out.append(message.deleted ? 1 : 0)
                if let file = message.file {
                    // Files only: text messages keep the digest they had before files existed.
                    add("file")
                    add(file.name)
                    add(file.mediaType)
                    add(file.size)
                    add(file.plaintextHash.bytes)
                    add(file.chunks.flatMap(\.bytes))
                }
            case .system(let event):
                out.append(2)
                add(event.id.bytes)
                add(UInt64(bitPattern: event.displayedAtMillis))
                add(event.digestText)
            }
        }
        add("reactions")
        for message in reactions.keys.sorted() {
            add(message.bytes)
            for (person, reaction) in reactions[message]!.sorted(by: { $0.key < $1.key }) {
                add(person.bytes)
                out.append(reaction.rawValue)
            }
        }
        add("receipts")
        for reader in receipts.keys.sorted() {
            add(reader.bytes)
            add(receipts[reader]!.delivered)
            add(receipts[reader]!.read)
        }
        add("rejected")
        let shared = sharedRejections
        for id in shared.keys.sorted() {
            add(id.bytes)
            add(shared[id]!)
        }
        return Blake2b.hash(out, outputBytes: 32)
    }
}
