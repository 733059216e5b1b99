// The mutants of scripts/mutate.mjs: each breaks the engine at one point, and the C
// tests named must notice (at least one of them fails). Fields:
//   id      short name (mutate.mjs --only id,...)
//   file    under native/src/
//   find    the exact original text; it must occur exactly once in the file, or the
//           run fails (the list must follow the code: update the snippet with it)
//   replace what the mutant puts there instead
//   tests   the C test programs (native/test/<name>.c) run against it, in order
//   env     optional: environment of those runs (e.g. MW_MP_CASE: one case of test_mp)
//   why     what the mutant breaks, in one line
// A test program is run with MW_TEST_SCALE (mutate.mjs sets 0.25 unless given).

export const MUTANTS = [
  // ---- log.c ------------------------------------------------------------------------------
  {
    id: "log-shared-switch-no-room",
    file: "durability/log.c",
    find: "    if (want > alloc1) alloc1 = want;",
    replace: "    (void)want;",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "room_ahead" },
    why: "a shared log's switch zeroes only the lead, not the room its last cycle used: the rest is zeroed again in every cycle (by the grower, or by commits under the publication lock)",
  },
  {
    id: "log-ack-before-sync",
    file: "durability/log.c",
    find: "if (durable ? log->synced_end >= end_offset : log->written_end >= end_offset) break;",
    replace: "if (log->written_end >= end_offset) break;",
    tests: ["test_engine_order", "test_log_group"],
    why: "a synchronous=FULL commit is acknowledged once written, before its group's data sync",
  },
  {
    id: "log-bad-checksum-replayed",
    file: "durability/log.c",
    find: "if (ck != get64(h + MW_REC_CKSUM)) return SQLITE_DONE;",
    replace: "(void)ck;",
    tests: ["test_log_recover", "test_log_faults"],
    why: "recovery replays a record whose checksum does not match",
  },
  {
    id: "log-torn-tail-kept",
    file: "durability/log.c",
    find: "if (rc == SQLITE_OK && size > end) {",
    replace: "if (rc == SQLITE_OK && size > end && 0) {",
    tests: ["test_log_recover", "test_log_faults"],
    why: "recovery leaves a torn or damaged tail in the log instead of cutting it durably",
  },
  {
    id: "log-epoch-gap-replayed",
    file: "durability/log.c",
    find: "get64(h + MW_REC_EPOCH) == expect &&",
    replace: "get64(h + MW_REC_EPOCH) >= expect &&",
    tests: ["test_log_recover"],
    why: "recovery replays records past a gap in the epochs",
  },
  {
    id: "log-spare-names-log",
    file: "durability/log.c",
    find: "  } else if (linked && mw_file_delete(log->spare_path, 0) != SQLITE_OK) {",
    replace: "  } else if (linked && 0) {",
    tests: ["test_log_compact"],
    why: "a log switch whose rename failed leaves the spare name on the log in use, for the next switch to overwrite",
  },
  {
    id: "log-spare-rezeroed",
    file: "durability/log.c",
    find: "  uint64_t zero_from = w1 - new_shift > room ? w1 - new_shift : room;",
    replace: "  uint64_t zero_from = w1 - new_shift;",
    tests: ["test_log_compact"],
    why: "a reused log file is written with zeros again where it already holds written bytes",
  },
  // ---- compact.c -------------------------------------------------------------------------
  {
    id: "compact-stale-request-kept",
    file: "durability/compact.c",
    find: "  if (db->want_compact && mw_log_size(db->log) <= db->opts.log_max_bytes) db->want_compact = 0;",
    replace: "",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "room_ahead" },
    why: "a compaction asked for while another was at work runs although that one brought the log under its limit",
  },
  {
    id: "compact-sync-after-cut",
    file: "durability/compact.c",
    find:
      "  if (rc == SQLITE_OK) rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);\n" +
      "  for (int i = 0; i < n; i++) free(pages[i].img);\n" +
      "  free(pages);\n" +
      "  if (rc != SQLITE_OK) return rc;\n" +
      "  mw_crash_point(\"compact_before_log\");\n" +
      "#if MW_USE_LOG\n" +
      "  rc = shared ? mw_mp_compact_log(db, m) : mw_log_compacted(db->log, m);\n" +
      "#endif\n",
    replace:
      "  for (int i = 0; i < n; i++) free(pages[i].img);\n" +
      "  free(pages);\n" +
      "  if (rc != SQLITE_OK) return rc;\n" +
      "  mw_crash_point(\"compact_before_log\");\n" +
      "#if MW_USE_LOG\n" +
      "  rc = shared ? mw_mp_compact_log(db, m) : mw_log_compacted(db->log, m);\n" +
      "#endif\n" +
      "  if (rc == SQLITE_OK) rc = f->pMethods->xSync(f, SQLITE_SYNC_NORMAL);\n",
    tests: ["test_engine_compact_sync"],
    why: "the database file is synced after the log was cut (a power loss between loses commits)",
  },
  {
    id: "compact-ignores-snapshots",
    file: "durability/compact.c",
    find:
      "  if (!final)\n" +
      "    for (mw_lane *l = db->lanes; l; l = l->next_in_db)\n" +
      "      if (l->reg && l->reg < m) m = l->reg;\n",
    replace: "  (void)final;\n",
    tests: ["test_engine_compact_snapshot", "test_engine_recover"],
    why: "compaction writes versions newer than an open snapshot into the database file",
  },
  {
    id: "compact-no-pin",
    file: "durability/compact.c",
    find: "if (!broken && m > since) db->compacting = m;",
    replace: "(void)0;",
    tests: ["test_engine_recover", "test_engine_compact_snapshot"],
    why: "the compaction's epoch T is not pinned: garbage collection may prune the versions at T it is writing",
  },
  // ---- store.c / db.c ---------------------------------------------------------------------
  {
    id: "store-gc-drops-unfiled-chains",
    file: "core/store.c",
    find: "uint64_t drop_upto = oldest < compacted ? oldest : compacted;",
    replace: "uint64_t drop_upto = oldest;",
    tests: ["test_engine_basic", "test_engine_compact_snapshot", "test_engine_recover"],
    why: "garbage collection drops chains whose version the database file does not hold yet",
  },
  {
    id: "store-view-off-by-one",
    file: "core/store.c",
    find: "if (c->v[mid].epoch <= snap) lo = mid + 1; else hi = mid;",
    replace: "if (c->v[mid].epoch < snap) lo = mid + 1; else hi = mid;",
    tests: ["test_engine_basic", "test_engine_bank"],
    why: "a snapshot does not see the version committed at its own epoch",
  },
  {
    id: "db-snapshot-unregistered",
    file: "core/db.c",
    find: "  l->reg = db->visible;\n  *pSnap = db->visible;",
    replace: "  *pSnap = db->visible;",
    tests: ["test_engine_compact_snapshot", "test_engine_recover", "test_engine_pinned"],
    why: "a snapshot is not registered: compaction and garbage collection ignore it",
  },
  // ---- relocate.c -------------------------------------------------------------------------
  {
    id: "relocate-overflow-next",
    file: "growth/relocate.c",
    find: "int rc = on_ref(&r, MW_REF_NEXT, 0, 0, next);",
    replace: "int rc = on_ref(&r, MW_REF_NEXT, 0, 4, next);",
    tests: ["test_relocate", "test_growth", "test_relocate_merge"],
    why: "relocation rewrites an overflow page's next pointer at the wrong offset",
  },
  {
    id: "relocate-lock-page",
    file: "growth/relocate.c",
    find: "if (g > 0 && ((lock > n0 && lock <= n0 + g) || (lock > n1 && lock <= n1 + g)))",
    replace: "if (g > 0 && (lock > n0 && lock <= n0 + g))",
    tests: ["test_relocate"],
    why: "relocation moves new pages over the lock-byte page",
  },

  // ---- commit.c and lane.c ----------------------------------------------------------------
  {
    id: "commit-visible-out-of-order",
    file: "core/commit.c",
    find: "if (!nx->ready && !durable_now) break;",
    replace: "(void)durable_now;",
    tests: ["test_engine_order"],
    why: "an epoch becomes visible before an older one is durable (mixed synchronous levels)",
  },
  {
    id: "commit-ack-before-sync",
    file: "core/commit.c",
    find: "rc = c->l->sync_level >= 2 ? mw_log_wait_durable(db->log, end)",
    replace: "rc = c->l->sync_level >= 4 ? mw_log_wait_durable(db->log, end)",
    tests: ["test_engine_order"],
    why: "a synchronous=FULL commit waits only for its write, not for the group sync",
  },
  {
    id: "commit-no-schema-cookie",
    file: "core/commit.c",
    find: "    if (c->view_cookie != newest_cookie) {",
    replace: "    if (0) {",
    tests: ["test_engine_ddl"],
    why: "a commit whose snapshot predates a schema change is not refused",
  },
  {
    id: "commit-no-write-validation",
    file: "core/commit.c",
    find: "    if (e <= l->snap || is_own(l, e)) continue;\n    /* Growth",
    replace: "    continue;\n    /* Growth",
    tests: ["test_engine_basic", "test_engine_bank"],
    why: "pages written are not validated: a lost update commits",
  },
  {
    id: "commit-no-leaf-readcheck",
    file: "core/commit.c",
    find: "int check = full || routes(l, ch, c->rp[i])",
    replace: "int check = routes(l, ch, c->rp[i])",
    tests: ["test_engine_skew", "test_engine_bank"],
    why: "leaves read are not validated (only interior pages): write skew commits",
  },
  {
    id: "commit-validated-against-last-own",
    file: "core/commit.c",
    find: "    if (e <= l->snap || is_own(l, e)) continue;\n    int check",
    replace: "    if (e <= (l->nown ? l->own[l->nown - 1] : l->snap) || is_own(l, e)) continue;\n    int check",
    tests: ["test_engine_isolation"],
    why: "a snapshot's second commit is validated against its own last commit: a stale read commits",
  },
  {
    id: "commit-own-writes-not-read",
    file: "core/commit.c",
    find: "  for (int i = 0; i < c->nw; i++) mw_pageset_add(&l->rs, c->wp[i]);\n",
    replace: "",
    tests: ["test_engine_isolation"],
    why: "pages a snapshot's commit wrote (kept in SQLite's cache) are not validated by its next commit",
  },
  {
    id: "commit-readcheck0-no-structure",
    file: "core/commit.c",
    find: "|| mw_pageset_has(&kids, c->rp[i]);",
    replace: ";",
    tests: ["test_engine_isolation"],
    why: "mw_readcheck=0: the leaf balance_quick takes its divider from is not validated",
  },
  {
    id: "commit-relocated-page1-fields",
    file: "core/commit.c",
    find: "(!c->writes_page1 || c->relocated)",
    replace: "(!c->writes_page1)",
    tests: ["test_engine_isolation"],
    why: "a relocated commit does not validate the page-1 header fields it read",
  },
  {
    id: "commit-merge-routes",
    file: "core/commit.c",
    find: "    if (ch && ch->n && !same_routes(l, ch, c->merge[i])) {",
    replace: "    if (0) {",
    tests: ["test_engine_isolation"],
    why: "a key range read through a merged interior page is not validated",
  },
  {
    id: "lane-no-group-commit",
    file: "vfs/lane.c",
    find: "if (*mw_thread_write_locks() > 1) {",
    replace: "if (*mw_thread_write_locks() > 100) {",
    tests: ["test_engine_isolation"],
    why: "a transaction over attached databases publishes main before the other is validated",
  },
  {
    id: "lane-read-set-empty",
    file: "vfs/lane.c",
    find: "    if (l->in_snap && pgno != 1) mw_pageset_add(&l->rs, pgno);\n",
    replace: "",
    tests: ["test_engine_skew", "test_engine_bank"],
    why: "pages read from the store or the file never enter the read set",
  },
  {
    id: "lane-walindex-not-zeroed",
    file: "vfs/lane.c",
    find: "  if (l->nregion > 0 && l->region[0]) memset(l->region[0], 0, 96);\n",
    replace: "",
    tests: ["test_engine_basic", "test_engine_bank", "test_engine_skew"],
    why: "the private wal-index header survives the transaction: the next one reads stale frames",
  },
  {
    id: "lane-writers-warm",
    file: "vfs/lane.c",
    find: "  if ((l->wrote && !l->keeps_version && !l->alone) || l->stashed",
    replace: "  if ((0) || l->stashed",
    tests: ["test_engine_basic", "test_growth"],
    why: "writers keep SQLite's cache: carried pages make unrelated commits conflict",
  },
  {
    id: "lane-warm-misses-other-commits",
    file: "vfs/lane.c",
    find: "      (l->must_reset || l->snap != l->last_snap + (uint64_t)l->last_nown ||",
    replace: "      (l->must_reset ||",
    tests: ["test_engine_isolation"],
    why: "a warm connection keeps SQLite's cache after another connection committed: it reads stale rows",
  },
  {
    id: "commit-blind-unchecked",
    file: "core/commit.c",
    find: "  if (l->blind && others_committed(l)) {",
    replace: "  if (0 && others_committed(l)) {",
    tests: ["test_engine_isolation"],
    why: "a connection warm after its own write while alone commits a copy of a row another connection changed since (read from SQLite's cache)",
  },
  {
    id: "lane-warm-writer-forgets-carried",
    file: "vfs/lane.c",
    find: "  l->warm = 1;\n  if (l->must_reset) go_cold(l);\n}",
    replace: "  l->warm = 1;\n  if (l->must_reset) go_cold(l);\n  else if (l->last_nown) mw_pageset_clear(&l->rs);\n}",
    tests: ["test_engine_isolation"],
    why: "a connection that polls data_version keeps its cache after its own commit but not the pages it holds in the read set",
  },
  {
    id: "db-open-hides-nomem",
    file: "core/db.c",
    find: "  if (wal == 0) return SQLITE_NOMEM;\n  int has_wal = mw_file_exists(wal);",
    replace: "  if (wal == 0) { *pNeeds = 1; return SQLITE_OK; }\n  int has_wal = mw_file_exists(wal);",
    tests: ["test_engine_oom"],
    why: "a failed allocation of SQLite's allocator at open is absorbed: the open succeeds where SQLite's fault tests expect an error",
  },
  {
    id: "vfs-refused-file-cantopen",
    file: "vfs/vfs.c",
    find: "  return prim == SQLITE_NOMEM || prim == SQLITE_IOERR || prim == SQLITE_FULL ? rc : SQLITE_CANTOPEN;",
    replace: "  return SQLITE_CANTOPEN;",
    tests: ["test_engine_oom"],
    why: "a file refused for want of memory answers 'unable to open database file' to an ATTACH instead of SQLITE_NOMEM",
  },
  // ---- mp.c -------------------------------------------------------------------------------
  {
    id: "mp-lazy-image-misread",
    file: "processes/mp.c",
    find: "  int rc = mw_log_read_image(db->log, at, buf);",
    replace: "  int rc = mw_log_read_image(db->log, at + 8, buf);",
    tests: ["test_mp_checker"],
    why: "another process's page is read from the wrong place of the log when first used",
  },
  {
    id: "mp-compacted-image-lost",
    file: "processes/mp.c",
    find: "  if (rc == SQLITE_NOTFOUND) rc = mw_db_read_file(db, pgno, buf, 0, db->page_size);",
    replace: "  if (rc == SQLITE_NOTFOUND) { memset(buf, 0, (size_t)db->page_size); rc = SQLITE_OK; }",
    tests: ["test_mp"],
    why: "a lazy page whose record a compaction dropped from the log is not taken from the database file",
  },
  {
    id: "mp-group-sync-off",
    file: "processes/mp.c",
    find: "    uint32_t seen = __atomic_load_n(&h->sync_seq, __ATOMIC_SEQ_CST);",
    replace: "    uint32_t seen = 0;\n    break;",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "bank" },
    why: "each process syncs its own records again: one data sync per commit, none covering another process's",
  },
  {
    id: "mp-group-sync-thread-leads",
    file: "processes/mp.c",
    find: "    if (o == 0 || (o == me && !__atomic_load_n(&m->leading, __ATOMIC_SEQ_CST))) {",
    replace: "    if (o == 0 || o == me) { __atomic_store_n(&m->leading, 0, __ATOMIC_SEQ_CST);",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "threads_sync" },
    why: "every thread of the leading process leads a group sync of its own: one data sync per commit again",
  },
  {
    id: "log-images-in-pairs",
    file: "durability/log.c",
    find: "  return log->features & MW_LOG_FEAT_PGNOS_FIRST ? 4u * n + i * ps : i * (4u + ps) + 4u;",
    replace: "  return i * (4u + ps) + 4u;",
    tests: ["test_log_layout"],
    why: "a log with the page numbers first gets its images where the pairs layout puts them: they overwrite the page numbers",
  },
  {
    id: "log-follow-list-ahead-only",
    file: "durability/log.c",
    find: "    if (npages > ahead) {",
    replace: "    if (0) {",
    tests: ["test_log_layout"],
    why: "a follower keeps only the page numbers of its first read: records of more pages get garbage numbers",
  },
  {
    id: "mp-refresh-catch-up-to-now",
    file: "processes/mp.c",
    find: "    (void)catch_up_to(db, ce); /* a failure breaks the database (every commit fails) */",
    replace: "    (void)catch_up_locked(db); /* a failure breaks the database (every commit fails) */",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "refresh_switch" },
    why: "a snapshot's catch-up reads records a switch put in the new file from the old one: a false SQLITE_CORRUPT breaks the process",
  },
  {
    id: "lane-cold-again-after-unread-reset",
    file: "vfs/lane.c",
    find: "  if (l->warm && !unread_reset &&",
    replace: "  if (l->warm &&",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "refresh_switch" },
    why: "a lane goes cold at every try of one read lock while others commit: a slow process gets SQLITE_PROTOCOL",
  },
  {
    id: "mp-switch-room-unpublished",
    file: "processes/mp.c",
    find: "      __atomic_store_n(&m->hdr->alloc_end, m->switch_room, __ATOMIC_RELAXED);",
    replace: "      __atomic_store_n(&m->hdr->alloc_end, 0, __ATOMIC_RELAXED);",
    tests: ["test_mp"],
    env: { MW_MP_CASE: "room_ahead" },
    why: "the room a log switch zeroed is not published: the next commit zeroes it again under the publication lock",
  },
  {
    id: "mp-turn-not-taken",
    file: "core/db.c",
    find: "  if (db->mp && db->turn == l && !l->mp_turn) take_mp_turn_locked(db, l);",
    replace: "",
    tests: ["test_mp_turn"],
    why: "the holder of a process's turn does not take the turn across processes: the writers of different processes refuse each other",
  },
  {
    id: "mp-foreign-not-early",
    file: "core/db.c",
    find: "    if (nx->epoch != e + 1 || !(nx->foreign || __atomic_load_n(&nx->installed, __ATOMIC_ACQUIRE)))",
    replace: "    if (nx->epoch != e + 1 || !__atomic_load_n(&nx->installed, __ATOMIC_ACQUIRE))",
    tests: ["test_mp_turn"],
    why: "a turn holder's snapshot leaves out the previous holder's record of another process until it is durable: the holder works on a stale state",
  },
  {
    id: "mp-turn-dead-owner-kept",
    file: "processes/mp.c",
    find: "    int dead = held > (uint64_t)TURN_POLL_MS * 1000000u && o <= MW_MP_SLOTS &&",
    replace: "    int dead = 0 && held > (uint64_t)TURN_POLL_MS * 1000000u && o <= MW_MP_SLOTS &&",
    tests: ["test_mp_turn"],
    why: "a process that died holding the turn across processes is not passed over until MW_TURN_HOLD_MS",
  },
  {
    id: "mp-room-not-in-background",
    file: "processes/mp.c",
    find: "    mw_bg_wake(&m->grower, 0);",
    replace: "",
    tests: ["test_mp_room"],
    why: "a claimed step of room is never zeroed by the grower: the holder that runs out of room zeroes it under the publication lock",
  },
  {
    id: "mp-room-record-in-claim",
    file: "processes/mp.c",
    find: "    if (end <= a) return; /* before the claimed range */",
    replace: "    if (end <= __atomic_load_n(&h->grow_end, __ATOMIC_SEQ_CST)) return;",
    tests: ["test_mp_room"],
    why: "a record is written into the range a grower is zeroing: the zeros may overwrite a published record",
  },
  {
    id: "mp-room-dead-claim-kept",
    file: "processes/mp.c",
    find: "    else __atomic_store_n(&h->grow_end, a, __ATOMIC_SEQ_CST); /* its process died */",
    replace: "    else mw_sleep_us(200);",
    tests: ["test_mp"],
    why: "the claim of a process that died while zeroing room is never dropped: every process that needs room waits forever",
  },
];
