import ArgumentParser
import NatterCrypto
import NatterStore

/// `natter digest`: a fingerprint of the log, equal on nodes that hold the same records.
struct DigestCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "digest",
        abstract: "Print a digest of the record log (equal on nodes holding the same records).",
        discussion: "First line: `log <hex>`. Then counts: records held and applied, feeds, forked feeds.")

    @OptionGroup var data: DataOption

    func run() throws {
        do {
            let (_, store) = try data.dataDirectory.open()
            let stats = try store.statistics()
            print("log \(Hex.encode(try store.logDigest()))")
            print("records \(stats.recordsHeld) held, \(stats.recordsApplied) applied; feeds \(stats.feeds); "
                + "conversations \(stats.conversations); forked feeds \(stats.forkedFeeds)")
        } catch {
            throw fail(error)
        }
    }
}
