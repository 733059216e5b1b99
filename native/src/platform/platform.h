/*
** The operating-system layer of the engine: threads, locks, condition variables,
** a clock, and the file calls the log and the compactor make directly (pwrite,
** data sync, preallocation). Everything else goes through SQLite's own VFS.
**
** Owns: the portability between POSIX and Windows. Never touches SQLite.
** The synchronisation primitives are inline wrappers; the file calls live in
** platform_posix.c and platform_win.c. File calls return SQLite result codes
** (SQLITE_OK, SQLITE_FULL for a full disk, SQLITE_IOERR_* otherwise) and keep the
** OS error number in *pErrno when pErrno is not NULL.
*/
#ifndef MW_PLATFORM_H
#define MW_PLATFORM_H

#include <stddef.h>
#include <stdint.h>

#ifdef _WIN32
#  ifndef WIN32_LEAN_AND_MEAN
#    define WIN32_LEAN_AND_MEAN
#  endif
#  include <windows.h>
typedef SRWLOCK mw_mutex;
typedef CONDITION_VARIABLE mw_cond;
typedef HANDLE mw_thread;
typedef HANDLE mw_fd;
#  define MW_MUTEX_INIT SRWLOCK_INIT
#  define MW_COND_INIT CONDITION_VARIABLE_INIT
#  define MW_FD_INVALID INVALID_HANDLE_VALUE
static inline void mw_mutex_init(mw_mutex *m) { InitializeSRWLock(m); }
static inline void mw_mutex_destroy(mw_mutex *m) { (void)m; }
static inline void mw_mutex_lock(mw_mutex *m) { AcquireSRWLockExclusive(m); }
static inline void mw_mutex_unlock(mw_mutex *m) { ReleaseSRWLockExclusive(m); }
static inline int mw_mutex_trylock(mw_mutex *m) { return TryAcquireSRWLockExclusive(m) != 0; }
static inline void mw_cond_init(mw_cond *c) { InitializeConditionVariable(c); }
static inline void mw_cond_destroy(mw_cond *c) { (void)c; }
static inline void mw_cond_wait(mw_cond *c, mw_mutex *m) {
  SleepConditionVariableSRW(c, m, INFINITE, 0);
}
static inline void mw_cond_signal(mw_cond *c) { WakeConditionVariable(c); }
static inline void mw_cond_broadcast(mw_cond *c) { WakeAllConditionVariable(c); }
#else
#  include <pthread.h>
typedef pthread_mutex_t mw_mutex;
typedef pthread_cond_t mw_cond;
typedef pthread_t mw_thread;
typedef int mw_fd;
#  define MW_MUTEX_INIT PTHREAD_MUTEX_INITIALIZER
#  define MW_COND_INIT PTHREAD_COND_INITIALIZER
#  define MW_FD_INVALID (-1)
/* pthread calls on valid, initialised objects only fail on programming errors
** (EINVAL, EDEADLK); the engine never relies on their return codes. */
static inline void mw_mutex_init(mw_mutex *m) { pthread_mutex_init(m, 0); }
static inline void mw_mutex_destroy(mw_mutex *m) { pthread_mutex_destroy(m); }
static inline void mw_mutex_lock(mw_mutex *m) { pthread_mutex_lock(m); }
static inline void mw_mutex_unlock(mw_mutex *m) { pthread_mutex_unlock(m); }
/* 1 when m was free and is now held by the caller. */
static inline int mw_mutex_trylock(mw_mutex *m) { return pthread_mutex_trylock(m) == 0; }
static inline void mw_cond_init(mw_cond *c) { pthread_cond_init(c, 0); }
static inline void mw_cond_destroy(mw_cond *c) { pthread_cond_destroy(c); }
static inline void mw_cond_wait(mw_cond *c, mw_mutex *m) { pthread_cond_wait(c, m); }
static inline void mw_cond_signal(mw_cond *c) { pthread_cond_signal(c); }
static inline void mw_cond_broadcast(mw_cond *c) { pthread_cond_broadcast(c); }
#endif

/* Waits on c for at most ms milliseconds; returns 0 when signalled, 1 on timeout. */
int mw_cond_timedwait_ms(mw_cond *c, mw_mutex *m, int ms);

/* Starts a thread running fn(arg). Returns 0 on success. */
int mw_thread_start(mw_thread *t, void *(*fn)(void *), void *arg);
/* Waits for a thread started by mw_thread_start to end. */
void mw_thread_join(mw_thread t);
/* Lets a started thread run on its own: nobody joins it (it ends by itself). */
void mw_thread_detach(mw_thread t);
/* A connected pair of local stream sockets, both close-on-exec, fds[1] nonblocking: a thread
** wakes a reader of fds[0] with mw_wake_send(fds[1]). 0, or -1 where there is none
** (Windows: the caller polls instead). */
int mw_wake_pair(int fds[2]);
/* Writes one byte to a wake pair's fds[1]: never blocks (a full buffer already has bytes
** for its reader), never raises SIGPIPE (its reader gone). */
void mw_wake_send(int fd);
/* Closes both ends of a wake pair. */
void mw_wake_pair_close(int fds[2]);

/* Monotonic clock in nanoseconds. */
uint64_t mw_now_ns(void);
/* This process's id (a child made by fork() has another one). */
uint64_t mw_process_id(void);
/* Has fn run in the child process after each fork() (POSIX; Windows has no fork). */
void mw_at_fork_child(void (*fn)(void));
/* Has fn run when the process exits normally: exit() (Deno), and on Linux quick_exit()
** too (Bun ends with it). fn runs on the exiting thread while the others still run.
** Windows: never (threads are killed before a DLL's exit handlers, perhaps holding the
** engine's locks). */
void mw_at_process_exit(void (*fn)(void));
/* Sleeps for about us microseconds. */
void mw_sleep_us(unsigned us);

/* One gather-write element for mw_file_pwritev. */
typedef struct mw_iovec { const void *base; size_t len; } mw_iovec;

/* Opens (creating it when create is set) a file for reading and writing. */
int mw_file_open(const char *path, int create, mw_fd *out, int *pErrno);
int mw_file_close(mw_fd fd);
/* Reads exactly n bytes at off; SQLITE_IOERR_SHORT_READ (buffer zero-filled past
** what was read) when the file ends before. */
int mw_file_pread(mw_fd fd, void *buf, size_t n, uint64_t off, int *pErrno);
/* Writes all n bytes at off (retrying short writes); SQLITE_FULL on ENOSPC. */
int mw_file_pwrite(mw_fd fd, const void *buf, size_t n, uint64_t off, int *pErrno);
/* Writes the cnt buffers back to back at off, in as few system calls as it can. */
int mw_file_pwritev(mw_fd fd, const mw_iovec *iov, int cnt, uint64_t off, int *pErrno);
/* Makes written data durable: fdatasync, or F_FULLFSYNC on macOS when full is set. */
int mw_file_datasync(mw_fd fd, int full, int *pErrno);
/* Writes the dirty cached pages of [off, off+len) to the device and waits for them,
** without a device flush or metadata (Linux sync_file_range; elsewhere nothing: the
** later data sync writes them). So that a large write (the log's zeros) does not
** leave megabytes for the next data sync of another thread to write. */
int mw_file_writeback(mw_fd fd, uint64_t off, uint64_t len, int *pErrno);
/* Makes data and metadata durable (fsync). */
int mw_file_sync(mw_fd fd, int *pErrno);
/* Reserves disk blocks up to size bytes without changing what reads return
** (fallocate / posix_fallocate / extending the file); SQLITE_FULL when the disk
** has no room. */
int mw_file_preallocate(mw_fd fd, uint64_t size, int *pErrno);
int mw_file_truncate(mw_fd fd, uint64_t size, int *pErrno);
int mw_file_size(mw_fd fd, uint64_t *pSize, int *pErrno);
/* Syncs the directory that holds path, so that a create, delete or truncate of a
** file in it is durable. A no-op where the OS has no such call (Windows). */
int mw_dir_sync(const char *path, int *pErrno);
/* Deletes a file; SQLITE_OK when it did not exist. */
int mw_file_delete(const char *path, int *pErrno);
/* 1 when the file exists. */
int mw_file_exists(const char *path);
/* Renames from over to (atomically replacing to); sync the directory to make it durable. */
int mw_file_rename(const char *from, const char *to, int *pErrno);
/* Gives an existing file a second name (a hard link; `to` must not exist); an error where
** the OS or the file system has none. */
int mw_file_link(const char *from, const char *to, int *pErrno);
/* Creates a directory; SQLITE_OK when it exists already (as a directory). */
int mw_dir_make(const char *path, int *pErrno);
/* Calls fn(ctx, name) for every entry of a directory (not "." nor ".."), in no order,
** until fn returns non-zero (returned then). SQLITE_OK for a directory that does not
** exist: it has no entries. */
int mw_dir_list(const char *path, int (*fn)(void *ctx, const char *name), void *ctx, int *pErrno);
/* Sets a file's access and modification times to ms milliseconds since the Unix epoch. */
int mw_file_set_mtime(mw_fd fd, int64_t ms, int *pErrno);

/* What a file is, whatever its name: device and inode on POSIX, volume serial number
** and file index on Windows. Two names (hard links, a rename) of one file give the
** same identity; a new file created at an old name gives another. */
typedef struct mw_file_id { uint64_t dev, ino; } mw_file_id;
/* SQLITE_CANTOPEN when path does not name an existing file. */
int mw_file_identity(const char *path, mw_file_id *out, int *pErrno);
static inline int mw_file_id_eq(const mw_file_id *a, const mw_file_id *b) {
  return a->dev == b->dev && a->ino == b->ino;
}

/* Takes a write lock on one byte of [first, first + n) of the file at path (the
** first byte nobody else holds), through a handle of its own that the lock belongs
** to: an open file description lock (Linux), which another handle of this process
** closing the file does not drop, and which conflicts with every other handle's
** locks, of this process or not. The file must have identity id. SQLITE_OK with the
** handle in *out (closing it drops the lock); SQLITE_BUSY when every byte is locked
** elsewhere; SQLITE_NOTFOUND where the system has no such locks (macOS, Windows, an
** old kernel); SQLITE_CANTOPEN or SQLITE_IOERR_LOCK otherwise. */
int mw_file_hold_byte(const char *path, const mw_file_id *id, uint64_t first, int n,
                      mw_fd *out);

/* Fault injection for tests. When mw_fault_hook is set, every file call above asks
** it first, with the operation and the file (MW_FD_INVALID for calls on paths); a
** nonzero answer is an errno value the call then fails with, doing nothing. NULL in
** production. It is read atomically: set it with __atomic_store_n (threads of the
** engine may be making file calls meanwhile). */
enum {
  MW_OP_OPEN = 1, MW_OP_READ, MW_OP_WRITE, MW_OP_DATASYNC, MW_OP_SYNC, MW_OP_PREALLOC,
  MW_OP_TRUNCATE, MW_OP_SIZE, MW_OP_DIRSYNC, MW_OP_DELETE, MW_OP_RENAME, MW_OP_LINK
};
typedef int (*mw_fault_hook_fn)(int op, mw_fd fd);
extern mw_fault_hook_fn mw_fault_hook;

#endif /* MW_PLATFORM_H */
