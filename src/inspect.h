/* The store commands: `ntkd info`, `export` and `verify` (inspect.c).
 * They read a store and never write it; each returns the process exit
 * code (docs/CLI.md). */
#ifndef NTKD_INSPECT_H
#define NTKD_INSPECT_H

#include "comm/comm.h"

/* info and export: single process. */
int ntk_cmd_info(const char *store_path, int records); /* records: list every record and damaged region */
/* export: the block rows x cols ("A:B", ":B", "A:"; NULL: all) as .npy, or as
 * raw little-endian values without a header (raw_format). */
int ntk_cmd_export(const char *store_path, const char *out_path, const char *kernel, const char *rows,
                   const char *cols, int raw_format);
/* verify: collective over `world` (under mpirun each rank checks the
 * payloads of every size-th tile; rank 0 reports). */
int ntk_cmd_verify(const ntk_comm_t *world, const char *store_path);


#endif
