/* The job file: an INI file with [data], [model], [compute] and [output]
 * sections (a kernel job, with [test] and [solve] for kernel regression),
 * or [data], [validation] and [train] (a training job). Parsing checks every
 * key and value and reports file:line; lines and values have no length limit. */
#ifndef NTKD_CONFIG_H
#define NTKD_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#include "base/defs.h"
#include "base/status.h"

struct ntk_arch;

#define NTK_MAX_DATA_FILES 16
/* Class labels are 0 .. NTK_LABELS_MAX - 1 ([data] classes at most this). */
#define NTK_LABELS_MAX 65536

typedef enum ntk_data_format {
  NTK_FORMAT_AUTO,
  NTK_FORMAT_NPY,
  NTK_FORMAT_IDX,
  NTK_FORMAT_CIFAR10,
} ntk_data_format;

/* NLC: 3-D (N, L, C) sequences for 1-D convolutions, held as L x 1 images. */
typedef enum ntk_layout { NTK_LAYOUT_NHWC, NTK_LAYOUT_NCHW, NTK_LAYOUT_NLC } ntk_layout;

/* Largest layer size and batch, and most epochs, a [train] section takes:
 * far beyond any MLP this trains, and size products stay in range. A
 * snapshot's header is checked against the same bounds. */
#define NTK_TRAIN_MAX_SIZE ((size_t)1 << 24)
#define NTK_TRAIN_MAX_EPOCHS ((size_t)1000000)
/* [train] eps's least value: below it a gradient whose square float32
 * cannot hold (|g| < 1.1e-19) gets Adam's step m / eps, far beyond
 * alpha (src/job/config.c, docs/TRAINING.md "Subnormals"). */
#define NTK_TRAIN_MIN_EPS 1e-15

/* [train] and [validation] of a training job (docs/JOB-FILE.md). */

struct ntk_train_opts {
  int enabled;          /* the job file has a [train] section */
  size_t nlayers;       /* entries in layers: input, hidden..., classes */
  size_t layers[NTK_TRAIN_MAX_LAYERS];
  size_t batch, epochs; /* global batch size, epochs to reach */
  int layers_line, batch_line; /* their lines in the job file, for messages */
  double alpha, beta1, beta2, eps;
  uint64_t seed;
  int flush_denormals;  /* FTZ/DAZ on every rank and thread that computes */
  int device;           /* NTK_TRAIN_DEVICE_*: where a rank computes */
  double rank_timeout;  /* seconds a rank waits for the others at a step or an epoch's end (at least 3x the
                           longest such wait seen) before the job ends, exit 9 */
  char snapshot[NTK_PATH_MAX]; /* "" for none */
  char log[NTK_PATH_MAX];      /* "" for none */
  int snapshot_line, log_line; /* their lines in the job file, for messages (0: not given) */
  /* [validation] */
  char val_path[NTK_PATH_MAX], val_labels[NTK_PATH_MAX];
  int val_path_line, val_labels_line; /* their lines in the job file, for messages */
  size_t val_count;     /* 0: all */
};

/* [test] and [solve] of a kernel-regression job (docs/SOLVE.md). */
#define NTK_MAX_RIDGES 32
struct ntk_test_opts {
  int enabled;   /* the job file has a [test] section */
  int ndata;
  char path[NTK_MAX_DATA_FILES][NTK_PATH_MAX]; /* read like [data] path, same format and layout */
  int path_line;   /* its line in the job file, for messages */
  char labels[NTK_PATH_MAX]; /* "" if not given */
  int labels_line; /* its line in the job file, for messages */
  char pattern[NTK_PATH_MAX]; /* [test] pattern: the test graphs' edges, as [data] pattern; "" if not given */
  int pattern_line;
  size_t count;  /* 0: all */
  int test_test; /* compute test x test too */
};

struct ntk_solve_opts {
  int enabled;   /* the job file has a [solve] section */
  size_t nridge;
  double ridge[NTK_MAX_RIDGES]; /* neural-tangents' diag_reg: times mean(diag K_train) */
  char predictions[NTK_PATH_MAX]; /* output prefix; "" for the store path without .ntk */
  int ridge_line, predictions_line; /* their lines in the job file, for messages */
  int method;            /* NTK_SOLVE_AUTO | LAPACK | SCALAPACK | CG (docs/SOLVE.md) */
  size_t block;          /* ScaLAPACK block size; 0: the method's default (divides the tile) */
  int block_line;        /* its line in the job file, for messages */
  int grid_rows, grid_cols; /* ScaLAPACK process grid; 0 x 0: as square as the rank count allows */
  double tolerance;      /* CG: relative residual to stop at; 0: the method's default */
  size_t max_iterations; /* CG; 0: the method's default */
  size_t precond_rank;   /* CG: rank of the low-rank preconditioner, 0: none; NTK_PRECOND_DEFAULT: the method's */
  int cg_kernel;         /* CG: NTK_CG_KERNEL_AUTO | MEMORY (the tiles across the ranks) | STREAM (from the store) */
  int cg_products;       /* CG: NTK_CG_PRODUCTS_AUTO (float32 for float32 tiles) | FLOAT32 | FLOAT64 */
  int loo;               /* Cholesky: leave-one-out accuracy and MSE per ridge (default yes) */
  int variance;          /* NTK_VARIANCE_NO | DIAG (the m test variances) | FULL (the m x m covariance) */
};
#define NTK_PRECOND_DEFAULT SIZE_MAX
enum { NTK_SOLVE_AUTO = 0, NTK_SOLVE_LAPACK = 1, NTK_SOLVE_SCALAPACK = 2, NTK_SOLVE_CG = 3 };
enum { NTK_CG_KERNEL_AUTO = 0, NTK_CG_KERNEL_MEMORY = 1, NTK_CG_KERNEL_STREAM = 2 };
enum { NTK_CG_PRODUCTS_AUTO = 0, NTK_CG_PRODUCTS_FLOAT32 = 1, NTK_CG_PRODUCTS_FLOAT64 = 2 };
enum { NTK_VARIANCE_NO = 0, NTK_VARIANCE_DIAG = 1, NTK_VARIANCE_FULL = 2 };

struct ntk_job {
  char source[NTK_PATH_MAX]; /* job file name, for messages */
  /* [data] */
  int ndata;
  char data_path[NTK_MAX_DATA_FILES][NTK_PATH_MAX]; /* relative to the job file's folder */
  int data_line;   /* line of [data] path in the job file, for messages */
  ntk_data_format format;
  ntk_layout layout;
  size_t count;    /* 0: all samples */
  char count_key[24]; /* the key count came from, for messages: "" is [data] count ([test], [validation]: theirs) */
  double scale;    /* used when has_scale */
  int has_scale;
  char labels_path[NTK_PATH_MAX]; /* training and regression jobs; "" if not given */
  int labels_line; /* its line in the job file, for messages */
  char pattern_path[NTK_PATH_MAX]; /* a graph network's patterns, (N, V, V) .npy (docs/JOB-FILE.md); "" if none */
  int pattern_line;
  size_t classes;  /* [data] classes: the class count the labels are read against; 0: from the labels
                      (docs/JOB-FILE.md, "Labels") */
  int classes_line;
  /* [model] */
  char *arch;      /* the arch string, any length; owned (ntk_job_free). NULL if the job has none */
  struct ntk_arch *net; /* the arch, parsed once when the job file is (with w_std, b_std, standard);
                           owned (ntk_job_free). NULL if the job has none */
  int arch_line;   /* line of `arch` in the job file, for messages */
  int arch_lines;  /* lines the value spans (a notebook's stax.serial(...) joined), 1 for one */
  double w_std, b_std;
  int b_std_given; /* [model] b_std written: with 0, Dense/Conv still have a bias (stax's b_std=0.) */
  int standard;    /* [model] parameterization = standard (else ntk) */
  int kernels;     /* NTK_KERNEL_* mask; "ntk" stores both */
  /* [compute] */
  int precision;   /* element size: 4 or 8 */
  size_t tile;
  int backend;     /* NTK_BACKEND_AUTO | CPU | CUDA (base/defs.h) */
  double worker_timeout; /* seconds a worker may hold tiles without returning one */
  /* [output] */
  char out_path[NTK_PATH_MAX];
  int out_path_line; /* its line in the job file, for messages (0: not given) */
  int level;
  double progress_interval; /* seconds between plain progress lines */
  double sync_interval;     /* seconds between store fsyncs */
  int direct_io;            /* workers write their records with O_DIRECT where the file system allows */
  /* [test], [solve] */
  struct ntk_test_opts test;
  struct ntk_solve_opts solve;
  /* [train], [validation] */
  struct ntk_train_opts train;
};

/* Ownership: a job owns its `arch` string and its `net` and nothing else; ntk_job_free()
 * releases it. A shallow copy (`*copy = *job`) shares it: free only one.
 * The struct itself belongs to the caller (stack, calloc, ...). */

/* Defaults for every key. The job owns nothing afterwards; what it owned
 * before is not freed (call ntk_job_free() first on a parsed job). */
void ntk_job_defaults(struct ntk_job *job);

/* Free what `job` owns (its arch string and network) and set them to NULL; not the struct
 * itself. Accepts NULL and a job that owns nothing (after ntk_job_defaults
 * or a failed parse); `job` must have been through one of those or a parse,
 * or be all zero (calloc). Rank-local. */
void ntk_job_free(struct ntk_job *job);


/* Parse job-file text. `name` is the file name used in messages and to
 * resolve relative paths. Rank-local, deterministic: every rank parsing the
 * same text gets the same job. `job` is overwritten (ntk_job_defaults
 * first). On success the caller releases it with ntk_job_free(); on failure
 * it owns nothing. Errors: NTK_ECONFIG "name:line: ...", NTK_ENOMEM. */
ntk_status ntk_job_parse_string(const char *text, const char *name, struct ntk_job *job);

/* The same for a piece of a job file (a section shown alone in the docs):
 * the syntax, every section, key and value, duplicates and the arch string
 * are checked, but not which sections and keys a whole job needs or refuses
 * together (required keys, [model] in a training job, ...). Rank-local;
 * ownership as ntk_job_parse_string. */
ntk_status ntk_job_parse_fragment(const char *text, const char *name, struct ntk_job *job);

/* One line (no newline) saying what a parsed job does: kind, data files,
 * network, kernels, precision, output. Truncated to `cap` bytes. Rank-local. */
void ntk_job_summary(const struct ntk_job *job, char *buf, size_t cap);

/* st, its message (about a file the job names on `line`, as `key`:
 * "[data] path") put at that line: "job.conf:4: [data] path: x.npy: ...",
 * as the job file's own errors are ("[data] path: x.npy: ..." for a job
 * not read from a file: line 0). A message that names the job file
 * already is kept as it is. Returns st. */
ntk_status ntk_job_error_at(const struct ntk_job *job, int line, const char *key, ntk_status st);

/* Read the whole file (at most 16 MiB, no NUL bytes) into a NUL-terminated
 * buffer the caller frees. A FIFO, device or socket is refused (NTK_EINPUT)
 * without blocking; a file that cannot be opened is NTK_EUSAGE. Rank-local. */
ntk_status ntk_read_text_file(const char *path, char **text, size_t *len);

#endif
