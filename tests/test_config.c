/* Job files: defaults, every key, the INI syntax (inline comments, CRLF,
 * lines of any length), and errors that name file, line and key. */
#include <math.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "kernels/arch.h"
#include "backend/backend.h"
#include "job/config.h"
#include "job/jobhash.h"
#include "testutil.h"

static const char good[] =
    "# a comment\n"
    "[data]\n"
    "path = data/x.npy\n"
    "count = 100\n"
    "scale = 0.5\n"
    "layout = NCHW\n"
    "format = npy\n"
    "\n"
    "[model]\n"
    "arch = [Dense Relu]*3 Dense\n"
    "w_std = 1.5\n"
    "b_std = 0.05\n"
    "kernel = nngp\n"
    "[compute]\n"
    "precision = float64\n"
    "tile = 256\n"
    "backend = cuda\n"
    "[output]\n"
    "path = /abs/out.ntk\n"
    "level = 3\n"
    "progress = 10\n"
    "sync = 0\n"
    "direct_io = no\n";

/* An out-of-memory error under a limit names the limit (base/status.c):
 * a bare "out of memory" at 230 MB of a 24 GB machine said nothing. In a
 * child, which keeps the limit to itself. */
START_TEST(test_out_of_memory_names_the_limit) {
  struct rlimit as, data;
  ck_assert(!getrlimit(RLIMIT_AS, &as) && !getrlimit(RLIMIT_DATA, &data));
  ntk_error(NTK_ENOMEM, "out of memory");
  if (as.rlim_cur == RLIM_INFINITY && data.rlim_cur == RLIM_INFINITY) /* a runner under no limit */
    ck_assert_ptr_null(strstr(ntk_error_message(), "ulimit"));
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (!pid) {
    struct rlimit r = {(rlim_t)1 << 40, (rlim_t)1 << 40};
    int bad = setrlimit(RLIMIT_AS, &r) != 0;
    ntk_error(NTK_ENOMEM, "out of memory");
    bad |= !strstr(ntk_error_message(), "out of memory (the address-space limit, ulimit -v, is 1048576 MiB)");
    ntk_error(NTK_ENOMEM, "the address-space limit (ulimit -v) is small"); /* a message that names it already */
    bad |= strstr(ntk_error_message(), "MiB)") != NULL;
    ntk_error(NTK_EIO, "cannot read");
    bad |= strstr(ntk_error_message(), "ulimit") != NULL;
    _exit(bad);
  }
  int ws = 0;
  ck_assert_int_eq(waitpid(pid, &ws, 0), pid);
  ck_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0);
}
END_TEST

START_TEST(test_good) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(good, "jobs/a.conf", &j), NTK_OK);
  ck_assert_int_eq(j.ndata, 1);
  ck_assert_str_eq(j.data_path[0], "jobs/data/x.npy"); /* relative to the job file */
  ck_assert_uint_eq(j.count, 100);
  ck_assert(j.has_scale);
  ck_assert_double_eq(j.scale, 0.5);
  ck_assert_int_eq(j.layout, NTK_LAYOUT_NCHW);
  ck_assert_int_eq(j.format, NTK_FORMAT_NPY);
  ck_assert_str_eq(j.arch, "[Dense Relu]*3 Dense");
  ck_assert_double_eq(j.w_std, 1.5);
  ck_assert_double_eq(j.b_std, 0.05);
  ck_assert_int_eq(j.kernels, NTK_KERNEL_NNGP);
  ck_assert_int_eq(j.precision, 8);
  ck_assert_uint_eq(j.tile, 256);
  ck_assert_int_eq(j.backend, NTK_BACKEND_CUDA);
  ck_assert_str_eq(j.out_path, "/abs/out.ntk");
  ck_assert_int_eq(j.level, 3);
  ck_assert_double_eq(j.progress_interval, 10);
  ck_assert_double_eq(j.sync_interval, 0);
  ck_assert_int_eq(j.direct_io, 0);
  ntk_job_free(&j);
  ck_assert_ptr_null(j.arch);
  ntk_job_free(&j); /* twice is harmless */
  ntk_job_free(NULL);
}
END_TEST

START_TEST(test_defaults) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath=x.npy\n[model]\narch=Dense\n[output]\npath=o\n", "j.conf", &j),
                   NTK_OK);
  ck_assert_str_eq(j.data_path[0], "x.npy");
  ck_assert_int_eq(j.kernels, NTK_KERNEL_NNGP | NTK_KERNEL_NTK);
  ck_assert_int_eq(j.precision, 4);
  ck_assert_double_eq(j.w_std, 1.0);
  ck_assert_double_eq(j.b_std, 0.0);
  ck_assert(!j.has_scale);
  ck_assert_uint_eq(j.count, 0);
  ck_assert_uint_eq(j.tile, 1024);
  ck_assert_int_eq(j.backend, NTK_BACKEND_AUTO);
  ck_assert_int_eq(j.level, 1);
  ck_assert_int_eq(j.direct_io, 1);
  ntk_job_free(&j);
}
END_TEST

/* [model] b_std = 0, written, is stax's b_std=0. on every layer without its
 * own: a bias parameter, which adds 1 to the standard parameterisation's NTK
 * per layer. It was read as stax's default (no bias), silently dropping it. */
START_TEST(test_model_b_std_zero_is_a_bias) {
  static const char *fmt = "[data]\npath=x.npy\n[model]\narch=Dense(7) Relu Dense(3, b_std=None) Relu Dense(2)\n"
                           "parameterization = standard\n%s[output]\npath=o\n";
  const char *extra[] = {"", "b_std = 0\n", "b_std = 0.5\n"};
  const int want[3][3] = {{0, 0, 0}, {1, 0, 1}, {1, 0, 1}};
  for (int i = 0; i < 3; i++) {
    char text[512];
    snprintf(text, sizeof text, fmt, extra[i]);
    struct ntk_job j;
    ck_assert_int_eq(ntk_job_parse_string(text, "j.conf", &j), NTK_OK);
    ck_assert_ptr_nonnull(j.net);
    ck_assert_uint_eq(j.net->n, 5);
    for (int k = 0; k < 3; k++) ck_assert_msg(j.net->layers[2 * k].bias == want[i][k], "case %d layer %d", i, 2 * k);
    ntk_job_free(&j);
  }
}
END_TEST

/* Several files in one path are CIFAR-10 batches only: a list of .npy or IDX
 * files is refused by the job file's check, at its line, as the run refuses
 * it (ntkd check said OK, the run then stopped). */
START_TEST(test_several_files_cifar_only) {
  struct ntk_job j;
  const char *fmt = "[data]\npath = %s\n%s[model]\narch = Dense\n[output]\npath = o\n%s";
  const struct {
    const char *path, *format, *test;
    int ok;
  } c[] = {{"a.npy b.npy", "", "", 0},
           {"a-idx3-ubyte b-idx3-ubyte", "", "", 0},
           {"a.bin b.bin", "", "", 1},
           {"a.bin.gz b.bin", "", "", 1},
           {"a.npy b.npy", "format = cifar10\n", "", 1},
           {"a.bin b.bin", "format = npy\n", "", 0},
           {"a.npy", "", "[test]\npath = t.npy u.npy\n", 0},
           {"a.bin", "", "[test]\npath = t.bin u.bin\n", 1}};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, fmt, c[i].path, c[i].format, c[i].test);
    ntk_status st = ntk_job_parse_string(text, "j.conf", &j);
    ck_assert_msg((st == NTK_OK) == c[i].ok, "case %zu: %s", i, st ? ntk_error_message() : "OK");
    if (!st) ntk_job_free(&j);
    else ck_assert_ptr_nonnull(strstr(ntk_error_message(), "files (spaces separate them; quotes do not join them: a "
                                                              "file whose name has a space needs a link without one); "
                                                              "several files are only supported for CIFAR-10"));
  }
}
END_TEST

/* [data] layout = NCHW / NLC reorders .npy arrays only: the IDX reader took
 * no notice of it, so a 4-D IDX file of NCHW images was silently read as
 * NHWC (a CNN's kernel 24% off). Refused for IDX and CIFAR-10 files, in
 * [data] and [test]. */
START_TEST(test_layout_npy_only) {
  struct ntk_job j;
  const char *fmt = "[data]\npath = %s\nlayout = %s\n%s[model]\narch = Dense\n[output]\npath = o\n%s";
  const struct {
    const char *path, *layout, *format, *test;
    int ok;
  } c[] = {{"a.npy", "NCHW", "", "", 1},
           {"a.npy.gz", "NLC", "", "", 1},
           {"a-idx3-ubyte.gz", "NHWC", "", "", 1},
           {"a.bin", "NHWC", "", "", 1},
           {"a-idx4-ubyte", "NCHW", "", "", 0},
           {"a-idx3-ubyte.gz", "NLC", "", "", 0},
           {"a.bin", "NCHW", "", "", 0},
           {"a.dat", "NCHW", "format = npy\n", "", 1},
           {"a.npy", "NCHW", "format = idx\n", "", 0},
           {"a.npy", "NCHW", "", "[test]\npath = t.idx\n", 0},
           {"a.npy", "NCHW", "", "[test]\npath = t.npy\n", 1}};
  for (size_t i = 0; i < sizeof c / sizeof c[0]; i++) {
    char text[512];
    snprintf(text, sizeof text, fmt, c[i].path, c[i].layout, c[i].format, c[i].test);
    ntk_status st = ntk_job_parse_string(text, "j.conf", &j);
    ck_assert_msg((st == NTK_OK) == c[i].ok, "case %zu: %s", i, st ? ntk_error_message() : "OK");
    if (!st) ntk_job_free(&j);
    else ck_assert_ptr_nonnull(strstr(ntk_error_message(), "j.conf:3: [data] layout"));
  }
}
END_TEST

START_TEST(test_cifar_list) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath = a.bin  b.bin\tc.bin\n[model]\narch=Dense\n[output]\npath=o\n",
                                        "d/j.conf", &j), NTK_OK);
  ck_assert_int_eq(j.ndata, 3);
  ck_assert_str_eq(j.data_path[2], "d/c.bin");
  ntk_job_free(&j);
}
END_TEST

/* Each bad file must fail with a message containing `needle`. */
static void bad(const char *text, const char *needle) {
  struct ntk_job j;
  ntk_status st = ntk_job_parse_string(text, "bad.conf", &j);
  ck_assert_msg(st == NTK_ECONFIG, "should fail: %s", text);
  ck_assert_msg(strstr(ntk_error_message(), needle), "message '%s' lacks '%s'", ntk_error_message(), needle);
  ck_assert_ptr_null(j.arch); /* a job that failed owns nothing */
}

#define BASE "[data]\npath=x.npy\n[model]\narch=Dense\n[output]\npath=o\n"

START_TEST(test_errors) {
  bad(BASE "[compute]\ntiel = 5\n", "bad.conf:8: [compute] tiel: unknown key");
  bad(BASE "[comptue]\ntile = 5\n", "bad.conf:7: unknown section [comptue]");
  bad(BASE "[extra]\n", "bad.conf:7: unknown section [extra]");
  bad(BASE "[compute]\ntile = 0\n", "bad.conf:8: [compute] tile");
  bad(BASE "[compute]\ntile = -3\n", "[compute] tile: '-3'");
  bad(BASE "[compute]\ntile = 12x\n", "[compute] tile: '12x'");
  bad(BASE "[compute]\nprecision = float16\n", "bad.conf:8: [compute] precision: 'float16' is not float32 or float64");
  bad(BASE "[model]\nkernel = cntk\n", "[model] kernel: 'cntk'");
  bad(BASE "[model]\nw_std = -1\n", "[model] w_std");
  bad(BASE "[model]\nb_std = nan\n", "[model] b_std");
  bad(BASE "[data]\nscale = 0\n", "[data] scale");
  bad(BASE "[data]\ncount = 0\n", "[data] count");
  bad(BASE "[data]\nlayout = NWHC\n", "[data] layout");
  bad(BASE "[data]\nformat = hdf5\n", "[data] format");
  bad(BASE "[output]\nlevel = 30\n", "[output] level");
  bad(BASE "[output]\ndirect_io = 1\n", "[output] direct_io: '1' is not yes or no");
  bad(BASE "[output]\nlevel = 1.5\n", "[output] level");
  bad(BASE "[output]\nlevel = 0x1\n", "bad.conf:8: [output] level: '0x1'");
  bad(BASE "[model]\nw_std = 0x1p0\n", "bad.conf:8: [model] w_std: '0x1p0'");
  bad(BASE "[output]\nprogress = 0\n", "[output] progress");
  bad(BASE "[compute]\nbackend = gpu\n", "bad.conf:8: [compute] backend: 'gpu' is not auto, cpu or cuda");
  bad("[data]\npath=x.npy\npath=y.npy\n[model]\narch=Dense\n[output]\npath=o\n", "bad.conf:3: [data] path: given twice");
  bad("[model]\narch=Dense\n[output]\npath=o\n", "[data] path is required");
  bad("[data]\npath=x.npy\n[output]\npath=o\n", "[model] arch is required");
  bad("[data]\npath=x.npy\n[model]\narch=Dense\n", "[output] path is required");
  bad("[data]\npath=x.npy\n[model]\narch=Relu Dense\n[output]\npath=o\n", "cannot be the first layer");
  bad("[data]\npath=x.npy\n[model]\narch=Dense Foo\n[output]\npath=o\n", "bad.conf:4: [model] arch, column 7: unknown layer");
  bad("[data]\npath=x.npy\njust some words\n", "bad.conf:3: syntax error");
  bad("[data\npath=x.npy\n", "bad.conf:1: section header without ']'");
  bad("key = value\n", "bad.conf:1: key 'key' is outside any section");
}
END_TEST

#define TRAIN "[data]\npath=x.gz\nlabels=y.gz\n[validation]\npath=vx.gz\nlabels=vy.gz\n[train]\nlayers=784 10\n"

START_TEST(test_train_good) {
  struct ntk_job j;
  const char *text = "[data]\npath = tr.gz\nlabels = trl.gz\ncount = 1000\n"
                     "[validation]\npath = /v/x.npy\nlabels = vl.npy\ncount = 50\n"
                     "[train]\nlayers = 784 1000  1000\t10\nbatch = 50\nepochs = 5\nalpha = 0.002\n"
                     "beta1 = 0.8\nbeta2 = 0.99\neps = 1e-7\nseed = 18446744073709551615\n"
                     "flush_denormals = false\ndevice = cpu\nsnapshot = out/snap.bin\nlog = out/log.jsonl\n";
  ck_assert_int_eq(ntk_job_parse_string(text, "d/t.conf", &j), NTK_OK);
  ck_assert(j.train.enabled);
  ck_assert_str_eq(j.labels_path, "d/trl.gz");
  ck_assert_str_eq(j.train.val_path, "/v/x.npy");
  ck_assert_str_eq(j.train.val_labels, "d/vl.npy");
  ck_assert_uint_eq(j.train.val_count, 50);
  ck_assert_uint_eq(j.train.nlayers, 4);
  ck_assert_uint_eq(j.train.layers[0], 784);
  ck_assert_uint_eq(j.train.layers[2], 1000);
  ck_assert_uint_eq(j.train.layers[3], 10);
  ck_assert_uint_eq(j.train.batch, 50);
  ck_assert_uint_eq(j.train.epochs, 5);
  ck_assert_double_eq(j.train.alpha, 0.002);
  ck_assert_double_eq(j.train.beta1, 0.8);
  ck_assert_double_eq(j.train.beta2, 0.99);
  ck_assert_double_eq(j.train.eps, 1e-7);
  ck_assert(j.train.seed == UINT64_MAX);
  ck_assert_int_eq(j.train.flush_denormals, 0);
  ck_assert_int_eq(j.train.device, NTK_TRAIN_DEVICE_CPU);
  ck_assert_str_eq(j.train.snapshot, "d/out/snap.bin");
  ck_assert_str_eq(j.train.log, "d/out/log.jsonl");
  ck_assert_ptr_null(j.arch);
  ntk_job_free(&j);
}
END_TEST

START_TEST(test_train_defaults) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(TRAIN, "t.conf", &j), NTK_OK);
  ck_assert(j.train.enabled);
  ck_assert_double_eq(j.train.alpha, 0.001);
  ck_assert_double_eq(j.train.beta1, 0.9);
  ck_assert_double_eq(j.train.beta2, 0.999);
  ck_assert_double_eq(j.train.eps, 1e-8);
  ck_assert_int_eq(j.train.flush_denormals, 1);
  ck_assert_int_eq(j.train.device, NTK_TRAIN_DEVICE_AUTO);
  ck_assert_uint_eq(j.train.batch, 100);
  ck_assert_uint_eq(j.train.epochs, 20);
  ck_assert_str_eq(j.train.snapshot, "");
  ck_assert_str_eq(j.train.log, "");
  /* A kernel job is not a training job. */
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(BASE, "k.conf", &j), NTK_OK);
  ck_assert(!j.train.enabled);
  ntk_job_free(&j);
}
END_TEST

START_TEST(test_train_errors) {
  bad(TRAIN "batch = 0\n", "bad.conf:9: [train] batch: '0'");
  bad(TRAIN "epochs = 2.5\n", "[train] epochs: '2.5'");
  bad(TRAIN "alpha = 0\n", "[train] alpha: '0' is not a number in [1.18e-38, 3.4e38] (float32's normal range)");
  bad(TRAIN "alpha = 1e39\n", "bad.conf:9: [train] alpha: '1e39' is not a number in [1.18e-38, 3.4e38]");
  bad(TRAIN "alpha = 1e-300\n", "[train] alpha: '1e-300' is not a number in [1.18e-38, 3.4e38] (float32's normal range)");
  /* Below float32's normal range eps is 0 under FTZ/DAZ: 0 / 0 for a parameter never moved. */
  bad(TRAIN "eps = 1e-40\n", "bad.conf:9: [train] eps: '1e-40' is not a number in [1e-15, 3.4e38]");
  /* Normal floats, but a gradient below 1.1e-19 squares to 0 in float32 and its step becomes m / eps:
   * with eps = 1.2e-38 a job on inputs of 1e-18 grew parameters to 1e15 in 30 steps and ended with exit 0. */
  bad(TRAIN "eps = 1.2e-38\n", "bad.conf:9: [train] eps: '1.2e-38' is not a number in [1e-15, 3.4e38]: float32 "
      "squares a gradient below 1.1e-19 to 0");
  bad(TRAIN "eps = 9.9e-16\n", "[train] eps: '9.9e-16' is not a number in [1e-15, 3.4e38]");
  bad(TRAIN "eps = 0\n", "[train] eps: '0'");
  bad(TRAIN "eps = 1e39\n", "[train] eps: '1e39'");
  bad(TRAIN "beta1 = 1\n", "[train] beta1: '1' is not a number in [0, 1)");
  bad(TRAIN "beta2 = -0.1\n", "[train] beta2");
  bad(TRAIN "eps = inf\n", "[train] eps");
  bad(TRAIN "seed = -1\n", "[train] seed");
  bad(TRAIN "flush_denormals = yes\n", "bad.conf:9: [train] flush_denormals: 'yes' is not true or false");
  bad(TRAIN "device = gpu\n", "bad.conf:9: [train] device: 'gpu' is not auto, cpu or cuda");
  bad(TRAIN "lr = 0.1\n", "bad.conf:9: [train] lr: unknown key (layers, batch");
  bad(TRAIN "layers = 784 10\n", "bad.conf:9: [train] layers: given twice");
  bad(TRAIN "[validation]\ncount = 0\n", "[validation] count");
  bad(TRAIN "[validation]\nscale = 2\n", "[validation] scale: unknown key (path, labels, count)");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\nlabels=w\n[train]\nlayers = 784\n",
      "bad.conf:8: [train] layers: '784' needs at least the input size and the number of classes");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\nlabels=w\n[train]\nlayers = 784 a 10\n",
      "[train] layers: 'a' is not a layer size");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\nlabels=w\n[train]\nlayers = 784 0 10\n",
      "[train] layers: '0'");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\nlabels=w\n[train]\nlayers = 784 1\n",
      "the last size (classes) must be at least 2");
  /* What a training job needs, and what it refuses. */
  bad("[data]\npath=x\n[validation]\npath=v\nlabels=w\n[train]\nlayers=4 2\n", "[data] labels is required");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\nlabels=w\n[train]\n", "[train] layers is required");
  bad("[data]\npath=x\nlabels=y\n[train]\nlayers=4 2\n", "[validation] path is required");
  bad("[data]\npath=x\nlabels=y\n[validation]\npath=v\n[train]\nlayers=4 2\n", "[validation] labels is required");
  bad(TRAIN "[model]\narch = Dense\n", "bad.conf:9: [model] is for kernel jobs");
  bad(TRAIN "[output]\n", "bad.conf:9: [output] is for kernel jobs");
  bad("[compute]\ntile = 5\n" TRAIN, "bad.conf:1: [compute] is for kernel jobs");
  /* A kernel job refuses the training keys and sections. */
  bad("[data]\npath=x.npy\nlabels=y\n[model]\narch=Dense\n[output]\npath=o\n",
      "bad.conf:3: [data] labels: only a training job ([train]) or a kernel regression");
  bad(BASE "[validation]\npath = v\n", "bad.conf:7: [validation] is only for a training job");
  bad(BASE "[model]\nbatch = 5\n", "[model] batch: unknown key");
}
END_TEST

#define REG "[data]\npath=tr.gz\nlabels=trl.gz\ncount=100\n[model]\narch=Dense\n[output]\npath=o\n"

START_TEST(test_regression_good) {
  struct ntk_job j;
  const char *text = REG "[test]\npath = te.gz\nlabels = /l/tel.gz\ncount = 20\ntest_test = yes\n"
                         "[solve]\nridge = 0, 1e-4,1e-2 1\npredictions = p/pred\n";
  ck_assert_int_eq(ntk_job_parse_string(text, "d/reg.conf", &j), NTK_OK);
  ck_assert(j.test.enabled && j.solve.enabled && !j.train.enabled);
  ck_assert_int_eq(j.test.ndata, 1);
  ck_assert_str_eq(j.test.path[0], "d/te.gz");
  ck_assert_str_eq(j.test.labels, "/l/tel.gz");
  ck_assert_str_eq(j.labels_path, "d/trl.gz");
  ck_assert_uint_eq(j.test.count, 20);
  ck_assert_int_eq(j.test.test_test, 1);
  ck_assert_uint_eq(j.solve.nridge, 4);
  ck_assert(j.solve.ridge[0] == 0 && j.solve.ridge[1] == 1e-4 && j.solve.ridge[2] == 1e-2 && j.solve.ridge[3] == 1);
  /* the solve method's defaults */
  ck_assert_int_eq(j.solve.method, NTK_SOLVE_AUTO);
  ck_assert_int_eq(j.solve.loo, 1);
  ck_assert_int_eq(j.solve.variance, NTK_VARIANCE_NO);
  ck_assert(j.solve.precond_rank == NTK_PRECOND_DEFAULT && j.solve.block == 0 && j.solve.grid_rows == 0);
  ck_assert_str_eq(j.solve.predictions, "d/p/pred");
  ntk_job_free(&j);
  /* -0 is the ridge 0 (its file ridge0.npy, not ridge-0.npy) */
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = -0, 1\n", "d/reg.conf", &j),
                   NTK_OK);
  ck_assert(j.solve.nridge == 2 && j.solve.ridge[0] == 0 && !signbit(j.solve.ridge[0]));
  ntk_job_free(&j);
  /* every key of the solve methods (method = auto reads them all) */
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\nmethod = auto\n"
                                        "block = 128\ngrid = 2 x 3\ntolerance = 1e-9\nmax_iterations = 500\n"
                                        "preconditioner_rank = 0\ncg_kernel = stream\ncg_products = float64\nloo = no\n",
                                        "r.conf", &j), NTK_OK);
  ck_assert_int_eq(j.solve.method, NTK_SOLVE_AUTO);
  ck_assert(j.solve.block == 128 && j.solve.grid_rows == 2 && j.solve.grid_cols == 3);
  ck_assert(j.solve.tolerance == 1e-9 && j.solve.max_iterations == 500 && j.solve.precond_rank == 0);
  ck_assert(j.solve.cg_kernel == NTK_CG_KERNEL_STREAM && j.solve.loo == 0);
  ck_assert_int_eq(j.solve.cg_products, NTK_CG_PRODUCTS_FLOAT64);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = t\nlabels = l\ntest_test = yes\n[solve]\nridge = 1\n"
                                        "variance = full\n", "r.conf", &j), NTK_OK);
  ck_assert_int_eq(j.solve.variance, NTK_VARIANCE_FULL);
  ntk_job_free(&j);
  /* [test] labels without [solve]: both or neither (the later solve reads both) */
  bad(REG "[test]\npath = te.gz\n", "bad.conf:3: [data] labels is given and [test] labels is not");
  bad("[data]\npath=tr.gz\n[model]\narch=Dense\n[output]\npath=o\n[test]\npath = te.gz\nlabels = l\n",
      "bad.conf:9: [test] labels is given and [data] labels is not");
  /* [test] alone: the kernel over train and test, solved later. */
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = te.gz\nlabels = l\n", "r.conf", &j), NTK_OK);
  ck_assert(j.test.enabled && !j.solve.enabled && !j.test.test_test && j.test.count == 0);
  ntk_job_free(&j);
}
END_TEST

START_TEST(test_regression_errors) {
  bad(REG "[solve]\nridge = 1\n", "bad.conf:9: [solve] needs a [test] section");
  bad(REG "[test]\nlabels = l\n", "bad.conf:9: [test] path is required");
  bad(REG "[test]\npath = t\n[solve]\nridge = 1\n", "[test] labels is required to solve");
  bad("[data]\npath=x\n[model]\narch=Dense\n[output]\npath=o\n[test]\npath=t\nlabels=l\n[solve]\nridge=1\n",
      "[data] labels is required to solve");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\n", "bad.conf:12: [solve] ridge is required");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1, -2\n", "bad.conf:13: [solve] ridge: '-2' is not a number >= 0");
  /* a ridge given twice: it was refused later as "the file of ridge 0.001 is also the file of ridge 0.001" */
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1e-3, 0.001\n",
      "bad.conf:13: [solve] ridge: '0.001': that ridge is given twice");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = -0 0\n", "bad.conf:13: [solve] ridge: '0': that ridge is given twice");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1, x\n", "[solve] ridge: 'x'");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = ,\n", "[solve] ridge: ',': a comma with no value before it");
  /* A value left out between commas was skipped: three ridges meant, two solved. */
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1e-3,,1e-2\n",
      "bad.conf:13: [solve] ridge: '1e-3,,1e-2': a comma with no value before it");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1e-3, , 1e-2\n", "a comma with no value before it");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1e-3, 1e-2,\n", "a comma with no value after it");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\nridge = 2\n", "bad.conf:14: [solve] ridge: given twice");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\nlambda = 2\n", "[solve] lambda: unknown key (ridge, predictions, method");
#define SOLVE REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\n"
  bad(SOLVE "method = qr\n", "bad.conf:14: [solve] method: 'qr' is not auto, lapack, scalapack or cg");
  bad(SOLVE "block = 0\n", "[solve] block: '0' is not a block size");
  bad(SOLVE "grid = 2x\n", "[solve] grid: '2x' is not a process grid");
  bad(SOLVE "grid = 0 x 2\n", "[solve] grid: '0 x 2'");
  /* past int: sscanf's %d wrapped them (4294967297 x 1 ran as 1 x 1, exit 0) */
  bad(SOLVE "grid = 4294967297 x 1\n", "[solve] grid: '4294967297 x 1' is not a process grid");
  bad(SOLVE "grid = 1 x 4294967298\n", "[solve] grid: '1 x 4294967298'");
  bad(SOLVE "grid = -4294967295 x 1\n", "[solve] grid: '-4294967295 x 1'");
  bad(SOLVE "grid = 99999999999999999999 x 1\n", "[solve] grid: '99999999999999999999 x 1'");
  bad(SOLVE "grid = 65537 x 1\n", "[solve] grid: '65537 x 1'");
  bad(SOLVE "grid = +2 x 1\n", "[solve] grid: '+2 x 1'");
  bad(SOLVE "tolerance = 1\n", "[solve] tolerance: '1' is not a relative residual in (0, 1)");
  bad(SOLVE "tolerance = 0\n", "[solve] tolerance: '0'");
  bad(SOLVE "max_iterations = 0\n", "[solve] max_iterations: '0' is not a positive integer");
  bad(SOLVE "preconditioner_rank = -1\n", "[solve] preconditioner_rank: '-1'");
  bad(SOLVE "cg_kernel = disk\n", "[solve] cg_kernel: 'disk' is not auto, memory or stream");
  bad(SOLVE "cg_products = mixed\n", "bad.conf:14: [solve] cg_products: 'mixed' is not auto, float32 or float64");
  bad(SOLVE "cg_products = float32\ncg_products = float64\n", "bad.conf:15: [solve] cg_products: given twice");
  bad(SOLVE "loo = 1\n", "[solve] loo: '1' is not yes or no");
  /* at the key's line, not the section's */
  bad(SOLVE "method = cg\nloo = yes\n", "bad.conf:15: [solve] loo = yes is computed by methods lapack and scalapack, not cg");
  /* a key the method never reads is refused at its line, naming the method's */
  bad(SOLVE "method = lapack\nblock = 64\n", "bad.conf:15: [solve] block is read by method = scalapack (or auto), and "
      "method = lapack (line 14) never reads it");
  bad(SOLVE "grid = 1 x 2\nmethod = cg\n", "bad.conf:14: [solve] grid is read by method = scalapack (or auto), and "
      "method = cg (line 15)");
  bad(SOLVE "method = scalapack\ntolerance = 1e-6\n", "bad.conf:15: [solve] tolerance is read by method = cg");
  bad(SOLVE "method = lapack\nmax_iterations = 5\n", "[solve] max_iterations is read by method = cg");
  bad(SOLVE "method = lapack\npreconditioner_rank = 5\n", "[solve] preconditioner_rank is read by method = cg");
  bad(SOLVE "method = scalapack\ncg_kernel = memory\n", "[solve] cg_kernel is read by method = cg");
  bad(SOLVE "method = lapack\ncg_products = float64\n", "[solve] cg_products is read by method = cg");
  /* what the job file alone decides, before any tile: float32 products of
   * a float64 kernel (once refused after it) */
  bad(SOLVE "cg_products = float32\n[compute]\nprecision = float64\n", "bad.conf:14: [solve] cg_products = float32 needs a float32 kernel, and "
      "[compute] precision is float64");
  bad(SOLVE "variance = diag\n", "[solve] variance: 'diag' is not no, yes");
  bad(SOLVE "variance = yes\n", "bad.conf:14: [solve] variance needs the test x test kernel: add test_test = yes");
  bad(REG "[test]\npath = t\nlabels = l\ntest_test = yes\n[solve]\nridge = 1\nvariance = yes\nmethod = cg\n",
      "bad.conf:15: [solve] variance is computed by method = lapack only");
  bad(SOLVE "method = cg\nmethod = cg\n", "bad.conf:15: [solve] method: given twice");
  bad(REG "[test]\npath = t\ncount = 0\n", "bad.conf:11: [test] count: '0' is not a positive integer");
  bad(REG "[test]\npath = t\ntest_test = maybe\n", "[test] test_test: 'maybe' is not yes or no");
  bad(REG "[test]\npath = t\nscale = 2\n", "[test] scale: unknown key (path, labels, pattern, count, test_test)");
  bad(REG "[test]\npath = t\npath = u\n", "bad.conf:11: [test] path: given twice");
  bad(TRAIN "[test]\npath = t\n", "[test] is for kernel jobs");
  bad(TRAIN "[solve]\nridge = 1\n", "[solve] is for kernel jobs");
  char many[1024] = REG "[test]\npath = t\nlabels = l\n[solve]\nridge =";
  for (int i = 0; i < 33; i++) sprintf(many + strlen(many), " %d", i + 1);
  strcat(many, "\n");
  bad(many, "[solve] ridge: more than 32 values");
}
END_TEST

/* A graph network's patterns: [data] pattern and [test] pattern, paths
 * resolved as the data's; both sets have them or neither; not in a
 * training job. */
START_TEST(test_patterns) {
  struct ntk_job j;
  const char *text = "[data]\npath = x.npy\nlayout = NLC\npattern = g/p.npy\n[model]\narch = Dense Relu Aggregate "
                     "GlobalAvgPool Dense\n[output]\npath = o.ntk\n[test]\npath = t.npy\npattern = /abs/pt.npy\n";
  ck_assert_msg(ntk_job_parse_string(text, "d/g.conf", &j) == NTK_OK, "%s", ntk_error_message());
  ck_assert_str_eq(j.pattern_path, "d/g/p.npy");
  ck_assert_str_eq(j.test.pattern, "/abs/pt.npy");
  ck_assert_int_eq(j.pattern_line, 4);
  ntk_job_free(&j);
#define GRAPH "[data]\npath = x.npy\npattern = p.npy\n[model]\narch = Dense Aggregate GlobalAvgPool\n[output]\npath = o\n"
  bad(GRAPH "[test]\npath = t.npy\n", "bad.conf:3: [data] pattern is given and [test] pattern is not");
  bad("[data]\npath = x.npy\n[model]\narch = Dense\n[output]\npath = o\n[test]\npath = t\npattern = pt\n",
      "bad.conf:7: [test] pattern is given and [data] pattern is not");
  bad(GRAPH "[test]\npath = t.npy\npattern = a\npattern = b\n", "bad.conf:11: [test] pattern: given twice");
  bad("[data]\npath = x.npy\npattern = p\npattern = q\n", "bad.conf:4: [data] pattern: given twice");
  bad("[data]\npath = x.npy\npattern =\n", "[data] pattern");
  bad("[data]\npath=x.gz\nlabels=y.gz\npattern=p.npy\n[validation]\npath=vx.gz\nlabels=vy.gz\n[train]\n"
      "layers=784 10\n", "bad.conf:4: [data] pattern is for kernel jobs whose network has Aggregate layers");
  bad("[data]\npath = x\nedges = e\n", "unknown key (path, format, layout, count, scale, labels, pattern, classes)");
}
END_TEST

/* The INI syntax people write: inline comments after whitespace ('#' or
 * ';'), '#' and ';' inside a word kept, surrounding whitespace trimmed. */
/* [data] classes (the class count a regression's labels are read
 * against): 2 to 65536, once, only with labels; in a training job it must
 * be [train] layers' last size. The lines of the labels keys are kept for
 * the messages about labels. */
START_TEST(test_classes) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\n[data]\nclasses = 256\n",
                                        "r.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.classes, 256);
  ck_assert_int_eq(j.classes_line, 15);
  ck_assert_int_eq(j.labels_line, 3);
  ck_assert_int_eq(j.test.labels_line, 11);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(SOLVE "[data]\nclasses = 2\n", "r.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.classes, 2);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(SOLVE "[data]\nclasses = 65536\n", "r.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.classes, 65536);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(SOLVE, "r.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.classes, 0); /* from the labels */
  ntk_job_free(&j);
  bad(SOLVE "[data]\nclasses = 1\n", "bad.conf:15: [data] classes: '1' is not a class count from 2 to 65536");
  bad(SOLVE "[data]\nclasses = 65537\n", "[data] classes: '65537' is not a class count from 2 to 65536");
  bad(SOLVE "[data]\nclasses = -10\n", "[data] classes: '-10' is not a class count");
  bad(SOLVE "[data]\nclasses = 10.5\n", "[data] classes: '10.5' is not a class count");
  bad(SOLVE "[data]\nclasses = 18446744073709551626\n", "[data] classes: '18446744073709551626' is not a class count");
  bad(SOLVE "[data]\nclasses = 10\nclasses = 10\n", "bad.conf:16: [data] classes: given twice");
  bad(BASE "[data]\nclasses = 10\n", "bad.conf:8: [data] classes: states the class count of labels, and this job has "
                                     "no [data] labels");
  bad(BASE "[data]\nlabelz = y\n", "unknown key (path, format, layout, count, scale, labels, pattern, classes)");
  ck_assert_int_eq(ntk_job_parse_string(TRAIN "[data]\nclasses = 10\n", "t.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.classes, 10);
  ntk_job_free(&j);
  bad(TRAIN "[data]\nclasses = 12\n", "bad.conf:10: [data] classes = 12, but [train] layers ends in 10 classes");
}
END_TEST

START_TEST(test_inline_comments) {
  struct ntk_job j;
  const char *text = "[data]   # the training set\n"
                     "path = a#b.bin\tc;d.bin   ; two files, '#' and ';' inside names\n"
                     "count = 100\t# tab before the comment\n"
                     "[model] ; the network\n"
                     "arch = Dense Relu Dense   # two Dense layers\n"
                     "kernel = nngp              # NNGP only\n"
                     "w_std = 1.5;not a comment\n"
                     "[output]\n"
                     "path = ../out/fc#1.ntk      # relative to this file\n"
                     "   ; an indented full-line comment\n"
                     "\t# and another\n";
  ck_assert_int_eq(ntk_job_parse_fragment(text, "d/j.conf", &j), NTK_ECONFIG); /* w_std = '1.5;not a comment' */
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "d/j.conf:7: [model] w_std: '1.5;not a comment'"));
  char *fixed = strdup(text);
  memcpy(strstr(fixed, "1.5;not"), "1.5 ;not", 8); /* whitespace first: now a comment */
  ck_assert_int_eq(ntk_job_parse_string(fixed, "d/j.conf", &j), NTK_OK);
  free(fixed);
  ck_assert_int_eq(j.ndata, 2);
  ck_assert_str_eq(j.data_path[0], "d/a#b.bin");
  ck_assert_str_eq(j.data_path[1], "d/c;d.bin");
  ck_assert_uint_eq(j.count, 100);
  ck_assert_str_eq(j.arch, "Dense Relu Dense");
  ck_assert_int_eq(j.kernels, NTK_KERNEL_NNGP);
  ck_assert_double_eq(j.w_std, 1.5);
  ck_assert_str_eq(j.out_path, "d/../out/fc#1.ntk");
  ntk_job_free(&j);
  /* The README's worked example: `kernel = ntk   # stores NNGP and NTK`. */
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath = x.npy\n[model]\narch = Dense\n"
                                        "kernel = ntk              # stores NNGP and NTK\n"
                                        "[output]\npath = ../out/fc.ntk      # relative to this file\n",
                                        "configs/fc.conf", &j), NTK_OK);
  ck_assert_int_eq(j.kernels, NTK_KERNEL_NNGP | NTK_KERNEL_NTK);
  ck_assert_str_eq(j.out_path, "configs/../out/fc.ntk");
  ntk_job_free(&j);
  /* A value that is only a comment is empty; a key cannot hide in one. */
  bad("[data]\npath =   # none\n", "bad.conf:2: [data] path: empty");
  bad("[data]\npath # = x\n", "bad.conf:2: syntax error");
  bad("[data] x\npath = y\n", "bad.conf:1: syntax error");
  bad("[data]#x\npath = y\n", "bad.conf:1: syntax error");
}
END_TEST

/* Growable text for the long-line tests. */
struct text {
  char *s;
  size_t n, cap;
};

static void add(struct text *t, const char *piece) {
  size_t len = strlen(piece);
  if (t->n + len + 1 > t->cap) {
    t->cap = 2 * (t->n + len + 1);
    t->s = realloc(t->s, t->cap);
    ck_assert_ptr_nonnull(t->s);
  }
  memcpy(t->s + t->n, piece, len + 1);
  t->n += len;
}

#define LONG_LAYERS 30000

/* "Dense Relu " x 30000 + "Dense": about 330 000 characters on one line. */
static void add_long_arch(struct text *t) {
  add(t, "arch = ");
  for (int i = 0; i < LONG_LAYERS; i++) add(t, "Dense Relu ");
  add(t, "Dense\n");
}

START_TEST(test_long_arch) {
  struct text t = {0};
  add(&t, "[data]\npath = x.npy\n[model]\nw_std = 1.5\n");
  add_long_arch(&t);
  add(&t, "b_std = 0.1\n[output]\npath = o.ntk\n");
  ck_assert_uint_gt(t.n, 300000);
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(t.s, "long.conf", &j), NTK_OK);
  ck_assert_int_eq(j.arch_line, 5);
  ck_assert_uint_eq(strlen(j.arch), (size_t)LONG_LAYERS * strlen("Dense Relu ") + strlen("Dense"));
  ck_assert_double_eq(j.b_std, 0.1);
  /* The same network as the compact form. */
  struct ntk_arch a, b;
  char compact[64];
  snprintf(compact, sizeof compact, "[Dense Relu]*%d Dense", LONG_LAYERS);
  ck_assert_int_eq(ntk_arch_parse(j.arch, j.w_std, j.b_std, &a), NTK_OK);
  ck_assert_int_eq(ntk_arch_parse(compact, j.w_std, j.b_std, &b), NTK_OK);
  ck_assert_uint_eq(a.n, 2 * LONG_LAYERS + 1);
  ck_assert_uint_eq(a.n, b.n);
  for (size_t i = 0; i < a.n; i++) {
    const struct ntk_layer *x = &a.layers[i], *y = &b.layers[i];
    ck_assert_int_eq(x->kind, y->kind);
    ck_assert_int_eq(x->kind, i % 2 ? NTK_LAYER_MAP : NTK_LAYER_DENSE);
    ck_assert(x->w_std == y->w_std && x->b_std == y->b_std && x->map.a == y->map.a && x->map.b == y->map.b);
    ck_assert_str_eq(x->name, y->name);
  }
  ck_assert_double_eq(a.layers[0].w_std, 1.5);
  ck_assert_double_eq(a.layers[0].b_std, 0.1);
  ntk_arch_free(&a);
  ntk_arch_free(&b);
  ntk_job_free(&j);
  /* In a fragment, too. */
  ck_assert_int_eq(ntk_job_parse_fragment(t.s + strlen("[data]\npath = x.npy\n"), "f.conf", &j), NTK_OK);
  ck_assert_uint_eq(strlen(j.arch), (size_t)LONG_LAYERS * strlen("Dense Relu ") + strlen("Dense"));
  ntk_job_free(&j);
  free(t.s);
}
END_TEST

/* Line numbers stay right after lines of any length, for every message. */
START_TEST(test_lines_after_long_lines) {
  struct text t = {0};
  add(&t, "[data]\npath = x.npy\n[model]\n");
  add_long_arch(&t); /* line 4 */
  const char *head = t.s;
  char *text = malloc(t.n + 200);
  ck_assert_ptr_nonnull(text);
  const char *tails[][2] = {
      {"[compute]\ntiel = 5\n", "bad.conf:6: [compute] tiel: unknown key (precision, tile, backend, worker_timeout)"},
      {"w_std = 1\narch = Dense\n", "bad.conf:6: [model] arch: given twice"},
      {"\n\njust some words\n", "bad.conf:7: syntax error"},
      {"[comptue]\n", "bad.conf:5: unknown section [comptue]"},
      {"[output]\npath = o\n[train\n", "bad.conf:7: section header without ']'"},
      {"[output]\npath = o\n[data]\npath = y.npy\n", "bad.conf:8: [data] path: given twice"},
  };
  for (size_t i = 0; i < sizeof tails / sizeof tails[0]; i++) {
    snprintf(text, t.n + 200, "%s%s", head, tails[i][0]);
    bad(text, tails[i][1]);
  }
  /* An arch error names the line of the arch. */
  snprintf(text, t.n + 200, "%s[output]\npath = o\n[model]\nkernel = ntk\n", head);
  memcpy(strstr(text, "Relu Dense\n"), "Rulu", 4);
  bad(text, "bad.conf:4: [model] arch, column");
  free(text);
  free(t.s);
}
END_TEST

/* Many long paths on one line (CIFAR-10 batches in a deep folder). */
#define LONG_PATH "/scratch/project-with-a-long-name/datasets/cifar-10-batches-bin/copy-%02d/data_batch.bin"

START_TEST(test_long_path_lists) {
  struct text t = {0};
  add(&t, "[data]\npath =");
  char p[200];
  for (int i = 0; i < 16; i++) {
    snprintf(p, sizeof p, " " LONG_PATH, i);
    add(&t, p);
  }
  add(&t, "\nformat = cifar10\n[model]\narch = Dense\n[output]\npath = o.ntk\n");
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(t.s, "c.conf", &j), NTK_OK);
  ck_assert_int_eq(j.ndata, 16);
  for (int i = 0; i < 16; i++) {
    snprintf(p, sizeof p, LONG_PATH, i);
    ck_assert_str_eq(j.data_path[i], p);
  }
  ck_assert_int_eq(j.format, NTK_FORMAT_CIFAR10);
  ntk_job_free(&j);
  free(t.s);
  /* 20 of them: more than the 16 files a job takes, said at the right line. */
  t = (struct text){0};
  add(&t, "# CIFAR-10\n[data]\npath =");
  for (int i = 0; i < 20; i++) {
    snprintf(p, sizeof p, " ../data/a-long-folder-name-for-cifar-10-batches-bin/batches-%02d/data_batch_1.bin", i);
    add(&t, p);
  }
  add(&t, "\n");
  bad(t.s, "bad.conf:3: [data] path: more than 16 files");
  free(t.s);
  /* A path longer than NTK_PATH_MAX is refused as such. */
  t = (struct text){0};
  add(&t, "[data]\npath = x.npy\n[model]\narch = Dense\n[output]\npath = ");
  for (int i = 0; i < NTK_PATH_MAX; i++) add(&t, "p");
  add(&t, "\n");
  bad(t.s, "bad.conf:6: [output] path: too long");
  free(t.s);
  /* A long bad value is quoted shortened, and the message still says why. */
  t = (struct text){0};
  add(&t, BASE "[compute]\nprecision = ");
  for (int i = 0; i < 5000; i++) add(&t, "f");
  add(&t, "\n");
  bad(t.s, "...' is not float32 or float64");
  free(t.s);
}
END_TEST

/* Windows line endings (and a byte order mark) read like Unix ones. */
/* A notebook's stax.serial(...) over several lines: joined while a bracket
 * is open, comments and blank lines dropped; the same network as the one
 * line; later keys keep their own line numbers. */
START_TEST(test_arch_lines) {
  const char *text = "[data]\npath = x.npy\n[model]\narch = stax.serial(  # from a notebook\n"
                     "    stax.Dense(512, W_std=np.sqrt(2), b_std=0.05),\n\n    # a comment line\n"
                     "    stax.Relu(), stax.Dense(1, 1.5,\r\n        0.05)\n)\nkernel = ntk\n[output]\npath = o\n";
  struct ntk_job j, one;
  ck_assert_int_eq(ntk_job_parse_string(text, "m.conf", &j), NTK_OK);
  ck_assert_str_eq(j.arch, "stax.serial( stax.Dense(512, W_std=np.sqrt(2), b_std=0.05), stax.Relu(), "
                           "stax.Dense(1, 1.5, 0.05) )");
  ck_assert_int_eq(j.arch_line, 4);
  ck_assert_int_eq(j.arch_lines, 7);
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath = x.npy\n[model]\narch = Dense(512, W_std=1.4142135623730951, "
                                        "b_std=0.05) Relu Dense(1, W_std=1.5, b_std=0.05)\n[output]\npath = o\n",
                                        "o.conf", &one), NTK_OK);
  ck_assert_uint_eq(j.net->n, one.net->n);
  for (size_t i = 0; i < j.net->n; i++) {
    ck_assert_int_eq(j.net->layers[i].kind, one.net->layers[i].kind);
    ck_assert(j.net->layers[i].w_std == one.net->layers[i].w_std && j.net->layers[i].b_std == one.net->layers[i].b_std);
  }
  ntk_job_free(&j);
  ntk_job_free(&one);
  /* A bracket in quotes does not count; one left open is named with its line. */
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath = x.npy\n[model]\narch = Conv(3, 1, '(') Relu\n[output]\npath = o\n",
                                        "q.conf", &j), NTK_ECONFIG);
  ck_assert_msg(!strstr(ntk_error_message(), "not closed"), "%s", ntk_error_message());
  bad("[data]\npath = x.npy\n[model]\narch = stax.serial(stax.Dense(1),\n  stax.Relu()\n[output]\npath = o\n",
      "bad.conf:6: [model] arch: a bracket opened on line 4 is not closed before this section header");
  bad("[data]\npath = x.npy\n[model]\narch = stax.serial(stax.Dense(1),\n  stax.Relu()\n[ output ]\npath = o\n",
      "bad.conf:6: [model] arch: a bracket opened on line 4 is not closed before this section header");
  bad("[data]\npath = x.npy\n[output]\npath = o\n[model]\narch = stax.serial(stax.Dense(1),\n  stax.Relu()\n",
      "bad.conf:6: [model] arch: a bracket opened on this line is not closed by the end of the file");
  bad("[data]\npath = x.npy\n[model]\narch = stax.serial(\n  stax.Dense(1), stax.Relux())\n[output]\npath = o\n",
      "bad.conf:4: [model] arch, column 34: unknown layer 'Relux'");
  bad("[data]\npath = x.npy\n[model]\narch = stax.serial(\n  stax.Dense(1), stax.Relux())\n[output]\npath = o\n",
      "(the column counts in the value's lines joined by single spaces)");
  /* Other keys do not span lines. */
  bad("[data]\npath = x(.npy\n  more\n[model]\narch = Dense\n[output]\npath = o\n", "bad.conf:3: syntax error");
}
END_TEST

START_TEST(test_crlf) {
  const char *text = "\xEF\xBB\xBF# job\r\n[data]\r\npath = x.npy\r\ncount = 5   # five\r\n\r\n[model]\r\n"
                     "arch = Dense Relu Dense\r\nkernel = nngp\t; NNGP\r\n[output]\r\npath = o.ntk\r\n";
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(text, "w.conf", &j), NTK_OK);
  ck_assert_str_eq(j.data_path[0], "x.npy");
  ck_assert_uint_eq(j.count, 5);
  ck_assert_str_eq(j.arch, "Dense Relu Dense");
  ck_assert_int_eq(j.arch_line, 7);
  ck_assert_int_eq(j.kernels, NTK_KERNEL_NNGP);
  ck_assert_str_eq(j.out_path, "o.ntk");
  ntk_job_free(&j);
  bad("[data]\r\npath = x.npy\r\n[compute]\r\ntiel = 5   # typo\r\n", "bad.conf:4: [compute] tiel: unknown key");
  bad("[data]\r\npath = x.npy\r\npath = y.npy # again\r\n", "bad.conf:3: [data] path: given twice");
}
END_TEST

/* A piece of a job (the docs show sections alone): every key and value is
 * checked, but not what a whole job needs. */
START_TEST(test_fragment) {
  struct ntk_job j;
  const char *solve = "[solve]\nridge = 1e-4, 1e-3   # two ridges\n";
  ck_assert_int_eq(ntk_job_parse_fragment(solve, "f.conf", &j), NTK_OK);
  ck_assert_uint_eq(j.solve.nridge, 2);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(solve, "f.conf", &j), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "[data] path is required"));
  ck_assert_int_eq(ntk_job_parse_fragment("[solve]\nridge = 1\nlambda = 2\n", "f.conf", &j), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "f.conf:3: [solve] lambda: unknown key"));
  ck_assert_int_eq(ntk_job_parse_fragment("[model]\narch = Relu\n", "f.conf", &j), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "f.conf:2: [model] arch"));
  ck_assert_ptr_null(j.arch);
  ck_assert_int_eq(ntk_job_parse_fragment("[tset]\n", "f.conf", &j), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "f.conf:1: unknown section [tset]"));
  ck_assert_int_eq(ntk_job_parse_fragment("ridge = 1\n", "f.conf", &j), NTK_ECONFIG);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "f.conf:1: key 'ridge' is outside any section"));
}
END_TEST

START_TEST(test_summary) {
  struct ntk_job j;
  char line[512];
  ck_assert_int_eq(ntk_job_parse_string(good, "jobs/a.conf", &j), NTK_OK);
  ntk_job_summary(&j, line, sizeof line);
  ck_assert_msg(strstr(line, "kernel job: 1 data file (first 100 samples), 7 layers, NNGP, float64, tile 256") &&
                strstr(line, "/abs/out.ntk"), "summary: %s", line);
  ntk_job_free(&j);
  ck_assert_int_eq(ntk_job_parse_string(TRAIN, "t.conf", &j), NTK_OK);
  ntk_job_summary(&j, line, sizeof line);
  ck_assert_msg(strstr(line, "training job: 1 data file, MLP 784-10, batch 100, 20 epochs"), "summary: %s", line);
  ntk_job_summary(&j, line, 8); /* truncated, terminated */
  ck_assert_str_eq(line, "trainin");
  ntk_job_free(&j);
}
END_TEST

START_TEST(test_read_file) {
  const char *dir = tu_tmpdir();
  char p[512];
  tu_path(p, sizeof p, dir, "job.conf");
  tu_write(p, good, strlen(good));
  char *text;
  size_t len;
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_OK);
  ck_assert_uint_eq(len, strlen(good));
  free(text);
  tu_write(p, "a\0b", 3);
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_ECONFIG);
  tu_write(p, "[data]\npath = x\nab\0c\n", 21);
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "job.conf:3: a NUL byte (byte 18): a binary file, not a job file"), "%s",
                ntk_error_message());
  tu_path(p, sizeof p, dir, "missing.conf");
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_EUSAGE);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "missing.conf: cannot open"));
  /* A FIFO is refused at once: reading it would wait for a writer. The
   * alarm turns a hang into a failure. */
  tu_path(p, sizeof p, dir, "fifo.conf");
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  alarm(20);
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_EINPUT);
  alarm(0);
  ck_assert_msg(strstr(ntk_error_message(), "fifo.conf is a FIFO, not a regular file"), "%s", ntk_error_message());
  ck_assert_ptr_null(text);
  unlink(p);
}
END_TEST

/* The identity text of the job file `text` on data ds (its hash in hash
 * unless NULL); the caller frees it. */
static char *job_identity(const char *text, const struct ntk_dataset *ds, uint8_t *hash) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string(text, "j.conf", &j), NTK_OK);
  struct ntk_store_info info;
  char *id = NULL;
  ck_assert_int_eq(ntk_job_identity(&j, j.net, ds, &info, &id), NTK_OK);
  if (hash) memcpy(hash, info.job_hash, 16);
  ntk_job_free(&j);
  return id;
}

/* The job identity of a float32 job computed in float64 (more than 64
 * nonlinear layers) says so, so that a store an older ntkd began with
 * float32 maps is not resumed into a mix; 64 layers, or float64, as before. */
START_TEST(test_identity_widened) {
  const char *nets[] = {"[Dense Relu]*65 Dense", "[Dense Relu]*64 Dense", "[Dense Relu]*65 Dense"};
  int elems[] = {4, 4, 8}, want[] = {1, 0, 0};
  for (int k = 0; k < 3; k++) {
    char text[256];
    snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o.ntk\n", nets[k]);
    struct ntk_dataset ds = {3, 4, 0, 0, 0, elems[k], calloc(12, 8), 0, 0, 0};
    char *id = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(id, "arithmetic = float64") == !want[k], "%s, elem %d:\n%s", nets[k], elems[k], id);
    free(id);
    free(ds.x);
  }
}
END_TEST

/* A float32 Gelu job's identity says its angle comes from ntkd's own
 * atan2 (an older ntkd took libm's: other bits), and a float32 Relu,
 * LeakyRelu or Abs job that its angle comes from one polynomial (an older
 * ntkd took an arcsine after a rotation: other bits), so that such a store
 * is not resumed into a mix; float64, a network without the map, and one
 * computed in float64 (more than 64 nonlinear layers) keep theirs. */
START_TEST(test_identity_angles) {
  const char *nets[] = {"Dense Gelu Dense",          "Conv(4, (2, 2)) Gelu GlobalAvgPool Dense",
                        "Dense Gelu Dense",          "Dense Erf Dense",
                        "[Dense Gelu]*65 Dense",     "Dense Relu Dense",
                        "Conv(4, (2, 2)) Abs Flatten Dense", "Dense LeakyRelu(0.1) Dense Gelu Dense",
                        "Dense Relu Dense",          "[Dense Relu]*65 Dense"};
  int elems[] = {4, 4, 8, 4, 4, 4, 4, 4, 8, 4};
  int gelu[] = {1, 1, 0, 0, 0, 0, 0, 1, 0, 0}, relu[] = {0, 0, 0, 0, 0, 1, 1, 1, 0, 0};
  for (int k = 0; k < 10; k++) {
    char text[256];
    snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o.ntk\n", nets[k]);
    int cnn = nets[k][0] == 'C';
    struct ntk_dataset ds = {3, 12, cnn ? 2 : 0, cnn ? 2 : 0, cnn ? 3 : 0, elems[k], calloc(36, 8), 0, 0, 0};
    for (size_t i = 0; i < 36; i++) {
      if (elems[k] == 4) ((float *)ds.x)[i] = (float)(i % 7) - 3.0f;
      else ((double *)ds.x)[i] = (double)(i % 7) - 3.0;
    }
    char *id = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(id, "gelu angle = ntkd's atan2") == !gelu[k], "%s, elem %d:\n%s", nets[k], elems[k], id);
    ck_assert_msg(!strstr(id, "relu angle = acos polynomial") == !relu[k], "%s, elem %d:\n%s", nets[k], elems[k], id);
    /* the Gelu map's scaled form: every network with a Gelu, in either precision */
    ck_assert_msg(!strstr(id, "gelu = scaled variances") == !strstr(nets[k], "Gelu"), "%s, elem %d:\n%s", nets[k],
                  elems[k], id);
    free(id);
    free(ds.x);
  }
}
END_TEST

/* (N, L, 1) data read as NLC sequences (rank 3) and as grey images one
 * pixel wide (rank 4) had the same identity, and a CNN whose LayerNorm
 * axes depend on the rank computes other numbers: a store begun by one
 * was finished by the other, exit 0. The rank-4 reading says so; the
 * sequences, images wider than 1, images one wide read by 1-D layers
 * (rank 3, as sequences) and FC networks keep the text they had. */
START_TEST(test_identity_data_rank) {
  const struct {
    const char *arch;
    int one_d, w, line;
  } cases[] = {
      {"Conv(4, (3, 1), padding='SAME') LayerNorm(axis=(-2, -1)) Relu Flatten Dense", 1, 1, 0},
      {"Conv(4, (3, 1), padding='SAME') LayerNorm(axis=(-2, -1)) Relu Flatten Dense", 0, 1, 1},
      {"Conv(4, (3, 1), padding='SAME') Relu GlobalAvgPool Dense", 0, 2, 0},
      {"Conv(4, (3,), padding='SAME') Relu GlobalAvgPool Dense", 0, 1, 0},
      {"Dense Relu Dense", 0, 1, 0},
  };
  char *ids[5];
  for (int k = 0; k < 5; k++) {
    char text[512];
    snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o.ntk\n", cases[k].arch);
    size_t h = 6, w = (size_t)cases[k].w;
    struct ntk_dataset ds = {3, h * w, h, w, 1, 8, calloc(3 * h * w, 8), 0, cases[k].one_d, 0};
    for (size_t i = 0; i < 3 * h * w; i++) ((double *)ds.x)[i] = (double)(i % 5) - 2.0;
    ids[k] = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(ids[k], "data rank = 4") == !cases[k].line, "%s, one_d %d, w %d:\n%s", cases[k].arch,
                  cases[k].one_d, cases[k].w, ids[k]);
    free(ds.x);
  }
  ck_assert_str_ne(ids[0], ids[1]); /* the two readings of one file: two jobs */
  for (int k = 0; k < 5; k++) free(ids[k]);
}
END_TEST

/* Two more lines of the identity (src/job/jobhash.c): a float32 job with a
 * scale whose float32 square is subnormal is computed in float64, and
 * RectifiedMonomial(0) says how it takes a zero variance; a store begun
 * by an ntkd that computed them otherwise is not resumed into a mix. */
START_TEST(test_identity_scale_and_rectmono) {
  const char *nets[] = {"Dense(1, W_std=1e-20) Relu Dense", "Dense(1, W_std=1e-20) Relu Dense",
                        "Dense(1, W_std=1e-10) Relu Dense", "Dense RectifiedMonomial(0) Dense",
                        "Dense RectifiedMonomial(1) Dense"};
  const char *line[] = {"arithmetic = float64, rounded to float32 once", "arithmetic = float64",
                        "arithmetic = float64", "rectified monomial 0 at a zero variance",
                        "rectified monomial 0 at a zero variance"};
  int elems[] = {4, 8, 4, 8, 8}, want[] = {1, 0, 0, 1, 0};
  for (int k = 0; k < 5; k++) {
    char text[256];
    snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o.ntk\n", nets[k]);
    struct ntk_dataset ds = {3, 12, 0, 0, 0, elems[k], calloc(36, 8), 0, 0, 0};
    for (size_t i = 0; i < 36; i++) {
      if (elems[k] == 4) ((float *)ds.x)[i] = (float)(i % 7) - 3.0f;
      else ((double *)ds.x)[i] = (double)(i % 7) - 3.0;
    }
    char *id = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(id, line[k]) == !want[k], "%s, elem %d:\n%s", nets[k], elems[k], id);
    free(id);
    free(ds.x);
  }
}
END_TEST

/* Equal rows are one sample in a fully-connected network (ntk_fc_twins),
 * a negated row its negation: its identity says so, so that a store begun
 * by an ntkd that did not is refused rather than mixed; data without equal
 * or negated rows, and CNNs, keep the identity every older store has.
 * repeat: 1 a row equal to another, 2 a row negated, 3 both. */
START_TEST(test_identity_equal_rows) {
  const char *nets[] = {"Dense Relu Dense", "Dense Relu Dense", "Conv(8, (2, 2)) Relu GlobalAvgPool Dense",
                        "Dense Relu Dense", "Dense Relu Dense", "Conv(8, (2, 2)) Relu GlobalAvgPool Dense"};
  int repeat[] = {1, 0, 1, 2, 3, 2}, want_eq[] = {1, 0, 0, 0, 1, 0}, want_neg[] = {0, 0, 0, 1, 1, 0};
  for (int k = 0; k < 6; k++) {
    char text[256];
    snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n[output]\npath = o.ntk\n", nets[k]);
    size_t n = 4, d = 12, cnn = nets[k][0] == 'C';
    float *x = malloc(n * d * sizeof *x);
    for (size_t i = 0; i < n * d; i++) x[i] = (float)i;
    if (repeat[k] & 1) memcpy(x + 2 * d, x, d * sizeof *x);
    for (size_t i = 0; repeat[k] & 2 && i < d; i++) x[3 * d + i] = -x[d + i];
    struct ntk_dataset ds = {n, d, cnn ? 2 : 0, cnn ? 2 : 0, cnn ? 3 : 0, 4, x, 0, 0, 0};
    char *id = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(id, "equal rows = one sample") == !want_eq[k] &&
                      !strstr(id, "negated rows = one sample negated") == !want_neg[k],
                  "%s, rows repeat %d:\n%s", nets[k], repeat[k], id);
    free(id);
    free(x);
  }
}
END_TEST

/* Equal rows that pair only within the test set are in test x test: held
 * (and the line written) only with test_test = yes. A store of such data
 * without test x test, begun by an older ntkd, holds the same numbers and
 * resumed; the line refused it. A test row equal to a train row always
 * pairs (test x train). */
START_TEST(test_identity_equal_rows_test_only) {
  const char *tt[] = {"no", "yes", "no"};
  int train_copy[] = {0, 0, 1}, want[] = {0, 1, 1};
  for (int k = 0; k < 3; k++) {
    char text[256];
    snprintf(text, sizeof text,
             "[data]\npath = x.npy\n[test]\npath = t.npy\ntest_test = %s\n[model]\narch = Dense Relu Dense\n"
             "[output]\npath = o.ntk\n", tt[k]);
    size_t n = 5, d = 6;
    float *x = malloc(n * d * sizeof *x);
    for (size_t i = 0; i < n * d; i++) x[i] = (float)i;
    memcpy(x + 4 * d, x + (train_copy[k] ? 0 : 3) * d, d * sizeof *x); /* rows 0-2 train, 3-4 test */
    struct ntk_dataset ds = {n, d, 0, 0, 0, 4, x, 3, 0, 0};
    char *id = job_identity(text, &ds, NULL);
    ck_assert_msg(!strstr(id, "equal rows = one sample") == !want[k], "test_test %s, train copy %d:\n%s", tt[k],
                  train_copy[k], id);
    free(id);
    free(x);
  }
}
END_TEST

/* Under ntk parameterisation a FanInConcat weights its branches by the
 * widths written in them, which the layer lines leave out: networks that
 * differ only there are other jobs (a store of one must not be resumed
 * with the other), while widths without a FanInConcat change nothing and
 * keep the identity every older store has. */
static void identity_of(const char *arch, const char *model, char **id, uint8_t hash[16]) {
  char text[512];
  snprintf(text, sizeof text, "[data]\npath = x.npy\n[model]\narch = %s\n%s[output]\npath = o.ntk\n", arch, model);
  struct ntk_dataset ds = {3, 4, 0, 0, 0, 8, calloc(12, 8), 0, 0, 0};
  *id = job_identity(text, &ds, hash);
  free(ds.x);
}

START_TEST(test_identity_concat_widths) {
  const char *cat[] = {"FanOut(2) parallel(Dense(64) Relu, Dense(128) Erf) FanInConcat Dense",
                       "FanOut(2) parallel(Dense(128) Relu, Dense(64) Erf) FanInConcat Dense",
                       "FanOut(2) parallel(Dense(64) Relu, Dense(64) Erf) FanInConcat Dense",
                       "Dense(32) FanOut(2) parallel(Identity, Dense(32) Erf) FanInConcat Dense",
                       "Dense(16) FanOut(2) parallel(Identity, Dense(32) Erf) FanInConcat Dense"};
  uint8_t h[5][16];
  char *id[5];
  for (int k = 0; k < 5; k++) identity_of(cat[k], "", &id[k], h[k]);
  for (int a = 0; a < 5; a++)
    for (int b = a + 1; b < 5; b++)
      ck_assert_msg(memcmp(h[a], h[b], 16), "same identity:\n%s\n%s", id[a], id[b]);
  for (int k = 0; k < 5; k++) free(id[k]);
  /* no FanInConcat: the widths never enter the kernel, the text is as before */
  char *x, *y;
  uint8_t hx[16], hy[16];
  identity_of("Dense(64) Relu FanOut(2) parallel(Dense(64), Dense(64) Erf Dense(64)) FanInSum Relu Dense", "", &x, hx);
  identity_of("Dense Relu FanOut(2) parallel(Dense, Dense Erf Dense) FanInSum Relu Dense", "", &y, hy);
  ck_assert_msg(!memcmp(hx, hy, 16) && !strstr(x, "widths"), "%s\n%s", x, y);
  free(x);
  free(y);
  /* nor does the width of a layer after the last FanInConcat */
  identity_of("FanOut(2) parallel(Dense(64) Relu, Dense(128) Erf) FanInConcat Dense(10)", "", &x, hx);
  identity_of("FanOut(2) parallel(Dense(64) Relu, Dense(128) Erf) FanInConcat Dense(1)", "", &y, hy);
  ck_assert_msg(!memcmp(hx, hy, 16), "%s\n%s", x, y);
  free(x);
  free(y);
}
END_TEST

/* A line only one job text has (written where it applies) is named by its
 * key: the ntk -> standard change said "layer 1: the store has
 * Dense(...), this job standard" before. */
START_TEST(test_identity_diff_inserted_line) {
  const char *ntk = "ntkd job = 2\nlayers = 1\nlayer 1 = Dense(W_std=1, b_std=0)\n";
  const char *std = "ntkd job = 2\nlayers = 1\nparameterization = standard\nlayer 1 = Dense(W_std=1, b_std=0)\n";
  char out[512];
  ntk_job_text_diff(ntk, std, out, sizeof out);
  ck_assert_msg(!strncmp(out, "parameterization: the store has no line, this job standard", 58), "%s", out);
  ntk_job_text_diff(std, ntk, out, sizeof out);
  ck_assert_msg(!strncmp(out, "parameterization: the store has standard, this job no line", 58), "%s", out);
  ntk_job_text_diff(ntk, "ntkd job = 2\nlayers = 1\nlayer 1 = Dense(W_std=2, b_std=0)\n", out, sizeof out);
  ck_assert_msg(strstr(out, "layer 1: the store has Dense(W_std=1, b_std=0), this job Dense(W_std=2, b_std=0)"), "%s",
                out);
  /* the inserted line is one difference, not every line after it (60
   * layers: "62 lines differ" before); a later change is one more */
  char a[4096] = "ntkd job = 2\nlayers = 60\n", b[4096] = "ntkd job = 2\nlayers = 60\nequal rows = one sample\n";
  for (int k = 1; k <= 60; k++) {
    snprintf(a + strlen(a), sizeof a - strlen(a), "layer %d = Dense(W_std=1, b_std=0)\n", k);
    snprintf(b + strlen(b), sizeof b - strlen(b), "layer %d = Dense(W_std=%d, b_std=0)\n", k, k == 40 ? 2 : 1);
  }
  ck_assert_int_eq(ntk_job_text_diff(a, b, out, sizeof out), 0);
  ck_assert_msg(strstr(out, "equal rows: the store has no line, this job one sample (2 lines of the job description "
                            "differ); this store was written by an older ntkd"), "%s", out);
  *strstr(b, "W_std=2") = '\0';
  strcat(b, "W_std=1, b_std=0)\n");
  for (int k = 41; k <= 60; k++) snprintf(b + strlen(b), sizeof b - strlen(b), "layer %d = Dense(W_std=1, b_std=0)\n", k);
  ck_assert_int_eq(ntk_job_text_diff(a, b, out, sizeof out), 1); /* the same job, by another version */
  ck_assert_msg(strstr(out, "(1 line of the job description differs)"), "%s", out);
  ck_assert_int_eq(ntk_job_text_diff(b, a, out, sizeof out), 1);
  ck_assert_msg(strstr(out, "equal rows: the store has one sample, this job no line") && strstr(out, "newer ntkd"), "%s",
                out);
  /* each line a newer ntkd writes, alone, is the same job by another
   * version (2: the entries differ by float32 rounding only) */
  const char *lines[] = {"gelu angle = ntkd's atan2", "relu angle = acos polynomial",
                         "rectified monomial 0 at a zero variance = f(0) E[f]", "arithmetic = float64",
                         "gelu = scaled variances"};
  int kinds[] = {2, 2, 1, 1, 2};
  for (int k = 0; k < 5; k++) {
    char c[256];
    snprintf(c, sizeof c, "ntkd job = 2\nlayers = 1\n%s\nlayer 1 = Dense(W_std=1, b_std=0)\n", lines[k]);
    ck_assert_msg(ntk_job_text_diff(ntk, c, out, sizeof out) == kinds[k] && strstr(out, "older ntkd"), "%s: %s",
                  lines[k], out);
  }
  /* several such lines, all missing: still the same job by another
   * version (a float32 Gelu store of before 2026-12-04 lacks both Gelu
   * lines; ntkd solve refused it as another job), 2 only if each marks
   * rounding alone */
  const char *both = "ntkd job = 2\nlayers = 1\ngelu angle = ntkd's atan2\ngelu = scaled variances\n"
                     "layer 1 = Dense(W_std=1, b_std=0)\n";
  ck_assert_int_eq(ntk_job_text_diff(ntk, both, out, sizeof out), 2);
  ck_assert_msg(strstr(out, "(2 lines of the job description differ)") && strstr(out, "older ntkd"), "%s", out);
  const char *mixed = "ntkd job = 2\nlayers = 1\ngelu angle = ntkd's atan2\narithmetic = float64\n"
                      "layer 1 = Dense(W_std=1, b_std=0)\n";
  ck_assert_int_eq(ntk_job_text_diff(ntk, mixed, out, sizeof out), 1);
  const char *other = "ntkd job = 2\nlayers = 1\ngelu angle = ntkd's atan2\nlayer 1 = Dense(W_std=2, b_std=0)\n";
  ck_assert_int_eq(ntk_job_text_diff(ntk, other, out, sizeof out), 0);
  /* two long layer lines (a Polynomial of 32 coefficients) that part at
   * their end: shown from a little before, not cut before the difference */
  char la[2][2048];
  for (int v = 0; v < 2; v++) {
    int n = snprintf(la[v], sizeof la[v], "ntkd job = 2\nlayers = 1\nlayer 1 = Polynomial([");
    for (int k = 0; k < 31; k++) n += snprintf(la[v] + n, sizeof la[v] - (size_t)n, "0.12345678901234568, ");
    snprintf(la[v] + n, sizeof la[v] - (size_t)n, "%s])\n", v ? "0.25" : "0.5");
  }
  ck_assert_int_eq(ntk_job_text_diff(la[0], la[1], out, sizeof out), 0);
  ck_assert_msg(strstr(out, "layer 1: the store has ...") && strstr(out, "0.12345678901234568, 0.5]), this job ...") &&
                    strstr(out, "0.12345678901234568, 0.25]) (1 line"),
                "%s", out);
  /* a line of the store missing from the job at the end */
  ck_assert_int_eq(ntk_job_text_diff(std, "ntkd job = 2\nlayers = 1\nparameterization = standard\n", out, sizeof out), 0);
  ck_assert_msg(!strncmp(out, "layer 1: the store has Dense(W_std=1, b_std=0), this job no line (1 line", 71), "%s", out);
}
END_TEST

int main(void) {
  Suite *s = suite_create("config");
  TCase *tc = tcase_create("parse");
  tcase_add_test(tc, test_good);
  tcase_add_test(tc, test_defaults);
  tcase_add_test(tc, test_cifar_list);
  tcase_add_test(tc, test_errors);
  tcase_add_test(tc, test_read_file);
  tcase_add_test(tc, test_train_good);
  tcase_add_test(tc, test_train_defaults);
  tcase_add_test(tc, test_train_errors);
  tcase_add_test(tc, test_regression_good);
  tcase_add_test(tc, test_regression_errors);
  tcase_add_test(tc, test_classes);
  tcase_add_test(tc, test_patterns);
  tcase_add_test(tc, test_inline_comments);
  tcase_add_test(tc, test_long_arch);
  tcase_add_test(tc, test_lines_after_long_lines);
  tcase_add_test(tc, test_long_path_lists);
  tcase_add_test(tc, test_arch_lines);
  tcase_add_test(tc, test_crlf);
  tcase_add_test(tc, test_fragment);
  tcase_add_test(tc, test_summary);
  tcase_add_test(tc, test_model_b_std_zero_is_a_bias);
  tcase_add_test(tc, test_several_files_cifar_only);
  tcase_add_test(tc, test_layout_npy_only);
  tcase_add_test(tc, test_identity_widened);
  tcase_add_test(tc, test_identity_angles);
  tcase_add_test(tc, test_identity_data_rank);
  tcase_add_test(tc, test_identity_scale_and_rectmono);
  tcase_add_test(tc, test_identity_equal_rows);
  tcase_add_test(tc, test_identity_equal_rows_test_only);
  tcase_add_test(tc, test_identity_diff_inserted_line);
  tcase_add_test(tc, test_identity_concat_widths);
  tcase_add_test(tc, test_out_of_memory_names_the_limit);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
