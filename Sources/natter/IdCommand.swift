import ArgumentParser
import NatterCrypto
import NatterStore

/// `natter id`: who this node is.
struct IdCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "id", abstract: "Print this node's fingerprint, public keys and display name.")

    @OptionGroup var data: DataOption

    func run() throws {
        let handle = data.dataDirectory
        do {
            let (identity, store) = try handle.open()
            let network = try handle.directory.readNetworkKey()
            let profile = try handle.profile(of: identity.author, in: store)
            print("fingerprint \(identity.signing.publicKey.fingerprint)")
            print("identity    \(Hex.encode(identity.signing.publicKey.bytes))")
            print("encryption  \(Hex.encode(identity.encryption.publicKey.bytes))")
            print("name        \(profile?.name ?? "(none)")")
            print("network     \(network.isDefault ? "default (public)" : "private")")
            print("data        \(handle.directory.path)")
        } catch {
            throw fail(error)
        }
    }
}
