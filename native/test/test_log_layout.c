/* The two record layouts (docs/format.md, "Record"). A new log has the page numbers of
** each record first, then its images (feature bit MW_LOG_FEAT_PGNOS_FIRST), so that a
** process following another's records (mw_mp=1) reads 4 bytes a page; a log of the
** first release (feature bits 0: (page number, image) pairs), left by a crash, is
** still recovered, appended to in its own layout, and followed. For each: the bytes of
** a record where the format says they are, recovery's pages and images, and a second
** handle following the first (mw_log_follow's page lists, with records of more pages
** than its first read takes, and mw_log_read_image at the offsets it gave). Format
** version 2 added the record's flags: written and followed in a new log, dropped in
** a version-1 log (a build of that version reads no flags). */
#include "test_log_util.h"

#define PS 512
#define MAXP 64 /* up to 64 pages a record: more than read_page_list reads ahead */

static char dir[256], db[300], logp[320];

static uint32_t hdr_features(void) {
  size_t n = 0;
  unsigned char *b = tl_read_file(logp, &n);
  CHECK(n >= MW_LOG_HDR_SIZE);
  uint32_t f;
  memcpy(&f, b + MW_LOG_HDR_FEATURES, 4);
  free(b);
  return f;
}

/* The record of `epoch` at file offset off: its page numbers and images where the
** layout puts them. */
static void check_record_bytes(uint64_t off, uint64_t epoch, int pgnos_first, int v2) {
  size_t n = 0;
  unsigned char *b = tl_read_file(logp, &n);
  tl_rec r;
  tl_build(&r, PS, epoch, MAXP);
  const unsigned char *body = b + off + MW_REC_HDR_SIZE;
  CHECK(off + MW_REC_HDR_SIZE + (uint64_t)r.n * (4 + PS) <= n);
  uint64_t e;
  memcpy(&e, b + off + MW_REC_EPOCH, 8);
  CHECK(e == epoch);
  uint32_t flags;
  memcpy(&flags, b + off + MW_REC_FLAGS, 4);
  CHECK(flags == (v2 ? tl_flags(epoch) : 0));
  for (int i = 0; i < r.n; i++) {
    uint32_t p;
    const unsigned char *pg = pgnos_first ? body + 4 * i : body + (size_t)i * (4 + PS);
    const unsigned char *img = pgnos_first ? body + 4 * r.n + (size_t)i * PS : pg + 4;
    memcpy(&p, pg, 4);
    CHECK(p == r.pgnos[i]);
    CHECK(memcmp(img, r.img[i], PS) == 0);
  }
  tl_free(&r);
  free(b);
}

/* A follower's page lists, each image read back at the offset it was given. */
typedef struct follow_check {
  mw_log *log;
  uint64_t next;     /* the epoch expected next */
  uint64_t records, pages, big;
  int v2;            /* the log's format version is 2: its records carry flags */
} follow_check;

static int on_follow(void *ctx, uint64_t epoch, uint32_t db_pages, uint32_t flags, int npages,
                     const uint32_t *pgnos, const uint64_t *ats) {
  follow_check *f = ctx;
  CHECK(epoch == f->next);
  CHECK(flags == (f->v2 ? tl_flags(epoch) : 0));
  f->next++;
  CHECK(db_pages == tl_dbpages(epoch) && npages == tl_npages(epoch, MAXP));
  unsigned char want[PS], got[PS];
  for (int i = 0; i < npages; i++) {
    CHECK(pgnos[i] == tl_pgno(epoch, i));
    tl_fill(want, PS, epoch, pgnos[i]);
    CHECK_RC(mw_log_read_image(f->log, ats[i], got), SQLITE_OK);
    CHECK(memcmp(want, got, PS) == 0);
  }
  f->records++;
  f->pages += (uint64_t)npages;
  if (npages > 62) f->big++;
  return SQLITE_OK;
}

/* A writer (shared, recovering the log) and a follower opened at its end; the writer
** appends 130 records (every size from 1 to 64 pages, twice), the follower follows. */
static void check_follow(uint64_t *pEpoch, int v2) {
  mw_log_options o = tl_opts(PS, 1, 64 * 1024);
  o.shared = 1;
  tl_seen seen;
  mw_log *w = 0, *f = 0;
  uint64_t base = 0, last = 0;
  CHECK_RC(tl_open_with(db, &o, MAXP, &seen, &w, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && last == *pEpoch - 1);
  uint64_t end = mw_log_size(w);
  for (int i = 0; i < 10; i++) CHECK_RC(tl_commit(w, PS, pEpoch, MAXP, 0, &end), SQLITE_OK);
  mw_log_options fo = o;
  fo.follow_end = end;
  fo.shift = 0;
  CHECK_RC(tl_open_with(db, &fo, MAXP, &seen, &f, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && last == *pEpoch - 1);
  follow_check fc = { f, *pEpoch, 0, 0, 0, v2 };
  for (int i = 0; i < 130; i++) CHECK_RC(tl_commit(w, PS, pEpoch, MAXP, 0, &end), SQLITE_OK);
  CHECK_RC(mw_log_follow(f, end, on_follow, &fc), SQLITE_OK);
  CHECK(fc.records == 130 && fc.next == *pEpoch && mw_log_end(f) == end);
  CHECK(fc.big >= 2);
  CHECK_RC(mw_log_close(f, 0), SQLITE_OK);
  CHECK_RC(mw_log_close(w, 0), SQLITE_OK);
  printf("test_log_layout: followed %llu records (%llu pages, %llu of more than 62)\n",
         (unsigned long long)fc.records, (unsigned long long)fc.pages,
         (unsigned long long)fc.big);
}

static void put32(unsigned char *p, uint32_t v) { memcpy(p, &v, 4); }
static void put64(unsigned char *p, uint64_t v) { memcpy(p, &v, 8); }

/* A log as the first release wrote it: format version 1, feature bits 0, records of
** epochs 2..last with (page number, image) pairs. */
static void write_v1_log(uint64_t last) {
  const uint64_t salt = 0x5EED5A17ull;
  size_t cap = MW_LOG_HDR_SIZE, n = 0;
  for (uint64_t e = 2; e <= last; e++) cap += MW_REC_HDR_SIZE + (size_t)tl_npages(e, MAXP) * (4 + PS);
  unsigned char *b = calloc(1, cap);
  CHECK(b != 0);
  memcpy(b + MW_LOG_HDR_MAGIC, MW_LOG_MAGIC, 8);
  put32(b + MW_LOG_HDR_VERSION, 1);
  put32(b + MW_LOG_HDR_BOM, MW_LOG_BOM);
  put32(b + MW_LOG_HDR_PAGE_SIZE, PS);
  put32(b + MW_LOG_HDR_FEATURES, 0);
  put64(b + MW_LOG_HDR_BASE, 1);
  put64(b + MW_LOG_HDR_SALT, salt);
  put64(b + MW_LOG_HDR_CKSUM, mw_log_checksum(0, b, MW_LOG_HDR_CKSUM));
  n = MW_LOG_HDR_SIZE;
  for (uint64_t e = 2; e <= last; e++) {
    tl_rec r;
    tl_build(&r, PS, e, MAXP);
    unsigned char *h = b + n;
    put32(h + MW_REC_OFF_MAGIC, MW_REC_MAGIC);
    put32(h + MW_REC_NPAGES, (uint32_t)r.n);
    put64(h + MW_REC_EPOCH, e);
    put32(h + MW_REC_DBPAGES, tl_dbpages(e));
    unsigned char *p = h + MW_REC_HDR_SIZE;
    for (int i = 0; i < r.n; i++, p += 4 + PS) {
      put32(p, r.pgnos[i]);
      memcpy(p + 4, r.img[i], PS);
    }
    size_t blen = (size_t)r.n * (4 + PS);
    put64(h + MW_REC_CKSUM, mw_log_checksum(mw_log_checksum(salt, h, MW_REC_CKSUM), h + MW_REC_HDR_SIZE, blen));
    n += MW_REC_HDR_SIZE + blen;
    tl_free(&r);
  }
  CHECK(n == cap);
  tl_write_file(logp, b, n);
  free(b);
}

int main(void) {
  alarm(120);
  tl_mkdir_in(dir, sizeof(dir), "mwlog-layout", 1);
  snprintf(db, sizeof(db), "%s/t.db", dir);
  snprintf(logp, sizeof(logp), "%s-mw", db);

  /* A new log: page numbers first. */
  tl_seen seen;
  mw_log *log = 0;
  uint64_t base = 0, last = 0, epoch = 2, end = 0;
  CHECK_RC(tl_open(db, PS, 1, 64 * 1024, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(hdr_features() == MW_LOG_FEAT_PGNOS_FIRST);
  for (int i = 0; i < 70; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, &end), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_record_bytes(MW_LOG_HDR_SIZE, 2, 1, 1);
  check_record_bytes(MW_LOG_HDR_SIZE + MW_REC_HDR_SIZE + (uint64_t)tl_npages(2, MAXP) * (4 + PS), 3, 1, 1);
  CHECK_RC(tl_open(db, PS, 1, 64 * 1024, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && seen.count == 70 && last == 71);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_follow(&epoch, 1);
  CHECK(hdr_features() == MW_LOG_FEAT_PGNOS_FIRST);
  tl_rmdir(dir);

  /* A log of the first release: recovered, appended to in pairs, followed. */
  tl_mkdir_in(dir, sizeof(dir), "mwlog-layout", 1);
  snprintf(db, sizeof(db), "%s/t.db", dir);
  snprintf(logp, sizeof(logp), "%s-mw", db);
  write_v1_log(40);
  CHECK_RC(tl_open(db, PS, 1, 64 * 1024, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && seen.count == 39 && last == 40);
  epoch = 41;
  uint64_t off41 = mw_log_size(log);
  for (int i = 0; i < 5; i++) CHECK_RC(tl_commit(log, PS, &epoch, MAXP, 0, &end), SQLITE_OK);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  CHECK(hdr_features() == 0);
  check_record_bytes(off41, 41, 0, 0);
  check_record_bytes(off41 + MW_REC_HDR_SIZE + (uint64_t)tl_npages(41, MAXP) * (4 + PS), 42, 0, 0);
  CHECK_RC(tl_open(db, PS, 1, 64 * 1024, MAXP, &seen, &log, &base, &last), SQLITE_OK);
  CHECK(!seen.bad && seen.count == 44 && last == 45);
  CHECK_RC(mw_log_close(log, 0), SQLITE_OK);
  check_follow(&epoch, 0);
  CHECK(hdr_features() == 0);
  tl_rmdir(dir);
  printf("test_log_layout: ok\n");
  return 0;
}
