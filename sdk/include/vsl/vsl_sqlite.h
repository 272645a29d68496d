/* OpenVSL native SDK: a SQLite VFS on a LUN (C API, part of the stable ABI; libvsl links
 * libsqlite3).
 *
 * Databases (and any journal SQLite writes) live in named files on the LUN: up to 16 of
 * up to 2^32 sectors each on a sparse LUN, else 4 of a fifth of the LUN each (layout:
 * docs/formats/sqlite-vfs.md). Every write between two syncs of a file is held
 * in memory and applied at the sync as ONE atomic vectored write, so each transaction
 * reaches flash all or nothing: with `PRAGMA journal_mode=MEMORY` SQLite needs no
 * rollback journal on the device and a database survives power cuts and crashes
 * consistent. The VFS advertises SQLITE_IOCAP_BATCH_ATOMIC and implements the
 * SQLITE_FCNTL_{BEGIN,COMMIT,ROLLBACK}_ATOMIC_WRITE protocol for SQLite builds that have
 * SQLITE_ENABLE_BATCH_ATOMIC_WRITE (then the default journal mode needs no journal file
 * either). (journal_mode=OFF works too but, as SQLite documents, leaves no way to undo
 * a statement that fails midway, e.g. on a full file.) A transaction larger than one
 * atomic write (vsl_caps): with the journal in memory its commit fails with
 * SQLITE_IOERR_WRITE and nothing of it is applied; with a rollback journal on the LUN
 * (journal_mode DELETE, TRUNCATE or PERSIST) it is applied in pieces, SQLite's journal
 * covering a torn write as on any device. Journals themselves are written in pieces.
 *
 * Locking is within this process (connections of one process may share a database);
 * the LUN itself is owned by this process (in-process) or reached through vsld. Temporary
 * files go to SQLite's default VFS. WAL mode is not offered (no shared memory).
 */
#ifndef VSL_VSL_SQLITE_H_
#define VSL_VSL_SQLITE_H_

#include "vsl/vsl.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Registers a VFS called `name` storing files on `dev` (which must stay open until the
 * VFS is unregistered and every connection using it is closed). `make_default` as in
 * sqlite3_vfs_register. Formats the file table on a LUN whose first sector was never
 * written. Returns 0 or -errno (-EINVAL: the LUN holds something else, or the name is
 * taken; -ENOMEM). */
int vsl_sqlite_vfs_register(vsl_dev* dev, const char* name, int make_default);
/* Unregisters and frees it. -ENOENT if not registered by vsl_sqlite_vfs_register. */
int vsl_sqlite_vfs_unregister(const char* name);

#ifdef __cplusplus
}
#endif
#endif /* VSL_VSL_SQLITE_H_ */
