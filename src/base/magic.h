/* The first bytes of every file ntkd keeps, in one place: the formats
 * write them (docs/STORE-FORMAT.md, docs/TRAINING.md) and the output rule
 * reads them, so that no output ever replaces one of ntkd's own files
 * (ntk_check_output_files, job/jobfiles.h). */
#ifndef NTKD_MAGIC_H
#define NTKD_MAGIC_H

#define NTK_MAGIC_LEN 8
#define NTK_MAGIC_STORE "NTKDSTOR"    /* a store's header (both copies) */
#define NTK_MAGIC_RECORD "NTKDTILE"   /* a record header inside a store */
#define NTK_MAGIC_INDEX "NTKDINDX"    /* PATH.index */
#define NTK_MAGIC_SNAPSHOT "NTKDSNAP" /* a training snapshot */
#define NTK_MAGIC_LOCK "ntkd writer lock" /* PATH.lock starts with this text */
#define NTK_MAGIC_STORE_COPY_B 4096   /* where a store's second header copy starts (NTK_STORE_HEADER_SIZE) */

/* The files ntkd keeps, which no output may replace (but a store the job
 * writes, or a snapshot the job writes, its own kind). */
enum {
  NTK_FILE_OTHER = 0,
  NTK_FILE_STORE,    /* a store (its header's magic) */
  NTK_FILE_INDEX,    /* PATH.index (its magic, or the name of a store's index) */
  NTK_FILE_LOCK,     /* PATH.lock (its text, or the name of a store's or snapshot's lock) */
  NTK_FILE_SNAPSHOT, /* a training snapshot */
  NTK_FILE_TMP,      /* NAME.tmp.HOST.PID: a file being written, then renamed */
};

#endif
