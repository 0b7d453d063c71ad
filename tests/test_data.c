/* Data readers: .npy, IDX (plain and .gz), CIFAR-10; good files and every
 * kind of broken one, paths that are not files, and the stop flag. */
#include <math.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "job/data.h"
#include "base/npy.h"
#include "base/signals.h"
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
  /* NCHW names a channel axis only a 4-D array has (docs/JOB-FILE.md,
   * [data] layout): (N, C, L) sequences and (N, D) vectors are refused,
   * not read as grey images or vectors. */
  write_npy_raw("seq.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 4), }", v, sizeof v);
  write_npy_raw("vec.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 12), }", v, sizeof v);
  job_for(&j, "seq.npy");
  j.layout = NTK_LAYOUT_NCHW;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "layout = NCHW is for 4-D (N, C, H, W) arrays, this one has 3"));
  job_for(&j, "vec.npy");
  j.layout = NTK_LAYOUT_NCHW;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "this one has 2 dimensions"));
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
  /* a dimension beyond 64 bits: said so, not "2 to 4 dimensions" (it has 2) */
  write_npy_raw("big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999, 2), }", f,
                sizeof f);
  expect_fail("big.npy", ".npy shape: 99999999999999999999999 is too large");
  /* tabs and line ends between the tokens, as numpy.load reads them */
  write_npy_raw("tabs.npy", "{'descr':\t'<f4', 'fortran_order':\tFalse, 'shape': (3,\t2), }", f, sizeof f);
  struct ntk_dataset tds;
  ck_assert_msg(load("tabs.npy", 8, &tds) == NTK_OK, "%s", ntk_error_message());
  ck_assert(tds.n == 3 && tds.d == 2 && ((double *)tds.x)[5] == 6.0);
  ntk_data_free(&tds);
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

/* Values in the job's own format are read in place (read_values) and
 * judged by their bits: the same values stored, and the same refusals,
 * as through raw_put, including at the edges of its limits. */
START_TEST(test_in_place_limits) {
  float lim = (float)3.0e38, above = nextafterf(lim, INFINITY);
  if ((double)lim > 3.0e38) above = lim, lim = nextafterf(lim, 0.0f);
  float ok[4] = {1, 1e-40f, -lim, 2}; /* a subnormal: kept (no DAZ here), and the largest value allowed */
  write_npy_raw("lim_ok.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", ok, sizeof ok);
  struct ntk_dataset ds;
  ck_assert_int_eq(load("lim_ok.npy", 4, &ds), NTK_OK);
  ck_assert_mem_eq(ds.x, ok, sizeof ok);
  ntk_data_free(&ds);
  float big[4] = {1, 2, 3, above}; /* the first float past 3e38: refused in a float32 job */
  write_npy_raw("lim_big.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", big, sizeof big);
  ck_assert_int_eq(load("lim_big.npy", 4, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "sample 1, feature 1 is infinite or out of range"), "%s",
                ntk_error_message());
  /* no [data] scale: not said to be "after scaling" (it was) */
  ck_assert_msg(strstr(ntk_error_message(), "; a float32 job holds at most 3e+38)") &&
                !strstr(ntk_error_message(), "scal"), "%s", ntk_error_message());
  ck_assert_int_eq(load("lim_big.npy", 8, &ds), NTK_OK); /* widened: in range */
  ntk_data_free(&ds);
  double dok[4] = {1, 4e-320, -1.7e308, 2}, dbig[4] = {1, 2, nextafter(1.7e308, INFINITY), 3};
  write_npy_raw("lim_dok.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", dok, sizeof dok);
  ck_assert_int_eq(load("lim_dok.npy", 8, &ds), NTK_OK);
  ck_assert_mem_eq(ds.x, dok, sizeof dok);
  ntk_data_free(&ds);
  write_npy_raw("lim_dbig.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (2, 2), }", dbig, sizeof dbig);
  ck_assert_int_eq(load("lim_dbig.npy", 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "sample 1, feature 0 is infinite or out of range"), "%s",
                ntk_error_message());
}
END_TEST

/* A file must end where its header says, and its header hold numpy's
 * three keys: a header edited to a smaller shape read the first rows as
 * the data, and an unknown key was ignored. */
/* len bytes at b gzip-compressed into dir/name. */
static void gz_write(const char *name, const void *b, size_t len) {
  char p[512];
  tu_path(p, sizeof p, dir, name);
  gzFile g = gzopen(p, "wb");
  ck_assert_ptr_nonnull(g);
  ck_assert_int_eq(gzwrite(g, b, (unsigned)len), (int)len);
  ck_assert_int_eq(gzclose(g), Z_OK);
}

/* dir/src gzip-compressed into dir/dst, its last `cut` bytes removed. */
static void gz_copy(const char *src, const char *dst, int cut) {
  char p[512], q[512], buf[8192];
  tu_path(p, sizeof p, dir, src);
  tu_path(q, sizeof q, dir, dst);
  FILE *in = fopen(p, "rb");
  ck_assert_ptr_nonnull(in);
  size_t len = fread(buf, 1, sizeof buf, in);
  fclose(in);
  gz_write(dst, buf, len);
  struct stat sb;
  ck_assert_int_eq(stat(q, &sb), 0);
  ck_assert_int_eq(truncate(q, sb.st_size - cut), 0);
}

START_TEST(test_npy_strict) {
  float f[6] = {1, 2, 3, 4, 5, 6};
  write_npy_raw("long.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, sizeof f);
  expect_fail("long.npy", "its header declares");
  write_npy_raw("keys.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'offset': 8, }", f, sizeof f);
  expect_fail("keys.npy", "has the key 'offset'");
  write_npy_raw("twice.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), 'shape': (3, 2)}", f,
                sizeof f);
  expect_fail("twice.npy", "repeats a key");
  /* The header read as numpy.load reads it (Python's literal): a key repeated after a tab or a
   * newline, or in double quotes, or named in a comment, was missed and its first value taken where
   * numpy takes the last: another shape, order or byte order, exit 0 (a hunt). */
  const char *misread[][2] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6, 1), 'shape'\t: (3, 2), }", "repeats a key: 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (6, 1), \"shape\": (3, 2), }", "repeats a key: 'shape'"},
      {"{'descr': '<f4', 'fortran_order': True, 'shape': (3, 2), 'fortran_order'\n: False}", "repeats a key"},
      {"{'descr': '>f4', 'fortran_order': False, 'shape': (3, 2), 'descr'\t: '<f4'}", "repeats a key: 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, # 'shape': (6, 1)\n 'shape': (3, 2)}", "where a quoted key belongs"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2) 'x'}", "after the value of 'shape'"},
      {"{'descr': '<f4', 'fortran_order': False}", "no 'shape'"},
  };
  for (size_t k = 0; k < sizeof misread / sizeof *misread; k++) {
    write_npy_raw("dup.npy", misread[k][0], f, sizeof f);
    expect_fail("dup.npy", misread[k][1]);
  }
  /* what numpy writes or reads alike: double quotes, any order, any blanks, no trailing comma */
  const char *fine[] = {"{\"descr\": \"<f4\", \"fortran_order\": False, \"shape\": (3, 2)}",
                        "{'shape': (3,2),'fortran_order':False,'descr':'<f4'}",
                        "{ 'descr' :\t'<f4' ,\n'fortran_order' : False , 'shape' : ( 3 , 2 , ) , }"};
  for (size_t k = 0; k < sizeof fine / sizeof *fine; k++) {
    write_npy_raw("fine.npy", fine[k], f, sizeof f);
    struct ntk_dataset ds;
    ck_assert_msg(load("fine.npy", 8, &ds) == NTK_OK, "%s: %s", fine[k], ntk_error_message());
    ck_assert_uint_eq(ds.n, 3);
    ck_assert_uint_eq(ds.d, 2);
    ck_assert(((const double *)ds.x)[5] == 6.0);
    ntk_data_free(&ds);
  }
  /* What numpy.load refuses to evaluate: a control byte (a NUL as well: the
   * same check), text beside the dictionary; a structured dtype named as
   * written, not by its first field's name. */
  write_npy_raw("ctl.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }\x01", f, sizeof f);
  expect_fail("ctl.npy", "holds the byte 0x01 at offset 69");
  { /* a version 2 header starts 2 bytes later (its length takes 4): the offset says so */
    char v2[512], buf2[256];
    tu_path(v2, sizeof v2, dir, "v2.npy");
    const char *d2 = "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }\x02";
    size_t dl = strlen(d2), total = (12 + dl + 1 + 63) / 64 * 64;
    memcpy(buf2, "\x93NUMPY\x02\x00", 8);
    buf2[8] = (char)(total - 12);
    buf2[9] = buf2[10] = buf2[11] = 0;
    memcpy(buf2 + 12, d2, dl);
    memset(buf2 + 12 + dl, ' ', total - 12 - dl);
    buf2[total - 1] = '\n';
    memcpy(buf2 + total, f, sizeof f);
    tu_write(v2, buf2, total + sizeof f);
    expect_fail("v2.npy", "holds the byte 0x02 at offset 71");
  }
  write_npy_raw("text.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), } 7", f, sizeof f);
  expect_fail("text.npy", "is not one dictionary");
  write_npy_raw("fields.npy", "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (3, 2), }", f, sizeof f);
  expect_fail("fields.npy", "dtype [('a', '<f4')] is not supported");
  /* The same file gzip-compressed: read one byte further. */
  char p[512];
  gz_copy("long.npy", "long.npy.gz", 0);
  expect_fail("long.npy.gz", "go on after");
  /* A compressed file missing any of its last 8 bytes (the gzip trailer:
   * CRC-32 and length) is cut, with and without count: its checksum was
   * never checked, and a changed value passed. */
  write_npy_raw("four.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", f, sizeof f);
  for (int cut = 0; cut <= 8; cut++) {
    gz_copy("four.npy", "four.npy.gz", cut);
    struct ntk_job jc;
    struct ntk_dataset dc;
    for (size_t count = 0; count <= 2; count += 2) {
      job_for(&jc, "four.npy.gz");
      jc.count = count;
      ntk_status st = ntk_data_load(&jc, 8, &dc);
      if (cut == 0) {
        ck_assert_msg(st == NTK_OK, "%s", ntk_error_message());
        ck_assert_uint_eq(dc.n, count ? count : 3);
        ntk_data_free(&dc);
      } else {
        ck_assert_msg(st == NTK_EINPUT, "cut %d count %zu: taken", cut, count);
        ck_assert_msg(strstr(ntk_error_message(), "compressed stream ends early"), "%s", ntk_error_message());
      }
    }
  }
  /* Bytes after the gzip stream that are not another member (two files run
   * together, the first compressed; zeros): zlib's gzread drops them, and
   * they were taken. Another member is read on (the walk past the fast
   * path of the trailer's length). */
  {
    /* "XYZ"; zeros then a byte; the trailer written twice (its last 4 bytes
     * the length of everything read, which a check of them alone passed) */
    const char *tails[] = {"XYZ", "\0\0\0\0\0\0\0\x01", NULL};
    size_t tlen[] = {3, 8, 8};
    char q[512], trailer[8];
    for (int k = 0; k < 3; k++) {
      if (!tails[k]) { /* the stream's own last 8 bytes */
        gz_copy("four.npy", "tail.npy.gz", 0);
        tu_path(q, sizeof q, dir, "tail.npy.gz");
        FILE *g = fopen(q, "rb");
        fseek(g, -8, SEEK_END);
        ck_assert_uint_eq(fread(trailer, 1, 8, g), 8);
        fclose(g);
        tails[k] = trailer;
      }
      gz_copy("four.npy", "tail.npy.gz", 0);
      tu_path(q, sizeof q, dir, "tail.npy.gz");
      FILE *a = fopen(q, "ab");
      ck_assert_uint_eq(fwrite(tails[k], 1, tlen[k], a), tlen[k]);
      fclose(a);
      expect_fail("tail.npy.gz", "bytes after its gzip stream");
    }
    /* Zeros alone after it: padding, read past as gzip does. */
    gz_copy("four.npy", "pad.npy.gz", 0);
    tu_path(q, sizeof q, dir, "pad.npy.gz");
    FILE *a = fopen(q, "ab");
    for (int z = 0; z < 70000; z++) fputc(0, a);
    fclose(a);
    struct ntk_dataset dp;
    ck_assert_msg(load("pad.npy.gz", 8, &dp) == NTK_OK, "%s", ntk_error_message());
    ck_assert_uint_eq(dp.n, 3);
    ntk_data_free(&dp);
    /* Two members: the header and first row, then the rest; then with a tail. */
    char whole[512], two[512], buf[4096];
    tu_path(whole, sizeof whole, dir, "four.npy");
    FILE *in = fopen(whole, "rb");
    size_t len = fread(buf, 1, sizeof buf, in);
    fclose(in);
    gz_write("m1.gz", buf, len - 16);
    gz_write("m2.gz", buf + len - 16, 16);
    tu_path(two, sizeof two, dir, "two.npy.gz");
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "cat '%s/m1.gz' '%s/m2.gz' > '%s'", dir, dir, two);
    ck_assert_int_eq(system(cmd), 0);
    struct ntk_dataset dm;
    ck_assert_msg(load("two.npy.gz", 8, &dm) == NTK_OK, "%s", ntk_error_message());
    ck_assert_uint_eq(dm.n, 3);
    ntk_data_free(&dm);
    snprintf(cmd, sizeof cmd, "printf 'junk' >> '%s'", two);
    ck_assert_int_eq(system(cmd), 0);
    expect_fail("two.npy.gz", "4 bytes after its gzip stream (from byte");
  }
  /* With count, the rows the job skips are still there (plain: the size). */
  struct ntk_job j;
  struct ntk_dataset ds;
  write_npy_raw("three.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (3, 2), }", f, sizeof f);
  job_for(&j, "three.npy");
  j.count = 2;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.n, 2);
  ntk_data_free(&ds);
  write_npy_raw("cut.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4, 2), }", f, sizeof f);
  job_for(&j, "cut.npy");
  j.count = 2;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "cut short"), "%s", ntk_error_message());
  /* Labels: one more than declared. */
  int32_t l4[3] = {0, 1, 2};
  write_npy_raw("llong.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", l4, sizeof l4);
  int32_t *y = NULL;
  tu_path(p, sizeof p, dir, "llong.npy");
  ck_assert_int_eq(ntk_labels_load(p, 2, 1, 10, &y), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "its header declares"), "%s", ntk_error_message());
  ck_assert_ptr_null(y);
  /* Labels compressed, missing the last byte of the gzip trailer. */
  write_npy_raw("lab.npy", "{'descr': '<i4', 'fortran_order': False, 'shape': (3,), }", l4, sizeof l4);
  gz_copy("lab.npy", "lab.npy.gz", 1);
  tu_path(p, sizeof p, dir, "lab.npy.gz");
  ck_assert_int_eq(ntk_labels_load(p, 3, 1, 10, &y), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "compressed stream ends early"), "%s", ntk_error_message());
  ck_assert_ptr_null(y);
  gz_copy("lab.npy", "lab.npy.gz", 0);
  ck_assert_msg(ntk_labels_load(p, 3, 1, 10, &y) == NTK_OK, "%s", ntk_error_message());
  ck_assert_int_eq(y[2], 2);
  free(y);
  { /* ... and with a byte after its stream */
    FILE *a = fopen(p, "ab");
    fputc('x', a);
    fclose(a);
    ck_assert_int_eq(ntk_labels_load(p, 3, 1, 10, &y), NTK_EINPUT);
    ck_assert_msg(strstr(ntk_error_message(), "1 byte after its gzip stream (from byte 94 of 95) is not another gzip member"), "%s", ntk_error_message());
  }
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
  if (gz) gz_write(name, b, len);
  else tu_write(p, b, len);
  free(b);
}

/* A graph job's patterns ([data] pattern, [test] pattern): appended to
 * each sample's features (ds->pattern), cut by the counts, not scaled as
 * uint8 data are, and refused naming the file where their shape does not
 * match the samples, where a value is not finite, or on vector data. */
START_TEST(test_patterns) {
  uint8_t x[3 * 2 * 1 * 2] = {0, 255, 51, 102, 0, 0, 255, 255, 1, 2, 3, 4}; /* 3 samples of 2 x 1 x 2, uint8 */
  write_npy_raw("gx.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (3, 2, 1, 2), }", x, sizeof x);
  uint8_t xt[2 * 4] = {10, 20, 30, 40, 50, 60, 70, 80};
  write_npy_raw("gxt.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 1, 2), }", xt, sizeof xt);
  double p[3 * 4] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12};
  write_npy_raw("gp.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2, 2), }", p, sizeof p);
  uint8_t pt[2 * 4] = {0, 1, 1, 0, 2, 0, 0, 2}; /* uint8: weights, not scaled by 1/255 */
  write_npy_raw("gpt.npy", "{'descr': '|u1', 'fortran_order': False, 'shape': (2, 2, 2), }", pt, sizeof pt);
  struct ntk_job j;
  job_for(&j, "gx.npy");
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gp.npy");
  j.test.enabled = 1;
  j.test.ndata = 1;
  tu_path(j.test.path[0], sizeof j.test.path[0], dir, "gxt.npy");
  tu_path(j.test.pattern, sizeof j.test.pattern, dir, "gpt.npy");
  struct ntk_dataset ds;
  ck_assert_msg(ntk_data_load_job(&j, 8, &ds) == NTK_OK, "%s", ntk_error_message());
  ck_assert_uint_eq(ds.n, 5);
  ck_assert_uint_eq(ds.n_train, 3);
  ck_assert_uint_eq(ds.pattern, 4);
  ck_assert_uint_eq(ds.d, 8);
  const double *v = ds.x;
  ck_assert(v[1] == 1.0 && v[2] == 0.2);             /* the features, uint8 scaled by 1/255 */
  ck_assert(v[4] == 1 && v[7] == 4 && v[8 + 4] == 5); /* the patterns as they are */
  ck_assert(v[3 * 8 + 0] == 10 / 255.0 && v[3 * 8 + 5] == 1 && v[4 * 8 + 4] == 2 && v[4 * 8 + 7] == 2);
  ntk_data_free(&ds);
  j.count = 2; /* the first 2 samples' patterns */
  ck_assert_msg(ntk_data_load_job(&j, 4, &ds) == NTK_OK, "%s", ntk_error_message());
  ck_assert_uint_eq(ds.n, 4);
  ck_assert(((const float *)ds.x)[8 + 7] == 8.0f && ((const float *)ds.x)[2 * 8 + 5] == 1.0f);
  ntk_data_free(&ds);
  j.count = 0;
  /* the test set's pattern for the train set: 2 matrices for 3 samples */
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gpt.npy");
  ck_assert_int_eq(ntk_data_load_job(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "[data] pattern: /"), "%s", ntk_error_message());
  ck_assert_msg(strstr(ntk_error_message(), "gpt.npy: the pattern must have shape (3, V, V)") &&
                strstr(ntk_error_message(), "not (2, 2, 2)"), "%s", ntk_error_message());
  /* a pattern of other positions than the samples' (an Aggregate after a pooling): the network's plan checks
   * it; the [test] pattern must have the [data] pattern's */
  double small[3 * 1] = {1, 2, 3};
  write_npy_raw("gsmall.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 1, 1), }", small, sizeof small);
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gsmall.npy");
  ck_assert_int_eq(ntk_data_load_job(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "[test] pattern: /"), "%s", ntk_error_message());
  ck_assert_msg(strstr(ntk_error_message(), "gpt.npy: the pattern must have shape (2, 1, 1), as the [data] "
                                            "pattern's") && strstr(ntk_error_message(), "not (2, 2, 2)"), "%s",
                ntk_error_message());
  j.test.enabled = 0;
  ck_assert_msg(ntk_data_load_job(&j, 8, &ds) == NTK_OK, "%s", ntk_error_message());
  ck_assert_uint_eq(ds.pattern, 1);
  ck_assert_uint_eq(ds.d, 5);
  ck_assert(((const double *)ds.x)[2 * 5 + 4] == 3);
  ntk_data_free(&ds);
  j.test.enabled = 1;
  double flat[3 * 4] = {0};
  write_npy_raw("gflat.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", flat, sizeof flat);
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gflat.npy");
  ck_assert_int_eq(ntk_data_load_job(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "not (3, 4)"), "%s", ntk_error_message());
  p[5] = NAN;
  write_npy_raw("gnan.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2, 2), }", p, sizeof p);
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gnan.npy");
  ck_assert_int_eq(ntk_data_load_job(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "gnan.npy: sample 1") && strstr(ntk_error_message(), "NaN"), "%s",
                ntk_error_message());
  /* vectors have no positions to pair */
  write_npy_raw("gv.npy", "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }", flat, sizeof flat);
  job_for(&j, "gv.npy");
  tu_path(j.pattern_path, sizeof j.pattern_path, dir, "gp.npy");
  ck_assert_int_eq(ntk_data_load_job(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "these data are (N, 4) vectors"), "%s", ntk_error_message());
}
END_TEST

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

/* The classes a regression's labels make (ntk_labels_classes): 0 .. the
 * largest label while at most half of those never occur, else refused at
 * the labels key holding that label, with the counts and how to state the
 * class count; a stated [data] classes is used as it is. The counts and
 * the line said about each file. */
START_TEST(test_label_classes) {
  struct ntk_job j;
  ntk_job_defaults(&j);
  snprintf(j.source, sizeof j.source, "job.conf");
  snprintf(j.labels_path, sizeof j.labels_path, "ytr.npy");
  snprintf(j.test.labels, sizeof j.test.labels, "yte.npy");
  j.labels_line = 3;
  j.test.labels_line = 9;
  int32_t tr[40], te[10];
  for (int i = 0; i < 40; i++) tr[i] = i % 10;
  for (int i = 0; i < 10; i++) te[i] = (i * 3) % 10;
  size_t classes = 0;
  ck_assert_int_eq(ntk_labels_classes(&j, tr, 40, te, 10, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 10);
  /* one stray label, in the train labels or the test labels */
  tr[17] = 255;
  ck_assert_int_eq(ntk_labels_classes(&j, tr, 40, te, 10, 0, &classes), NTK_ECONFIG);
  ck_assert_str_eq(ntk_error_message(),
                   "job.conf:3: [data] labels: ytr.npy: label 17 is 255, and only 11 of the 256 classes 0..255 occur "
                   "in the train and test labels (245 never do): a stray label? If the task has 256 classes, state "
                   "it in [data]: classes = 256");
  tr[17] = 7;
  te[4] = 65535;
  ck_assert_int_eq(ntk_labels_classes(&j, tr, 40, te, 10, 0, &classes), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "job.conf:9: [test] labels: yte.npy: label 4 is 65535, and only 11 of the "
                                            "65536 classes 0..65535 occur"), "%s", ntk_error_message());
  /* stated, it is the count: no refusal */
  j.classes = 65536;
  ck_assert_int_eq(ntk_labels_classes(&j, tr, 40, te, 10, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 65536);
  j.classes = 12;
  te[4] = 2;
  ck_assert_int_eq(ntk_labels_classes(&j, tr, 40, te, 10, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 12);
  j.classes = 0;
  /* the bound: half of 0..max absent is accepted, one more is not; the
   * train and test labels count together */
  int32_t a[5] = {0, 1, 2, 3, 9}, b[4] = {0, 1, 2, 9}, c[1] = {4};
  ck_assert_int_eq(ntk_labels_classes(&j, a, 5, a, 5, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 10);
  ck_assert_int_eq(ntk_labels_classes(&j, b, 4, b, 4, 0, &classes), NTK_ECONFIG);
  ck_assert_msg(strstr(ntk_error_message(), "only 4 of the 10 classes 0..9 occur in the train and test labels (6 never "
                                            "do)"), "%s", ntk_error_message());
  ck_assert_int_eq(ntk_labels_classes(&j, b, 4, c, 1, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 10);
  int32_t zero[3] = {0, 0, 0}; /* one class: still two columns, as before */
  ck_assert_int_eq(ntk_labels_classes(&j, zero, 3, zero, 1, 0, &classes), NTK_OK);
  ck_assert_uint_eq(classes, 2);
  /* what a file holds */
  struct ntk_label_counts k;
  tr[17] = 255;
  ck_assert_int_eq(ntk_labels_count(tr, 40, NTK_LABELS_MAX, &k), NTK_OK);
  ck_assert(k.n == 40 && k.max == 255 && k.distinct == 11);
  char line[256];
  ntk_labels_describe("ytr.npy", &k, line, sizeof line);
  ck_assert_str_eq(line, "ytr.npy: 11 classes in 0..255, 40 labels");
  ck_assert_int_eq(ntk_labels_count(te, 10, 10, &k), NTK_OK);
  ntk_labels_describe("yte.npy", &k, line, sizeof line);
  ck_assert_str_eq(line, "yte.npy: 10 classes (0..9), 10 labels");
}
END_TEST

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
  gz_write("l-ubyte.gz", idx, sizeof idx);
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

/* Debian's dataset-fashion-mnist (scripts/install-deps.sh installs it): its
 * own ctest test, data_fashion_mnist (`test_data fashion-mnist`), skipped
 * with exit 77 where the package is missing. */
static const char fashion_mnist[] = "/usr/share/datasets/fashion-mnist/t10k-images-idx3-ubyte.gz";

START_TEST(test_fashion_mnist) {
  const char *p = fashion_mnist;
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
  /* a count past both batches: the message names both, not the first alone */
  j.count = 6;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "data_batch_1.bin and 1 more batch file: [data] count = 6 but the data "
                                            "hold only 5 samples"), "%s", ntk_error_message());
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

/* A refused value (NaN, infinite, beyond float32 once scaled) is reported
 * as when the values were checked after loading: after what is wrong with
 * the file itself, and the first in the NHWC array, not in the file. */
START_TEST(test_refused_value_order) {
  /* NCHW, 3 channels of 2 x 2: NaN at channel 0 pixel 3 (NHWC feature 9), inf at channel 2 pixel 0 (feature 2) */
  float v[12] = {0};
  v[0 * 4 + 3] = NAN;
  v[2 * 4 + 0] = INFINITY;
  write_npy_raw("chw_bad.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (1, 3, 2, 2), }", v, sizeof v);
  struct ntk_job j;
  job_for(&j, "chw_bad.npy");
  j.layout = NTK_LAYOUT_NCHW;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "sample 0, feature 2 is infinite"), "%s", ntk_error_message());
  /* a CIFAR-10 batch whose record 1 has label 77 and whose pixels pass float32 at scale 1e38: the label first */
  write_cifar("label_scaled.bin", 3, 1, 0);
  job_for(&j, "label_scaled.bin");
  j.has_scale = 1;
  j.scale = 1e38;
  ck_assert_int_eq(ntk_data_load(&j, 4, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "record 1 has label 77"), "%s", ntk_error_message());
  write_cifar("scaled.bin", 3, 0, 0);
  ck_assert_int_eq(load("scaled.bin", 4, &ds), NTK_OK); /* 1/255: in range */
  ntk_data_free(&ds);
  job_for(&j, "scaled.bin");
  j.has_scale = 1;
  j.scale = 1e38;
  ck_assert_int_eq(ntk_data_load(&j, 4, &ds), NTK_EINPUT); /* pixel 4 of record 0 is 4e38 */
  ck_assert_msg(strstr(ntk_error_message(), "scaled.bin: sample 0, feature 12 is infinite or out of range (4e+38 after [data] scale; a float32 job "
                                        "holds at most 3e+38)"),
                "%s", ntk_error_message());
}
END_TEST

/* ---- hostile paths and files --------------------------------------------- */

/* A reader that opens a FIFO blocks in open() until a writer comes, and
 * /dev/zero as CIFAR-10 never ends: alarm() turns such a regression into a
 * failure instead of a hang. Our own handler, not check's: with CK_FORK=no
 * check's SIGALRM handler kills the whole process group, ctest included. */
static void blocked(int sig) {
  static const char msg[] = "test_not_regular: a reader blocked for 20 s on a FIFO or device\n";
  (void)sig;
  ssize_t w = write(STDERR_FILENO, msg, sizeof msg - 1);
  (void)w;
  _exit(EXIT_FAILURE);
}

START_TEST(test_not_regular) {
  struct sigaction sa, old;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = blocked;
  sigaction(SIGALRM, &sa, &old);
  alarm(20);
  char fifo[512], sock[512];
  tu_path(fifo, sizeof fifo, dir, "fifo.npy");
  ck_assert_int_eq(mkfifo(fifo, 0600), 0);
  expect_fail("fifo.npy", "is a FIFO, not a regular file");
  int32_t *y = (int32_t *)1;
  labels_fail("fifo.npy", 1, 0, "is a FIFO");

  /* [test] path: the same reader, through ntk_data_load_job. */
  float f[4] = {1, 2, 3, 4};
  write_npy_raw("good.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, sizeof f);
  struct ntk_job *j = malloc(sizeof *j);
  ck_assert_ptr_nonnull(j);
  job_for(j, "good.npy");
  j->test.enabled = 1;
  j->test.ndata = 1;
  snprintf(j->test.path[0], sizeof j->test.path[0], "%s", fifo);
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load_job(j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "[test]") && strstr(ntk_error_message(), "fifo.npy is a FIFO"), "%s",
                ntk_error_message());

  /* A CIFAR-10 batch list whose second file is a FIFO. */
  write_cifar("one.bin", 1, 0, 0);
  job_for(j, "one.bin");
  j->ndata = 2;
  snprintf(j->data_path[1], sizeof j->data_path[1], "%s", fifo);
  ck_assert_int_eq(ntk_data_load(j, 8, &ds), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "is a FIFO"));

  /* /dev/zero as CIFAR-10 with a count: refused, not read. */
  if (!access("/dev/zero", R_OK)) {
    ntk_job_defaults(j);
    j->ndata = 1;
    snprintf(j->data_path[0], sizeof j->data_path[0], "/dev/zero");
    j->format = NTK_FORMAT_CIFAR10;
    j->count = 10;
    ck_assert_int_eq(ntk_data_load(j, 8, &ds), NTK_EINPUT);
    ck_assert_msg(strstr(ntk_error_message(), "/dev/zero is a character device"), "%s", ntk_error_message());
    ck_assert_int_eq(ntk_labels_load("/dev/zero", 1, 0, 10, &y), NTK_EINPUT);
    ck_assert_ptr_null(y);
  }

  /* A socket (open() fails with ENXIO: said as what it is). */
  int sfd = socket(AF_UNIX, SOCK_STREAM, 0);
  ck_assert_int_ge(sfd, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof addr);
  addr.sun_family = AF_UNIX;
  tu_path(sock, sizeof sock, dir, "sock.npy");
  ck_assert_uint_lt(strlen(sock), sizeof addr.sun_path);
  memcpy(addr.sun_path, sock, strlen(sock) + 1);
  ck_assert_int_eq(bind(sfd, (struct sockaddr *)&addr, sizeof addr), 0);
  expect_fail("sock.npy", "is a socket, not a regular file");
  close(sfd);
  unlink(sock);

  /* A folder. */
  expect_fail("", "is a folder");
  free(j);
  unlink(fifo);
  alarm(0);
  sigaction(SIGALRM, &old, NULL);
}
END_TEST

/* Headers whose sizes wrap around 64 bits: the old readers took the wrapped
 * (small) product as the sample size and accepted the file, whose image
 * shape then broke the CNN code. */
START_TEST(test_overflowing_shapes) {
  float f[100] = {0};
  /* 4-D: 5 * 3 * 12297829382473034411 = 5 (mod 2^64), 20 samples of "5 values". */
  write_npy_raw("wrap4.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (20, 5, 3, 12297829382473034411), }",
                f, sizeof f);
  expect_fail("wrap4.npy", "overflows 64 bits");
  struct ntk_job j;
  job_for(&j, "wrap4.npy");
  j.layout = NTK_LAYOUT_NCHW;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 4, &ds), NTK_EINPUT);
  /* 3-D: 3 * 6148914691236517206 = 2 (mod 2^64). */
  write_npy_raw("wrap3.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3, 6148914691236517206), }",
                f, 4 * sizeof *f);
  expect_fail("wrap3.npy", "overflows 64 bits");
  /* 2-D: n * d wraps (2 * 2^63 = 0). */
  write_npy_raw("wrap2.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 9223372036854775808), }",
                f, sizeof f);
  expect_fail("wrap2.npy", "overflows 64 bits");
  /* The whole array's bytes wrap even when count keeps only one sample:
   * 2^62 samples of 4 float32 are 2^66 bytes, no such file exists. */
  write_npy_raw("wrapn.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (4611686018427387904, 4), }",
                f, 4 * sizeof *f);
  job_for(&j, "wrapn.npy");
  j.count = 1;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "overflows 64 bits"), "%s", ntk_error_message());
  write_npy_raw("neg.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (-1, 4), }", f, 4 * sizeof *f);
  expect_fail("neg.npy", "negative 'shape'");

  /* IDX: four 32-bit sizes, 769546 * 494770 * 48448661 = 2^64 + 4: one
   * sample of "4 bytes". */
  unsigned char idx[24] = {0, 0, 8, 4, 0, 0, 0, 1};
  const uint32_t dims[3] = {769546, 494770, 48448661};
  for (int i = 0; i < 3; i++)
    for (int k = 0; k < 4; k++) idx[8 + 4 * i + k] = (unsigned char)(dims[i] >> (24 - 8 * k));
  char p[512];
  tu_path(p, sizeof p, dir, "wrap-ubyte");
  tu_write(p, idx, sizeof idx);
  expect_fail("wrap-ubyte", "overflows 64 bits");
  /* (2^32 - 1)^3: wraps to 12884901887, which passes the size bound. */
  memset(idx + 8, 0xff, 12);
  tu_path(p, sizeof p, dir, "max-ubyte");
  tu_write(p, idx, sizeof idx);
  expect_fail("max-ubyte", "overflows 64 bits");

  /* Labels: 2^61 int64 labels are 2^64 bytes. */
  int64_t l8[2] = {1, 2};
  write_npy_raw("wrapl.npy", "{'descr': '<i8', 'fortran_order': False, 'shape': (2305843009213693952,), }", l8,
                sizeof l8);
  labels_fail("wrapl.npy", 2, 0, "overflows 64 bits");
}
END_TEST

/* Bytes this process has read through read(2) so far (/proc/self/io), or
 * -1 where that is not available. */
static long long bytes_read(void) {
  FILE *f = fopen("/proc/self/io", "r");
  if (!f) return -1;
  long long v = -1;
  if (fscanf(f, "rchar: %lld", &v) != 1) v = -1;
  fclose(f);
  return v;
}

/* `count` stops the CIFAR-10 reader at the records it needs, but a
 * compressed file it ended inside is still read to its end: only there is
 * its checksum checked, and the records taken are only as good as that. */
START_TEST(test_cifar_count_stops) {
  /* A gzip-compressed batch cut in the middle of its stream: the records
   * before the cut decompress, but the file is damaged, with count = 2 as
   * without (count = 2 took it, unchecked). Records of pseudo-random bytes,
   * so the compressed stream is about as long as the data and the cut lies
   * far after record 2. */
  size_t n = 20, len = n * 3073;
  unsigned char *b = malloc(len);
  ck_assert_ptr_nonnull(b);
  uint32_t seed = 12345;
  for (size_t k = 0; k < len; k++) {
    seed = seed * 1664525u + 1013904223u;
    b[k] = (unsigned char)(seed >> 24);
  }
  for (size_t i = 0; i < n; i++) b[i * 3073] = (unsigned char)(i % 10);
  char p[512];
  tu_path(p, sizeof p, dir, "cut.bin.gz");
  gz_write("cut.bin.gz", b, len);
  struct stat sb;
  ck_assert_int_eq(stat(p, &sb), 0);
  ck_assert_int_gt(sb.st_size, (long long)len / 2);
  ck_assert_int_eq(truncate(p, sb.st_size / 2), 0);
  struct ntk_job j;
  job_for(&j, "cut.bin.gz");
  j.count = 2;
  struct ntk_dataset ds;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "truncated"), "%s", ntk_error_message());
  /* An intact batch with count = 2: the two records, the rest read through. */
  tu_path(p, sizeof p, dir, "whole.bin.gz");
  gz_write("whole.bin.gz", b, len);
  job_for(&j, "whole.bin.gz");
  j.count = 2;
  ck_assert_msg(ntk_data_load(&j, 8, &ds) == NTK_OK, "%s", ntk_error_message());
  ck_assert_uint_eq(ds.n, 2);
  /* sample 1, pixel 7, channel 2 <- byte 1 + 2*1024 + 7 of record 1 */
  ck_assert_double_eq_tol(((double *)ds.x)[3072 + 7 * 3 + 2], b[3073 + 1 + 2048 + 7] / 255.0, 1e-15);
  ntk_data_free(&ds);
  /* The same batch without its last byte (a byte of the gzip trailer, the
   * CRC-32 and length): refused with count = 2 and without. */
  ck_assert_int_eq(stat(p, &sb), 0);
  ck_assert_int_eq(truncate(p, sb.st_size - 1), 0);
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "compressed stream ends early"), "%s", ntk_error_message());
  j.count = 0;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "compressed stream ends early"), "%s", ntk_error_message());
  job_for(&j, "cut.bin.gz");
  j.count = 0;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  j.count = 15; /* past the cut */
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  /* A compressed batch with fewer records than count. */
  gz_write("few.bin.gz", b, 3 * 3073);
  job_for(&j, "few.bin.gz");
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  ck_assert_uint_eq(ds.n, 3);
  ntk_data_free(&ds);
  j.count = 4;
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_msg(strstr(ntk_error_message(), "count = 4 but the data hold only 3 samples"), "%s", ntk_error_message());
  /* ... and one ending inside a record. */
  gz_write("part.bin.gz", b, 3 * 3073 - 5);
  expect_fail("part.bin.gz", "9214 bytes is not a whole number");
  free(b);

  /* A plain batch of about 1 GiB, sparse (no disk used), whose first two
   * records are valid: count = 2 reads them and not the rest. The bytes
   * that went through read(2) say so, whatever the speed of the machine. */
  size_t big = ((size_t)1 << 30) / 3073;
  write_cifar("sparse.bin", 2, 0, 0);
  tu_path(p, sizeof p, dir, "sparse.bin");
  ck_assert_int_eq(truncate(p, (off_t)(big * 3073)), 0);
  job_for(&j, "sparse.bin");
  j.count = 2;
  long long before = bytes_read();
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_OK);
  long long after = bytes_read();
  ck_assert_uint_eq(ds.n, 2);
  ntk_data_free(&ds);
  if (before < 0 || after < 0) fprintf(stderr, "test_cifar_count_stops: no /proc/self/io, read size not checked\n");
  else ck_assert_msg(after - before < (16 << 20), "count = 2 read %lld bytes of a 1 GiB file", after - before);
  /* More than the file holds: known from its size, refused unread. */
  j.count = big + 1;
  before = bytes_read();
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  after = bytes_read();
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "but the data hold only"));
  if (before >= 0 && after >= 0) ck_assert_int_lt(after - before, 4 << 20); /* zlib looks at 1 MiB for a gzip header */
  /* Its size must still be a whole number of records. */
  ck_assert_int_eq(truncate(p, (off_t)(big * 3073 + 1)), 0);
  ck_assert_int_eq(ntk_data_load(&j, 8, &ds), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not a whole number of CIFAR-10 records"));
  unlink(p);
}
END_TEST

/* A stop signal while loading: every reader returns NTK_EINTERRUPTED. The
 * flag is process-wide and cannot be cleared, and ctest runs the unit tests
 * with CK_FORK=no (one process): this test is in a test case of its own,
 * added last, so no other test runs after the flag is set. (With CK_FORK=yes
 * it is set in this test's child process only.) */
START_TEST(test_stop_flag) {
  float f[4] = {1, 2, 3, 4};
  write_npy_raw("stop.npy", "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 2), }", f, sizeof f);
  write_idx("stop-ubyte.gz", 3, 2, 2, 1, 0);
  write_cifar("stop.bin", 2, 0, 0);
  char p[512];
  unsigned char rec[3073] = {3};
  gz_write("stop.bin.gz", rec, sizeof rec);
  unsigned char lab[9] = {0, 0, 8, 1, 0, 0, 0, 1, 4};
  tu_path(p, sizeof p, dir, "stop-l-ubyte");
  tu_write(p, lab, sizeof lab);
  struct ntk_dataset ds;
  ck_assert_int_eq(load("stop.npy", 8, &ds), NTK_OK); /* before the signal */
  ntk_data_free(&ds);

  setenv("NTKD_STOP_GRACE", "0", 1); /* this process lives on after its stop (test_stop_grace: the limit) */
  ntk_signals_install();
  raise(SIGTERM);
  ck_assert_int_eq(ntk_stop_requested(), SIGTERM);
  const char *names[] = {"stop.npy", "stop-ubyte.gz", "stop.bin", "stop.bin.gz"};
  for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
    ck_assert_msg(load(names[i], 8, &ds) == NTK_EINTERRUPTED, "%s: %s", names[i], ntk_error_message());
    ck_assert_msg(strstr(ntk_error_message(), "interrupted while reading") && strstr(ntk_error_message(), names[i]),
                  "%s", ntk_error_message());
  }
  int32_t *y = (int32_t *)1;
  ck_assert_int_eq(ntk_labels_load(p, 1, 1, 10, &y), NTK_EINTERRUPTED);
  ck_assert_ptr_null(y);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "stop-l-ubyte"));
}
END_TEST

/* A stop that does not end: a thread inside a call that never polls the
 * flag (OpenBLAS retrying an allocation for ever, a helper's hunt) kept
 * the process alive and deaf to the signal. NTKD_STOP_GRACE seconds after
 * the first stop signal the process says so and exits 5. In a child, as
 * the flag cannot be cleared. */
START_TEST(test_stop_grace) {
  char path[512];
  tu_path(path, sizeof path, dir, "grace.err");
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  pid_t pid = fork();
  ck_assert_int_ge(pid, 0);
  if (pid == 0) {
    if (!freopen(path, "w", stderr)) _exit(90);
    setenv("NTKD_STOP_GRACE", "1", 1);
    ntk_signals_install();
    raise(SIGTERM);
    sleep(20); /* polls nothing */
    _exit(91);
  }
  int status = 0;
  ck_assert_int_eq(waitpid(pid, &status, 0), pid);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
  ck_assert_msg(WIFEXITED(status) && WEXITSTATUS(status) == 5, "status %d", status);
  ck_assert_msg(secs > 0.9 && secs < 10, "ended after %.2f s", secs);
  char buf[512] = {0};
  FILE *f = fopen(path, "r");
  ck_assert_ptr_nonnull(f);
  size_t got = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  ck_assert_msg(got > 0 && strstr(buf, "still running 1 s after the stop signal") && strstr(buf, "rerun resumes"),
                "%s", buf);
}
END_TEST

/* test_data [readers|fashion-mnist]: the readers on files made here, or
 * the installed Fashion-MNIST (exit 77 without it); both without an argument. */
int main(int argc, char **argv) {
  const char *part = argc > 1 ? argv[1] : "all";
  int readers = !strcmp(part, "readers") || !strcmp(part, "all");
  int fashion = !strcmp(part, "fashion-mnist") || !strcmp(part, "all");
  if (!readers && !fashion) {
    fprintf(stderr, "usage: test_data [readers|fashion-mnist]\n");
    return 2;
  }
  if (fashion && access(fashion_mnist, R_OK)) {
    printf("skipped: %s is not installed (Debian's dataset-fashion-mnist; scripts/install-deps.sh)\n", fashion_mnist);
    if (!readers) return 77;
    fashion = 0;
  }
  dir = tu_tmpdir();
  Suite *s = suite_create("data");
  TCase *tc = tcase_create("readers");
  if (!readers) {
    tcase_add_test(tc, test_fashion_mnist);
    suite_add_tcase(s, tc);
    return tu_run(s);
  }
  tcase_add_test(tc, test_npy_f4_f8);
  tcase_add_test(tc, test_in_place_limits);
  tcase_add_test(tc, test_npy_u8_scale_count);
  tcase_add_test(tc, test_npy_images);
  tcase_add_test(tc, test_npy_broken);
  tcase_add_test(tc, test_npy_strict);
  tcase_add_test(tc, test_idx);
  tcase_add_test(tc, test_patterns);
  tcase_add_test(tc, test_labels);
  tcase_add_test(tc, test_label_classes);
  if (fashion) tcase_add_test(tc, test_fashion_mnist);
  tcase_add_test(tc, test_cifar);
  tcase_add_test(tc, test_refused_value_order);
  tcase_add_test(tc, test_not_regular);
  tcase_add_test(tc, test_overflowing_shapes);
  tcase_add_test(tc, test_cifar_count_stops);
  suite_add_tcase(s, tc);
  /* Last: it sets the process-wide stop flag (see test_stop_flag). */
  TCase *stop = tcase_create("stop");
  tcase_add_test(stop, test_stop_grace);
  tcase_add_test(stop, test_stop_flag);
  suite_add_tcase(s, stop);
  return tu_run(s);
}
