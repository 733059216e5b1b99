/* fuzz_log: libFuzzer target for the log's record decoder and recovery (log.c).
**
** The input is a log file "<db>-mw", written to a scratch directory and opened with
** mw_log_open, which replays the valid records and cuts the rest. The first byte
** chooses how:
**   bit 0   fix the checksums: the header's and each record's checksum are computed
**           over the bytes as they are (walking the records by their page counts),
**           so that the fuzzer reaches the decoding past the checksums;
**   bit 1   after a successful open, commit one more record, close, reopen: the new
**           record must be replayed as the last one;
**   bit 2   sync mode 1 (preallocation writes zeros and syncs);
**   bits 3-4 page size 512, 1024, 4096, or the header's own when it is a valid one.
** Checked: no crash, no out-of-bounds access, no leak (ASan/LSan), no undefined
** behaviour (UBSan); an open fails only when the header is not sound (recovery cuts
** any damage behind a sound one); on success the replayed epochs are base+1, base+2, ... and
** *pLast is the last of them; each replayed image is readable in full.
** MW_FUZZ_VERBOSE=1 prints the result of each open.
*/
#include "mw_internal.h"
#include "durability/log.h"
#include "durability/log_format.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64], db[128], logpath[160];

static void fail(const char *why) {
  fprintf(stderr, "fuzz_log: %s\n", why);
  abort();
}

typedef struct seen {
  uint64_t next; /* the epoch the next replay must have; 0: not known yet */
  uint64_t count;
  int page_size;
  uint64_t sum;
} seen;

static int replay(void *ctx, uint64_t epoch, uint32_t db_pages, int npages, const uint32_t *pgnos,
                  const unsigned char *images) {
  seen *s = ctx;
  if (npages < 0) fail("negative page count replayed");
  if (s->next && epoch != s->next) fail("replayed epochs are not consecutive");
  s->next = epoch + 1;
  s->count++;
  /* Every byte handed over must be readable (ASan checks the reads). */
  for (int i = 0; i < npages; i++) {
    s->sum += pgnos[i];
    const unsigned char *img = images + (size_t)i * (size_t)s->page_size;
    s->sum += img[0] + img[s->page_size - 1];
  }
  s->sum += db_pages;
  return SQLITE_OK;
}

static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }
static uint32_t get32(const unsigned char *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static uint64_t get64(const unsigned char *p) { uint64_t v; memcpy(&v, p, 8); return v; }

/* Recomputes the header checksum and those of the records it can walk. */
static void fix_checksums(unsigned char *b, size_t n, int ps) {
  if (n < MW_LOG_HDR_SIZE) return;
  put64(b + MW_LOG_HDR_CKSUM, mw_log_checksum(0, b, MW_LOG_HDR_CKSUM));
  uint64_t salt = get64(b + MW_LOG_HDR_SALT);
  size_t off = MW_LOG_HDR_SIZE;
  while (n - off >= MW_REC_HDR_SIZE) {
    unsigned char *h = b + off;
    uint64_t blen = (uint64_t)get32(h + MW_REC_NPAGES) * (4u + (uint64_t)ps);
    if (blen > n - off - MW_REC_HDR_SIZE) return;
    uint64_t ck = mw_log_checksum(mw_log_checksum(salt, h, MW_REC_CKSUM), h + MW_REC_HDR_SIZE, (size_t)blen);
    put64(h + MW_REC_CKSUM, ck);
    off += MW_REC_HDR_SIZE + (size_t)blen;
  }
}

static void write_file(const unsigned char *b, size_t n) {
  FILE *f = fopen(logpath, "wb");
  if (!f) fail("cannot create the log file");
  if (n && fwrite(b, 1, n, f) != n) fail("cannot write the log file");
  if (fclose(f) != 0) fail("cannot close the log file");
}

static void remove_dir(void) {
  unlink(logpath);
  char tmp[200];
  snprintf(tmp, sizeof tmp, "%s.tmp", logpath);
  unlink(tmp);
  rmdir(dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  snprintf(dir, sizeof dir, "/dev/shm/mwfuzzlog.XXXXXX");
  if (!mkdtemp(dir)) {
    snprintf(dir, sizeof dir, "/tmp/mwfuzzlog.XXXXXX");
    if (!mkdtemp(dir)) fail("cannot make a scratch directory");
  }
  snprintf(db, sizeof db, "%s/f.db", dir);
  snprintf(logpath, sizeof logpath, "%s-mw", db);
  atexit(remove_dir);
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (size < 1 || size > (1u << 20)) return 0;
  unsigned flags = data[0];
  size_t n = size - 1;
  unsigned char *b = malloc(n ? n : 1);
  if (!b) return 0;
  memcpy(b, data + 1, n);
  static const int sizes[3] = { 512, 1024, 4096 };
  int ps = (flags >> 3) & 3;
  if (ps < 3) {
    ps = sizes[ps];
  } else {
    uint32_t hp = n >= MW_LOG_HDR_SIZE ? get32(b + MW_LOG_HDR_PAGE_SIZE) : 0;
    ps = hp >= 512 && hp <= 65536 && (hp & (hp - 1)) == 0 ? (int)hp : 512;
  }
  if (flags & 1) fix_checksums(b, n, ps);
  /* A sound header of this page size: whatever follows, recovery must succeed
  ** (it keeps the valid records and cuts the rest; only I/O can fail it). */
  int sound = n >= MW_LOG_HDR_SIZE && memcmp(b, MW_LOG_MAGIC, 8) == 0 &&
              get32(b + MW_LOG_HDR_VERSION) == MW_LOG_VERSION && get32(b + MW_LOG_HDR_BOM) == MW_LOG_BOM &&
              get32(b + MW_LOG_HDR_PAGE_SIZE) == (uint32_t)ps && (get32(b + MW_LOG_HDR_FEATURES) & ~MW_LOG_FEATURES) == 0 &&
              get64(b + MW_LOG_HDR_CKSUM) == mw_log_checksum(0, b, MW_LOG_HDR_CKSUM);
  write_file(b, n);
  free(b);

  mw_log_options o = { ps, (flags & 4) ? 1 : 0, 0, 65536 };
  seen s = { 0, 0, ps, 0 };
  mw_log *log = 0;
  uint64_t base = 0, last = 0;
  char *err = 0;
  int rc = mw_log_open(db, &o, replay, &s, &log, &base, &last, &err);
  if (getenv("MW_FUZZ_VERBOSE"))
    fprintf(stderr, "open: rc %d, base %llu, %llu records replayed%s%s\n", rc, (unsigned long long)base,
            (unsigned long long)s.count, err ? ": " : "", err ? err : "");
  if (rc != SQLITE_OK) {
    if (sound || n == 0) fail("recovery failed on a log with a sound header");
    if (log) fail("a failed open returned a log");
    if (!err) fail("a failed open without a message");
    sqlite3_free(err);
    unlink(logpath);
    return 0;
  }
  if (err) fail("a successful open with a message");
  if (last != base + s.count) fail("*pLast is not base + the records replayed");
  if (s.count && s.next != last + 1) fail("the last replayed epoch is not *pLast");

  if (flags & 2) {
    /* One more commit, then it must be the last record replayed. */
    uint32_t pgno = 7;
    unsigned char *img = calloc(1, (size_t)ps);
    if (!img) fail("out of memory");
    const unsigned char *imgs[1] = { img };
    uint64_t bytes = mw_log_record_size(log, 1);
    rc = mw_log_reserve(log, bytes);
    if (rc == SQLITE_OK) {
      uint64_t off = mw_log_assign(log, last + 1, bytes);
      rc = mw_log_submit(log, off, last + 1, 9, 0, 1, &pgno, imgs);
      if (rc == SQLITE_OK) rc = mw_log_wait_durable(log, off + bytes);
    }
    free(img);
    if (rc != SQLITE_OK) fail("a commit after recovery failed");
    if (mw_log_close(log, 0) != SQLITE_OK) fail("close failed");
    seen s2 = { 0, 0, ps, 0 };
    uint64_t base2 = 0, last2 = 0;
    rc = mw_log_open(db, &o, replay, &s2, &log, &base2, &last2, &err);
    if (rc != SQLITE_OK) fail("the reopen after a commit failed");
    if (base2 != base || last2 != last + 1 || s2.count != s.count + 1)
      fail("the new commit was not replayed after the recovered ones");
  }
  if (mw_log_close(log, 0) != SQLITE_OK) fail("close failed");
  unlink(logpath);
  return 0;
}
