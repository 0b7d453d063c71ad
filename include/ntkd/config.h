/* The job file: an INI file with [data], [model], [compute] and [output]
 * sections. Parsing checks every key and value and reports file:line. */
#ifndef NTKD_CONFIG_H
#define NTKD_CONFIG_H

#include <stddef.h>

#include "ntkd/status.h"

#define NTK_PATH_MAX 1024
#define NTK_MAX_DATA_FILES 16

typedef enum ntk_data_format {
  NTK_FORMAT_AUTO,
  NTK_FORMAT_NPY,
  NTK_FORMAT_IDX,
  NTK_FORMAT_CIFAR10,
} ntk_data_format;

typedef enum ntk_layout { NTK_LAYOUT_NHWC, NTK_LAYOUT_NCHW } ntk_layout;

enum { NTK_KERNEL_NNGP = 1, NTK_KERNEL_NTK = 2 };

struct ntk_job {
  char source[NTK_PATH_MAX]; /* job file name, for messages */
  /* [data] */
  int ndata;
  char data_path[NTK_MAX_DATA_FILES][NTK_PATH_MAX]; /* relative to the job file's folder */
  ntk_data_format format;
  ntk_layout layout;
  size_t count;    /* 0: all samples */
  double scale;    /* used when has_scale */
  int has_scale;
  /* [model] */
  char arch[8192];
  int arch_line;   /* line of `arch` in the job file, for messages */
  double w_std, b_std;
  int kernels;     /* NTK_KERNEL_* mask; "ntk" stores both */
  /* [compute] */
  int precision;   /* element size: 4 or 8 */
  size_t tile;
  /* [output] */
  char out_path[NTK_PATH_MAX];
  int level;
  double progress_interval; /* seconds between plain progress lines */
  double sync_interval;     /* seconds between store fsyncs */
};

/* Defaults for every key. */
void ntk_job_defaults(struct ntk_job *job);

/* Parse job-file text. `name` is the file name used in messages and to
 * resolve relative paths. Rank-local, deterministic: every rank parsing the
 * same text gets the same job. Errors: NTK_ECONFIG "name:line: ...". */
ntk_status ntk_job_parse_string(const char *text, const char *name, struct ntk_job *job);

/* Read the whole file into a NUL-terminated buffer the caller frees. */
ntk_status ntk_read_text_file(const char *path, char **text, size_t *len);

#endif
