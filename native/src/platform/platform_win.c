/*
** platform_win.c: the file calls, threads and clock of platform.h for Windows
** (the mutex and condition-variable wrappers are inline in platform.h).
**
** Owns nothing but Win32 calls; never calls SQLite. Paths arrive in UTF-8 and
** are converted to UTF-16 for the wide-character API, so that every file name
** SQLite accepts works. *pErrno receives GetLastError() on a failure.
*/
#ifdef _WIN32
#include "mw_internal.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ReadFile/WriteFile take a DWORD count: move at most 1 GiB per call. */
#define MW_WIN_CHUNK ((DWORD)1 << 30)

static int fail(int rc, int *pErrno) {
  if (pErrno) *pErrno = (int)GetLastError();
  return rc;
}

static int is_disk_full(DWORD err) {
  return err == ERROR_DISK_FULL || err == ERROR_HANDLE_DISK_FULL;
}

/* A full disk is SQLITE_FULL whatever the call; anything else is the fallback. */
static int io_error(int fallback, int *pErrno) {
  DWORD err = GetLastError();
  if (pErrno) *pErrno = (int)err;
  return is_disk_full(err) ? SQLITE_FULL : fallback;
}

/* UTF-8 to a malloc'd UTF-16 string; NULL (last error set) on a bad name. */
static wchar_t *utf8_to_wide(const char *path) {
  int n = MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, NULL, 0);
  if (n <= 0) return NULL;
  wchar_t *w = malloc((size_t)n * sizeof(wchar_t));
  if (!w) {
    SetLastError(ERROR_NOT_ENOUGH_MEMORY);
    return NULL;
  }
  if (MultiByteToWideChar(CP_UTF8, MB_ERR_INVALID_CHARS, path, -1, w, n) != n) {
    free(w);
    return NULL;
  }
  return w;
}

int mw_cond_timedwait_ms(mw_cond *c, mw_mutex *m, int ms) {
  if (SleepConditionVariableSRW(c, m, ms < 0 ? 0 : (DWORD)ms, 0)) return 0;
  /* The only other failure is a programming error: treat it as a timeout so that
  ** callers re-check their condition rather than wait forever. */
  return 1;
}

/* CreateThread wants a DWORD WINAPI (LPVOID) procedure: carry fn and arg over. */
struct thread_start { void *(*fn)(void *); void *arg; };

static DWORD WINAPI thread_main(LPVOID p) {
  struct thread_start s = *(struct thread_start *)p;
  free(p);
  s.fn(s.arg);
  return 0;
}

int mw_thread_start(mw_thread *t, void *(*fn)(void *), void *arg) {
  struct thread_start *s = malloc(sizeof *s);
  if (!s) return ENOMEM;
  s->fn = fn;
  s->arg = arg;
  HANDLE h = CreateThread(NULL, 0, thread_main, s, 0, NULL);
  if (h == NULL) {
    int err = (int)GetLastError();
    free(s);
    return err ? err : -1;
  }
  *t = h;
  return 0;
}

void mw_thread_join(mw_thread t) {
  WaitForSingleObject(t, INFINITE);
  CloseHandle(t);
}

void mw_thread_detach(mw_thread t) { CloseHandle(t); }

int mw_wake_pair(int fds[2]) {
  (void)fds;
  return -1;
}

void mw_wake_send(int fd) { (void)fd; }

void mw_wake_pair_close(int fds[2]) { (void)fds; }

uint64_t mw_process_id(void) { return (uint64_t)GetCurrentProcessId(); }

void mw_at_fork_child(void (*fn)(void)) { (void)fn; }

void mw_at_process_exit(void (*fn)(void)) { (void)fn; }

uint64_t mw_now_ns(void) {
  /* The frequency is fixed at boot; reading it once per call costs nothing. */
  LARGE_INTEGER f, c;
  QueryPerformanceFrequency(&f);
  QueryPerformanceCounter(&c);
  uint64_t freq = (uint64_t)f.QuadPart, ticks = (uint64_t)c.QuadPart;
  /* Split to keep ticks * 1e9 from overflowing. */
  return (ticks / freq) * 1000000000ull + (ticks % freq) * 1000000000ull / freq;
}

#ifndef CREATE_WAITABLE_TIMER_HIGH_RESOLUTION
#  define CREATE_WAITABLE_TIMER_HIGH_RESOLUTION 0x00000002
#endif

void mw_sleep_us(unsigned us) {
  /* Sleep() counts in milliseconds and rounds up to the timer tick (often
  ** 15.6 ms); a high-resolution waitable timer (Windows 10 1803+) does better. */
  HANDLE timer = CreateWaitableTimerExW(NULL, NULL, CREATE_WAITABLE_TIMER_HIGH_RESOLUTION,
                                        TIMER_ALL_ACCESS);
  if (timer != NULL) {
    LARGE_INTEGER due;
    due.QuadPart = -(LONGLONG)us * 10; /* relative, in 100 ns units */
    int ok = SetWaitableTimer(timer, &due, 0, NULL, NULL, FALSE) &&
             WaitForSingleObject(timer, INFINITE) == WAIT_OBJECT_0;
    CloseHandle(timer);
    if (ok) return;
  }
  Sleep((us + 999u) / 1000u);
}

int mw_file_open(const char *path, int create, mw_fd *out, int *pErrno) {
  wchar_t *w = utf8_to_wide(path);
  if (!w) return fail(SQLITE_CANTOPEN, pErrno);
  /* Share everything: other connections and processes open the same files, and
  ** a file may be deleted while open (as on POSIX). */
  HANDLE h = CreateFileW(w, GENERIC_READ | GENERIC_WRITE,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                         create ? OPEN_ALWAYS : OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
  free(w);
  if (h == INVALID_HANDLE_VALUE) return fail(SQLITE_CANTOPEN, pErrno);
  *out = h;
  return SQLITE_OK;
}

int mw_file_close(mw_fd fd) {
  return CloseHandle(fd) ? SQLITE_OK : SQLITE_IOERR_CLOSE;
}

static void set_offset(OVERLAPPED *ov, uint64_t off) {
  memset(ov, 0, sizeof *ov);
  ov->Offset = (DWORD)(off & 0xffffffffu);
  ov->OffsetHigh = (DWORD)(off >> 32);
}

int mw_file_pread(mw_fd fd, void *buf, size_t n, uint64_t off, int *pErrno) {
  unsigned char *p = buf;
  size_t done = 0;
  while (done < n) {
    OVERLAPPED ov;
    set_offset(&ov, off + done);
    DWORD want = (n - done) > MW_WIN_CHUNK ? MW_WIN_CHUNK : (DWORD)(n - done);
    DWORD got = 0;
    if (!ReadFile(fd, p + done, want, &got, &ov)) {
      /* A read that starts at or past the end fails with ERROR_HANDLE_EOF. */
      if (GetLastError() != ERROR_HANDLE_EOF) return fail(SQLITE_IOERR_READ, pErrno);
      got = 0;
    }
    if (got == 0) {
      memset(p + done, 0, n - done);
      return SQLITE_IOERR_SHORT_READ;
    }
    done += got;
  }
  return SQLITE_OK;
}

int mw_file_pwrite(mw_fd fd, const void *buf, size_t n, uint64_t off, int *pErrno) {
  const unsigned char *p = buf;
  size_t done = 0;
  while (done < n) {
    OVERLAPPED ov;
    set_offset(&ov, off + done);
    DWORD want = (n - done) > MW_WIN_CHUNK ? MW_WIN_CHUNK : (DWORD)(n - done);
    DWORD wrote = 0;
    if (!WriteFile(fd, p + done, want, &wrote, &ov)) return io_error(SQLITE_IOERR_WRITE, pErrno);
    if (wrote == 0) {
      SetLastError(ERROR_DISK_FULL);
      return fail(SQLITE_FULL, pErrno);
    }
    done += wrote;
  }
  return SQLITE_OK;
}

/* Gathered writes up to this size are copied into one buffer and written with one
** call (WriteFileGather needs unbuffered, page-aligned I/O, which the log is not). */
#define MW_WIN_GATHER_MAX ((size_t)1 << 20)

int mw_file_pwritev(mw_fd fd, const mw_iovec *iov, int cnt, uint64_t off, int *pErrno) {
  size_t total = 0;
  for (int i = 0; i < cnt; i++) total += iov[i].len;
  if (cnt > 1 && total <= MW_WIN_GATHER_MAX) {
    unsigned char *joined = malloc(total ? total : 1);
    if (joined) {
      size_t at = 0;
      for (int i = 0; i < cnt; i++) {
        if (iov[i].len) memcpy(joined + at, iov[i].base, iov[i].len);
        at += iov[i].len;
      }
      int rc = mw_file_pwrite(fd, joined, total, off, pErrno);
      free(joined);
      return rc;
    }
    /* Out of memory: write the pieces one by one below. */
  }
  for (int i = 0; i < cnt; i++) {
    int rc = mw_file_pwrite(fd, iov[i].base, iov[i].len, off, pErrno);
    if (rc != SQLITE_OK) return rc;
    off += iov[i].len;
  }
  return SQLITE_OK;
}

int mw_file_datasync(mw_fd fd, int full, int *pErrno) {
  (void)full; /* FlushFileBuffers already asks the device to flush its cache. */
  return FlushFileBuffers(fd) ? SQLITE_OK : fail(SQLITE_IOERR_FSYNC, pErrno);
}

int mw_file_writeback(mw_fd fd, uint64_t off, uint64_t len, int *pErrno) {
  (void)fd; (void)off; (void)len; (void)pErrno; /* the later FlushFileBuffers writes them */
  return SQLITE_OK;
}

int mw_file_sync(mw_fd fd, int *pErrno) {
  return FlushFileBuffers(fd) ? SQLITE_OK : fail(SQLITE_IOERR_FSYNC, pErrno);
}

static int set_end_of_file(mw_fd fd, uint64_t size, int *pErrno) {
  FILE_END_OF_FILE_INFO eof;
  eof.EndOfFile.QuadPart = (LONGLONG)size;
  if (SetFileInformationByHandle(fd, FileEndOfFileInfo, &eof, sizeof eof)) return SQLITE_OK;
  return io_error(SQLITE_IOERR_TRUNCATE, pErrno);
}

int mw_file_preallocate(mw_fd fd, uint64_t size, int *pErrno) {
  uint64_t cur;
  int rc = mw_file_size(fd, &cur, pErrno);
  if (rc != SQLITE_OK) return rc;
  if (cur >= size) return SQLITE_OK;
  /* Reserve the clusters first (a full disk fails here, not on a later write),
  ** then move the end of file as the POSIX version does, so that later writes
  ** into the range do not change the file's size. The new range reads as zeros. */
  FILE_ALLOCATION_INFO alloc;
  alloc.AllocationSize.QuadPart = (LONGLONG)size;
  if (!SetFileInformationByHandle(fd, FileAllocationInfo, &alloc, sizeof alloc)) {
    DWORD err = GetLastError();
    if (is_disk_full(err)) {
      if (pErrno) *pErrno = (int)err;
      return SQLITE_FULL;
    }
    /* A file system without allocation control still takes the end-of-file move. */
  }
  return set_end_of_file(fd, size, pErrno);
}

int mw_file_truncate(mw_fd fd, uint64_t size, int *pErrno) {
  return set_end_of_file(fd, size, pErrno);
}

int mw_file_size(mw_fd fd, uint64_t *pSize, int *pErrno) {
  LARGE_INTEGER sz;
  if (!GetFileSizeEx(fd, &sz)) return fail(SQLITE_IOERR_FSTAT, pErrno);
  *pSize = (uint64_t)sz.QuadPart;
  return SQLITE_OK;
}

int mw_dir_sync(const char *path, int *pErrno) {
  /* NTFS journals directory changes itself; Windows has no call to sync a folder. */
  (void)path;
  (void)pErrno;
  return SQLITE_OK;
}

int mw_file_delete(const char *path, int *pErrno) {
  wchar_t *w = utf8_to_wide(path);
  if (!w) return fail(SQLITE_IOERR_DELETE, pErrno);
  int rc = SQLITE_IOERR_DELETE;
  DWORD err = 0;
  /* Virus scanners and indexers open new files briefly: a sharing violation or
  ** access denial right after a close is retried for a short, bounded time. */
  for (int attempt = 0; attempt < 20; attempt++) {
    if (DeleteFileW(w)) { rc = SQLITE_OK; break; }
    err = GetLastError();
    if (err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND) { rc = SQLITE_OK; break; }
    if (err != ERROR_SHARING_VIOLATION && err != ERROR_ACCESS_DENIED) break;
    Sleep(10);
  }
  if (rc != SQLITE_OK && pErrno) *pErrno = (int)err;
  free(w);
  return rc;
}

int mw_file_exists(const char *path) {
  wchar_t *w = utf8_to_wide(path);
  if (!w) return 0;
  DWORD attr = GetFileAttributesW(w);
  free(w);
  return attr != INVALID_FILE_ATTRIBUTES;
}
/* Multi-process mode is not built on Windows (mp.c): nothing asks for this there. */
int mw_file_hold_byte(const char *path, const mw_file_id *id, uint64_t first, int n,
                      mw_fd *out) {
  (void)path; (void)id; (void)first; (void)n; (void)out;
  return SQLITE_NOTFOUND;
}

int mw_file_identity(const char *path, mw_file_id *out, int *pErrno) {
  wchar_t *w = utf8_to_wide(path);
  if (!w) return fail(SQLITE_CANTOPEN, pErrno);
  /* No access rights asked, everything shared: only the file's information is read,
  ** and no other opener of the file is disturbed. */
  HANDLE h = CreateFileW(w, 0, FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                         OPEN_EXISTING, FILE_FLAG_BACKUP_SEMANTICS, NULL);
  free(w);
  if (h == INVALID_HANDLE_VALUE) return fail(SQLITE_CANTOPEN, pErrno);
  BY_HANDLE_FILE_INFORMATION info;
  BOOL ok = GetFileInformationByHandle(h, &info);
  if (!ok) {
    int rc = fail(SQLITE_CANTOPEN, pErrno);
    CloseHandle(h);
    return rc;
  }
  CloseHandle(h);
  out->dev = (uint64_t)info.dwVolumeSerialNumber;
  out->ino = ((uint64_t)info.nFileIndexHigh << 32) | (uint64_t)info.nFileIndexLow;
  return SQLITE_OK;
}

/* MoveFileEx refuses to replace a file that is open (ERROR_ACCESS_DENIED), and the log a
** switch replaces is open in every connection. Windows 10 1607 and later replace it with
** POSIX semantics: the name moves to the new file, open handles keep the old one. */
static BOOL rename_over_open(const wchar_t *wf, const wchar_t *wt) {
  HANDLE h = CreateFileW(wf, DELETE | SYNCHRONIZE,
                         FILE_SHARE_READ | FILE_SHARE_WRITE | FILE_SHARE_DELETE, NULL,
                         OPEN_EXISTING, FILE_ATTRIBUTE_NORMAL, NULL);
  if (h == INVALID_HANDLE_VALUE) return FALSE;
  size_t bytes = wcslen(wt) * sizeof(wchar_t);
  size_t size = sizeof(FILE_RENAME_INFO) + bytes;
  FILE_RENAME_INFO *info = calloc(1, size);
  BOOL ok = FALSE;
  DWORD err = ERROR_NOT_ENOUGH_MEMORY;
  if (info) {
    info->Flags = FILE_RENAME_FLAG_REPLACE_IF_EXISTS | FILE_RENAME_FLAG_POSIX_SEMANTICS;
    info->FileNameLength = (DWORD)bytes;
    memcpy(info->FileName, wt, bytes);
    ok = SetFileInformationByHandle(h, FileRenameInfoEx, info, (DWORD)size);
    err = ok ? 0 : GetLastError();
    free(info);
  }
  CloseHandle(h);
  if (!ok) SetLastError(err);
  return ok;
}

int mw_dir_make(const char *path, int *pErrno) {
  wchar_t *w = utf8_to_wide(path);
  if (!w) return fail(SQLITE_CANTOPEN, pErrno);
  int rc = SQLITE_OK;
  if (!CreateDirectoryW(w, 0)) {
    DWORD err = GetLastError();
    DWORD attr = GetFileAttributesW(w);
    if (!(err == ERROR_ALREADY_EXISTS && attr != INVALID_FILE_ATTRIBUTES &&
          (attr & FILE_ATTRIBUTE_DIRECTORY)))
      rc = fail(SQLITE_CANTOPEN, pErrno);
  }
  free(w);
  return rc;
}

int mw_dir_list(const char *path, int (*fn)(void *ctx, const char *name), void *ctx, int *pErrno) {
  size_t n = strlen(path);
  char *pat = malloc(n + 3);
  if (!pat) return SQLITE_NOMEM;
  memcpy(pat, path, n);
  memcpy(pat + n, "\\*", 3);
  wchar_t *w = utf8_to_wide(pat);
  free(pat);
  if (!w) return SQLITE_NOMEM;
  WIN32_FIND_DATAW fd;
  HANDLE h = FindFirstFileW(w, &fd);
  free(w);
  if (h == INVALID_HANDLE_VALUE) {
    DWORD err = GetLastError();
    return err == ERROR_FILE_NOT_FOUND || err == ERROR_PATH_NOT_FOUND ? SQLITE_OK
                                                                      : fail(SQLITE_IOERR_READ, pErrno);
  }
  int rc = SQLITE_OK;
  do {
    char name[MAX_PATH * 4];
    int len = WideCharToMultiByte(CP_UTF8, 0, fd.cFileName, -1, name, (int)sizeof(name), 0, 0);
    if (len <= 0 || !strcmp(name, ".") || !strcmp(name, "..")) continue;
    rc = fn(ctx, name);
  } while (rc == 0 && FindNextFileW(h, &fd));
  FindClose(h);
  return rc;
}

int mw_file_set_mtime(mw_fd fd, int64_t ms, int *pErrno) {
  /* FILETIME: 100 ns units since 1601-01-01. */
  uint64_t t = (uint64_t)(ms + 11644473600000LL) * 10000u;
  FILETIME ft;
  ft.dwLowDateTime = (DWORD)t;
  ft.dwHighDateTime = (DWORD)(t >> 32);
  if (!SetFileTime(fd, 0, &ft, &ft)) return fail(SQLITE_IOERR, pErrno);
  return SQLITE_OK;
}

int mw_file_rename(const char *from, const char *to, int *pErrno) {
  wchar_t *wf = utf8_to_wide(from);
  wchar_t *wt = wf ? utf8_to_wide(to) : 0;
  int rc = SQLITE_IOERR;
  DWORD err = 0;
  if (wf && wt) {
    /* Same bounded retry as delete: scanners briefly hold new files open. */
    for (int attempt = 0; attempt < 20; attempt++) {
      if (MoveFileExW(wf, wt, MOVEFILE_REPLACE_EXISTING | MOVEFILE_WRITE_THROUGH)) { rc = SQLITE_OK; break; }
      err = GetLastError();
      if (err == ERROR_ACCESS_DENIED && rename_over_open(wf, wt)) { rc = SQLITE_OK; break; }
      if (err != ERROR_SHARING_VIOLATION && err != ERROR_ACCESS_DENIED) break;
      Sleep(10);
    }
  }
  if (rc != SQLITE_OK && pErrno) *pErrno = (int)err;
  free(wf);
  free(wt);
  return rc;
}

int mw_file_link(const char *from, const char *to, int *pErrno) {
  wchar_t *wf = utf8_to_wide(from);
  wchar_t *wt = wf ? utf8_to_wide(to) : 0;
  int rc = SQLITE_IOERR;
  DWORD err = 0;
  if (wf && wt) {
    if (CreateHardLinkW(wt, wf, 0)) rc = SQLITE_OK;
    else err = GetLastError();
  }
  if (rc != SQLITE_OK && pErrno) *pErrno = (int)err;
  free(wf);
  free(wt);
  return rc;
}

/* The test hook of platform.h. The fault-injection tests run on POSIX only, so the
** Windows calls do not consult it; it exists so that the engine links. */
mw_fault_hook_fn mw_fault_hook = 0;

#endif /* _WIN32 */
