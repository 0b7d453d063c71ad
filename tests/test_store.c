/* The tile store: round trip, resume after torn or garbage tails, damaged
 * payloads, foreign files, and a full disk (file-size limit). */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "ntkd/codec.h"
#include "ntkd/config.h"
#include "ntkd/store.h"
#include "testutil.h"

static const char *dir;

static struct ntk_store_info make_info(void) {
  struct ntk_store_info in;
  memset(&in, 0, sizeof in);
  in.n = 10;
  in.d = 3;
  in.tile = 4; /* 3 blocks, 6 tiles */
  in.elem = 4;
  in.kernels = NTK_KERNEL_NNGP | NTK_KERNEL_NTK;
  for (int i = 0; i < 16; i++) in.job_hash[i] = (uint8_t)i;
  snprintf(in.description, sizeof in.description, "test store");
  return in;
}

/* Payload of tile k: compressed floats k*1000 + i. */
static size_t payload_for(ntk_store_t *s, uint64_t k, unsigned char *out, size_t cap) {
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), k);
  size_t raw = ntk_store_raw_bytes(s, &t);
  float *v = malloc(raw);
  for (size_t i = 0; i < raw / 4; i++) v[i] = (float)(k * 1000 + i);
  ntk_codec_t *c = ntk_codec_create(1);
  size_t len;
  ck_assert_int_eq(ntk_codec_compress(c, v, raw, 4, out, cap, &len), NTK_OK);
  ntk_codec_free(c);
  free(v);
  return len;
}

static void append(ntk_store_t *s, uint64_t k) {
  unsigned char buf[4096];
  size_t len = payload_for(s, k, buf, sizeof buf);
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), k);
  ck_assert_int_eq(ntk_store_append(s, &t, buf, len, ntk_checksum(buf, len)), NTK_OK);
}

static void check_tile(ntk_store_t *s, uint64_t k) {
  void *p;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, k, &p, &len), NTK_OK);
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), k);
  size_t raw = ntk_store_raw_bytes(s, &t);
  float *v = malloc(raw);
  ntk_codec_t *c = ntk_codec_create(1);
  ck_assert_int_eq(ntk_codec_decompress(c, p, len, 4, v, raw), NTK_OK);
  for (size_t i = 0; i < raw / 4; i++) ck_assert_float_eq(v[i], (float)(k * 1000 + i));
  ntk_codec_free(c);
  free(v);
  free(p);
}

static void make_store(const char *path, const uint64_t *tiles, int n) {
  struct ntk_store_info in = make_info();
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(path, &in, &s), NTK_OK);
  for (int i = 0; i < n; i++) append(s, tiles[i]);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
}

static off_t file_size(const char *p) {
  struct stat sb;
  ck_assert_int_eq(stat(p, &sb), 0);
  return sb.st_size;
}

START_TEST(test_roundtrip) {
  char p[512];
  tu_path(p, sizeof p, dir, "rt.ntk");
  const uint64_t tiles[] = {5, 0, 3, 1};
  make_store(p, tiles, 4);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
  const struct ntk_store_info *in = ntk_store_get_info(s);
  ck_assert_uint_eq(in->n, 10);
  ck_assert_uint_eq(in->tile, 4);
  ck_assert_str_eq(in->description, "test store");
  ck_assert_uint_eq(ntk_store_tiling(s)->ntiles, 6);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 4);
  ck_assert(ntk_store_has_tile(s, 3) && !ntk_store_has_tile(s, 2) && !ntk_store_has_tile(s, 4));
  for (int i = 0; i < 4; i++) check_tile(s, tiles[i]);
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 2, &q, &len), NTK_EINCOMPLETE);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  /* Appending after reopening. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE, &s), NTK_OK);
  append(s, 2);
  append(s, 2); /* a duplicate is ignored */
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  check_tile(s, 2);
  ntk_store_close(s);
}
END_TEST

/* A kernel-regression store: n = 10, tile 4 (3 blocks), train = the first 6
 * samples, no test x test: tile (2, 2) = number 5 holds only test x test
 * entries and is not needed. */
START_TEST(test_split) {
  char p[512];
  tu_path(p, sizeof p, dir, "split.ntk");
  struct ntk_store_info in = make_info();
  in.n_train = 6;
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(p, &in, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiling(s)->ntiles, 6);
  ck_assert_uint_eq(ntk_store_tiling(s)->needed, 5);
  ck_assert(!ntk_tiling_needed(ntk_store_tiling(s), 5) && ntk_tiling_needed(ntk_store_tiling(s), 4));
  append(s, 0);
  append(s, 5); /* no writer does this; readers must step over it */
  for (uint64_t k = 1; k < 5; k++) append(s, k);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
  const struct ntk_store_info *got = ntk_store_get_info(s);
  ck_assert_uint_eq(got->n_train, 6);
  ck_assert_int_eq(got->test_test, 0);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5); /* all needed tiles, the ones after tile 5 included */
  ck_assert(!ntk_store_has_tile(s, 5));
  ck_assert_uint_eq(ntk_store_get_scan(s)->tail_bytes, 0);
  for (uint64_t k = 0; k < 5; k++) check_tile(s, k);
  ntk_store_close(s);
  /* With test x test the whole triangle is needed. */
  tu_path(p, sizeof p, dir, "split-tt.ntk");
  in.test_test = 1;
  ck_assert_int_eq(ntk_store_create(p, &in, &s), NTK_OK);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_info(s)->test_test, 1);
  ck_assert_uint_eq(ntk_store_tiling(s)->needed, 6);
  ntk_store_close(s);
  /* A header claiming more train samples than samples is damaged. */
  tu_path(p, sizeof p, dir, "split-bad.ntk");
  in.test_test = 0;
  in.n_train = 11;
  ck_assert_int_eq(ntk_store_create(p, &in, &s), NTK_OK);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
}
END_TEST

START_TEST(test_torn_and_garbage_tail) {
  char p[512];
  tu_path(p, sizeof p, dir, "torn.ntk");
  const uint64_t tiles[] = {0, 1, 2};
  make_store(p, tiles, 2);
  off_t two = file_size(p);
  make_store(p, tiles, 3);
  off_t full = file_size(p);
  /* Every cut inside the last record loses only that record. */
  for (off_t cut = 1; cut < full - two; cut += 13) {
    make_store(p, tiles, 3);
    ck_assert_int_eq(truncate(p, full - cut), 0);
    ntk_store_t *s;
    ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
    ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
    ck_assert(ntk_store_get_scan(s)->tail_bytes > 0);
    check_tile(s, 0);
    check_tile(s, 1);
    append(s, 2); /* resume */
    ck_assert_int_eq(ntk_store_close(s), NTK_OK);
    ck_assert_int_eq(file_size(p), full);
  }
  /* Garbage after the last record. */
  make_store(p, tiles, 3);
  FILE *f = fopen(p, "ab");
  fputs("garbage garbage garbage garbage garbage garbage garbage garbage garbage garbage", f);
  fclose(f);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_get_scan(s)->tail_bytes, 79);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 3);
  ntk_store_close(s);
  ck_assert_int_eq(file_size(p), full);
}
END_TEST

START_TEST(test_flipped_byte) {
  char p[512];
  tu_path(p, sizeof p, dir, "flip.ntk");
  const uint64_t tiles[] = {0, 1, 2};
  make_store(p, tiles, 3);
  /* Flip a byte in the payload of the first record. */
  int fd = open(p, O_RDWR);
  unsigned char b;
  off_t at = NTK_STORE_HEADER_SIZE + NTK_STORE_RECORD_HEADER + 5;
  ck_assert_int_eq(pread(fd, &b, 1, at), 1);
  b ^= 0x01;
  ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
  close(fd);
  ntk_store_t *s;
  /* Without the payload check the tile is indexed, but reading it fails. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 0, &q, &len), NTK_ECORRUPT);
  ntk_store_close(s);
  /* With it, the tile is missing (to be recomputed) and later ones survive. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_get_scan(s)->damaged, 1);
  ck_assert(!ntk_store_has_tile(s, 0));
  check_tile(s, 1);
  check_tile(s, 2);
  append(s, 0);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_get_scan(s)->damaged, 0); /* superseded by the recomputed copy */
  check_tile(s, 0);
  ntk_store_close(s);
}
END_TEST

START_TEST(test_foreign_files) {
  char p[512];
  ntk_store_t *s;
  tu_path(p, sizeof p, dir, "notastore");
  char junk[5000];
  memset(junk, 'x', sizeof junk);
  tu_write(p, junk, sizeof junk);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not an ntkd store"));
  tu_write(p, "tiny", 4);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "shorter than a store header"));
  /* A damaged header. */
  const uint64_t tiles[] = {0};
  tu_path(p, sizeof p, dir, "hdr.ntk");
  make_store(p, tiles, 1);
  int fd = open(p, O_RDWR);
  ck_assert_int_eq(pwrite(fd, "\x7f", 1, 20), 1);
  close(fd);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "header is damaged"));
  tu_path(p, sizeof p, dir, "missing.ntk");
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EUSAGE);
  ck_assert_int_eq(ntk_store_open(dir, NTK_STORE_READ, &s) != NTK_OK, 1);
}
END_TEST

START_TEST(test_full_disk) {
  char p[512];
  tu_path(p, sizeof p, dir, "full.ntk");
  const uint64_t tiles[] = {0, 1};
  make_store(p, tiles, 2);
  off_t before = file_size(p);
  signal(SIGXFSZ, SIG_IGN);
  struct rlimit old, lim;
  getrlimit(RLIMIT_FSIZE, &old);
  lim = old;
  lim.rlim_cur = (rlim_t)before + 100; /* room for a header, not a payload */
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE, &s), NTK_OK);
  unsigned char buf[4096];
  size_t len = payload_for(s, 2, buf, sizeof buf);
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), 2);
  ck_assert_int_eq(ntk_store_append(s, &t, buf, len, ntk_checksum(buf, len)), NTK_EIO);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "finished tiles are kept"));
  ntk_store_close(s);
  setrlimit(RLIMIT_FSIZE, &old);
  ck_assert_int_eq(file_size(p), before); /* partial record cut back */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_WRITE | NTK_STORE_CHECK_PAYLOAD, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
  append(s, 2); /* room again: resumes */
  ck_assert_uint_eq(ntk_store_tiles_done(s), 3);
  ntk_store_close(s);
}
END_TEST

int main(void) {
  dir = tu_tmpdir();
  Suite *s = suite_create("store");
  TCase *tc = tcase_create("store");
  tcase_add_test(tc, test_roundtrip);
  tcase_add_test(tc, test_split);
  tcase_add_test(tc, test_torn_and_garbage_tail);
  tcase_add_test(tc, test_flipped_byte);
  tcase_add_test(tc, test_foreign_files);
  tcase_add_test(tc, test_full_disk);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
