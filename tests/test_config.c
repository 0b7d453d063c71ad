/* Job files: defaults, every key, and errors that name file, line and key. */
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
  suite_add_tcase(s, tc);
  return tu_run(s);
}
