import ArgumentParser
import NatterCrypto
import NatterModel
import NatterStore

/// `natter digest`: a fingerprint of the log, equal on nodes that hold the same records.
struct DigestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest",
        abstract: "Print a digest of the record log (equal on nodes holding the same records).",
        discussion: """
            First line: `log <hex>`. Then counts: records held and applied, feeds, forked feeds. Then one line per \
            conversation this node is a member of: `conversation <id> <hex>`, the digest of its shared state \
            (equal on every member holding the same records).
            """)

    @OptionGroup var data: DataOption

    func run() throws {
        do {
            let (identity, store) = try data.dataDirectory.open()
            let stats = try store.statistics()
            print("log \(Hex.encode(try store.logDigest()))")
            print(
                "records \(stats.recordsHeld) held, \(stats.recordsApplied) applied; feeds \(stats.feeds); "
                    + "conversations \(stats.conversations); forked feeds \(stats.forkedFeeds)")
            let conversations = Conversations(store: store, identity: identity)
            for id in try store.conversationIDs() {
                let isProfileFeed = try store.feeds(of: id).contains { $0.conversation == .profileFeed(of: $0.author) }
                guard !isProfileFeed else { continue }
                let state = try conversations.snapshot(of: id).state
                guard state.exists, state.members[identity.author] != nil else { continue }
                print("conversation \(id.hex) \(Hex.encode(state.digest()))")
            }
        } catch {
            throw fail(error)
        }
    }
}
