/* ntkd: the NNGP and NTK kernels of infinitely wide neural networks, with
 * the numbers of neural-tangents' stax, computed in this process (all
 * cores, or a given count of threads), and ntkd's kernel stores read.
 *
 * The library's one public header: it compiles alone, as C11 and as C++.
 * Link with -lntkd (pkg-config ntkd). Conventions:
 *
 *   - Errors by value: every function that can fail returns an
 *     ntkd_status; ntkd_last_error() then says what and where ("arch,
 *     column 14: repeat count 100000000 is above the limit of 100000").
 *     The message is the calling thread's, valid until its next call.
 *   - Handles are opaque, made by a _create/_open function and released
 *     by its _free/_close, which accepts NULL.
 *   - The caller owns every buffer it passes, outputs included; the
 *     library keeps no pointer to them after a call returns.
 *   - No global state that two handles or two threads share: different
 *     threads may use different handles at once, and one ntkd_net from
 *     several threads at once (it is read-only after creation). The
 *     process's own, which the library touches: OpenBLAS's thread count,
 *     1 while any call computes (its threads compute with one each) and
 *     the host's again after the last (a child forked while a call
 *     computes in another thread has no call: it gets the host's count
 *     back at the end of its own first call, and keeps 1 until then);
 *     and the calling thread's locale,
 *     C's during a call (its callbacks run in it too), the caller's again
 *     after. The library never calls exit(), never prints to stdout,
 *     installs no signal handler.
 *   - One process-wide choice, made when the library is loaded: where
 *     OpenBLAS picked kernels weaker than the CPU allows (it falls back
 *     to Prescott on CPU models it does not know, as virtual machines
 *     show them), it is switched to the kernels the ntkd program uses
 *     (AVX-512 "SkylakeX" or AVX2 "Haswell"), so that in-process tiles
 *     equal the program's bit for bit. Set OPENBLAS_CORETYPE or
 *     NTKD_KEEP_BLAS_CORE in the environment to keep OpenBLAS's own.
 *
 * The job-file language of architectures is docs/JOB-FILE.md ("Architecture strings");
 * the store format docs/STORE-FORMAT.md. */
#ifndef NTKD_H
#define NTKD_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NTKD_VERSION_MAJOR 0
#define NTKD_VERSION_MINOR 2
#define NTKD_VERSION_PATCH 0

/* "0.2.0": the library's version (it may differ from the header's). */
const char *ntkd_version(void);

/* ---- errors ---------------------------------------------------------------- */

typedef enum ntkd_status {
  NTKD_OK = 0,
  NTKD_ERROR_USAGE = 1,     /* a bad argument: NULL where a value is needed, sizes that disagree */
  NTKD_ERROR_ARCH = 2,      /* an architecture ntkd cannot read, or does not compute on this data */
  NTKD_ERROR_INPUT = 3,     /* bad data (a value that is not finite, a shape the network cannot take),
                               or a file that is not what it should be */
  NTKD_ERROR_NONFINITE = 4, /* a kernel value beyond the precision (float32: use float64) */
  NTKD_ERROR_CANCELLED = 5, /* stopped: the progress callback asked, or *cancel became non-zero */
  NTKD_ERROR_MEMORY = 6,    /* out of memory */
  NTKD_ERROR_IO = 7,        /* a read or write failed */
  NTKD_ERROR_DAMAGED = 8,   /* a damaged store (ntkd verify lists where) */
  NTKD_ERROR_INCOMPLETE = 9,/* a store lacks a tile the read needs */
  NTKD_ERROR_DEVICE = 10,   /* a GPU failed, or none is there where one was asked for */
  NTKD_ERROR_INTERNAL = 11  /* a bug: please report it with the message */
} ntkd_status;

/* "usage", "arch", ...: a short name for a status. Static memory. */
const char *ntkd_status_name(ntkd_status status);

/* The calling thread's message of its last failure ("" if none): what
 * failed and where. Valid until the thread's next call into the library. */
const char *ntkd_last_error(void);

/* ---- networks -------------------------------------------------------------- */

typedef struct ntkd_net ntkd_net;

enum {
  NTKD_PARAM_NTK = 0,      /* stax's parameterization='ntk' (the default) */
  NTKD_PARAM_STANDARD = 1  /* parameterization='standard': layer widths scale the NTK */
};

typedef struct ntkd_net_options {
  double w_std; /* W_std of a Dense or Conv that does not give its own (default 1) */
  double b_std; /* b_std of one that does not give its own (default 0) */
  int parameterization; /* NTKD_PARAM_* */
} ntkd_net_options;

/* The defaults: w_std 1, b_std 0, NTK parameterisation. */
void ntkd_net_options_init(ntkd_net_options *options);

/* A network from its architecture in the job file's language, e.g.
 * * "[Dense(512) Relu]*2 Dense(1)" (docs/JOB-FILE.md, "Architecture strings").
 * options may be NULL (the defaults). NTKD_ERROR_ARCH with the column and
 * the problem. */
ntkd_status ntkd_net_create(const char *arch, const ntkd_net_options *options, ntkd_net **net);

/* The same from one string per layer (in the same language, a combinator
 * such as "FanOut(2)" or "parallel(Dense(1), Identity)" counting as one):
 * the form a program builds, layer by layer. The strings are joined with
 * spaces and read as one arch string: a string of two layers is taken,
 * and an error's column and layer number count in the joined text. */
ntkd_status ntkd_net_create_layers(const char *const *layers, size_t nlayers, const ntkd_net_options *options,
                                   ntkd_net **net);

void ntkd_net_free(ntkd_net *net);

/* The network in canonical form, every layer with all its parameters:
 * two descriptions of the same network give the same text (an identity,
 * not always an arch string ntkd_net_create reads back: numbers in their
 * shortest form, Hermite(120) as 1.2e+02; under the standard
 * parameterisation a last Dense without a width as Dense(0, ...)). snprintf's
 * contract: at most cap bytes written, NUL included; returns the length
 * the whole text needs. */
size_t ntkd_net_describe(const ntkd_net *net, char *buf, size_t cap);

/* ---- data and kernels -------------------------------------------------------- */

enum { NTKD_FLOAT32 = 4, NTKD_FLOAT64 = 8 };

/* n samples in one C-contiguous array, in neural-tangents' layouts: per
 * sample shape (d) for flat data, (h, w, c) for images (NHWC), (l, c) for
 * 1-D sequences. */
typedef struct ntkd_data {
  const void *x;
  size_t n;
  int ndim;         /* 1, 2 or 3: the number of entries of shape used */
  size_t shape[3];  /* per sample */
  int dtype;        /* NTKD_FLOAT32 or NTKD_FLOAT64 */
} ntkd_data;

enum { NTKD_NNGP = 1, NTKD_NTK = 2 };
enum { NTKD_DEVICE_AUTO = 0, NTKD_DEVICE_CPU = 1, NTKD_DEVICE_CUDA = 2 };

/* Called from the thread that called ntkd_kernels, before the first tile
 * (after the samples' variances, which a deep network takes a while for:
 * *cancel stops those too), about ten times a second, and once at the
 * end, with the entries computed
 * and to do (counted inside a tile too: a convolutional network's
 * entries as they are finished, a fully-connected network's in proportion
 * to the layers done); a non-zero return stops the
 * computation (NTKD_ERROR_CANCELLED). The call at the end comes also after
 * a stop or a failure, saying how far it got; its return is ignored. */
typedef int (*ntkd_progress_fn)(void *arg, uint64_t done, uint64_t total);

typedef struct ntkd_compute_options {
  int threads;          /* threads computing tiles: 0 for every core of this machine */
  int device;           /* NTKD_DEVICE_*: auto computes on a GPU where the network runs there */
  size_t tile;          /* tile edge; 0 chooses one from the network */
  ntkd_progress_fn progress;
  void *progress_arg;
  const volatile int *cancel; /* non-NULL: the computation stops soon after *cancel becomes non-zero
                                 (set it from another thread or a signal handler, and leave it set
                                 until the call returns). The threads poll it inside their tiles
                                 (per layer, band of rows, pair of images): on the CPU a stop takes
                                 effect within a fraction of a second (not inside one 512 x 512
                                 block of an FC network's input covariance, a single BLAS call:
                                 seconds for ~10^5 input features); a GPU finishes its tile */
} ntkd_compute_options;

/* The defaults: every core, auto, a tile from the network, no callback. */
void ntkd_compute_options_init(ntkd_compute_options *options);

/* The kernels of x1 (n1 samples) against x2 (n2 samples): nngp and ntk
 * get n1 x n2 values each, row-major, in the data's dtype; either may be
 * NULL when it is not wanted (`kernels` says which: NTKD_NNGP, NTKD_NTK or
 * both). A call whose arguments pass their checks but that does not
 * finish (NTKD_ERROR_CANCELLED, a network that does not fit the data, a
 * failure while computing) leaves every entry of the outputs NaN: nothing
 * in them is a result. x2 NULL: x1 against itself, each pair computed once and the
 * matrix mirrored. x2 must have x1's dtype and per-sample shape. An
 * output asked for may share no byte with x1, x2, a pattern or the other
 * output (NTKD_ERROR_USAGE: the samples are read while results are
 * written). threads past the tile count compute nothing more, and under an
 * address-space limit (ulimit -v) as many compute as it holds room for
 * (docs/LIBRARY.md). options may be NULL (the defaults). The values equal, bit for bit, the tiles an
 * `ntkd` job computes on the same data in the same precision on the same
 * machine (with x1 as [data] and x2 as [test]). */
ntkd_status ntkd_kernels(const ntkd_net *net, const ntkd_data *x1, const ntkd_data *x2, unsigned kernels,
                         void *nngp, void *ntk, const ntkd_compute_options *options);

/* ntkd_kernels for a network with Aggregate layers (graph networks): each
 * sample of x1 has its pattern in pattern1, of x2 in pattern2 (NULL when
 * x2 is NULL: x1 against itself takes pattern1 for both). A sample's
 * pattern is neural-tangents' dense one without its batch axis: V x V
 * values, row-major, in the data's dtype, V the positions the network's
 * Aggregates see (`positions`; 0: the sample's own, its length or height
 * x width; fewer after a pooling or a VALID or strided convolution);
 * [i][j] the weight of the edge from position i to position j (0: none),
 * and an Aggregate replaces each position by the weighted sum of its
 * predecessors. For a network without an Aggregate, use ntkd_kernels (this
 * call refuses it). */
ntkd_status ntkd_kernels_graph(const ntkd_net *net, const ntkd_data *x1, const void *pattern1, const ntkd_data *x2,
                               const void *pattern2, size_t positions, unsigned kernels, void *nngp, void *ntk,
                               const ntkd_compute_options *options);

/* ---- stores -------------------------------------------------------------------- */

typedef struct ntkd_store ntkd_store;

typedef struct ntkd_store_info {
  uint64_t n;           /* the matrix is n x n */
  uint64_t n_train;     /* a regression's store: samples 0..n_train-1 are train, the rest test; 0: no split */
  int test_test;        /* with n_train: the test x test block was computed */
  int dtype;            /* NTKD_FLOAT32 or NTKD_FLOAT64 */
  unsigned kernels;     /* NTKD_NNGP, and NTKD_NTK when it holds the NTK */
  uint32_t tile;        /* tile edge */
  uint64_t tiles;       /* tiles needed */
  uint64_t tiles_done;  /* tiles present */
  int damaged;          /* the store is damaged: reads refuse it (NTKD_ERROR_DAMAGED) */
  char description[1024];
} ntkd_store_info;

/* Open a store for reading (through its index, as ntkd does), and check
 * its header. Never writes. */
ntkd_status ntkd_store_open(const char *path, ntkd_store **store);
void ntkd_store_close(ntkd_store *store);

ntkd_status ntkd_store_get_info(const ntkd_store *store, ntkd_store_info *info);

/* The block rows [r0, r1) x columns [c0, c1) of kernel NTKD_NNGP or
 * NTKD_NTK into out (row-major, leading dimension ld >= c1 - c0, the
 * store's dtype), the upper triangle by symmetry; entries of test x test
 * tiles a regression store did not compute are NaN. Reads only the tiles
 * the block touches, each checked. NTKD_ERROR_DAMAGED for a damaged store
 * (whatever the block), NTKD_ERROR_INCOMPLETE for a block that needs a
 * tile the store lacks. */
ntkd_status ntkd_store_read(ntkd_store *store, unsigned kernel, uint64_t r0, uint64_t r1, uint64_t c0, uint64_t c1,
                            void *out, size_t ld);

#ifdef __cplusplus
}
#endif

#endif
