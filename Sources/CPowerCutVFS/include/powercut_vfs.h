// A SQLite VFS for tests that simulates power cuts: every write not yet fsynced is lost when the power is cut.
//
// SIGKILL tests cannot see a missing fsync (the page cache outlives the process); this VFS can. It wraps the
// default ("unix") VFS and becomes SQLite's default while installed, because GRDB has no VFS option and natter's
// store builds its own database path. Only files under the installed directory are tracked; every other file
// (other tests' databases, in-memory and temporary files) goes straight through to the real VFS, untouched by a cut.
//
// The model: the disk holds, for each tracked file, its contents as of its last xSync, and the directory holds
// the names as of the last directory sync. Between syncs the VFS writes through to the real file but remembers
// what a power cut would take back: the old bytes of every 4 KiB block overwritten since the last sync and the
// size at that sync (an undo log), names created since the last directory sync (they vanish) and names deleted
// without a directory sync (the file is kept under a hidden name and comes back). A directory sync happens, as in
// SQLite's unix VFS, on the first xSync of a journal or WAL opened with SQLITE_OPEN_CREATE, and on xDelete with
// syncDir. `powercut_simulate` rolls every tracked file and name back to that durable state, then makes every
// later I/O on the handles open at the time fail with SQLITE_IOERR: the crashed connections can do nothing more
// and must be closed before the files are opened again (`powercut_reset`).
//
// Not modelled: unsynced writes that happen to reach the disk anyway, reordering among them, torn sectors, the
// -shm file (never synced by SQLite; a new connection rebuilds the wal-index from the WAL once every old
// connection is closed), and the directory entry of a file the VFS finds already existing when first opened,
// which is taken as durable (natter creates natter.sqlite itself, before SQLite opens it). All tracked files are
// taken to live in one directory.
#ifndef POWERCUT_VFS_H
#define POWERCUT_VFS_H

#ifdef __cplusplus
extern "C" {
#endif

/// What the VFS has seen since it was installed.
typedef struct powercut_stats {
    /// Durability events on tracked files: writes, truncations, syncs and deletes (the units `powercut_arm` counts).
    long long events;
    /// Successful xSync calls on tracked files.
    long long syncs;
    /// Power cuts so far.
    long long cuts;
    /// Bytes the last cut took back: truncated off, or rewritten with their content at the last sync.
    long long last_cut_bytes;
    /// Names the last cut removed (created since the last directory sync) or brought back (deleted without one).
    long long last_cut_names;
    /// The event an armed cut interrupted: 0 none (explicit `powercut_simulate`), 1 write, 2 truncate, 3 sync,
    /// 4 delete.
    int last_cut_event;
    /// Tracked handles open now.
    int open_files;
    /// Of those, handles that were open at a cut and are dead.
    int dead_files;
} powercut_stats;

/// Installs the VFS as SQLite's default and tracks every file under `directory`. Returns 0 (SQLITE_OK), or a
/// SQLite error code: SQLITE_MISUSE if already installed, SQLITE_CANTOPEN if `directory` cannot be resolved.
int powercut_install(const char *directory);

/// Restores the previous default VFS and forgets the tracked files. Connections opened meanwhile keep working
/// (untracked) through the VFS's pass-through. Returns how many tracked handles were still open (0 is expected).
int powercut_uninstall(void);

/// Cuts the power now: every tracked file and name goes back to its durable state, and every later I/O on the
/// tracked handles open now fails. Opening tracked files fails until `powercut_reset`.
void powercut_simulate(void);

/// Arms a cut at the `events`-th durability event from now (see `powercut_stats.events`): that event does not
/// happen and fails as the power goes. 0 disarms; either way any cut armed before is replaced.
void powercut_arm(long long events);

/// Arms a cut at the `syncs`-th xSync of a tracked file from now: the moment a commit's writes are all done and not
/// yet durable. 0 disarms. Replaces any cut armed before (as `powercut_arm` does).
void powercut_arm_at_sync(long long syncs);

/// After a cut, once the crashed connections are closed: lets tracked files be opened again. Returns the number of
/// dead handles still open; the reset happens only when that is 0.
int powercut_reset(void);

/// A snapshot of the counters.
powercut_stats powercut_get_stats(void);

#ifdef __cplusplus
}
#endif

#endif
