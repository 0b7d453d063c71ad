/* The tile store: round trip, resume after torn or garbage tails, damage
 * that stays local (payloads, record headers, zeroed pages, header copies,
 * the job text), records of another store, impossible headers, old
 * formats, non-regular files and a full disk (file-size limit). */
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include "base/codec.h"
#include "job/config.h"
#include "base/fsutil.h"
#include "base/magic.h"
#include "store/store.h"
#include "testutil.h"

static const char *dir;
static const char job_text[] = "ntkd job = 2\nsamples = 10\nlayer 1 = Dense(W_std=1, b_std=0)\n";

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
  ck_assert_int_eq(ntk_store_append(s, &t, buf, len, ntk_checksum(buf, len), NTK_CODEC_SHUFFLE_ZSTD), NTK_OK);
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

static void make_store_info(const char *path, const struct ntk_store_info *in, const uint64_t *tiles, int n) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(path, in, job_text, &s), NTK_OK);
  for (int i = 0; i < n; i++) append(s, tiles[i]);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
}

static void make_store(const char *path, const uint64_t *tiles, int n) {
  struct ntk_store_info in = make_info();
  make_store_info(path, &in, tiles, n);
}

static off_t file_size(const char *p) {
  struct stat sb;
  ck_assert_int_eq(stat(p, &sb), 0);
  return sb.st_size;
}

static void flip(const char *p, off_t at) {
  int fd = open(p, O_RDWR);
  unsigned char b;
  ck_assert_int_eq(pread(fd, &b, 1, at), 1);
  b ^= 0x10;
  ck_assert_int_eq(pwrite(fd, &b, 1, at), 1);
  close(fd);
}

static void zero(const char *p, off_t at, size_t len) {
  char *z = calloc(1, len);
  int fd = open(p, O_RDWR);
  ck_assert_int_eq(pwrite(fd, z, len, at), (ssize_t)len);
  close(fd);
  free(z);
}

/* Record offsets of tiles 0..5, from an intact store. */
static void record_offsets(const char *p, uint64_t *off) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  for (uint64_t k = 0; k < 6; k++) off[k] = ntk_store_record_offset(s, k);
  ntk_store_close(s);
}

/* Open as `verify` does (every record scanned, every payload checked) and
 * count what survives. */
static ntk_store_t *open_checked(const char *p) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ | NTK_STORE_CHECK_PAYLOAD | NTK_STORE_FULL_SCAN, &s), NTK_OK);
  return s;
}

/* Resume, let the audit check what the index vouched for (as the
 * coordinator does, here before rather than while computing), recompute
 * what is missing, and check the store is clean after. */
static void resume_and_finish(const char *p) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  uint64_t *bad;
  size_t nbad;
  ck_assert_int_eq(ntk_store_audit(s, NULL, &bad, &nbad), NTK_OK);
  for (size_t i = 0; i < nbad; i++) ck_assert(!ntk_store_has_tile(s, bad[i]));
  free(bad);
  for (uint64_t k = 0; k < 6; k++)
    if (!ntk_store_has_tile(s, k)) append(s, k);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  s = open_checked(p);
  ck_assert_msg(!ntk_store_is_damaged(s), "store still damaged after the resume");
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  for (uint64_t k = 0; k < 6; k++) check_tile(s, k);
  ntk_store_close(s);
}

static const uint64_t all6[] = {0, 1, 2, 3, 4, 5};

START_TEST(test_roundtrip) {
  char p[512];
  tu_path(p, sizeof p, dir, "rt.ntk");
  const uint64_t tiles[] = {5, 0, 3, 1};
  make_store(p, tiles, 4);
  ntk_store_t *s = open_checked(p);
  const struct ntk_store_info *in = ntk_store_get_info(s);
  ck_assert_uint_eq(in->n, 10);
  ck_assert_uint_eq(in->tile, 4);
  ck_assert_uint_eq(in->align, 4096); /* page-aligned records: writers on two nodes never share a page */
  ck_assert_str_eq(in->description, "test store");
  ck_assert_str_eq(ntk_store_job_text(s), job_text);
  ck_assert_uint_eq(ntk_store_tiling(s)->ntiles, 6);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 4);
  ck_assert(!ntk_store_is_damaged(s));
  ck_assert(ntk_store_has_tile(s, 3) && !ntk_store_has_tile(s, 2) && !ntk_store_has_tile(s, 4));
  for (int i = 0; i < 4; i++) check_tile(s, tiles[i]);
  for (int i = 0; i < 4; i++) ck_assert_uint_eq(ntk_store_record_offset(s, tiles[i]) % 4096, 0);
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 2, &q, &len), NTK_EINCOMPLETE);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  /* Appending after a resume. */
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  append(s, 2);
  append(s, 2); /* a duplicate is ignored */
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ck_assert_uint_eq(ntk_store_get_scan(s)->duplicates, 0);
  check_tile(s, 2);
  ntk_store_close(s);
  /* Large tiles get page-aligned records. */
  struct ntk_store_info big = make_info();
  big.n = 1000;
  big.tile = 128;
  tu_path(p, sizeof p, dir, "big.ntk");
  ck_assert_int_eq(ntk_store_create(p, &big, job_text, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_get_info(s)->align, 4096);
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
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiling(s)->ntiles, 6);
  ck_assert_uint_eq(ntk_store_tiling(s)->needed, 5);
  ck_assert(!ntk_tiling_needed(ntk_store_tiling(s), 5) && ntk_tiling_needed(ntk_store_tiling(s), 4));
  append(s, 0);
  append(s, 5); /* no writer does this; readers must step over it */
  for (uint64_t k = 1; k < 5; k++) append(s, k);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  s = open_checked(p);
  const struct ntk_store_info *got = ntk_store_get_info(s);
  ck_assert_uint_eq(got->n_train, 6);
  ck_assert_int_eq(got->test_test, 0);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5); /* all needed tiles, the ones after tile 5 included */
  ck_assert(!ntk_store_has_tile(s, 5));
  ck_assert(!ntk_store_is_damaged(s));
  ck_assert_uint_eq(ntk_store_get_scan(s)->tail_bytes, 0);
  for (uint64_t k = 0; k < 5; k++) check_tile(s, k);
  ntk_store_close(s);
  /* With test x test the whole triangle is needed. */
  tu_path(p, sizeof p, dir, "split-tt.ntk");
  in.test_test = 1;
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_info(s)->test_test, 1);
  ck_assert_uint_eq(ntk_store_tiling(s)->needed, 6);
  ntk_store_close(s);
  /* A header claiming more train samples than samples is damaged. */
  tu_path(p, sizeof p, dir, "split-bad.ntk");
  in.test_test = 0;
  in.n_train = 11;
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
}
END_TEST

static void copy_file(const char *from, const char *to) {
  FILE *a = fopen(from, "rb"), *b = fopen(to, "wb");
  ck_assert(a && b);
  char buf[1 << 16];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, a)) > 0) ck_assert_uint_eq(fwrite(buf, 1, n, b), n);
  fclose(a);
  ck_assert_int_eq(fclose(b), 0);
}

START_TEST(test_torn_and_garbage_tail) {
  char p[512], ip[600], saved[600], ipsaved[700];
  tu_path(p, sizeof p, dir, "torn.ntk");
  snprintf(ip, sizeof ip, "%s.index", p);
  snprintf(saved, sizeof saved, "%s.three", p);
  snprintf(ipsaved, sizeof ipsaved, "%s.index.two", p);
  const uint64_t tiles[] = {0, 1, 2};
  /* The store as a kill during the write of its third record leaves it:
   * the index synced after two records, the third record a prefix. */
  make_store(p, tiles, 2);
  off_t two = file_size(p);
  copy_file(ip, ipsaved);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  append(s, 2);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  off_t full = file_size(p);
  copy_file(p, saved);
  /* Every cut inside the last record loses only that record, and is a
   * torn write, not damage. */
  for (off_t cut = 1; cut < full - two; cut += 13) {
    copy_file(saved, p);
    copy_file(ipsaved, ip);
    ck_assert_int_eq(truncate(p, full - cut), 0);
    s = open_checked(p);
    ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
    ck_assert(ntk_store_get_scan(s)->tail_bytes > 0);
    ck_assert(!ntk_store_is_damaged(s));
    ntk_store_close(s);
    ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
    check_tile(s, 0);
    check_tile(s, 1);
    append(s, 2);
    ck_assert_int_eq(ntk_store_close(s), NTK_OK);
    ck_assert_int_eq(file_size(p), full);
  }
  /* The same cut under an index that lists the third record as synced: a
   * finished tile lost, which the index says. */
  copy_file(saved, p);
  ck_assert_int_eq(truncate(p, full - 100), 0);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
  ck_assert(ntk_store_get_scan(s)->index_damaged && ntk_store_is_damaged(s));
  ck_assert_ptr_nonnull(strstr(ntk_store_get_scan(s)->index_problem, "sync mark says the first"));
  /* ... and the messages say the tile is lost: they said "no tile is lost" */
  char why[NTK_STORE_INDEX_DAMAGE_MAX];
  ck_assert_ptr_nonnull(strstr(ntk_store_index_damage(ntk_store_get_scan(s), p, why, sizeof why), "cut short"));
  ck_assert_ptr_null(strstr(why, "no tile is lost"));
  ntk_store_close(s);
  /* Zeros after the last record are not a write cut short: a zeroed last
   * record looks just like them. */
  make_store(p, tiles, 3);
  ck_assert_int_eq(truncate(p, full + 3000), 0);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_get_scan(s)->tail_bytes, 3000);
  ck_assert(ntk_store_is_damaged(s));
  ntk_store_close(s);
  make_store(p, tiles, 3);
  zero(p, two, (size_t)(full - two)); /* the whole last record */
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
  ck_assert(ntk_store_get_scan(s)->tail_damaged && ntk_store_is_damaged(s));
  ntk_store_close(s);
  /* Garbage after the last record is damage; a resume cuts it. */
  make_store(p, tiles, 3);
  FILE *f = fopen(p, "ab");
  for (int i = 0; i < 20; i++) fputs("garbage garbage garbage garbage garbage garbage garbage garbage", f);
  fclose(f);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_get_scan(s)->tail_bytes, 20 * 63);
  ck_assert(ntk_store_get_scan(s)->tail_damaged && ntk_store_is_damaged(s));
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 3);
  ntk_store_close(s);
  ck_assert_int_eq(file_size(p), full);
  s = open_checked(p);
  ck_assert(!ntk_store_is_damaged(s));
  ntk_store_close(s);
}
END_TEST

START_TEST(test_flipped_payload) {
  char p[512];
  tu_path(p, sizeof p, dir, "flip.ntk");
  make_store(p, all6, 6);
  uint64_t off[6];
  record_offsets(p, off);
  flip(p, (off_t)(off[0] + NTK_STORE_RECORD_HEADER + 5));
  ntk_store_t *s;
  /* Without the payload check the tile is indexed, but reading it fails. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 0, &q, &len), NTK_ECORRUPT);
  ntk_store_close(s);
  /* With it, the tile is missing (to be recomputed) and the others survive. */
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_get_scan(s)->damaged, 1);
  ck_assert_uint_eq(ntk_store_get_scan(s)->regions, 1);
  ck_assert(ntk_store_is_damaged(s) && !ntk_store_has_tile(s, 0));
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ntk_store_close(s);
  resume_and_finish(p);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_get_scan(s)->dead, 1); /* the damaged record, marked dead */
  ntk_store_close(s);
  /* A flipped byte in a record's padding is damage too. */
  make_store(p, all6, 6);
  record_offsets(p, off);
  flip(p, (off_t)(off[1] - 1));
  s = open_checked(p);
  ck_assert(ntk_store_is_damaged(s) && !ntk_store_has_tile(s, 0));
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* The 3rd record's header: damage stays local, the records after it count. */
START_TEST(test_flipped_record_header) {
  char p[512];
  tu_path(p, sizeof p, dir, "rhdr.ntk");
  for (int field = 0; field < NTK_STORE_RECORD_HEADER; field += 7) {
    make_store(p, all6, 6);
    uint64_t off[6];
    record_offsets(p, off);
    flip(p, (off_t)(off[2] + (uint64_t)field));
    ntk_store_t *s = open_checked(p);
    ck_assert_msg(ntk_store_tiles_done(s) == 5, "byte %d: %llu tiles", field,
                  (unsigned long long)ntk_store_tiles_done(s));
    ck_assert(!ntk_store_has_tile(s, 2));
    ck_assert(ntk_store_is_damaged(s));
    for (uint64_t k = 0; k < 6; k++)
      if (k != 2) check_tile(s, k);
    ntk_store_close(s);
    resume_and_finish(p);
  }
  /* The last record's header: the tail is damaged, not torn. */
  make_store(p, all6, 6);
  uint64_t off[6];
  record_offsets(p, off);
  flip(p, (off_t)(off[5] + 30));
  ntk_store_t *s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ck_assert(ntk_store_get_scan(s)->tail_damaged && ntk_store_is_damaged(s));
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* The index: read instead of a scan, the same records as a full scan;
 * lost, rebuilt by the resume's scan; another store's, ignored; one that
 * does not fit the file, ignored. Damage below its sync mark is not seen
 * by an open through it (a read of that tile fails its checksum), but by
 * the audit after a resume. */
START_TEST(test_index) {
  char p[512], ip[600], other[512];
  tu_path(p, sizeof p, dir, "idx.ntk");
  tu_path(other, sizeof other, dir, "idx-other.ntk");
  snprintf(ip, sizeof ip, "%s.index", p);
  make_store(p, all6, 6);
  ntk_store_t *s, *f;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  f = open_checked(p);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 1);
  ck_assert_int_eq(ntk_store_get_scan(f)->index_used, 0);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  for (uint64_t k = 0; k < 6; k++) {
    ck_assert_uint_eq(ntk_store_record_offset(s, k), ntk_store_record_offset(f, k));
    check_tile(s, k);
  }
  ntk_store_close(f);
  ntk_store_close(s);
  /* Lost: a full scan, and the resume writes it again. */
  ck_assert_int_eq(unlink(ip), 0);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 0);
  ck_assert_str_eq(ntk_store_get_scan(s)->index_note, "no index");
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 1);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  /* Another store's index in its place. */
  make_store(other, all6, 3);
  char oip[600], cmd[2000];
  snprintf(oip, sizeof oip, "%s.index", other);
  snprintf(cmd, sizeof cmd, "cp '%s' '%s'", oip, ip);
  ck_assert_int_eq(system(cmd), 0);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 0);
  ck_assert_str_eq(ntk_store_get_scan(s)->index_note, "the index is of another store");
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  /* The store cut short under its index: the index does not fit. */
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK); /* a good index again */
  uint64_t off[6];
  for (uint64_t k = 0; k < 6; k++) off[k] = ntk_store_record_offset(s, k);
  ntk_store_close(s);
  uint64_t last = 0;
  for (int k = 0; k < 6; k++) last = off[k] > last ? off[k] : last;
  ck_assert_int_eq(truncate(p, (off_t)last + 100), 0);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 0);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ntk_store_close(s);
  resume_and_finish(p);
  /* A flipped payload byte below the mark: not seen through the index,
   * refused when read, found by the audit. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  uint64_t at = ntk_store_record_offset(s, 4);
  ntk_store_close(s);
  flip(p, (off_t)at + 128 + 10);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 4, &q, &len), NTK_ECORRUPT);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  ck_assert(ntk_store_has_tile(s, 4));
  uint64_t *bad;
  size_t nbad;
  ck_assert_int_eq(ntk_store_audit(s, NULL, &bad, &nbad), NTK_OK);
  ck_assert_uint_eq(nbad, 1);
  ck_assert_uint_eq(bad[0], 4);
  ck_assert(!ntk_store_has_tile(s, 4));
  free(bad);
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* ---- the index's claim, checked (issue 25) --------------------------------------- */

static void put64le(unsigned char *p, uint64_t v) {
  for (int i = 0; i < 8; i++) p[i] = (unsigned char)(v >> (8 * i));
}
static uint64_t get64le(const unsigned char *p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
  return v;
}

/* PATH.index read whole: 64-byte lines, the header first. */
static unsigned char *index_lines(const char *p, size_t *lines) {
  char ip[600];
  snprintf(ip, sizeof ip, "%s.index", p);
  FILE *f = fopen(ip, "rb");
  ck_assert_ptr_nonnull(f);
  unsigned char *b = malloc(1 << 16);
  size_t n = fread(b, 1, 1 << 16, f);
  fclose(f);
  *lines = n / 64;
  return b;
}

static void index_save(const char *p, const unsigned char *b, size_t lines) {
  char ip[600];
  snprintf(ip, sizeof ip, "%s.index", p);
  tu_write(ip, b, lines * 64);
}

/* A tile entry or a sync mark, sealed as ntkd seals them. */
static void line_tile(unsigned char *e, uint64_t tile, uint64_t off, uint64_t len, uint64_t seq) {
  memset(e, 0, 64);
  e[0] = 1;
  put64le(e + 8, tile);
  put64le(e + 16, off);
  put64le(e + 24, len);
  put64le(e + 32, seq);
  put64le(e + 56, ntk_checksum(e, 56));
}
static void line_mark(unsigned char *e, uint64_t covered) {
  memset(e, 0, 64);
  e[0] = 2;
  put64le(e + 40, covered);
  put64le(e + 56, ntk_checksum(e, 56));
}

/* Open through the index (as export): the index is damage, naming `what`. */
static void expect_index_damage(const char *p, const char *what) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  const struct ntk_store_scan *sc = ntk_store_get_scan(s);
  ck_assert_msg(sc->index_damaged && ntk_store_is_damaged(s) && !sc->index_used, "not damage: %s", sc->index_note);
  ck_assert_msg(strstr(sc->index_problem, what), "%s: not in '%s'", what, sc->index_problem);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6); /* scanned whole instead */
  char why[NTK_STORE_INDEX_DAMAGE_MAX], want[NTK_STORE_INDEX_DAMAGE_MAX];
  /* Every tile is there. An index longer than the store can need is not
   * read and cannot tell a store cut short from its own garbage: the
   * message must not say that none is lost, nor that some are. */
  int outgrown = strstr(sc->index_problem, "more than this store can need") != NULL;
  ck_assert_int_eq(sc->index_past_end, outgrown ? 2 : 0);
  snprintf(want, sizeof want, "the index (%s.index) %s; run the job again: the resume rebuilds it from the records "
           "(%s)", p, sc->index_problem, outgrown ? "unless the store was cut short under it: then the tiles past "
           "its end are lost, and the resume computes them again; ntkd verify counts the tiles the store holds"
                                              : "no tile is lost");
  ck_assert_str_eq(ntk_store_index_damage(sc, p, why, sizeof why), want);
  ntk_store_close(s);
  s = open_checked(p); /* as verify and info */
  ck_assert(ntk_store_get_scan(s)->index_damaged && ntk_store_is_damaged(s));
  ntk_store_close(s);
}

/* A resume after a forged index: it scans, writes into no record (no dead
 * region), keeps every tile, and its index is usable again. */
static void resume_untouched(const char *p) {
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ck_assert_uint_eq(ntk_store_get_scan(s)->regions, 0);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_get_scan(s)->dead, 0);
  ck_assert(!ntk_store_is_damaged(s));
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_get_scan(s)->index_used, 1);
  for (uint64_t k = 0; k < 6; k++) check_tile(s, k);
  ntk_store_close(s);
}

/* Tile k's record with its values stored raw: 3 pages for a 32 x 32 tile. */
static void append_raw(ntk_store_t *s, uint64_t k) {
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), k);
  size_t raw = ntk_store_raw_bytes(s, &t);
  float *v = malloc(raw);
  for (size_t i = 0; i < raw / 4; i++) v[i] = (float)(k * 1000 + i);
  ck_assert_int_eq(ntk_store_append(s, &t, v, raw, ntk_checksum(v, raw), NTK_CODEC_RAW), NTK_OK);
  free(v);
}

/* An index whose sync mark covers the whole store with no entries, one
 * whose mark falls inside a record, a zeroed stretch in its middle (a
 * zeroed end is a torn append, not damage), an entry renamed to another
 * tile, a 4 GB sparse index: damage, named; a resume never writes into a
 * record because of it. */
START_TEST(test_index_claim) {
  char p[512];
  tu_path(p, sizeof p, dir, "claim.ntk");
  make_store(p, all6, 6);
  size_t n;
  unsigned char *good = index_lines(p, &n); /* header, the new store's mark, 6 entries, a mark */
  ck_assert_uint_eq(n, 9);
  uint64_t end = (uint64_t)file_size(p);
  unsigned char *b = malloc(64 * 16);

  memcpy(b, good, 64);
  line_mark(b + 64, end);
  index_save(p, b, 2);
  expect_index_damage(p, "no entry accounts for bytes");
  resume_untouched(p);

  index_save(p, good, n); /* the zeroed middle */
  memcpy(b, good, 64 * n);
  memset(b + 3 * 64, 0, 64);
  index_save(p, b, n);
  expect_index_damage(p, "fails its checksum and intact entries follow it");
  memcpy(b, good, 64 * n); /* a zeroed end after the last mark: a torn append */
  memset(b + 64 * n, 0, 3 * 64);
  index_save(p, b, n + 3);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(ntk_store_get_scan(s)->index_used && !ntk_store_is_damaged(s));
  ntk_store_close(s);
  resume_untouched(p);

  /* Tile 2's entry renamed to tile 4 (sealed again): the extents still
   * cover every byte, so only a reader that meets it sees it. */
  unsigned char *fresh = index_lines(p, &n);
  memcpy(b, fresh, 64 * n);
  for (size_t i = 1; i < n; i++)
    if (b[i * 64] == 1 && get64le(b + i * 64 + 8) == 2)
      line_tile(b + i * 64, 4, get64le(b + i * 64 + 16), get64le(b + i * 64 + 24), get64le(b + i * 64 + 32));
  index_save(p, b, n);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(!ntk_store_is_damaged(s) && !ntk_store_has_tile(s, 2));
  ck_assert_int_eq(ntk_store_check_entry(s, 4), NTK_OK); /* tile 4's own entry (the newer) is right */
  ck_assert_int_eq(ntk_store_check_entries(s), NTK_ECORRUPT); /* before tile 2 is called missing */
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "disagrees with the store: its entry for tile 4"));
  ck_assert(ntk_store_is_damaged(s));
  ntk_store_close(s);
  s = open_checked(p);
  ck_assert(ntk_store_get_scan(s)->index_damaged && ntk_store_tiles_done(s) == 6);
  ntk_store_close(s);
  /* The resume trusts it (it covers every byte); its audit takes the
   * record as it is, and the index is written afresh. */
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  uint64_t *bad;
  size_t nbad;
  ck_assert_int_eq(ntk_store_audit(s, NULL, &bad, &nbad), NTK_OK);
  free(bad);
  ck_assert_uint_eq(nbad, 0);
  ck_assert(ntk_store_has_tile(s, 2));
  ck_assert_uint_eq(ntk_store_get_scan(s)->index_corrected, 1);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  resume_untouched(p);
  free(fresh);

  /* 4 GB of zeros after it: refused unread. */
  char ip[600];
  snprintf(ip, sizeof ip, "%s.index", p);
  ck_assert_int_eq(truncate(ip, (off_t)4 << 30), 0);
  expect_index_damage(p, "more than this store can need");
  resume_untouched(p);
  free(good);

  /* The mark one page inside a record of three pages. */
  struct ntk_store_info in = make_info();
  in.n = 64;
  in.tile = 32; /* 3 tiles, 8 KiB raw each */
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  for (uint64_t k = 0; k < 3; k++) append_raw(s, k);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  good = index_lines(p, &n);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  uint64_t at = ntk_store_record_offset(s, 1);
  ntk_store_close(s);
  size_t k = 1;
  memcpy(b, good, 64);
  for (size_t i = 1; i < n; i++)
    if (good[i * 64] == 1 && get64le(good + i * 64 + 16) < at) memcpy(b + 64 * k++, good + i * 64, 64);
  line_mark(b + 64 * k++, at + 4096);
  index_save(p, b, k);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(ntk_store_get_scan(s)->index_damaged && ntk_store_tiles_done(s) == 3);
  ck_assert_ptr_nonnull(strstr(ntk_store_get_scan(s)->index_problem, "a record of tile 1"));
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  ck_assert_uint_eq(ntk_store_get_scan(s)->regions, 0); /* no dead header into tile 1's record */
  ntk_store_close(s);
  s = open_checked(p);
  ck_assert(!ntk_store_is_damaged(s) && ntk_store_get_scan(s)->dead == 0 && ntk_store_tiles_done(s) == 3);
  ntk_store_close(s);
  free(good);
  free(b);
}
END_TEST

/* Repaired, then interrupted: the audit marks a damaged record dead; the
 * next sync writes a fresh index without it; until then (a kill in that
 * window: the index as the resume wrote it) readers find the tile
 * missing, not the store damaged. */
START_TEST(test_repaired_interrupted) {
  char p[512], ip[600], saved[700];
  tu_path(p, sizeof p, dir, "rti.ntk");
  snprintf(ip, sizeof ip, "%s.index", p);
  snprintf(saved, sizeof saved, "%s.stale", ip);
  make_store(p, all6, 6);
  uint64_t off[6];
  record_offsets(p, off);
  flip(p, (off_t)off[3] + 128 + 10);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  uint64_t *bad;
  size_t nbad;
  ck_assert_int_eq(ntk_store_audit(s, NULL, &bad, &nbad), NTK_OK);
  ck_assert_uint_eq(nbad, 1);
  ck_assert_uint_eq(bad[0], 3);
  free(bad);
  copy_file(ip, saved); /* the index a kill now would leave: it lists tile 3 */
  ck_assert_int_eq(ntk_store_close(s), NTK_OK); /* stopped: the closing sync */
  /* The index written at the stop no longer lists it. */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(ntk_store_get_scan(s)->index_used && !ntk_store_is_damaged(s));
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ck_assert(!ntk_store_has_tile(s, 3));
  ntk_store_close(s);
  s = open_checked(p);
  ck_assert(!ntk_store_is_damaged(s) && ntk_store_tiles_done(s) == 5 && ntk_store_get_scan(s)->index_dead == 0);
  ntk_store_close(s);
  /* The stale index: tile 3 is missing, nothing is damaged. */
  copy_file(saved, ip);
  s = open_checked(p);
  ck_assert(!ntk_store_is_damaged(s) && ntk_store_tiles_done(s) == 5);
  ck_assert_uint_eq(ntk_store_get_scan(s)->index_dead, 1);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(!ntk_store_is_damaged(s));
  ck_assert_int_eq(ntk_store_check_entry(s, 3), NTK_OK);
  ck_assert(!ntk_store_has_tile(s, 3));
  ck_assert_int_eq(ntk_store_check_entries(s), NTK_OK);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 5);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK); /* read without a check first (solve) */
  void *q;
  size_t len;
  ck_assert_int_eq(ntk_store_read_payload(s, 3, &q, &len), NTK_EINCOMPLETE);
  ck_assert(!ntk_store_has_tile(s, 3));
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* Memory follows the store: a header claiming 1.7e10 tiles with no
 * records, and a 4 GB sparse index, open in 512 MB more address space
 * than the test already has. */
static void limit_memory(struct rlimit *old) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  unsigned long kb = 0;
  while (f && fgets(line, sizeof line, f))
    if (sscanf(line, "VmSize: %lu kB", &kb) == 1) break;
  if (f) fclose(f);
  ck_assert(kb > 0);
  getrlimit(RLIMIT_AS, old);
  struct rlimit r = *old;
  r.rlim_cur = (rlim_t)(kb + (512ul << 10)) << 10;
  ck_assert_int_eq(setrlimit(RLIMIT_AS, &r), 0);
}

START_TEST(test_memory_follows_store) {
  char p[512], ip[600];
  tu_path(p, sizeof p, dir, "claim-huge.ntk");
  snprintf(ip, sizeof ip, "%s.index", p);
  struct ntk_store_info in = make_info();
  in.n = (uint64_t)185363 * 16384;
  in.tile = 16384;
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  struct rlimit old;
  limit_memory(&old);
  for (int flags = 0; flags < 2; flags++) {
    ntk_status st = ntk_store_open(p, flags ? NTK_STORE_READ | NTK_STORE_FULL_SCAN : NTK_STORE_READ, &s);
    if (st) setrlimit(RLIMIT_AS, &old);
    ck_assert_int_eq(st, NTK_OK);
    ck_assert_uint_eq(ntk_store_tiling(s)->ntiles, (uint64_t)185363 * 185364 / 2);
    ck_assert_uint_eq(ntk_store_tiles_done(s), 0);
    uint64_t *t;
    size_t n;
    ck_assert_int_eq(ntk_store_stored_tiles(s, &t, &n), NTK_OK);
    ck_assert_uint_eq(n, 0);
    free(t);
    ck_assert(!ntk_store_is_damaged(s));
    ntk_store_close(s);
  }
  setrlimit(RLIMIT_AS, &old);
  make_store(p, all6, 6);
  ck_assert_int_eq(truncate(ip, (off_t)4 << 30), 0);
  limit_memory(&old);
  ntk_status st = ntk_store_open(p, NTK_STORE_READ, &s);
  setrlimit(RLIMIT_AS, &old);
  ck_assert_int_eq(st, NTK_OK);
  ck_assert(ntk_store_get_scan(s)->index_damaged);
  ck_assert_ptr_nonnull(strstr(ntk_store_get_scan(s)->index_problem, "not read"));
  ntk_store_close(s);
}
END_TEST

/* A worker's write that failed for want of room: rank 0 marks the place
 * dead, but the file does not reach its end. No sync mark may pass it
 * (the index would claim bytes the store does not have): the store
 * verifies, with a torn tail the next resume cuts. */
START_TEST(test_abandon_past_end) {
  char p[512];
  tu_path(p, sizeof p, dir, "abandon.ntk");
  ntk_store_t *s;
  struct ntk_store_info in = make_info();
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  append(s, 0);
  struct ntk_store_grant g;
  ck_assert_int_eq(ntk_store_reserve(s, 1, 100, 1, NTK_CODEC_SHUFFLE_ZSTD, &g), NTK_OK);
  ck_assert_int_eq(ntk_store_abandon(s, &g), NTK_OK); /* nothing of the record was written */
  ck_assert_int_eq(ntk_store_sync(s), NTK_OK);
  ck_assert_int_eq(ntk_store_close(s), NTK_OK);
  ck_assert((uint64_t)file_size(p) < g.offset + g.extent);
  s = open_checked(p);
  ck_assert_msg(!ntk_store_is_damaged(s), "damaged: %s", ntk_store_get_scan(s)->index_problem);
  ck_assert(ntk_store_get_scan(s)->tail_bytes > 0 && !ntk_store_get_scan(s)->tail_damaged);
  ck_assert_uint_eq(ntk_store_get_scan(s)->index_covered, g.offset);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_OK);
  ck_assert(ntk_store_get_scan(s)->index_used && !ntk_store_is_damaged(s));
  ck_assert_uint_eq(ntk_store_tiles_done(s), 1);
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* Zeroed pages over two records lose only those. */
START_TEST(test_zeroed_page) {
  char p[512];
  tu_path(p, sizeof p, dir, "zpage.ntk");
  make_store(p, all6, 6);
  uint64_t off[6];
  record_offsets(p, off);
  zero(p, (off_t)off[1], 8192); /* records 1 and 2 (4 KiB each here) */
  ntk_store_t *s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 4);
  ck_assert(ntk_store_has_tile(s, 0) && ntk_store_has_tile(s, 3) && ntk_store_has_tile(s, 5));
  ck_assert_uint_eq(ntk_store_get_scan(s)->regions, 1);
  ck_assert(ntk_store_is_damaged(s));
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

/* A record copied from another store (same job, same shape) is not ours. */
START_TEST(test_foreign_record) {
  char a[512], b[512];
  tu_path(a, sizeof a, dir, "mine.ntk");
  tu_path(b, sizeof b, dir, "other.ntk");
  const uint64_t first[] = {0, 1, 2};
  make_store(a, first, 3);
  make_store(b, all6, 6);
  uint64_t off[6];
  record_offsets(b, off);
  unsigned char rec[512];
  int fb = open(b, O_RDONLY), fa = open(a, O_RDWR);
  ck_assert_int_eq(pread(fb, rec, sizeof rec, (off_t)off[4]), (ssize_t)sizeof rec);
  off_t end = file_size(a);
  ck_assert_int_eq(pwrite(fa, rec, sizeof rec, end), (ssize_t)sizeof rec); /* foreign tile 4 appended */
  close(fb);
  close(fa);
  ntk_store_t *s = open_checked(a);
  ck_assert(!ntk_store_has_tile(s, 4));
  ck_assert_uint_eq(ntk_store_tiles_done(s), 3);
  ck_assert(ntk_store_is_damaged(s)); /* at the end: a damaged tail, not a torn write */
  ntk_store_close(s);
  resume_and_finish(a);
  /* In the middle, followed by our own records: one damaged region, the
   * records after it kept. Tile 3's record is replaced by the foreign one. */
  const uint64_t mine[] = {0, 1, 2, 3, 5};
  make_store(a, mine, 5);
  uint64_t moff[6];
  record_offsets(a, moff);
  fa = open(a, O_RDWR);
  ck_assert_int_eq(pwrite(fa, rec, sizeof rec, (off_t)moff[3]), (ssize_t)sizeof rec);
  close(fa);
  s = open_checked(a);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 4);
  ck_assert(ntk_store_has_tile(s, 5) && !ntk_store_has_tile(s, 3) && !ntk_store_has_tile(s, 4));
  ck_assert_uint_eq(ntk_store_get_scan(s)->regions, 1);
  ck_assert(!ntk_store_get_scan(s)->tail_bytes);
  ntk_store_close(s);
  resume_and_finish(a);
}
END_TEST

START_TEST(test_header_copies) {
  char p[512];
  tu_path(p, sizeof p, dir, "hcopy.ntk");
  /* One copy damaged: the other is used, every tile kept, verify would fail. */
  for (int copy = 0; copy < 2; copy++) {
    make_store(p, all6, 6);
    flip(p, copy * NTK_STORE_HEADER_SIZE + 20);
    ntk_store_t *s = open_checked(p);
    ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
    ck_assert(ntk_store_get_scan(s)->header_damaged && ntk_store_is_damaged(s));
    ntk_store_close(s);
    resume_and_finish(p);
  }
  /* Both copies damaged: not usable. */
  make_store(p, all6, 6);
  flip(p, 20);
  flip(p, NTK_STORE_HEADER_SIZE + 20);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "both copies"));
  /* One stretch of 200 bytes across the boundary of the two copies (the end
   * of copy A, the start of copy B): each copy is damaged, but not in the
   * same bytes; their intact parts make the header, every tile is kept. */
  make_store(p, all6, 6);
  zero(p, NTK_STORE_HEADER_SIZE - 96, 200);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ck_assert(ntk_store_get_scan(s)->header_damaged && ntk_store_is_damaged(s));
  ntk_store_close(s);
  resume_and_finish(p);
  /* The same the other way round: copy A's start and copy B's end. */
  make_store(p, all6, 6);
  zero(p, 0, 100);
  zero(p, 2 * NTK_STORE_HEADER_SIZE - 50, 50);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  resume_and_finish(p);
  /* Bytes flipped in both copies, in different places. */
  make_store(p, all6, 6);
  flip(p, 20);
  flip(p, 977);
  flip(p, NTK_STORE_HEADER_SIZE + 30);
  flip(p, NTK_STORE_HEADER_SIZE + 958);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  resume_and_finish(p);
  /* A whole zeroed first page. */
  make_store(p, all6, 6);
  zero(p, 0, 4096);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  resume_and_finish(p);
}
END_TEST

START_TEST(test_job_text) {
  char p[512];
  tu_path(p, sizeof p, dir, "jtext.ntk");
  make_store(p, all6, 6);
  flip(p, 2 * NTK_STORE_HEADER_SIZE + 3);
  ntk_store_t *s = open_checked(p);
  ck_assert(ntk_store_get_scan(s)->job_text_damaged && ntk_store_is_damaged(s));
  ck_assert_str_eq(ntk_store_job_text(s), "");
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  resume_and_finish(p); /* rewritten from the job's own text */
  s = open_checked(p);
  ck_assert_str_eq(ntk_store_job_text(s), job_text);
  ntk_store_close(s);
  /* A job text of any length. */
  size_t big = 3u << 20;
  char *t = malloc(big + 1);
  for (size_t i = 0; i < big; i++) t[i] = (char)('a' + i % 23);
  t[big] = '\0';
  struct ntk_store_info in = make_info();
  ck_assert_int_eq(ntk_store_create(p, &in, t, &s), NTK_OK);
  ntk_store_close(s);
  s = open_checked(p);
  ck_assert_str_eq(ntk_store_job_text(s), t);
  ntk_store_close(s);
  free(t);
}
END_TEST

/* Rewrite both header copies with field `at` set to `v` and a valid checksum. */
static void forge_header(const char *p, int at, uint64_t v, int width) {
  unsigned char h[NTK_STORE_HEADER_SIZE];
  int fd = open(p, O_RDWR);
  ck_assert_int_eq(pread(fd, h, sizeof h, 0), (ssize_t)sizeof h);
  for (int i = 0; i < width; i++) h[at + i] = (unsigned char)(v >> (8 * i));
  uint64_t sum = ntk_checksum(h, NTK_STORE_HEADER_SIZE - 8);
  for (int i = 0; i < 8; i++) h[NTK_STORE_HEADER_SIZE - 8 + i] = (unsigned char)(sum >> (8 * i));
  ck_assert_int_eq(pwrite(fd, h, sizeof h, 0), (ssize_t)sizeof h);
  ck_assert_int_eq(pwrite(fd, h, sizeof h, NTK_STORE_HEADER_SIZE), (ssize_t)sizeof h);
  close(fd);
}

START_TEST(test_impossible_headers) {
  char p[512];
  tu_path(p, sizeof p, dir, "forged.ntk");
  ntk_store_t *s;
  /* N = 2^64 - 1 (with a matching tile count it would overflow everything). */
  make_store(p, all6, 6);
  forge_header(p, 16, UINT64_MAX, 8);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "impossible"));
  make_store(p, all6, 6);
  forge_header(p, 48, 1, 8); /* a tile count that does not match N and T */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  /* N = 2^32, T = 1: nb (nb + 1) / 2 wraps in 64 bits to 2^31, under the
   * 2^34 cap; with that count written the header was taken, and an export
   * read tiles past it as "not computed" (NaN, exit 0). The count is
   * 2^63 + 2^31 now: that header is inconsistent, and one that says so is
   * more than ntkd supports. */
  make_store(p, all6, 6);
  forge_header(p, 16, (uint64_t)1 << 32, 8);
  forge_header(p, 32, 1, 4);
  forge_header(p, 48, (uint64_t)1 << 31, 8);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "tile count is inconsistent"));
  forge_header(p, 48, ((uint64_t)1 << 63) + ((uint64_t)1 << 31), 8);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "more than ntkd supports"));
  make_store(p, all6, 6);
  forge_header(p, 32, 0, 4); /* tile 0 */
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_ECORRUPT);
  /* A store of format version 1 is refused with a message, not misread. */
  make_store(p, all6, 6);
  forge_header(p, 8, 1, 4);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "version 1"));
}
END_TEST

START_TEST(test_foreign_files) {
  char p[512];
  ntk_store_t *s;
  tu_path(p, sizeof p, dir, "notastore");
  char junk[10000];
  memset(junk, 'x', sizeof junk);
  tu_write(p, junk, sizeof junk);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "not an ntkd store"));
  tu_write(p, "tiny", 4);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  tu_path(p, sizeof p, dir, "missing.ntk");
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EUSAGE);
  ck_assert_int_eq(ntk_store_open(dir, NTK_STORE_READ, &s), NTK_EINPUT);
  /* A FIFO is refused at once, not waited on. */
  tu_path(p, sizeof p, dir, "fifo.ntk");
  ck_assert_int_eq(mkfifo(p, 0600), 0);
  alarm(10);
  ck_assert_int_eq(ntk_store_open(p, NTK_STORE_READ, &s), NTK_EINPUT);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "FIFO"));
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_EINPUT);
  alarm(0);
  ck_assert_int_eq(ntk_store_open("/dev/zero", NTK_STORE_READ, &s), NTK_EINPUT);
}
END_TEST

/* The temporary file a store is written to before its rename: created
 * afresh, never through a link planted at its (predictable) name. */
START_TEST(test_tmp_not_through_links) {
  char p[512], tmp[1024], victim[512];
  tu_path(p, sizeof p, dir, "linked.ntk");
  tu_path(victim, sizeof victim, dir, "victim.txt");
  tu_write(victim, "keep me", 7);
  ck_assert(ntk_tmp_path(p, tmp, sizeof tmp));
  ck_assert_int_eq(symlink(victim, tmp), 0);
  make_store(p, all6, 6);
  ntk_store_t *s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  ck_assert_int_eq(file_size(victim), 7);
  ck_assert_int_eq(access(tmp, F_OK), -1);
}
END_TEST

/* A file put in place by rename never replaces one of ntkd's own files
 * that another job made there after the start's check: a store finished
 * at x.ntk.index while the store x.ntk was made was replaced by x.ntk's
 * index (exit 0 for that job, its tiles lost), and one finished at an
 * export's name by the export. */
START_TEST(test_commit_never_over_another_store) {
  char other[512], p[512], out[512], tmp[1024];
  tu_path(p, sizeof p, dir, "race.ntk");
  tu_path(other, sizeof other, dir, "race.ntk.index");
  make_store(other, all6, 6);
  ntk_store_t *s;
  struct ntk_store_info in = make_info();
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_EUSAGE);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "is now an ntkd store"));
  s = open_checked(other);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 6);
  ntk_store_close(s);
  /* An output (an export, predictions): over a plain file, into an empty
   * place, never over a store; a store's index only over its own kind. */
  tu_path(out, sizeof out, dir, "race.npy");
  int fd;
  const char *kinds[] = {"nothing", "plain", "store"};
  for (int k = 0; k < 3; k++) {
    unlink(out);
    if (k == 1) tu_write(out, "an old export", 13);
    if (k == 2) make_store(out, all6, 2);
    ck_assert_int_eq(ntk_tmp_create(out, tmp, sizeof tmp, &fd, NULL), NTK_OK);
    ck_assert_int_eq(write(fd, "new", 3), 3);
    close(fd);
    ntk_status st = ntk_tmp_commit(tmp, out, NTK_FILE_OTHER);
    ck_assert_msg(st == (k == 2 ? NTK_EUSAGE : NTK_OK), "%s: %d", kinds[k], st);
    if (k != 2) ck_assert_int_eq(file_size(out), 3);
    if (st) unlink(tmp);
  }
  s = open_checked(out); /* the store is still there, whole */
  ck_assert_uint_eq(ntk_store_tiles_done(s), 2);
  ntk_store_close(s);
  ck_assert_int_eq(ntk_tmp_create(out, tmp, sizeof tmp, &fd, NULL), NTK_OK);
  close(fd);
  ck_assert_int_eq(ntk_tmp_commit(tmp, out, NTK_FILE_STORE), NTK_OK); /* its own kind: replaced */
  ck_assert_int_eq(file_size(out), 0);
}
END_TEST

/* A refused job's new store: removed, with its index, while it holds
 * nothing; kept (only closed) once it holds a record, or when another file
 * took its name. */
START_TEST(test_discard_only_empty) {
  char p[512], idx[600];
  tu_path(p, sizeof p, dir, "discard.ntk");
  snprintf(idx, sizeof idx, "%s.index", p);
  struct ntk_store_info in = make_info();
  ntk_store_t *s;
  int removed = -1;
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  ck_assert_int_eq(ntk_store_discard(s, &removed), NTK_OK);
  ck_assert_int_eq(removed, 1);
  ck_assert_int_ne(access(p, F_OK), 0);
  ck_assert_int_ne(access(idx, F_OK), 0);
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  append(s, 0);
  ck_assert_int_eq(ntk_store_discard(s, &removed), NTK_OK);
  ck_assert_int_eq(removed, 0);
  s = open_checked(p);
  ck_assert_uint_eq(ntk_store_tiles_done(s), 1);
  ntk_store_close(s);
  unlink(p);
  unlink(idx);
  ck_assert_int_eq(ntk_store_create(p, &in, job_text, &s), NTK_OK);
  char moved[600];
  snprintf(moved, sizeof moved, "%s.moved", p);
  ck_assert_int_eq(rename(p, moved), 0);
  tu_write(p, "someone's file", 14);
  ck_assert_int_eq(ntk_store_discard(s, &removed), NTK_OK);
  ck_assert_int_eq(removed, 0);
  ck_assert_int_eq(file_size(p), 14);
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
  lim.rlim_cur = (rlim_t)before + 100; /* room for a record header, not a payload */
  ck_assert_int_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
  ntk_store_t *s;
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
  unsigned char buf[4096];
  size_t len = payload_for(s, 2, buf, sizeof buf);
  struct ntk_tile t = ntk_tiling_tile(ntk_store_tiling(s), 2);
  ck_assert_int_eq(ntk_store_append(s, &t, buf, len, ntk_checksum(buf, len), NTK_CODEC_SHUFFLE_ZSTD), NTK_EIO);
  ck_assert_ptr_nonnull(strstr(ntk_error_message(), "finished tiles are kept"));
  ntk_store_close(s);
  setrlimit(RLIMIT_FSIZE, &old);
  ck_assert_int_eq(file_size(p), before); /* partial record cut back */
  ck_assert_int_eq(ntk_store_resume(p, job_text, &s), NTK_OK);
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
  tcase_set_timeout(tc, 60);
  tcase_add_test(tc, test_roundtrip);
  tcase_add_test(tc, test_split);
  tcase_add_test(tc, test_index);
  tcase_add_test(tc, test_index_claim);
  tcase_add_test(tc, test_repaired_interrupted);
  tcase_add_test(tc, test_memory_follows_store);
  tcase_add_test(tc, test_abandon_past_end);
  tcase_add_test(tc, test_torn_and_garbage_tail);
  tcase_add_test(tc, test_flipped_payload);
  tcase_add_test(tc, test_flipped_record_header);
  tcase_add_test(tc, test_zeroed_page);
  tcase_add_test(tc, test_foreign_record);
  tcase_add_test(tc, test_header_copies);
  tcase_add_test(tc, test_job_text);
  tcase_add_test(tc, test_impossible_headers);
  tcase_add_test(tc, test_foreign_files);
  tcase_add_test(tc, test_tmp_not_through_links);
  tcase_add_test(tc, test_full_disk);
  tcase_add_test(tc, test_commit_never_over_another_store);
  tcase_add_test(tc, test_discard_only_empty);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
