/* Job files: defaults, every key, and errors that name file, line and key. */
#include "ntkd/backend.h"
#include "ntkd/config.h"
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
    "sync = 0\n";

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
}
END_TEST

START_TEST(test_cifar_list) {
  struct ntk_job j;
  ck_assert_int_eq(ntk_job_parse_string("[data]\npath = a.bin  b.bin\tc.bin\n[model]\narch=Dense\n[output]\npath=o\n",
                                        "d/j.conf", &j), NTK_OK);
  ck_assert_int_eq(j.ndata, 3);
  ck_assert_str_eq(j.data_path[2], "d/c.bin");
}
END_TEST

/* Each bad file must fail with a message containing `needle`. */
static void bad(const char *text, const char *needle) {
  struct ntk_job j;
  ntk_status st = ntk_job_parse_string(text, "bad.conf", &j);
  ck_assert_msg(st == NTK_ECONFIG, "should fail: %s", text);
  ck_assert_msg(strstr(ntk_error_message(), needle), "message '%s' lacks '%s'", ntk_error_message(), needle);
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
  bad(BASE "[output]\nlevel = 1.5\n", "[output] level");
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
  ck_assert_int_eq(ntk_job_parse_string(BASE, "k.conf", &j), NTK_OK);
  ck_assert(!j.train.enabled);
}
END_TEST

START_TEST(test_train_errors) {
  bad(TRAIN "batch = 0\n", "bad.conf:9: [train] batch: '0'");
  bad(TRAIN "epochs = 2.5\n", "[train] epochs: '2.5'");
  bad(TRAIN "alpha = 0\n", "[train] alpha: '0' is not a number > 0");
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
  ck_assert_str_eq(j.solve.predictions, "d/p/pred");
  /* [test] alone: the kernel over train and test, solved later. */
  ck_assert_int_eq(ntk_job_parse_string(REG "[test]\npath = te.gz\n", "r.conf", &j), NTK_OK);
  ck_assert(j.test.enabled && !j.solve.enabled && !j.test.test_test && j.test.count == 0);
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
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1, x\n", "[solve] ridge: 'x'");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = ,\n", "[solve] ridge: empty");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\nridge = 2\n", "bad.conf:14: [solve] ridge: given twice");
  bad(REG "[test]\npath = t\nlabels = l\n[solve]\nridge = 1\nlambda = 2\n", "[solve] lambda: unknown key (ridge, predictions)");
  bad(REG "[test]\npath = t\ncount = 0\n", "bad.conf:11: [test] count: '0' is not a positive integer");
  bad(REG "[test]\npath = t\ntest_test = maybe\n", "[test] test_test: 'maybe' is not yes or no");
  bad(REG "[test]\npath = t\nscale = 2\n", "[test] scale: unknown key (path, labels, count, test_test)");
  bad(REG "[test]\npath = t\npath = u\n", "bad.conf:11: [test] path: given twice");
  bad(TRAIN "[test]\npath = t\n", "[test] is for kernel jobs");
  bad(TRAIN "[solve]\nridge = 1\n", "[solve] is for kernel jobs");
  char many[1024] = REG "[test]\npath = t\nlabels = l\n[solve]\nridge =";
  for (int i = 0; i < 33; i++) strcat(many, " 1");
  strcat(many, "\n");
  bad(many, "[solve] ridge: more than 32 values");
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
  tu_path(p, sizeof p, dir, "missing.conf");
  ck_assert_int_eq(ntk_read_text_file(p, &text, &len), NTK_EUSAGE);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "missing.conf: cannot open"));
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
  suite_add_tcase(s, tc);
  return tu_run(s);
}
