/* Data readers: .npy, IDX (plain and .gz), CIFAR-10; good files and every
 * kind of broken one. */
#include <math.h>
#include <zlib.h>

#include "ntkd/data.h"
#include "ntkd/npy.h"
#include "testutil.h"

static const char *dir;

static void job_for(struct ntk_job *j, const char *name) {
  ntk_job_defaults(j);
  j->ndata = 1;
  tu_path(j->data_path[0], sizeof j->data_path[0], dir, name);
}

/* .npy with an arbitrary header dict and raw body. */
static void write_npy_raw(const char *name, const char *dict, const void *body, size_t blen) {
  char p[512], buf[4096];
  tu_path(p, sizeof p, dir, name);
  size_t dl = strlen(dict), total = (10 + dl + 1 + 63) / 64 * 64;
  memcpy(buf, "\x93NUMPY\x01\x00", 8);
  buf[8] = (char)((total - 10) & 0xff);
  buf[9] = (char)((total - 10) >> 8);
  memcpy(buf + 10, dict, dl);
  memset(buf + 10 + dl, ' ', total - 10 - dl);
  buf[total - 1] = '\n';
  memcpy(buf + total, body, blen);
  tu_write(p, buf, total + blen);
}

static ntk_status load(const char *name, int elem, struct ntk_dataset *ds) {
  struct ntk_job j;
  job_for(&j, name);
  return ntk_data_load(&j, elem, ds);
}

static void expect_fail(const char *name, const char *needle) {
  struct ntk_dataset ds;
  ntk_status st = load(name, 8, &ds);
  ck_assert_msg(st == NTK_EINPUT, "%s should be refused (status %d)", name, st);
  ck_assert_msg(strstr(ntk_error_message(), needle), "%s: message '%s' lacks '%s'", name, ntk_error_message(), needle);
  ck_assert_msg(strstr(ntk_error_message(), name), "message '%s' does not name the file", ntk_error_message());
}

START_TEST(test_npy_f4_f8) {
  float f[6] = {1, 2, 3, 4, 5, 6};
  write_npy_raw("f4.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", f, sizeof f);
  struct ntk_dataset ds;
  ck_assert_int_eq(load("f4.npy", 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.n, 3);
  ck_assert_uint_eq(ds.d, 2);
  ck_assert_double_eq(((double *)ds.x)[5], 6.0);
  ntk_data_free(&ds);
  double d[4] = {0.5, -1, 2, 1e-3};
  write_npy_raw("f8.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", d, sizeof d);
  ck_assert_int_eq(load("f8.npy", 4, &ds), NTK_OK);
  ck_assert_int_eq(ds.elem, 4);
  ck_assert_float_eq(((float *)ds.x)[3], 1e-3f);
  ntk_data_free(&ds);
  /* Big-endian doubles. */
  unsigned char be[16];
  for (int i = 0; i < 2; i++) {
    double v = i ? -2.5 : 3.0;
    unsigned char b[8];
    memcpy(b, &v, 8);
    for (int k = 0; k < 8; k++) be[8 * i + k] = b[7 - k];
  }
  write_npy_raw("be.npy", "{'descr': '>f8', 'fortran_order': False, 'shape': (1, 2), }", be, sizeof be);
  ck_assert_int_eq(load("be.npy", 8, &ds), NTK_OK);
  ck_assert_double_eq(((double *)ds.x)[1], -2.5);
  ntk_data_free(&ds);
}
END_TEST

START_TEST(test_npy_u8_scale_count) {
  unsigned char u[8] = {0, 255, 51, 102, 1, 2, 3, 4};
  write_npy_raw("u8.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (4, 2), }", u, sizeof u);
  struct ntk_job j;
  job_for(&j, "u8.npy");
  j.count = 2;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.n, 2);
  ck_assert_double_eq_tol(((double *)ds.x)[1], 1.0, 1e-15); /* default scale 1/255 */
  ck_assert_double_eq_tol(((double *)ds.x)[2], 0.2, 1e-15);
  ntk_data_free(&ds);
  j.has_scale = 1;
  j.scale = 2.0;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_double_eq(((double *)ds.x)[1], 510.0);
  ntk_data_free(&ds);
  j.count = 5;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "count = 5 but the data hold only 4 samples"));
}
END_TEST

START_TEST(test_npy_images) {
  /* 1 sample, 2x2 pixels, 3 channels, stored NCHW: value = 100*c + pixel. */
  float v[12];
  for (int c = 0; c < 3; c++)
    for (int p = 0; p < 4; p++) v[c * 4 + p] = (float)(100 * c + p);
  write_npy_raw("img.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 2, 2), }", v, sizeof v);
  struct ntk_job j;
  job_for(&j, "img.npy");
  j.layout = NTK_LAYOUT_NCHW;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.h, 2);
  ck_assert_uint_eq(ds.w, 2);
  ck_assert_uint_eq(ds.c, 3);
  ck_assert_uint_eq(ds.d, 12);
  const double *x = ds.x; /* NHWC now: pixel p, channel c at p*3 + c */
  ck_assert_double_eq(x[0 * 3 + 2], 200.0);
  ck_assert_double_eq(x[3 * 3 + 1], 103.0);
  ntk_data_free(&ds);
  j.layout = NTK_LAYOUT_NHWC; /* same bytes read as NHWC: shape (1, 3, 2, 2) */
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.h, 3);
  ck_assert_uint_eq(ds.c, 2);
  ck_assert_double_eq(((double *)ds.x)[5], 101.0);
  ntk_data_free(&ds);
}
END_TEST

START_TEST(test_npy_broken) {
  float f[6] = {1, 2, 3, 4, 5, 6};
  write_npy_raw("short.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", f, sizeof f);
  expect_fail("short.npy", "truncated");
  write_npy_raw("i4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3, 2), }", f, sizeof f);
  expect_fail("i4.npy", "dtype '<i4' is not supported");
  write_npy_raw("fo.npy", "{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), }", f, sizeof f);
  expect_fail("fo.npy", "Fortran-ordered");
  write_npy_raw("1d.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (6,), }", f, sizeof f);
  expect_fail("1d.npy", "2 to 4 dimensions");
  write_npy_raw("5d.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 1, 1, 1, 6), }", f, sizeof f);
  expect_fail("5d.npy", "2 to 4 dimensions");
  write_npy_raw("noshape.npy", "{'descr': '<f4', 'fortran_order': False}", f, sizeof f);
  expect_fail("noshape.npy", "no 'shape'");
  write_npy_raw("empty.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (0, 2), }", f, 0);
  expect_fail("empty.npy", "empty data");
  char p[512];
  tu_path(p, sizeof p, dir, "magic.npy");
  tu_write(p, "NUMPY not really a numpy file", 29);
  expect_fail("magic.npy", "not a .npy file");
  tu_path(p, sizeof p, dir, "tiny.npy");
  tu_write(p, "\x93NUM", 4);
  expect_fail("tiny.npy", "truncated");
  float nan[4] = {1, NAN, 2, 3};
  write_npy_raw("nan.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", nan, sizeof nan);
  expect_fail("nan.npy", "sample 0, feature 1 is NaN");
  float inf[4] = {1, 2, 3, INFINITY};
  write_npy_raw("inf.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", inf, sizeof inf);
  expect_fail("inf.npy", "sample 1, feature 1 is infinite");
  double huge[2] = {1e300, 1};
  write_npy_raw("huge.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 2), }", huge, sizeof huge);
  struct ntk_dataset ds;
  ck_assert_int_eq(load("huge.npy", 4, &ds), NTK_EINPUT); /* not representable in float32 */
  ck_assert_int_eq(load("huge.npy", 8, &ds), NTK_OK);
  ntk_data_free(&ds);
  expect_fail("does-not-exist.npy", "cannot open");
}
END_TEST

/* IDX file of n images h x w, pixel = (i * 7 + k) % 256, optionally gzipped. */
static void write_idx(const char *name, int n, int h, int w, int gz, int truncate_by) {
  size_t len = 16 + (size_t)n * h * w;
  unsigned char *b = malloc(len);
  unsigned char hdr[16] = {0, 0, 8, 3};
  int dims[3] = {n, h, w};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++) hdr[4 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
  memcpy(b, hdr, 16);
  for (size_t k = 0; k < (size_t)n * h * w; k++) b[16 + k] = (unsigned char)((k / (size_t)(h * w) * 7 + k) % 256);
  len -= (size_t)truncate_by;
  char p[512];
  tu_path(p, sizeof p, dir, name);
  if (gz) {
    gzFile f = gzopen(p, "wb");
    ck_assert_ptr_nonnull(f);
    ck_assert_int_eq(gzwrite(f, b, (unsigned)len), (int)len);
    ck_assert_int_eq(gzclose(f), Z_OK);
  } else {
    tu_write(p, b, len);
  }
  free(b);
}

START_TEST(test_idx) {
  write_idx("imgs-ubyte", 5, 4, 3, 0, 0);
  write_idx("imgs-ubyte.gz", 5, 4, 3, 1, 0);
  struct ntk_dataset a, b;
  ck_assert_int_eq(load("imgs-ubyte", 8, &a), NTK_OK);
  ck_assert_int_eq(load("imgs-ubyte.gz", 8, &b), NTK_OK);
  ck_assert_uint_eq(a.n, 5);
  ck_assert_uint_eq(a.d, 12);
  ck_assert_uint_eq(a.h, 4);
  ck_assert_uint_eq(a.c, 1);
  ck_assert_mem_eq(a.x, b.x, 5 * 12 * sizeof(double));
  ck_assert_double_eq_tol(((double *)a.x)[12 + 1], (7.0 + 13.0) / 255.0, 1e-15);
  ntk_data_free(&a);
  ntk_data_free(&b);
  write_idx("trunc-ubyte.gz", 5, 4, 3, 1, 7);
  expect_fail("trunc-ubyte.gz", "truncated");
  write_idx("trunc2-ubyte", 5, 4, 3, 0, 70);
  expect_fail("trunc2-ubyte", "truncated");
  unsigned char labels[12] = {0, 0, 8, 1, 0, 0, 0, 4, 1, 2, 3, 4};
  char p[512];
  tu_path(p, sizeof p, dir, "labels-ubyte");
  tu_write(p, labels, sizeof labels);
  expect_fail("labels-ubyte", "labels file");
  tu_path(p, sizeof p, dir, "junk-ubyte");
  tu_write(p, "hello world, not idx", 20);
  expect_fail("junk-ubyte", "not an IDX file");
  unsigned char badtype[8] = {0, 0, 0x42, 3, 0, 0, 0, 1};
  tu_path(p, sizeof p, dir, "badtype-ubyte");
  tu_write(p, badtype, sizeof badtype);
  expect_fail("badtype-ubyte", "not an IDX file");
}
END_TEST

/* Labels: a label reader error must name the file and say what is wrong. */
static void labels_fail(const char *name, size_t n, int exact, const char *needle) {
  char p[512];
  tu_path(p, sizeof p, dir, name);
  int32_t *y = NULL;
  ntk_status st = ntk_labels_load(p, n, exact, 10, &y);
  ck_assert_msg(st == NTK_EINPUT, "%s should be refused (status %d)", name, st);
  ck_assert_ptr_null(y);
  ck_assert_msg(strstr(ntk_error_message(), needle), "%s: message '%s' lacks '%s'", name, ntk_error_message(), needle);
  ck_assert_msg(strstr(ntk_error_message(), name), "message '%s' does not name the file", ntk_error_message());
}

START_TEST(test_labels) {
  unsigned char idx[12] = {0, 0, 8, 1, 0, 0, 0, 4, 3, 0, 9, 1};
  char p[512];
  tu_path(p, sizeof p, dir, "l-ubyte");
  tu_write(p, idx, sizeof idx);
  int32_t *y;
  ck_assert_int_eq(ntk_labels_load(p, 4, 1, 10, &y), NTK_OK);
  ck_assert_int_eq(y[0], 3);
  ck_assert_int_eq(y[2], 9);
  free(y);
  ck_assert_int_eq(ntk_labels_load(p, 2, 0, 10, &y), NTK_OK); /* the first 2 of 4, as with count */
  ck_assert_int_eq(y[1], 0);
  free(y);
  /* gzip-compressed */
  tu_path(p, sizeof p, dir, "l-ubyte.gz");
  gzFile g = gzopen(p, "wb");
  gzwrite(g, idx, sizeof idx);
  gzclose(g);
  ck_assert_int_eq(ntk_labels_load(p, 4, 1, 10, &y), NTK_OK);
  ck_assert_int_eq(y[3], 1);
  free(y);
  /* .npy of uint8, int32, int64 */
  int32_t i4[3] = {2, 0, 7};
  write_npy_raw("l4.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", i4, sizeof i4);
  tu_path(p, sizeof p, dir, "l4.npy");
  ck_assert_int_eq(ntk_labels_load(p, 3, 1, 10, &y), NTK_OK);
  ck_assert_int_eq(y[2], 7);
  free(y);
  int64_t i8[2] = {5, 1};
  write_npy_raw("l8.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2,), }", i8, sizeof i8);
  tu_path(p, sizeof p, dir, "l8.npy");
  ck_assert_int_eq(ntk_labels_load(p, 2, 1, 10, &y), NTK_OK);
  ck_assert_int_eq(y[0], 5);
  free(y);
  unsigned char u1[2] = {4, 8};
  write_npy_raw("l1.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (2,), }", u1, sizeof u1);
  tu_path(p, sizeof p, dir, "l1.npy");
  ck_assert_int_eq(ntk_labels_load(p, 2, 1, 10, &y), NTK_OK);
  ck_assert_int_eq(y[1], 8);
  free(y);

  /* Broken files. */
  labels_fail("l-ubyte", 5, 0, "holds 4 labels for 5 samples");
  labels_fail("l-ubyte", 3, 1, "holds 4 labels but the data hold 3 samples");
  tu_path(p, sizeof p, dir, "trunc-l-ubyte");
  tu_write(p, idx, 10);
  labels_fail("trunc-l-ubyte", 4, 1, "truncated");
  unsigned char magic[13] = {0, 0, 8, 2, 0, 0, 0, 1, 0, 0, 0, 1, 5}; /* a 1 x 1 image */
  tu_path(p, sizeof p, dir, "img-ubyte");
  tu_write(p, magic, sizeof magic);
  labels_fail("img-ubyte", 1, 0, "not an IDX labels file");
  tu_path(p, sizeof p, dir, "junk-l-ubyte");
  tu_write(p, "not labels at all!", 18);
  labels_fail("junk-l-ubyte", 1, 0, "not an IDX file");
  unsigned char range[10] = {0, 0, 8, 1, 0, 0, 0, 2, 1, 10};
  tu_path(p, sizeof p, dir, "range-ubyte");
  tu_write(p, range, sizeof range);
  labels_fail("range-ubyte", 2, 1, "label 1 is 10, outside the classes 0..9");
  int32_t neg[2] = {1, -1};
  write_npy_raw("neg.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", neg, sizeof neg);
  labels_fail("neg.npy", 2, 1, "label 1 is -1");
  float f[2] = {1, 2};
  write_npy_raw("lf.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }", f, sizeof f);
  labels_fail("lf.npy", 2, 1, "not supported for labels");
  write_npy_raw("l2d.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (1, 2), }", u1, sizeof u1);
  labels_fail("l2d.npy", 1, 0, "one dimension");
  labels_fail("missing-labels", 1, 0, "cannot open");
}
END_TEST

START_TEST(test_fashion_mnist_if_installed) {
  const char *p = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";
  if (access(p, R_OK)) return; /* Debian's dataset-fashion-mnist not installed */
  struct ntk_job j;
  ntk_job_defaults(&j);
  j.ndata = 1;
  snprintf(j.data_path[0], sizeof j.data_path[0], "%s", p);
  j.count = 100;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 4, &ds), NTK_OK);
  ck_assert_uint_eq(ds.d, 784);
  ck_assert_uint_eq(ds.h, 28);
  float mx = 0;
  for (size_t k = 0; k < ds.n * ds.d; k++) mx = ((float *)ds.x)[k] > mx ? ((float *)ds.x)[k] : mx;
  ck_assert_float_eq(mx, 1.0f);
  ntk_data_free(&ds);
}
END_TEST

static void write_cifar(const char *name, int n, int bad_label, int truncate_by) {
  size_t len = (size_t)n * 3073;
  unsigned char *b = malloc(len);
  for (int i = 0; i < n; i++) {
    b[(size_t)i * 3073] = (unsigned char)(i % 10);
    for (int k = 0; k < 3072; k++) b[(size_t)i * 3073 + 1 + (size_t)k] = (unsigned char)((i + k) % 256);
  }
  if (bad_label) b[3073] = 77;
  char p[512];
  tu_path(p, sizeof p, dir, name);
  tu_write(p, b, len - (size_t)truncate_by);
  free(b);
}

START_TEST(test_cifar) {
  write_cifar("data_batch_1.bin", 3, 0, 0);
  write_cifar("data_batch_2.bin", 2, 0, 0);
  struct ntk_job j;
  job_for(&j, "data_batch_1.bin");
  tu_path(j.data_path[1], sizeof j.data_path[1], dir, "data_batch_2.bin");
  j.ndata = 2;
  j.count = 4;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.n, 4);
  ck_assert_uint_eq(ds.d, 3072);
  ck_assert_uint_eq(ds.c, 3);
  const double *x = ds.x;
  /* sample 3 = first record of file 2 (i = 0 there); HWC: pixel p channel c <- byte c*1024 + p */
  ck_assert_double_eq_tol(x[3 * 3072 + 5 * 3 + 2], (double)((2048 + 5) % 256) / 255.0, 1e-15);
  ck_assert_double_eq_tol(x[1 * 3072 + 0 * 3 + 1], (double)((1 + 1024) % 256) / 255.0, 1e-15);
  ntk_data_free(&ds);
  write_cifar("trunc.bin", 3, 0, 100);
  expect_fail("trunc.bin", "not a whole number of CIFAR-10 records");
  write_cifar("label.bin", 3, 1, 0);
  expect_fail("label.bin", "label 77");
  char p[512];
  tu_path(p, sizeof p, dir, "empty.bin");
  tu_write(p, "", 0);
  expect_fail("empty.bin", "not a whole number");
}
END_TEST

int main(void) {
  dir = tu_tmpdir();
  Suite *s = suite_create("data");
  TCase *tc = tcase_create("readers");
  tcase_add_test(tc, test_npy_f4_f8);
  tcase_add_test(tc, test_npy_u8_scale_count);
  tcase_add_test(tc, test_npy_images);
  tcase_add_test(tc, test_npy_broken);
  tcase_add_test(tc, test_idx);
  tcase_add_test(tc, test_labels);
  tcase_add_test(tc, test_fashion_mnist_if_installed);
  tcase_add_test(tc, test_cifar);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
