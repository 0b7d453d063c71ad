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

#endif
