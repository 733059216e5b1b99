/*
** log_format.h: the byte layout of the commit log "<db>-mw" (docs/format.md says the
** same in words). Shared by the log's files, the commit path and mp.c (the record
** flags), and the tests that craft damaged logs.
**
** Owns: offsets, magic numbers, the version, the checksum function.
** Never touches: files, locks, the engine.
**
** Every integer is stored in the byte order of the machine that wrote it; the header
** carries a byte-order mark so that a log moved to a machine of the other order is
** refused (SQLITE_CANTOPEN) instead of being misread.
*/
#ifndef MW_LOG_FORMAT_H
#define MW_LOG_FORMAT_H

#include <stddef.h>
#include <stdint.h>

/* The header: MW_LOG_HDR_SIZE bytes at offset 0. */
#define MW_LOG_HDR_SIZE 64
#define MW_LOG_MAGIC "SQLMWLOG"            /* bytes 0..7, ASCII, no terminator */
#define MW_LOG_VERSION 2u                  /* bytes 8..11: what this build writes */
/* Version 2 (issue 33) gave the record's reserved word a meaning: its flags (below).
** A version-1 log (its flags are all zero) is still read and written; its records then
** carry no flags until a compaction gives it a version-2 file. A build that knows
** version 1 only refuses a version-2 log (SQLITE_CANTOPEN): it would take a flagged
** record for the end of the log. */
#define MW_LOG_VERSION_MIN 1u              /* the oldest version this build reads */
#define MW_LOG_BOM 0x01020304u             /* bytes 12..15, byte-order mark */
#define MW_LOG_FEATURES 1u                 /* bytes 20..23: feature bits this build knows */
/* Feature bit 0: each record's page numbers come first, then its images (the layout a
** new log gets); without it, (page number, image) pairs (logs of the first release).
** A catch-up of another process's record (mw_mp=1) then reads 4 bytes a page. The bit
** is the log's for life: a compaction copies records as they are. */
#define MW_LOG_FEAT_PGNOS_FIRST 1u
#define MW_LOG_HDR_MAGIC 0
#define MW_LOG_HDR_VERSION 8
#define MW_LOG_HDR_BOM 12
#define MW_LOG_HDR_PAGE_SIZE 16             /* u32 */
#define MW_LOG_HDR_FEATURES 20              /* u32 */
#define MW_LOG_HDR_BASE 24                  /* u64 base epoch */
#define MW_LOG_HDR_SALT 32                  /* u64 */
#define MW_LOG_HDR_TXID 40                  /* u64: the replica stream's TXID of the base
                                            ** epoch (replica/stream.c), 0: no stream
                                            ** (version 2; zero in version 1) */
/* bytes 48..55 are zero (reserved) */
#define MW_LOG_HDR_CKSUM 56                 /* u64 = mw_log_checksum(0, bytes 0..55) */

/* A record: MW_REC_HDR_SIZE bytes, then npages * (4 + page_size) bytes of body: the
** npages u32 page numbers, then the npages images (MW_LOG_FEAT_PGNOS_FIRST), or else
** npages (u32 page number, image) pairs. */
#define MW_REC_HDR_SIZE 32
#define MW_REC_MAGIC 0x4D575243u            /* bytes 0..3, u32 */
#define MW_REC_OFF_MAGIC 0                  /* u32 MW_REC_MAGIC */
#define MW_REC_NPAGES 4                     /* u32 */
#define MW_REC_EPOCH 8                      /* u64 */
#define MW_REC_DBPAGES 16                   /* u32 database size in pages */
#define MW_REC_FLAGS 20                     /* u32, MW_REC_F_* (zero in a version-1 log) */
#define MW_REC_CKSUM 24                     /* u64, see below */
/* Record checksum: mw_log_checksum(mw_log_checksum(salt, bytes 0..23), body). */

/* Record flags. ACK_WRITTEN: its commit was acknowledged once written, before any sync
** (PRAGMA synchronous=NORMAL or OFF): another process may make it visible as soon as
** it is published, as stock WAL readers see such a commit at once. Without it the
** commit waits for its sync (FULL, EXTRA) and the others make it visible once durable.
** A set bit this build does not know ends the log there (the record is not read). */
#define MW_REC_F_ACK_WRITTEN 1u
#define MW_REC_F_KNOWN 1u

/* A 64-bit checksum of n bytes, seeded (not cryptographic: it catches torn writes
** and flipped bits; any change of one aligned 8-byte word always changes it). */
uint64_t mw_log_checksum(uint64_t seed, const void *data, size_t n);

#endif /* MW_LOG_FORMAT_H */
