/* The store commands: info, export and verify (inspect.h). Read-only. */
#include "inspect.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/clock.h"
#include "base/codec.h"
#include "comm/comm.h"
#include "job/config.h"
#include "base/fsutil.h"
#include "job/store_ranks.h"
#include "job/jobfiles.h"
#include "store/lock.h"
#include "base/npy.h"
#include "base/signals.h"
#include "store/store.h"

/* A line on stderr every 10 s of a long read (verify and export of a store
 * of gigabytes said nothing for a minute): `done` of `total` `what`. */
struct ticker {
  double start, next;
};

static void tick(struct ticker *t, const char *cmd, uint64_t done, uint64_t total, const char *what) {
  double now = ntk_now();
  if (!t->start) t->start = t->next = now;
  if (now < t->next + 10) return;
  t->next = now;
  fprintf(stderr, "ntkd: %s: %llu of %llu %s (%.0f%%), %.0f s\n", cmd, (unsigned long long)done,
          (unsigned long long)total, what, total ? 100.0 * (double)done / (double)total : 100.0, now - t->start);
}

static int fail(ntk_status st) {
  fprintf(stderr, "ntkd: error: %s\n", ntk_error_message());
  return ntk_status_exit_code(st);
}

/* NTK_EINTERRUPTED once a stop signal came: an export's file is then not
 * written (its temporary file is removed). */
static ntk_status export_stopped(const char *out) {
  int sig = ntk_stop_requested();
  return sig ? ntk_error(NTK_EINTERRUPTED, "stopped by signal %d: %s is not written", sig, out) : NTK_OK;
}

static const char *kernel_names(uint32_t k) {
  return k == (NTK_KERNEL_NNGP | NTK_KERNEL_NTK) ? "nngp, ntk" : k == NTK_KERNEL_NTK ? "ntk" : "nngp";
}

/* Damage the scan found, for info and verify: every damaged region (the
 * first NTK_STORE_DAMAGED_LIST), header copy, job text, tail. */
static void print_damage(const char *path, const struct ntk_store_scan *sc) {
  for (uint64_t k = 0; k < sc->regions && k < NTK_STORE_DAMAGED_LIST; k++) {
    const struct ntk_store_region *r = &sc->region_list[k];
    printf("damaged: bytes %llu..%llu (%llu bytes): %s", (unsigned long long)r->offset,
           (unsigned long long)(r->offset + r->bytes - 1), (unsigned long long)r->bytes, r->why);
    if (r->tile != UINT64_MAX) printf(", a record of tile %llu", (unsigned long long)r->tile);
    printf("\n");
  }
  if (sc->regions > NTK_STORE_DAMAGED_LIST)
    printf("damaged: ... and %llu more regions\n", (unsigned long long)(sc->regions - NTK_STORE_DAMAGED_LIST));
  if (sc->header_damaged)
    printf("damaged: %s\n", sc->header_damaged == 2
                                 ? "both header copies, in different bytes (the header was rebuilt from them)"
                                 : "one of the two header copies (the other is intact)");
  if (sc->job_text_damaged) printf("damaged: the job description kept in the store\n");
  char why[NTK_STORE_INDEX_DAMAGE_MAX];
  if (sc->index_damaged) printf("damaged: %s\n", ntk_store_index_damage(sc, path, why, sizeof why));
  if (sc->tail_bytes && sc->tail_damaged)
    printf("damaged: the last %llu bytes are not a write cut short (a damaged or foreign record, or garbage)\n",
           (unsigned long long)sc->tail_bytes);
  else if (sc->tail_bytes)
    printf("%s: %llu bytes after the last intact record (a write cut short; the next run cuts it)\n", path,
           (unsigned long long)sc->tail_bytes);
}

/* Pairs (i >= j) of the tiles a store needs: per block row I, its
 * diagonal tile (if needed) and min(I, nbc) full-width tiles to its left.
 * O(number of block rows), not of tiles. */
static uint64_t needed_pairs(const struct ntk_tiling *t) {
  uint64_t sum = 0;
  for (uint64_t I = 0; I < t->nb; I++) {
    uint64_t rows = t->n - I * t->tile < t->tile ? t->n - I * t->tile : t->tile;
    uint64_t left = I < t->nbc ? I : t->nbc;
    sum += rows * t->tile * left + (I < t->nbc ? rows * (rows + 1) / 2 : 0);
  }
  return sum;
}

/* What the next run does about a store without a usable index. It said
 * "rebuilds it by a scan" also where a FIFO or folder stands at the
 * index's name, which the run refuses (a hunt). */
static const char *index_cure(const struct ntk_store_scan *sc) {
  return sc->index_blocked ? "remove it: the next run refuses the job while it is there, then rebuilds the index by a "
                             "scan"
                           : "the next run rebuilds it by a scan";
}

/* The index, in one line for info and verify: what a resume will do with it. */
static void print_index(const char *label, const char *path, const struct ntk_store_scan *sc) {
  char why[NTK_STORE_INDEX_DAMAGE_MAX];
  if (sc->index_damaged)
    printf("%s%s\n", label, ntk_store_index_damage(sc, path, why, sizeof why));
  else if (sc->index_note[0])
    printf("%sno usable index (%s): %s\n", label, sc->index_note, index_cure(sc));
  else if (sc->index_dead)
    printf("%s%llu entries below its sync mark at byte %llu, %llu of them over regions a resume marked dead since "
           "(those tiles are missing; the next run rewrites the index)\n", label,
           (unsigned long long)sc->index_entries, (unsigned long long)sc->index_covered,
           (unsigned long long)sc->index_dead);
  else
    printf("%s%llu entries below its sync mark at byte %llu, as the store has them\n", label,
           (unsigned long long)sc->index_entries, (unsigned long long)sc->index_covered);
}

int ntk_cmd_info(const char *path, int records) {
  ntk_store_t *s;
  /* Every record header read (not the payloads): the dead and damaged
   * regions below the index's sync mark are counted too, and the index is
   * checked against them. */
  ntk_status st = ntk_store_open(path, NTK_STORE_READ | NTK_STORE_FULL_SCAN, &s);
  if (st) return fail(st);
  const struct ntk_store_info *in = ntk_store_get_info(s);
  const struct ntk_tiling *t = ntk_store_tiling(s);
  const struct ntk_store_scan *sc = ntk_store_get_scan(s);
  uint64_t *have = NULL;
  size_t nhave = 0;
  if ((st = ntk_store_stored_tiles(s, &have, &nhave))) {
    ntk_store_close(s);
    return fail(st);
  }
  uint64_t done = nhave, raw = 0, pairs = 0;
  for (size_t k = 0; k < nhave; k++) {
    struct ntk_tile tl = ntk_tiling_tile(t, have[k]);
    raw += ntk_store_raw_bytes(s, &tl);
    pairs += ntk_tile_pairs(&tl);
  }
  printf("store:       %s\n", path);
  printf("job:         %s\n", in->description);
  printf("shape:       %llu x %llu (input features %llu)\n", (unsigned long long)in->n,
         (unsigned long long)in->n, (unsigned long long)in->d);
  printf("kernels:     %s\n", kernel_names(in->kernels));
  printf("precision:   %s\n", in->elem == 4 ? "float32" : "float64");
  uint64_t want_pairs = needed_pairs(t);
  if (in->n_train)
    printf("split:       %llu train + %llu test samples (train x train, test x train%s)\n",
           (unsigned long long)in->n_train, (unsigned long long)(in->n - in->n_train),
           in->test_test ? ", test x test" : "; no test x test");
  printf("tile:        %u (%llu tiles in the lower triangle", in->tile, (unsigned long long)t->ntiles);
  if (t->needed != t->ntiles) printf(", %llu of them needed", (unsigned long long)t->needed);
  printf(")\n");
  printf("progress:    %llu/%llu tiles (%.1f%%), %llu of %llu pairs%s\n", (unsigned long long)done,
         (unsigned long long)t->needed, t->needed ? 100.0 * (double)done / (double)t->needed : 0.0,
         (unsigned long long)pairs, (unsigned long long)want_pairs, done == t->needed ? ", complete" : "");
  printf("compression: %llu bytes stored for %llu raw (ratio %.3f)\n", (unsigned long long)sc->payload_bytes,
         (unsigned long long)raw, sc->payload_bytes ? (double)raw / (double)sc->payload_bytes : 0.0);
  if (sc->tail_bytes)
    printf("tail:        %llu bytes after the last intact record (%s; the next run cuts it)\n",
           (unsigned long long)sc->tail_bytes, sc->tail_damaged ? "damaged" : "a write cut short");
  if (sc->dead) printf("dead:        %llu regions, %llu bytes (damage found and repaired by an earlier run)\n",
                       (unsigned long long)sc->dead, (unsigned long long)sc->dead_bytes);
  print_index("index:       ", path, sc);
  if (ntk_store_is_damaged(s)) printf("damage:      found (ntkd verify lists it; a rerun of the job repairs it)\n");
  printf("hash:        ");
  for (int i = 0; i < 16; i++) printf("%02x", in->job_hash[i]);
  printf("\n");
  char holder[600];
  if (ntk_lock_holder(path, holder, sizeof holder)) printf("writer:      a job is running on it (%s)\n", holder);
  if (records) {
    printf("records:     tile offset (first record at the start of the tile records; alignment %u)\n", in->align);
    for (size_t k = 0; k < nhave; k++)
      printf("record:      %llu %llu\n", (unsigned long long)have[k],
             (unsigned long long)ntk_store_record_offset(s, have[k]));
    print_damage(path, sc);
  }
  free(have);
  ntk_store_close(s);
  return 0;
}

/* One bound of a --rows/--cols range: decimal digits only (empty: absent).
 * 1 and *v set when it is a number below 2^62, else 0. */
static int parse_bound(const char *s, size_t len, int *given, uint64_t *v) {
  *given = len > 0;
  uint64_t x = 0;
  for (size_t i = 0; i < len; i++) {
    if (s[i] < '0' || s[i] > '9' || x > ((uint64_t)1 << 58)) return 0;
    x = x * 10 + (uint64_t)(s[i] - '0');
  }
  *v = x;
  return 1;
}

/* `--rows`/`--cols SPEC` as a Python slice of 0..n with step 1: "A:B",
 * ":B", "A:" or ":"; NULL is the whole range. 0 after printing the usage
 * error (which names the option and the matrix size) if SPEC is not one,
 * is empty, or goes beyond n. */
static int parse_range(const char *opt, const char *spec, uint64_t n, uint64_t *a, uint64_t *b) {
  *a = 0;
  *b = n;
  if (!spec) return 1;
  const char *colon = strchr(spec, ':');
  int ga = 0, gb = 0;
  uint64_t va = 0, vb = n;
  const char *why = NULL;
  if (!colon || strchr(colon + 1, ':') || !parse_bound(spec, (size_t)(colon - spec), &ga, &va) ||
      !parse_bound(colon + 1, strlen(colon + 1), &gb, &vb))
    why = "is not a range";
  if (!why) {
    *a = ga ? va : 0;
    *b = gb ? vb : n;
    if (*b > n || *a >= n) why = "goes beyond the matrix";
    else if (*b <= *a) why = "is empty";
  }
  if (!why) return 1;
  fprintf(stderr, "ntkd: error: %s %s %s: the matrix is %llu x %llu; write A:B, :B or A: "
          "with 0 <= A < B <= %llu (B excluded, as in Python)\n", opt, spec, why, (unsigned long long)n,
          (unsigned long long)n, (unsigned long long)n);
  return 0;
}

/* The error for a store that is damaged: what the scan or the index check
 * found (the index named when it is all there is). */
static ntk_status damaged_error(ntk_store_t *s, const char *path) {
  const struct ntk_store_scan *sc = ntk_store_get_scan(s);
  char why[NTK_STORE_INDEX_DAMAGE_MAX];
  if (sc->index_damaged && !(sc->regions || sc->damaged || sc->tail_damaged || sc->header_damaged ||
                             sc->job_text_damaged))
    return ntk_error(NTK_ECORRUPT, "%s: %s", path, ntk_store_index_damage(sc, path, why, sizeof why));
  return ntk_error(NTK_ECORRUPT, "%s is damaged (ntkd verify lists where); run the job again to repair it "
                   "and recompute what was lost", path);
}

/* The tiles of the block [bi0, bi1] x [bj0, bj1] (of tile rows and
 * columns) that the store needs and lacks: how many, and the first. An
 * upper-triangle tile whose mirror is in the block too counts once. */
static void block_missing(ntk_store_t *s, uint64_t bi0, uint64_t bi1, uint64_t bj0, uint64_t bj1, uint64_t *missing,
                          uint64_t *first) {
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  *missing = 0;
  for (uint64_t I = bi0; I <= bi1; I++)
    for (uint64_t J = bj0; J <= bj1; J++) {
      if (J > I && J <= bi1 && I >= bj0) continue;
      uint64_t idx = J <= I ? ntk_tiling_index(I, J) : ntk_tiling_index(J, I);
      if (ntk_tiling_needed(tg, idx) && !ntk_store_has_tile(s, idx) && !(*missing)++) *first = idx;
    }
}

/* Refuse a damaged store (whatever the block), and a block that needs a
 * tile the store does not hold yet: the first such tile is named. Tiles a
 * regression store never computes (test x test) are not needed: NaN. The
 * records the block needs are checked against the index first (a record a
 * resume has since marked dead is missing; one the index misnames is
 * damage), and before a tile is called missing, all of the index (a tile
 * it hides is damage, not an unfinished store). */
static ntk_status export_check(ntk_store_t *s, const char *path, uint64_t bi0, uint64_t bi1, uint64_t bj0,
                               uint64_t bj1) {
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  /* Damage first: a store missing tiles because of damage is damaged,
   * not merely unfinished. */
  if (ntk_store_is_damaged(s)) return damaged_error(s, path);
  int all = (bi0 == 0 && bj0 == 0 && bi1 + 1 == tg->nb && bj1 + 1 == tg->nb);
  ntk_status st = NTK_OK;
  uint64_t missing = 0, first = 0;
  if (all) {
    /* The whole matrix: every entry, and the first tile missing found in
     * as many steps as there are tiles present. */
    if ((st = ntk_store_check_entries(s))) return st;
    missing = tg->needed - ntk_store_tiles_done(s);
    for (uint64_t i = 0; missing && i < tg->ntiles; i++)
      if (ntk_tiling_needed(tg, i) && !ntk_store_has_tile(s, i)) {
        first = i;
        break;
      }
  } else {
    for (uint64_t I = bi0; I <= bi1 && !st; I++)
      for (uint64_t J = bj0; J <= bj1 && !st; J++) {
        uint64_t idx = J <= I ? ntk_tiling_index(I, J) : ntk_tiling_index(J, I);
        if (ntk_tiling_needed(tg, idx)) st = ntk_store_check_entry(s, idx);
      }
    if (st) return st;
    block_missing(s, bi0, bi1, bj0, bj1, &missing, &first);
    if (missing) {
      if ((st = ntk_store_check_entries(s))) return st;
      block_missing(s, bi0, bi1, bj0, bj1, &missing, &first);
    }
  }
  if (!missing) return NTK_OK;
  struct ntk_tile t = ntk_tiling_tile(tg, first);
  if (all)
    return ntk_error(NTK_EINCOMPLETE, "%s is not complete (%llu of %llu tiles), the first missing tile %llu (rows "
                     "%llu:%llu, cols %llu:%llu); run the job to finish it", path,
                     (unsigned long long)ntk_store_tiles_done(s), (unsigned long long)tg->needed,
                     (unsigned long long)first, (unsigned long long)t.r0, (unsigned long long)(t.r0 + t.rows),
                     (unsigned long long)t.c0, (unsigned long long)(t.c0 + t.cols));
  return ntk_error(NTK_EINCOMPLETE, "%s is not complete (%llu of %llu tiles) and the block needs %llu tiles it "
                   "lacks, the first tile %llu (rows %llu:%llu, cols %llu:%llu); run the job to finish it", path,
                   (unsigned long long)ntk_store_tiles_done(s), (unsigned long long)tg->needed,
                   (unsigned long long)missing, (unsigned long long)first, (unsigned long long)t.r0,
                   (unsigned long long)(t.r0 + t.rows), (unsigned long long)t.c0, (unsigned long long)(t.c0 + t.cols));
}

/* The block [ra, rb) x [ca, cb) of the symmetric matrix, streamed one
 * tile-row at a time: memory is one tile-row of the block plus one tile.
 * The upper triangle is the transpose of the stored lower one. */
int ntk_cmd_export(const char *path, const char *out, const char *kernel, const char *rows_spec,
                   const char *cols_spec, int raw_format) {
  const char *what = raw_format ? "OUT" : "OUT.npy";
  struct ntk_named_path src = {"the store", path, 0}, dst = {what, out, 0};
  ntk_status st = *out ? ntk_check_output_files(&src, 1, &dst, 1) : ntk_error(NTK_EUSAGE, "%s is an empty name", what);
  if (st) return fail(st);
  ntk_store_t *s;
  st = ntk_store_open(path, NTK_STORE_READ, &s);
  if (st) return fail(st);
  const struct ntk_store_info *in = ntk_store_get_info(s);
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  int which = in->kernels & NTK_KERNEL_NTK ? NTK_KERNEL_NTK : NTK_KERNEL_NNGP;
  if (kernel) {
    which = !strcmp(kernel, "nngp") ? NTK_KERNEL_NNGP : !strcmp(kernel, "ntk") ? NTK_KERNEL_NTK : 0;
    if (!which) {
      ntk_store_close(s);
      fprintf(stderr, "ntkd: error: --kernel must be nngp or ntk, not '%s'\n", kernel);
      return NTK_EXIT_USAGE;
    }
    if (!(in->kernels & (uint32_t)which)) {
      ntk_store_close(s);
      fprintf(stderr, "ntkd: error: %s holds no %s kernel (it has: %s)\n", path, kernel, kernel_names(in->kernels));
      return NTK_EXIT_USAGE;
    }
  }
  uint64_t ra, rb, ca, cb;
  if (!parse_range("--rows", rows_spec, in->n, &ra, &rb) || !parse_range("--cols", cols_spec, in->n, &ca, &cb)) {
    ntk_store_close(s);
    return NTK_EXIT_USAGE;
  }
  size_t n = (size_t)in->n, T = in->tile, es = in->elem;
  size_t edge = T < n ? T : n, bh = (size_t)(rb - ra), bw = (size_t)(cb - ca);
  uint64_t bi0 = ra / T, bi1 = (rb - 1) / T, bj0 = ca / T, bj1 = (cb - 1) / T;
  if ((st = export_check(s, path, bi0, bi1, bj0, bj1))) {
    ntk_store_close(s);
    return fail(st);
  }
  char tmp[NTK_PATH_MAX + 400];
  int fd;
  if ((st = ntk_tmp_create(out, tmp, sizeof tmp, &fd, raw_format ? NULL : "\x93NUMPY"))) {
    ntk_store_close(s);
    return fail(st);
  }
  FILE *f = fdopen(fd, "wb");
  /* One tile-row of the block: at most a tile's rows, and no more rows
   * than the block has. */
  char *rowbuf = malloc((bh < edge ? bh : edge) * bw * es);
  char *tb = malloc(edge * edge * es);
  char *raw = malloc(edge * edge * es * 2);
  ntk_codec_t *codec = ntk_codec_create(1);
  if (!f) {
    st = ntk_error(NTK_EIO, "%s: cannot open: %s", tmp, strerror(errno));
    close(fd);
    unlink(tmp);
  } else if (!rowbuf || !tb || !raw || !codec) {
    st = ntk_error(NTK_ENOMEM, "out of memory");
  }
  if (!st && !raw_format) {
    char hdr[256];
    size_t hl = ntk_npy_header(hdr, sizeof hdr, (int)es, bh, bw);
    if (fwrite(hdr, 1, hl, f) != hl) st = ntk_error(NTK_EIO, "%s: write failed: %s", tmp, strerror(errno));
  }
  struct ticker ticker = {0, 0};
  for (uint64_t I = bi0; I <= bi1 && !st; I++) {
    tick(&ticker, "export", I - bi0, bi1 - bi0 + 1, "tile-rows written");
    /* Tile-row I holds rows [r0, r0 + rows); the block takes [i0, i1) of them. */
    size_t r0 = I * T, rows = n - r0 < T ? n - r0 : T;
    size_t i0 = r0 > ra ? r0 : (size_t)ra, i1 = r0 + rows < rb ? r0 + rows : (size_t)rb, h = i1 - i0;
    for (uint64_t J = bj0; J <= bj1 && !st; J++) {
      /* A stop signal, checked before each tile: the partial file is
       * removed (exit 5), never renamed. */
      if ((st = export_stopped(out))) break;
      size_t c0 = J * T, cols = n - c0 < T ? n - c0 : T;
      size_t j0 = c0 > ca ? c0 : (size_t)ca, j1 = c0 + cols < cb ? c0 + cols : (size_t)cb, w = j1 - j0;
      char *dst0 = rowbuf + (j0 - ca) * es; /* row i of this tile's part: dst0 + i * bw * es */
      if (!ntk_tiling_needed(tg, J <= I ? ntk_tiling_index(I, J) : ntk_tiling_index(J, I))) {
        /* test x test of a regression job that did not ask for it */
        for (size_t i = 0; i < h; i++)
          for (size_t j = 0; j < w; j++) {
            char *e = dst0 + (i * bw + j) * es;
            if (es == 4) *(float *)(void *)e = NAN;
            else *(double *)(void *)e = NAN;
          }
      } else if (J <= I) {
        if ((st = ntk_store_read_kernel(s, codec, ntk_tiling_index(I, J), which, raw, tb))) break;
        for (size_t i = 0; i < h; i++)
          memcpy(dst0 + i * bw * es, tb + ((i0 - r0 + i) * cols + (j0 - c0)) * es, w * es);
      } else { /* upper triangle: the transpose of tile (J, I), which is cols x rows */
        if ((st = ntk_store_read_kernel(s, codec, ntk_tiling_index(J, I), which, raw, tb))) break;
        for (size_t i = 0; i < h; i++)
          for (size_t j = 0; j < w; j++)
            memcpy(dst0 + (i * bw + j) * es, tb + ((j0 - c0 + j) * rows + (i0 - r0 + i)) * es, es);
      }
    }
    if (!st && fwrite(rowbuf, es, h * bw, f) != h * bw)
      st = ntk_error(NTK_EIO, "%s: write failed: %s", tmp, strerror(errno));
  }
  if (!st) st = export_stopped(out); /* during the last tile: not renamed either */
  if (f && fflush(f)) st = st ? st : ntk_error(NTK_EIO, "%s: write failed: %s", tmp, strerror(errno));
  if (f && !st && fsync(fileno(f))) st = ntk_error(NTK_EIO, "%s: fsync failed: %s", tmp, strerror(errno));
  if (f && fclose(f) && !st) st = ntk_error(NTK_EIO, "%s: close failed: %s", tmp, strerror(errno));
  if (!st) st = ntk_tmp_commit(tmp, out, NTK_FILE_OTHER);
  if (st && f) unlink(tmp);
  else if (!st && (st = ntk_fsync_folder_of(out))) /* the new name survives a crash too */
    st = ntk_error(st, "%s: written, but %s", out, ntk_error_message());
  free(rowbuf);
  free(tb);
  free(raw);
  ntk_codec_free(codec);
  ntk_store_close(s);
  if (st) return fail(st);
  fprintf(stderr, "ntkd: wrote %s: %zu x %zu %s %s", out, bh, bw, es == 4 ? "float32" : "float64",
          which == NTK_KERNEL_NTK ? "NTK" : "NNGP");
  if (bh != n || bw != n)
    fprintf(stderr, " (rows %llu:%llu, cols %llu:%llu)", (unsigned long long)ra, (unsigned long long)rb,
            (unsigned long long)ca, (unsigned long long)cb);
  if (raw_format) fprintf(stderr, ", raw little-endian <f%zu, row-major, no header", es);
  fprintf(stderr, "\n");
  return 0;
}

/* The full header scan on every rank (cheap: one record header each),
 * then every size-th tile's record checked (checksum, padding) and decoded
 * by each rank: the reads of the payloads, which are the cost, are shared.
 * A frame that passes its checksum but does not decode to the tile's size
 * is damage too. Rank 0 adds the counts and reports. */
int ntk_cmd_verify(const ntk_comm_t *world, const char *path) {
  int rank = ntk_comm_rank(world), size = ntk_comm_size(world);
  ntk_store_t *s = NULL;
  ntk_store_ranks_test_open_late(rank);
  ntk_status st = ntk_store_open(path, NTK_STORE_READ | NTK_STORE_FULL_SCAN, &s);
  if (ntk_comm_agree(world, st)) {
    if (st && rank == 0) return fail(st);
    ntk_store_close(s);
    return ntk_status_exit_code(st ? st : NTK_ECOMM);
  }
  /* Each rank takes every size-th tile of its own list: the lists must be
   * one list (a store replaced between the opens, or a job adding tiles,
   * left tiles that no rank checked, and a damaged one unseen). */
  if (size > 1 && (st = ntk_store_same_on_ranks(world, path, s, 1, "nothing was verified"))) {
    ntk_store_close(s);
    return ntk_status_exit_code(st);
  }
  const struct ntk_tiling *tg = ntk_store_tiling(s);
  const struct ntk_store_scan *sc = ntk_store_get_scan(s);
  ntk_codec_t *codec = ntk_codec_create(1);
  double count[3] = {0, 0, 0}; /* damaged, intact, unfinished: this rank's share, then everyone's */
  if (rank == 0) print_damage(path, sc);
  uint64_t *have = NULL;
  size_t nhave = 0, most = 1;
  st = ntk_store_stored_tiles(s, &have, &nhave);
  /* One tile's values at a time, the largest this rank checks: memory
   * follows what is stored, not the tile edge a header claims. */
  for (size_t k = (size_t)rank; !st && k < nhave; k += (size_t)size) {
    struct ntk_tile t = ntk_tiling_tile(tg, have[k]);
    size_t b = ntk_store_raw_bytes(s, &t);
    most = b > most ? b : most;
  }
  char *raw = malloc(most);
  struct ticker ticker = {0, 0};
  for (size_t k = (size_t)rank; !st && k < nhave && codec && raw; k += (size_t)size) {
    if (rank == 0) tick(&ticker, "verify", k, nhave, "tiles checked"); /* (the ranks advance together) */
    uint64_t i = have[k];
    struct ntk_tile t = ntk_tiling_tile(tg, i);
    int intact = 0;
    st = ntk_store_check_record(s, i, &intact);
    if (st) break;
    const char *why = "payload checksum mismatch or damaged record";
    if (intact) {
      st = ntk_store_read_tile(s, codec, i, raw);
      if (st == NTK_EIO || st == NTK_ENOMEM) break;
      intact = !st;
      why = ntk_error_message();
      st = NTK_OK;
    }
    /* Past the index's sync mark a record may still be being written (a
     * running job, several writers): unfinished, not damage, as the scan
     * treats it. */
    if (!intact && sc->settled && ntk_store_record_offset(s, i) >= sc->settled) {
      count[2]++;
      continue;
    }
    if (!intact)
      printf("damaged: tile %llu (rows %llu.., cols %llu..): %s\n", (unsigned long long)i, (unsigned long long)t.r0,
             (unsigned long long)t.c0, why);
    count[intact]++;
  }
  if (!st && (!codec || !raw)) st = ntk_error(NTK_ENOMEM, "out of memory");
  free(have);
  free(raw);
  ntk_codec_free(codec);
  fflush(stdout);
  if (!(st = ntk_comm_agree_report(world, st))) st = ntk_comm_agree_report(world, ntk_comm_sum_doubles(world, count, 3));
  uint64_t bad = (uint64_t)count[0], ok = (uint64_t)count[1], unfinished = (uint64_t)count[2];
  /* Present: an intact record (a tile whose record failed the check is
   * not). The index was checked against the scan when the store was
   * opened (print_damage says what is wrong with it). */
  uint64_t done = ntk_store_tiles_done(s) - bad - unfinished, ntiles = tg->needed, lost = sc->damaged;
  int damaged = ntk_store_is_damaged(s) || bad;
  int sc_index_only = sc->index_damaged && !bad && !sc->regions && !sc->damaged && !sc->tail_damaged &&
                      !sc->header_damaged && !sc->job_text_damaged;
  char holder[600];
  int running = ntk_lock_holder(path, holder, sizeof holder);
  if (rank == 0 && !sc->index_damaged && sc->index_note[0])
    printf("%s: no usable index (%s): %s\n", path, sc->index_note, index_cure(sc));
  ntk_store_close(s);
  if (st) return ntk_status_exit_code(st);
  if (rank != 0) return damaged ? NTK_EXIT_CORRUPT : 0;
  printf("%s: %llu tiles intact, %llu damaged, %llu of %llu tiles present%s\n", path, (unsigned long long)ok,
         (unsigned long long)(bad + lost), (unsigned long long)done, (unsigned long long)ntiles,
         done == ntiles ? " (complete)" : running ? " (a job is writing it now)" : " (incomplete: run the job to finish it)");
  if (size > 1) printf("%s: checked by %d ranks\n", path, size);
  if (running) printf("%s: being written by a running job (%s)\n", path, holder);
  if (damaged && sc_index_only) {
    printf("%s: FAILED: the index disagrees with the store (above); run the job again to rebuild it\n", path);
    return NTK_EXIT_CORRUPT;
  }
  if (damaged) {
    printf("%s: FAILED: the store is damaged (above); run the job again to repair it and recompute what was lost\n", path);
    return NTK_EXIT_CORRUPT;
  }
  return 0;
}
