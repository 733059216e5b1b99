// lib/stats.ts: the engine's counters of a connection as EngineStats: the names of the
// slots of mw_stats()'s array (MW_STAT_* in native/include/multiwriter.h) and the
// retries of transaction(). Reads nothing itself: db.stats() calls mw_stats.
import type { TransactionState } from "./internals.ts";

/** The slots of mw_stats()'s array (MW_STAT_COUNT in multiwriter.h). */
export const STAT_SLOTS = 32;

/** The engine's counters for a connection (see native/include/multiwriter.h). */
export interface EngineStats {
  /** The connection runs on the multi-writer engine. */
  engine: boolean;
  /** The epoch of the snapshot the open transaction reads (0 outside one). */
  snapshotEpoch: number;
  /** The epoch of this connection's last commit. */
  commitEpoch: number;
  /** Commits of this connection. */
  commits: number;
  /** Commits refused, all kinds together. */
  conflicts: number;
  /** Commits refused because another commit wrote a page this one wrote. */
  conflictWrite: number;
  /** Commits refused because another commit wrote a page this one read. */
  conflictRead: number;
  /** Commits refused because the schema changed. */
  conflictSchema: number;
  /** Commits refused because the disk was full. */
  conflictFull: number;
  /** Bytes in the durable log (`<db>-mw`). */
  logBytes: number;
  /** Compactions of the log into the database file. */
  compactions: number;
  /** The newest epoch visible to new transactions. */
  visibleEpoch: number;
  /** Page versions kept for open snapshots. */
  pinnedVersions: number;
  /** Pages relocated by the engine. */
  relocations: number;
  /** Commits merged with a concurrent one. */
  merges: number;
  /** Times this connection waited its turn on a hot spot. */
  turns: number;
  /** Relocations refused. */
  relocateRefused: number;
  /** Background worker threads of the process, shared by every open engine database. */
  backgroundThreads: number;
  /** Steps the background workers ran for this database's compactor (none while it is idle). */
  compactorRuns: number;
  /** Steps of log room a commit had to zero itself, on the commit path (normally
   *  zeroed ahead, off it); a count that keeps rising means commits waited for the disk. */
  logRoomInline: number;
  /** Data syncs of the log this process issued; one covers a group of commits (with
   *  `mw_mp=1`, of every process). */
  logSyncs: number;
  /** Commits merged row by row with the commits since their snapshot (`rebase: true`). */
  rebases: number;
  /** Merges refused: a row both changed, a declared row changed, overflow, no room. */
  rebaseRefused: number;
  /** With `ltxDir`: the replica's TXID of this connection's last commit (0: none), for
   *  `litestream restore -txid`. */
  ltxTxid: number;
  /** With `ltxDir`: the highest TXID written to the replica so far (0: none). */
  ltxEmitted: number;
  /** Transactions run again by transaction() on this connection. */
  retries: number;
  /** Attempts of the last transaction() call (1 = no retry). */
  lastTransactionAttempts: number;
  /** Every slot of the engine's array, including ones added after this version. */
  raw: number[];
}

/** The counters of mw_stats() (out), named, with transaction()'s own. */
export function statsFrom(out: BigInt64Array, tx: TransactionState): EngineStats {
  const raw = Array.from(out, (v) => Number(v));
  const at = (i: number): number => raw[i] ?? 0;
  return {
    engine: at(0) === 1,
    snapshotEpoch: at(1),
    commitEpoch: at(2),
    commits: at(3),
    conflicts: at(4) + at(5) + at(6) + at(7),
    conflictWrite: at(4),
    conflictRead: at(5),
    conflictSchema: at(6),
    conflictFull: at(7),
    logBytes: at(8),
    compactions: at(9),
    visibleEpoch: at(10),
    pinnedVersions: at(11),
    relocations: at(12),
    merges: at(13),
    turns: at(14),
    relocateRefused: at(15),
    backgroundThreads: at(21),
    compactorRuns: at(22),
    logRoomInline: at(24),
    logSyncs: at(25),
    rebases: at(28),
    rebaseRefused: at(29),
    ltxTxid: at(30),
    ltxEmitted: at(31),
    retries: tx.retries,
    lastTransactionAttempts: tx.lastAttempts,
    raw,
  };
}
