import Foundation
import NatterCrypto
import NatterModel
import NatterNode

/// The people the REPL knows: display names from profiles (kept current by the node's `profile` events), and those
/// the user ignores or blocks (remembered in the ignore file when there is one).
struct People {
    let me: AuthorID
    private var names: [AuthorID: String] = [:]
    /// The names as a `NameBook` (rebuilt when a name changes: duplicates get fingerprints).
    private(set) var book: NameBook
    private(set) var ignored = Set<AuthorID>()
    private(set) var blocked = Set<AuthorID>()
    private let ignoreFile: String?

    init(me: AuthorID, ignoreFile: String?) {
        self.me = me
        self.ignoreFile = ignoreFile
        book = NameBook(names: [:], me: me)
        load()
    }

    /// Starts from every profile the store holds.
    mutating func know(_ all: [AuthorID: String]) {
        names = all
        book = NameBook(names: names, me: me)
    }

    /// A profile arrived or changed.
    mutating func named(_ person: AuthorID, _ name: String?) {
        guard names[person] != name else { return }
        names[person] = name
        book = NameBook(names: names, me: me)
    }

    func isHidden(_ person: AuthorID) -> Bool { ignored.contains(person) || blocked.contains(person) }

    /// Adds `person` to the ignored (or blocked) people, or removes them, and saves the lists; returns whether they
    /// are in it now.
    mutating func toggle(_ person: AuthorID, blocking: Bool) throws -> Bool {
        var set = blocking ? blocked : ignored
        let added = set.remove(person) == nil
        if added { set.insert(person) }
        if blocking { blocked = set } else { ignored = set }
        try save()
        return added
    }

    private mutating func load() {
        guard let ignoreFile, FileManager.default.fileExists(atPath: ignoreFile) else { return }
        // A file that cannot be read leaves nobody ignored; the next change rewrites it.
        guard let text = try? String(contentsOfFile: ignoreFile, encoding: .utf8) else { return }
        for line in text.split(separator: "\n") {
            let parts = line.split(separator: " ")
            guard parts.count == 2, let bytes = Hex.decode(String(parts[1])), bytes.count == 32 else { continue }
            let author = AuthorID(bytes: bytes)
            if parts[0] == "block" { blocked.insert(author) } else { ignored.insert(author) }
        }
    }

    private func save() throws {
        guard let ignoreFile else { return }
        let lines = ignored.sorted().map { "ignore \($0.hex)" } + blocked.sorted().map { "block \($0.hex)" }
        guard
            FileManager.default.createFile(
                atPath: ignoreFile, contents: Data((lines.joined(separator: "\n") + "\n").utf8),
                attributes: [.posixPermissions: 0o600])
        else { throw ReplError("cannot save \(ignoreFile): the change lasts until the node stops") }
    }
}

/// Where the person is: the conversation open, the numbering of the last `/list`, how far back `/more` has shown,
/// the last search's results, and their own last message (`last`).
struct Navigation {
    enum Current: Equatable {
        case none
        case conversation(ConversationID)
        /// A direct chat with no messages yet: the first line founds it.
        case direct(AuthorID)
    }

    var current = Current.none
    /// Conversations as `/list` last numbered them.
    var listed: [ConversationID] = []
    /// Index into the timeline of the oldest line shown, per conversation (for /more).
    var shownFrom: [ConversationID: Int] = [:]
    /// The last search's results, so `/open REF` jumps to one.
    var searchResults: [(conversation: ConversationID, message: RecordID)] = []
    /// This person's last message (for `last`).
    var lastOwn: (conversation: ConversationID, id: RecordID)?

    var currentConversation: ConversationID? {
        if case .conversation(let id) = current { return id }
        return nil
    }
}

/// Files asked for with `/save`: where each goes once its chunks are here, and which were saved (`/wait saved`).
struct FileSaves {
    struct Pending {
        let conversation: ConversationID
        let path: String
        let overwrite: Bool
        let ref: String
    }

    private var pending: [RecordID: Pending] = [:]
    private var saved = Set<RecordID>()

    mutating func waitFor(_ message: RecordID, _ save: Pending) { pending[message] = save }
    func pending(_ message: RecordID) -> Pending? { pending[message] }
    mutating func take(_ message: RecordID) -> Pending? { pending.removeValue(forKey: message) }
    mutating func saved(_ message: RecordID) { saved.insert(message) }
    func isSaved(_ message: RecordID) -> Bool { saved.contains(message) }
}
