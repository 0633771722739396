import Foundation
import GRDB

#if canImport(Glibc)
import Glibc
#endif

/// Why a node cannot be sure that its own feeds end where its store says: records of its identity may exist, past
/// its stored heads, on other nodes. Writing then would give two records the same place in a feed — a self-fork,
/// which freezes that feed on every node (DESIGN §3). While a doubt stands, `RecordStore.appendOwn` refuses
/// (`StoreError.ownHeadsUnconfirmed`); it is lifted once a peer that knows this identity has synced with the node
/// (`NodeCore`), or when the user forces it. Persisted in `meta`, so a restart does not forget it
/// (docs/protocol.md §9.2).
public enum OwnHeadsDoubt: String, Sendable, CaseIterable {
    /// The identity was imported into this directory (`natter identity import`): everything it wrote is elsewhere.
    case imported
    /// The data directory is not where it was last opened: copied, restored from a backup, or moved to another
    /// machine (its home marker changed, `DataDirectoryHome`). The original may have written on since.
    case copied = "moved"
    /// A peer brought records of this identity that the store lacked, before its first sync with it completed.
    case peerAhead = "peer-ahead"

    /// What happened, for the one line that says why sending waits.
    public var explanation: String {
        switch self {
        case .imported: "this identity was imported here and has not yet learned its feeds from a peer"
        case .copied:
            "this data directory was copied, restored or moved since it was last used, so its own feeds may be behind"
        case .peerAhead: "a peer holds records of this identity that this node lacked; they are still arriving"
        }
    }
}

/// Where a data directory lives: the machine (`/etc/machine-id`) and the inode numbers of the directory and of its
/// database file. A copy, a restore from a backup or a move to another machine changes at least one of them; a
/// restart, a reboot or renaming the directory on its file system changes none. Device numbers are left out: they
/// can change across reboots (device-mapper, USB disks, btrfs subvolumes) and would make a normal restart wait.
struct DataDirectoryHome: Equatable {
    let machine: String
    let directoryInode: UInt64
    let databaseInode: UInt64

    /// The text stored in `meta` under `home`: `machine=<id> directory=<inode> database=<inode>`.
    var text: String { "machine=\(machine) directory=\(directoryInode) database=\(databaseInode)" }

    /// The home of `directory` now; nil when it cannot be read (then no marker is kept or compared).
    static func current(directory: String, database: String) -> DataDirectoryHome? {
        var directoryInfo = stat()
        var databaseInfo = stat()
        guard stat(directory, &directoryInfo) == 0, stat(database, &databaseInfo) == 0 else { return nil }
        return DataDirectoryHome(
            machine: machineID(), directoryInode: UInt64(directoryInfo.st_ino),
            databaseInode: UInt64(databaseInfo.st_ino))
    }

    /// The systemd/D-Bus machine id, or empty where there is none (many containers): then the inodes alone decide.
    private static func machineID() -> String {
        for path in ["/etc/machine-id", "/var/lib/dbus/machine-id"] {
            // A missing or unreadable file only means this source of the machine's identity is not there.
            guard let text = try? String(contentsOfFile: path, encoding: .utf8) else { continue }
            let id = text.trimmingCharacters(in: .whitespacesAndNewlines)
            if !id.isEmpty, id.count <= 64, id.allSatisfy(\.isHexDigit) { return id }
        }
        return ""
    }
}

extension RecordStore {
    /// Why this node may not write now (nil: its feeds are current as far as it can tell).
    public var ownHeadsDoubt: OwnHeadsDoubt? { ownHeads.withLock { $0 } }

    /// Stops own writes until `confirmOwnHeads` (persisted). An earlier doubt stands: its reason is the first cause.
    public func doubtOwnHeads(_ doubt: OwnHeadsDoubt) throws(StoreError) {
        guard ownHeadsDoubt == nil else { return }
        do {
            try writeTransaction { db in
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('own_heads_doubt', ?)",
                    arguments: [Data(doubt.rawValue.utf8)])
            }
        } catch {
            throw .database("\(error)")
        }
        ownHeads.withLock { $0 = doubt }
    }

    /// Lifts the doubt: own writes continue from the stored heads. Returns the doubt that was lifted, if any.
    @discardableResult
    public func confirmOwnHeads() throws(StoreError) -> OwnHeadsDoubt? {
        guard let doubt = ownHeadsDoubt else { return nil }
        do {
            try writeTransaction { db in try db.execute(sql: "DELETE FROM meta WHERE key = 'own_heads_doubt'") }
        } catch {
            throw .database("\(error)")
        }
        ownHeads.withLock { $0 = nil }
        return doubt
    }

    /// The doubt stored in `db` (an unknown value, from a newer natter, counts as a copy: the safe reading).
    static func storedDoubt(_ db: Database) throws -> OwnHeadsDoubt? {
        guard let value = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'own_heads_doubt'") else {
            return nil
        }
        return OwnHeadsDoubt(rawValue: String(decoding: value, as: UTF8.self)) ?? .copied
    }

    /// Compares the directory's home (`DataDirectoryHome`) with the one stored the last time it was opened, and
    /// doubts the own heads when it changed; then stores the current one. A store opened for the first time (or
    /// written by a natter that kept no marker) just records its home.
    func checkHome(directory: String, database: String) throws(StoreError) {
        guard let home = DataDirectoryHome.current(directory: directory, database: database) else { return }
        let doubt: OwnHeadsDoubt?
        do {
            // A restart where the directory was: one read on the writer's connection (already open; a reader would
            // open another connection), no transaction.
            let unmoved = try writer.writeWithoutTransaction { db in
                try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'home'") == Data(home.text.utf8)
            }
            if unmoved { return }
            // The new marker and the doubt commit together: a crash in between must not leave the move forgotten.
            doubt = try writeTransaction { db in
                let stored = try Data.fetchOne(db, sql: "SELECT value FROM meta WHERE key = 'home'")
                    .map { String(decoding: $0, as: UTF8.self) }
                guard stored != home.text else { return try Self.storedDoubt(db) }
                try db.execute(
                    sql: "INSERT OR REPLACE INTO meta (key, value) VALUES ('home', ?)",
                    arguments: [Data(home.text.utf8)])
                if stored != nil, try Self.storedDoubt(db) == nil {
                    try db.execute(
                        sql: "INSERT INTO meta (key, value) VALUES ('own_heads_doubt', ?)",
                        arguments: [Data(OwnHeadsDoubt.copied.rawValue.utf8)])
                }
                return try Self.storedDoubt(db)
            }
        } catch {
            throw .database("\(error)")
        }
        ownHeads.withLock { $0 = doubt }
    }
}
