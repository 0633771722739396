// The power-cut VFS: see include/powercut_vfs.h for the model and what it leaves out.
#include "powercut_vfs.h"

#include <sqlite3.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PC_BLOCK 4096
#define PC_ROUND8(n) (((n) + 7) & ~(size_t)7)

// MARK: - State

/// The content of one block at the last sync.
typedef struct pc_block {
    sqlite3_int64 index;
    int length;
    unsigned char bytes[];
} pc_block;

/// One file (an inode): its size at the last sync and the undo log of blocks overwritten since.
typedef struct pc_inode {
    struct pc_inode *next;
    sqlite3_int64 synced_size;
    pc_block **slots;  // open addressing by block index; NULL = empty
    size_t capacity;   // 0 or a power of two
    size_t count;
    char *backup;      // the hidden name it is kept under while deleted without a directory sync
} pc_inode;

/// One name in the tracked directory: the file it names now, and the file it names on disk after a power cut.
typedef struct pc_entry {
    struct pc_entry *next;
    char *path;
    pc_inode *current;
    pc_inode *durable;
} pc_entry;

/// An open file. The real VFS's file follows it in the same allocation.
typedef struct pc_file {
    sqlite3_file base;
    sqlite3_file *real;
    pc_inode *inode;  // NULL when untracked
    int dead;
    int dirsync_pending;
    struct pc_file *prev, *next;
} pc_file;

static pthread_mutex_t pc_mutex = PTHREAD_MUTEX_INITIALIZER;
static pthread_once_t pc_once = PTHREAD_ONCE_INIT;
static sqlite3_vfs pc_vfs;
static sqlite3_vfs *pc_real;
static int pc_installed;
static char *pc_prefix;  // "/resolved/directory/"
static size_t pc_prefix_length;
static pc_entry *pc_entries;
static pc_inode *pc_inodes;
static pc_file *pc_files;
static int pc_crashed;
static long long pc_countdown;
static long long pc_sync_countdown;
static long long pc_backups;
static powercut_stats pc_stats;

// MARK: - Undo log

static size_t pc_hash(sqlite3_int64 index, size_t capacity) {
    return (size_t)(((uint64_t)index * UINT64_C(0x9E3779B97F4A7C15)) >> 17) & (capacity - 1);
}

static pc_block *pc_find_block(const pc_inode *inode, sqlite3_int64 index) {
    if (inode->capacity == 0) return NULL;
    for (size_t slot = pc_hash(index, inode->capacity);; slot = (slot + 1) & (inode->capacity - 1)) {
        pc_block *block = inode->slots[slot];
        if (block == NULL || block->index == index) return block;
    }
}

static void pc_insert(pc_block **slots, size_t capacity, pc_block *block) {
    size_t slot = pc_hash(block->index, capacity);
    while (slots[slot] != NULL) slot = (slot + 1) & (capacity - 1);
    slots[slot] = block;
}

static int pc_put_block(pc_inode *inode, pc_block *block) {
    if ((inode->count + 1) * 2 > inode->capacity) {
        size_t capacity = inode->capacity ? inode->capacity * 2 : 64;
        pc_block **slots = calloc(capacity, sizeof *slots);
        if (slots == NULL) return SQLITE_NOMEM;
        for (size_t i = 0; i < inode->capacity; i++) {
            if (inode->slots[i] != NULL) pc_insert(slots, capacity, inode->slots[i]);
        }
        free(inode->slots);
        inode->slots = slots;
        inode->capacity = capacity;
    }
    pc_insert(inode->slots, inode->capacity, block);
    inode->count++;
    return SQLITE_OK;
}

static void pc_clear_blocks(pc_inode *inode) {
    for (size_t i = 0; i < inode->capacity; i++) free(inode->slots[i]);
    free(inode->slots);
    inode->slots = NULL;
    inode->capacity = 0;
    inode->count = 0;
}

/// Remembers the synced content of every block in [start, end) not remembered yet. Bytes at or beyond the synced
/// size need nothing: a cut truncates them away.
static int pc_save_range(pc_file *file, sqlite3_int64 start, sqlite3_int64 end) {
    pc_inode *inode = file->inode;
    if (end > inode->synced_size) end = inode->synced_size;
    if (start < 0) start = 0;
    if (start >= end) return SQLITE_OK;
    for (sqlite3_int64 index = start / PC_BLOCK; index * PC_BLOCK < end; index++) {
        if (pc_find_block(inode, index) != NULL) continue;
        sqlite3_int64 offset = index * PC_BLOCK;
        int length = (int)(inode->synced_size - offset < PC_BLOCK ? inode->synced_size - offset : PC_BLOCK);
        pc_block *block = malloc(sizeof *block + (size_t)length);
        if (block == NULL) return SQLITE_IOERR_NOMEM;
        block->index = index;
        block->length = length;
        // Every byte below the synced size that is not in the log is still on disk as it was synced.
        int rc = file->real->pMethods->xRead(file->real, block->bytes, length, offset);
        if (rc != SQLITE_OK) {
            free(block);
            return rc == SQLITE_IOERR_SHORT_READ ? SQLITE_IOERR_READ : rc;
        }
        if (pc_put_block(inode, block) != SQLITE_OK) {
            free(block);
            return SQLITE_IOERR_NOMEM;
        }
    }
    return SQLITE_OK;
}

// MARK: - Names

static pc_inode *pc_new_inode(sqlite3_int64 synced_size) {
    pc_inode *inode = calloc(1, sizeof *inode);
    if (inode == NULL) return NULL;
    inode->synced_size = synced_size;
    inode->next = pc_inodes;
    pc_inodes = inode;
    return inode;
}

static pc_entry *pc_find_entry(const char *path) {
    for (pc_entry *entry = pc_entries; entry != NULL; entry = entry->next) {
        if (strcmp(entry->path, path) == 0) return entry;
    }
    return NULL;
}

static pc_entry *pc_add_entry(const char *path) {
    pc_entry *entry = calloc(1, sizeof *entry);
    if (entry == NULL) return NULL;
    entry->path = strdup(path);
    if (entry->path == NULL) {
        free(entry);
        return NULL;
    }
    entry->next = pc_entries;
    pc_entries = entry;
    return entry;
}

static int pc_is_named(const pc_inode *inode) {
    for (const pc_entry *entry = pc_entries; entry != NULL; entry = entry->next) {
        if (entry->current == inode || entry->durable == inode) return 1;
    }
    return 0;
}

/// Drops the hidden copy of a deleted file once no name, now or after a cut, refers to it.
static void pc_drop_backup_if_unnamed(pc_inode *inode) {
    if (inode != NULL && inode->backup != NULL && !pc_is_named(inode)) {
        unlink(inode->backup);
        free(inode->backup);
        inode->backup = NULL;
    }
}

/// The directory was synced: every name as it is now is durable.
static void pc_directory_synced(void) {
    for (pc_entry *entry = pc_entries; entry != NULL; entry = entry->next) {
        if (entry->durable != entry->current) {
            pc_inode *old = entry->durable;
            entry->durable = entry->current;
            pc_drop_backup_if_unnamed(old);
        }
    }
}

/// Whether the handle was open at a cut (set under the mutex, read from any thread).
static int pc_dead(const pc_file *file) {
    return __atomic_load_n(&file->dead, __ATOMIC_ACQUIRE);
}

static int pc_tracked_path(const char *path) {
    return path != NULL && pc_prefix != NULL && strncmp(path, pc_prefix, pc_prefix_length) == 0;
}

// MARK: - The cut

/// Puts `inode`'s synced content back into the file at `path`; returns the bytes taken back.
static long long pc_restore(const char *path, const pc_inode *inode) {
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "powercut: cannot open %s to roll it back: %s\n", path, strerror(errno));
        return 0;
    }
    long long taken = 0;
    struct stat info;
    if (fstat(fd, &info) == 0 && info.st_size > inode->synced_size) taken += info.st_size - inode->synced_size;
    if (ftruncate(fd, inode->synced_size) != 0) {
        fprintf(stderr, "powercut: cannot truncate %s: %s\n", path, strerror(errno));
    }
    for (size_t i = 0; i < inode->capacity; i++) {
        const pc_block *block = inode->slots[i];
        if (block == NULL) continue;
        if (pwrite(fd, block->bytes, (size_t)block->length, (off_t)(block->index * PC_BLOCK)) != block->length) {
            fprintf(stderr, "powercut: cannot roll back %s: %s\n", path, strerror(errno));
        }
        taken += block->length;
    }
    close(fd);
    return taken;
}

static void pc_cut_locked(int event) {
    long long bytes = 0, names = 0;
    for (pc_entry *entry = pc_entries; entry != NULL; entry = entry->next) {
        pc_inode *target = entry->durable, *current = entry->current;
        if (current != NULL && current != target) {
            // Created (or re-created) since the last directory sync: the name is not on disk.
            if (unlink(entry->path) != 0) {
                fprintf(stderr, "powercut: cannot remove %s: %s\n", entry->path, strerror(errno));
            }
            names++;
        }
        if (target != NULL && target != current) {
            // Deleted without a directory sync: the file is still there under its old name.
            if (target->backup == NULL || rename(target->backup, entry->path) != 0) {
                fprintf(stderr, "powercut: cannot bring back %s\n", entry->path);
            }
            free(target->backup);
            target->backup = NULL;
            names++;
        }
        if (target != NULL) bytes += pc_restore(entry->path, target);
        entry->current = target;
    }
    for (pc_inode *inode = pc_inodes; inode != NULL; inode = inode->next) {
        pc_clear_blocks(inode);
        pc_drop_backup_if_unnamed(inode);
    }
    for (pc_file *file = pc_files; file != NULL; file = file->next) __atomic_store_n(&file->dead, 1, __ATOMIC_RELEASE);
    pc_crashed = 1;
    pc_countdown = 0;
    pc_sync_countdown = 0;
    pc_stats.cuts++;
    pc_stats.last_cut_bytes = bytes;
    pc_stats.last_cut_names = names;
    pc_stats.last_cut_event = event;
}

/// Counts a durability event on a live tracked file; returns 1 when an armed cut fires instead of it.
static int pc_event(int kind) {
    pc_stats.events++;
    int fire = pc_countdown > 0 && --pc_countdown == 0;
    if (kind == 3 && pc_sync_countdown > 0 && --pc_sync_countdown == 0) fire = 1;
    if (fire) pc_cut_locked(kind);
    return fire;
}

// MARK: - File methods

static int pcClose(sqlite3_file *base) {
    pc_file *file = (pc_file *)base;
    if (file->inode != NULL) {
        pthread_mutex_lock(&pc_mutex);
        if (file->prev != NULL) file->prev->next = file->next;
        else pc_files = file->next;
        if (file->next != NULL) file->next->prev = file->prev;
        pthread_mutex_unlock(&pc_mutex);
    }
    return file->real->pMethods->xClose(file->real);
}

static int pcRead(sqlite3_file *base, void *buffer, int amount, sqlite3_int64 offset) {
    pc_file *file = (pc_file *)base;
    if (file->inode == NULL) return file->real->pMethods->xRead(file->real, buffer, amount, offset);
    pthread_mutex_lock(&pc_mutex);
    int rc = pc_dead(file) ? SQLITE_IOERR_READ : file->real->pMethods->xRead(file->real, buffer, amount, offset);
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcWrite(sqlite3_file *base, const void *buffer, int amount, sqlite3_int64 offset) {
    pc_file *file = (pc_file *)base;
    if (file->inode == NULL) return file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    pthread_mutex_lock(&pc_mutex);
    int rc;
    if (pc_dead(file) || pc_event(1)) {
        rc = SQLITE_IOERR_WRITE;
    } else {
        rc = pc_save_range(file, offset, offset + amount);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xWrite(file->real, buffer, amount, offset);
    }
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcTruncate(sqlite3_file *base, sqlite3_int64 size) {
    pc_file *file = (pc_file *)base;
    if (file->inode == NULL) return file->real->pMethods->xTruncate(file->real, size);
    pthread_mutex_lock(&pc_mutex);
    int rc;
    if (pc_dead(file) || pc_event(2)) {
        rc = SQLITE_IOERR_TRUNCATE;
    } else {
        rc = pc_save_range(file, size, LLONG_MAX);
        if (rc == SQLITE_OK) rc = file->real->pMethods->xTruncate(file->real, size);
    }
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcSync(sqlite3_file *base, int flags) {
    pc_file *file = (pc_file *)base;
    if (file->inode == NULL) return file->real->pMethods->xSync(file->real, flags);
    pthread_mutex_lock(&pc_mutex);
    int rc;
    if (pc_dead(file) || pc_event(3)) {
        rc = SQLITE_IOERR_FSYNC;
    } else {
        rc = file->real->pMethods->xSync(file->real, flags);
        sqlite3_int64 size = 0;
        if (rc == SQLITE_OK) rc = file->real->pMethods->xFileSize(file->real, &size);
        if (rc == SQLITE_OK) {
            // fsync (or fdatasync) makes the content and the size durable.
            pc_clear_blocks(file->inode);
            file->inode->synced_size = size;
            pc_stats.syncs++;
            if (file->dirsync_pending) {
                // The unix VFS syncs the directory on the first sync of a journal or WAL it was asked to create.
                file->dirsync_pending = 0;
                pc_directory_synced();
            }
        }
    }
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcFileSize(sqlite3_file *base, sqlite3_int64 *size) {
    pc_file *file = (pc_file *)base;
    if (file->inode == NULL) return file->real->pMethods->xFileSize(file->real, size);
    pthread_mutex_lock(&pc_mutex);
    int rc = pc_dead(file) ? SQLITE_IOERR_FSTAT : file->real->pMethods->xFileSize(file->real, size);
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcLock(sqlite3_file *base, int level) {
    pc_file *file = (pc_file *)base;
    if (pc_dead(file)) return SQLITE_IOERR_LOCK;
    return file->real->pMethods->xLock(file->real, level);
}

static int pcUnlock(sqlite3_file *base, int level) {
    // Releasing is allowed even on a dead handle: it frees the real VFS's bookkeeping and persists nothing.
    pc_file *file = (pc_file *)base;
    return file->real->pMethods->xUnlock(file->real, level);
}

static int pcCheckReservedLock(sqlite3_file *base, int *result) {
    pc_file *file = (pc_file *)base;
    if (pc_dead(file)) {
        *result = 0;
        return SQLITE_IOERR_CHECKRESERVEDLOCK;
    }
    return file->real->pMethods->xCheckReservedLock(file->real, result);
}

static int pcFileControl(sqlite3_file *base, int op, void *argument) {
    pc_file *file = (pc_file *)base;
    if (pc_dead(file)) return SQLITE_NOTFOUND;
    return file->real->pMethods->xFileControl(file->real, op, argument);
}

static int pcSectorSize(sqlite3_file *base) {
    pc_file *file = (pc_file *)base;
    return file->real->pMethods->xSectorSize(file->real);
}

static int pcDeviceCharacteristics(sqlite3_file *base) {
    pc_file *file = (pc_file *)base;
    return file->real->pMethods->xDeviceCharacteristics(file->real);
}

static int pcShmMap(sqlite3_file *base, int region, int size, int extend, void volatile **memory) {
    pc_file *file = (pc_file *)base;
    if (pc_dead(file)) {
        *memory = NULL;
        return SQLITE_IOERR_SHMMAP;
    }
    return file->real->pMethods->xShmMap(file->real, region, size, extend, memory);
}

static int pcShmLock(sqlite3_file *base, int offset, int n, int flags) {
    pc_file *file = (pc_file *)base;
    if (pc_dead(file) && !(flags & SQLITE_SHM_UNLOCK)) return SQLITE_IOERR_SHMLOCK;
    return file->real->pMethods->xShmLock(file->real, offset, n, flags);
}

static void pcShmBarrier(sqlite3_file *base) {
    pc_file *file = (pc_file *)base;
    file->real->pMethods->xShmBarrier(file->real);
}

static int pcShmUnmap(sqlite3_file *base, int deleteFlag) {
    // Always passed on: the real VFS must drop its shared-memory node, or a later connection in this process would
    // reuse the crashed one's wal-index instead of rebuilding it from the WAL on disk.
    pc_file *file = (pc_file *)base;
    return file->real->pMethods->xShmUnmap(file->real, deleteFlag);
}

static int pcFetch(sqlite3_file *base, sqlite3_int64 offset, int amount, void **pointer) {
    pc_file *file = (pc_file *)base;
    // Tracked files are read through xRead only (a NULL pointer tells SQLite to do so).
    if (file->inode != NULL || file->real->pMethods->iVersion < 3) {
        *pointer = NULL;
        return SQLITE_OK;
    }
    return file->real->pMethods->xFetch(file->real, offset, amount, pointer);
}

static int pcUnfetch(sqlite3_file *base, sqlite3_int64 offset, void *pointer) {
    pc_file *file = (pc_file *)base;
    if (file->inode != NULL || file->real->pMethods->iVersion < 3) return SQLITE_OK;
    return file->real->pMethods->xUnfetch(file->real, offset, pointer);
}

static const sqlite3_io_methods pc_io_methods = {
    3,
    pcClose,
    pcRead,
    pcWrite,
    pcTruncate,
    pcSync,
    pcFileSize,
    pcLock,
    pcUnlock,
    pcCheckReservedLock,
    pcFileControl,
    pcSectorSize,
    pcDeviceCharacteristics,
    pcShmMap,
    pcShmLock,
    pcShmBarrier,
    pcShmUnmap,
    pcFetch,
    pcUnfetch,
};

// MARK: - VFS methods

static int pcOpen(sqlite3_vfs *vfs, sqlite3_filename name, sqlite3_file *base, int flags, int *outFlags) {
    (void)vfs;
    pc_file *file = (pc_file *)base;
    memset(file, 0, sizeof *file);
    file->real = (sqlite3_file *)((char *)file + PC_ROUND8(sizeof(pc_file)));
    pthread_mutex_lock(&pc_mutex);
    int tracked = pc_tracked_path(name) && !(flags & SQLITE_OPEN_DELETEONCLOSE);
    if (!tracked) {
        pthread_mutex_unlock(&pc_mutex);
        int rc = pc_real->xOpen(pc_real, name, file->real, flags, outFlags);
        if (file->real->pMethods != NULL) base->pMethods = &pc_io_methods;
        return rc;
    }
    if (pc_crashed) {
        pthread_mutex_unlock(&pc_mutex);
        return SQLITE_CANTOPEN;
    }
    struct stat info;
    int existed = stat(name, &info) == 0;
    int rc = pc_real->xOpen(pc_real, name, file->real, flags, outFlags);
    if (file->real->pMethods != NULL) base->pMethods = &pc_io_methods;
    if (rc == SQLITE_OK) {
        pc_entry *entry = pc_find_entry(name);
        int known = entry != NULL;
        if (entry == NULL) entry = pc_add_entry(name);
        if (entry != NULL && entry->current == NULL) {
            sqlite3_int64 size = 0;
            if (existed) rc = file->real->pMethods->xFileSize(file->real, &size);
            pc_inode *inode = pc_new_inode(size);
            if (inode == NULL) rc = SQLITE_NOMEM;
            entry->current = inode;
            // A file found on disk the first time it is seen is taken as durable, name included.
            if (existed && !known) entry->durable = inode;
        }
        if (entry == NULL) rc = SQLITE_NOMEM;
        if (rc == SQLITE_OK) {
            file->inode = entry->current;
            int type = flags & 0x0FFF00;
            file->dirsync_pending = (flags & SQLITE_OPEN_CREATE)
                && (type == SQLITE_OPEN_MAIN_JOURNAL || type == SQLITE_OPEN_SUPER_JOURNAL || type == SQLITE_OPEN_WAL);
            file->next = pc_files;
            if (pc_files != NULL) pc_files->prev = file;
            pc_files = file;
        } else if (base->pMethods != NULL) {
            file->real->pMethods->xClose(file->real);
            base->pMethods = NULL;
        }
    }
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

/// Deletes a tracked name (mutex held), keeping the file while the deletion is not durable.
static int pc_delete_locked(const char *name, int syncDirectory) {
    if (pc_crashed || pc_event(4)) return SQLITE_IOERR_DELETE;
    pc_entry *entry = pc_find_entry(name);
    struct stat info;
    if (entry == NULL) {
        if (stat(name, &info) != 0) return SQLITE_IOERR_DELETE_NOENT;
        // Never opened through this VFS since it was installed: taken as durable, name included.
        entry = pc_add_entry(name);
        pc_inode *inode = entry != NULL ? pc_new_inode(info.st_size) : NULL;
        if (inode == NULL) return SQLITE_IOERR_NOMEM;
        entry->current = entry->durable = inode;
    }
    if (entry->current == NULL) return SQLITE_IOERR_DELETE_NOENT;
    if (syncDirectory) {
        int rc = pc_real->xDelete(pc_real, name, 1);
        if (rc == SQLITE_OK) {
            entry->current = NULL;
            pc_directory_synced();
        }
        return rc;
    }
    if (entry->current != entry->durable) {
        // Created since the last directory sync: a cut would remove the name anyway.
        if (unlink(name) != 0) return errno == ENOENT ? SQLITE_IOERR_DELETE_NOENT : SQLITE_IOERR_DELETE;
        entry->current = NULL;
        return SQLITE_OK;
    }
    // The deletion is not durable yet: keep the file under a hidden name until it is, or until a cut revives it.
    char backup[PATH_MAX];
    int length = snprintf(backup, sizeof backup, "%s.powercut-deleted-%lld", name, ++pc_backups);
    if (length < 0 || (size_t)length >= sizeof backup) return SQLITE_IOERR_DELETE;
    char *copy = strdup(backup);
    if (copy == NULL) return SQLITE_IOERR_NOMEM;
    if (rename(name, backup) != 0) {
        free(copy);
        return errno == ENOENT ? SQLITE_IOERR_DELETE_NOENT : SQLITE_IOERR_DELETE;
    }
    entry->current->backup = copy;
    entry->current = NULL;
    return SQLITE_OK;
}

static int pcDelete(sqlite3_vfs *vfs, const char *name, int syncDirectory) {
    (void)vfs;
    pthread_mutex_lock(&pc_mutex);
    if (!pc_tracked_path(name)) {
        pthread_mutex_unlock(&pc_mutex);
        return pc_real->xDelete(pc_real, name, syncDirectory);
    }
    int rc = pc_delete_locked(name, syncDirectory);
    pthread_mutex_unlock(&pc_mutex);
    return rc;
}

static int pcAccess(sqlite3_vfs *vfs, const char *name, int flags, int *result) {
    (void)vfs;
    return pc_real->xAccess(pc_real, name, flags, result);
}

static int pcFullPathname(sqlite3_vfs *vfs, const char *name, int size, char *output) {
    (void)vfs;
    return pc_real->xFullPathname(pc_real, name, size, output);
}

static void *pcDlOpen(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return pc_real->xDlOpen(pc_real, name);
}

static void pcDlError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    pc_real->xDlError(pc_real, size, message);
}

static void (*pcDlSym(sqlite3_vfs *vfs, void *handle, const char *symbol))(void) {
    (void)vfs;
    return pc_real->xDlSym(pc_real, handle, symbol);
}

static void pcDlClose(sqlite3_vfs *vfs, void *handle) {
    (void)vfs;
    pc_real->xDlClose(pc_real, handle);
}

static int pcRandomness(sqlite3_vfs *vfs, int size, char *output) {
    (void)vfs;
    return pc_real->xRandomness(pc_real, size, output);
}

static int pcSleep(sqlite3_vfs *vfs, int microseconds) {
    (void)vfs;
    return pc_real->xSleep(pc_real, microseconds);
}

static int pcCurrentTime(sqlite3_vfs *vfs, double *now) {
    (void)vfs;
    return pc_real->xCurrentTime(pc_real, now);
}

static int pcGetLastError(sqlite3_vfs *vfs, int size, char *message) {
    (void)vfs;
    return pc_real->xGetLastError ? pc_real->xGetLastError(pc_real, size, message) : 0;
}

static int pcCurrentTimeInt64(sqlite3_vfs *vfs, sqlite3_int64 *now) {
    (void)vfs;
    return pc_real->xCurrentTimeInt64(pc_real, now);
}

static int pcSetSystemCall(sqlite3_vfs *vfs, const char *name, sqlite3_syscall_ptr call) {
    (void)vfs;
    return pc_real->xSetSystemCall(pc_real, name, call);
}

static sqlite3_syscall_ptr pcGetSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return pc_real->xGetSystemCall(pc_real, name);
}

static const char *pcNextSystemCall(sqlite3_vfs *vfs, const char *name) {
    (void)vfs;
    return pc_real->xNextSystemCall(pc_real, name);
}

/// Fills in the VFS once, around the default VFS of the first install (SQLite's "unix"); never changed afterwards,
/// because connections opened through it keep using it after it stops being the default.
static void pc_setup(void) {
    pc_real = sqlite3_vfs_find(NULL);
    if (pc_real == NULL) return;
    pc_vfs.iVersion = pc_real->iVersion < 3 ? pc_real->iVersion : 3;
    pc_vfs.szOsFile = (int)PC_ROUND8(sizeof(pc_file)) + pc_real->szOsFile;
    pc_vfs.mxPathname = pc_real->mxPathname;
    pc_vfs.zName = "powercut";
    pc_vfs.xOpen = pcOpen;
    pc_vfs.xDelete = pcDelete;
    pc_vfs.xAccess = pcAccess;
    pc_vfs.xFullPathname = pcFullPathname;
    pc_vfs.xDlOpen = pcDlOpen;
    pc_vfs.xDlError = pcDlError;
    pc_vfs.xDlSym = pcDlSym;
    pc_vfs.xDlClose = pcDlClose;
    pc_vfs.xRandomness = pcRandomness;
    pc_vfs.xSleep = pcSleep;
    pc_vfs.xCurrentTime = pcCurrentTime;
    pc_vfs.xGetLastError = pcGetLastError;
    pc_vfs.xCurrentTimeInt64 = pcCurrentTimeInt64;
    pc_vfs.xSetSystemCall = pcSetSystemCall;
    pc_vfs.xGetSystemCall = pcGetSystemCall;
    pc_vfs.xNextSystemCall = pcNextSystemCall;
}

// MARK: - Public interface

int powercut_install(const char *directory) {
    pthread_once(&pc_once, pc_setup);
    if (pc_real == NULL || pc_real == &pc_vfs) return SQLITE_ERROR;
    char resolved[PATH_MAX];
    if (directory == NULL || realpath(directory, resolved) == NULL) return SQLITE_CANTOPEN;
    pthread_mutex_lock(&pc_mutex);
    if (pc_installed) {
        pthread_mutex_unlock(&pc_mutex);
        return SQLITE_MISUSE;
    }
    size_t length = strlen(resolved);
    pc_prefix = malloc(length + 2);
    if (pc_prefix == NULL) {
        pthread_mutex_unlock(&pc_mutex);
        return SQLITE_NOMEM;
    }
    memcpy(pc_prefix, resolved, length);
    pc_prefix[length] = '/';
    pc_prefix[length + 1] = '\0';
    pc_prefix_length = length + 1;
    pc_installed = 1;
    pc_crashed = 0;
    pc_countdown = 0;
    pc_sync_countdown = 0;
    memset(&pc_stats, 0, sizeof pc_stats);
    pthread_mutex_unlock(&pc_mutex);
    // Outside the mutex: registration takes SQLite's own global mutex.
    int rc = sqlite3_vfs_register(&pc_vfs, 1);
    if (rc != SQLITE_OK) powercut_uninstall();
    return rc;
}

int powercut_uninstall(void) {
    sqlite3_vfs_register(pc_real, 1);
    sqlite3_vfs_unregister(&pc_vfs);
    pthread_mutex_lock(&pc_mutex);
    int open = 0;
    for (pc_file *file = pc_files; file != NULL; file = file->next) open++;
    free(pc_prefix);
    pc_prefix = NULL;
    pc_prefix_length = 0;
    if (open == 0) {
        // Still-open handles keep pointing at their inodes: in that (reported) case the state is leaked, not freed.
        while (pc_inodes != NULL) {
            pc_inode *inode = pc_inodes;
            pc_inodes = inode->next;
            pc_clear_blocks(inode);
            if (inode->backup != NULL) unlink(inode->backup);
            free(inode->backup);
            free(inode);
        }
    }
    while (pc_entries != NULL) {
        pc_entry *entry = pc_entries;
        pc_entries = entry->next;
        free(entry->path);
        free(entry);
    }
    pc_installed = 0;
    pc_crashed = 0;
    pc_countdown = 0;
    pc_sync_countdown = 0;
    pthread_mutex_unlock(&pc_mutex);
    return open;
}

void powercut_simulate(void) {
    pthread_mutex_lock(&pc_mutex);
    if (pc_installed) pc_cut_locked(0);
    pthread_mutex_unlock(&pc_mutex);
}

void powercut_arm(long long events) {
    pthread_mutex_lock(&pc_mutex);
    pc_countdown = events > 0 ? events : 0;
    pc_sync_countdown = 0;
    pthread_mutex_unlock(&pc_mutex);
}

void powercut_arm_at_sync(long long syncs) {
    pthread_mutex_lock(&pc_mutex);
    pc_countdown = 0;
    pc_sync_countdown = syncs > 0 ? syncs : 0;
    pthread_mutex_unlock(&pc_mutex);
}

int powercut_reset(void) {
    pthread_mutex_lock(&pc_mutex);
    int dead = 0;
    for (pc_file *file = pc_files; file != NULL; file = file->next) dead += pc_dead(file);
    if (dead == 0) {
        pc_crashed = 0;
        pc_countdown = 0;
        pc_sync_countdown = 0;
    }
    pthread_mutex_unlock(&pc_mutex);
    return dead;
}

powercut_stats powercut_get_stats(void) {
    pthread_mutex_lock(&pc_mutex);
    powercut_stats stats = pc_stats;
    stats.open_files = 0;
    stats.dead_files = 0;
    for (pc_file *file = pc_files; file != NULL; file = file->next) {
        stats.open_files++;
        stats.dead_files += pc_dead(file);
    }
    pthread_mutex_unlock(&pc_mutex);
    return stats;
}
