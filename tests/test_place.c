/* GPU placement (docs/GPU.md, "Placement"): the table of one node, from
 * what each of its ranks sees (ntk_backend_place_node, pure), for the
 * launch layouts of the issue, against a brute-force maximum matching on
 * random layouts, and the test setting NTKD_TEST_GPU_UUIDS that replaces
 * the device listing. No GPU needed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/backend.h"
#include "testutil.h"

#define MAXR 16

/* A node from a compact description: ranks separated by ';', each a
 * comma-separated list of one-character device tags in that rank's own
 * CUDA order ("" none, "!" listing failed). `coordinator`: rank 0 is the
 * coordinator of a kernel job (does not compute). */
static int node(const char *spec, int coordinator, struct ntk_gpu_view *v) {
  int n = 0;
  memset(v, 0, MAXR * sizeof *v);
  for (const char *p = spec;; n++) {
    ck_assert_int_lt(n, MAXR);
    v[n].rank = n;
    v[n].computes = !(coordinator && n == 0);
    size_t len = strcspn(p, ";");
    if (len == 1 && *p == '!') {
      v[n].n = -1;
      snprintf(v[n].why, sizeof v[n].why, "driver failed");
    }
    for (size_t k = 0; k < len && *p != '!'; k++)
      if (p[k] != ',') {
        struct ntk_gpu_info *d = &v[n].dev[v[n].n++];
        d->uuid[0] = (unsigned char)p[k];
        d->uuid[15] = 0x5a; /* the same tag is the same UUID, whatever else */
        snprintf(d->name, sizeof d->name, "GPU %c", p[k]);
      }
    p += len;
    if (!*p) return n + 1;
    p++;
  }
}

/* The tag of the device rank r was given, '-' for none. */
static char tag(const struct ntk_gpu_view *v, const int *place, int r) {
  return place[r] >= 0 ? (char)v[r].dev[place[r]].uuid[0] : '-';
}

/* Every table: a placed rank computes and holds one of its own devices, no
 * physical GPU twice, the rest CPU / NO_GPU / NONE as the rule says, and
 * the summary counts what the table holds. */
static void check_table(int pref, int n, const struct ntk_gpu_view *v, const int *place,
                        const struct ntk_place_summary *s) {
  int computing = 0, on_gpu = 0;
  for (int r = 0; r < n; r++) {
    computing += v[r].computes;
    if (!v[r].computes) {
      ck_assert_int_eq(place[r], NTK_PLACE_NONE);
      continue;
    }
    if (place[r] >= 0) {
      on_gpu++;
      ck_assert_int_lt(place[r], v[r].n);
      for (int q = 0; q < r; q++)
        if (place[q] >= 0)
          ck_assert_msg(memcmp(v[q].dev[place[q]].uuid, v[r].dev[place[r]].uuid, NTK_GPU_UUID_BYTES),
                        "ranks %d and %d both got GPU %c", q, r, tag(v, place, r));
    } else {
      ck_assert_int_eq(place[r], pref == NTK_BACKEND_CUDA ? NTK_PLACE_NO_GPU : NTK_PLACE_CPU);
    }
  }
  ck_assert_int_eq(s->computing, computing);
  ck_assert_int_eq(s->on_gpu, on_gpu);
  if (pref == NTK_BACKEND_CPU) ck_assert_int_eq(on_gpu, 0);
}

/* Place and return the tags as a string ("AB-..."), checking the table. */
static const char *run(int pref, int gpu_arch, const char *spec, int coordinator, struct ntk_place_summary *s) {
  static char out[MAXR + 1];
  struct ntk_gpu_view v[MAXR];
  int place[MAXR], again[MAXR];
  int n = node(spec, coordinator, v);
  struct ntk_place_summary sum;
  ntk_backend_place_node(pref, gpu_arch, n, v, place, &sum);
  check_table(pref, n, v, place, &sum);
  ntk_backend_place_node(pref, gpu_arch, n, v, again, NULL); /* deterministic */
  ck_assert_mem_eq(place, again, (size_t)n * sizeof *place);
  for (int r = 0; r < n; r++) out[r] = tag(v, place, r);
  out[n] = '\0';
  if (s) *s = sum;
  return out;
}

/* The index (in the rank's own list) rank r got. */
static int index_of(int pref, const char *spec, int coordinator, int r) {
  struct ntk_gpu_view v[MAXR];
  int place[MAXR];
  int n = node(spec, coordinator, v);
  ntk_backend_place_node(pref, 1, n, v, place, NULL);
  return place[r];
}

#define ALL8 "ABCDEFGH"
#define ALL8x9 ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8
#define ALL8x8 ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8 ";" ALL8

START_TEST(test_all_visible) {
  struct ntk_place_summary s;
  /* 9 ranks on an 8-GPU node, rank 0 coordinating, every GPU visible to
   * every rank (--gpus-per-node=8): 8 workers on 8 distinct GPUs, rank r
   * on index r - 1; the coordinator takes none. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, ALL8x9, 1, &s), "-ABCDEFGH");
  ck_assert_int_eq(s.computing, 8);
  ck_assert_int_eq(s.distinct, 8);
  ck_assert_int_eq(s.on_gpu, 8);
  for (int r = 1; r < 9; r++) ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, ALL8x9, 1, r), r - 1);
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, ALL8x9, 1, 0), NTK_PLACE_NONE);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, ALL8x9, 1, &s), "-ABCDEFGH");
  /* -np 8 there: 7 workers, 7 GPUs used, H idle. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, ALL8x8, 1, &s), "-ABCDEFG");
  ck_assert_int_eq(s.on_gpu, 7);
  ck_assert_int_eq(s.distinct, 8);
  /* A node without the coordinator (a second node, or training, where
   * every rank computes): 8 ranks, 8 GPUs. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, ALL8x8, 0, &s), "ABCDEFGH");
  ck_assert_int_eq(s.on_gpu, 8);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, ALL8x8, 0, NULL), "ABCDEFGH");
  /* More computing ranks than GPUs there: the rest on the CPU. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, ALL8x9, 0, &s), "ABCDEFGH-");
  ck_assert_int_eq(s.on_gpu, 8);
}
END_TEST

START_TEST(test_gpus_per_task) {
  struct ntk_place_summary s;
  /* --gpus-per-task=1: each rank sees exactly one GPU, its own, as index
   * 0. The coordinator's (A) stays idle; every worker gets its index 0. */
  const char *per_task = "A;B;C;D;E;F;G;H";
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, per_task, 1, &s), "-BCDEFGH");
  ck_assert_int_eq(s.distinct, 7); /* seen by computing ranks */
  for (int r = 1; r < 8; r++) ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, per_task, 1, r), 0);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, per_task, 0, &s), "ABCDEFGH");
  ck_assert_int_eq(s.on_gpu, 8);
  /* --gpus-per-node=1 with 2 ranks, both seeing the one GPU: one GPU rank,
   * one CPU rank (auto) or a refusal (cuda). */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "A;A", 0, &s), "A-");
  ck_assert_int_eq(s.distinct, 1);
  ck_assert_int_eq(s.on_gpu, 1);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, "A;A", 0, NULL), "A-");
  ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, "A;A", 0, 1), NTK_PLACE_NO_GPU);
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, "A;A", 0, 1), NTK_PLACE_CPU);
  /* The same with a coordinator: 3 ranks, workers 1 and 2 share GPU A. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "A;A;A", 1, NULL), "-A-");
}
END_TEST

START_TEST(test_permuted) {
  /* Different CUDA_VISIBLE_DEVICES orders: each rank takes the first
   * device of its own order that is free, by UUID, never by index. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "ABCD;BADC;CDAB;DCBA", 0, NULL), "ABCD");
  for (int r = 0; r < 4; r++) ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, "ABCD;BADC;CDAB;DCBA", 0, r), 0);
  /* Index 0 of ranks 1 and 2 is the same physical GPU: only one gets it. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AB;AB;BA", 0, NULL), "AB-");
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, "AB;AB;BA", 0, 1), 1);
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "BA;AB;AB", 0, NULL), "BA-");
  /* Two ranks whose index 0 differs but who see the same two GPUs. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "X;BA;AB", 1, NULL), "-BA");
  /* A rank listing one GPU twice (one UUID): counted once. */
  struct ntk_place_summary s;
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AA;A", 0, &s), "A-");
  ck_assert_int_eq(s.distinct, 1);
}
END_TEST

START_TEST(test_overlapping) {
  struct ntk_place_summary s;
  /* Nested sets: greedy alone gives rank 0 A and leaves rank 1 (which sees
   * only A) without one; the augmenting path moves rank 0 to B (its index
   * 1) and gives A to rank 1. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AB;A", 0, &s), "BA");
  ck_assert_int_eq(s.on_gpu, 2);
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, "AB;A", 0, 0), 1);
  /* Greedy places everybody: it is kept as is. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AB;B", 0, NULL), "AB");
  /* A chain: rank 2 needs A, rank 0 moves to B, rank 1 to C. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AB;BC;A", 0, NULL), "BCA");
  /* Nothing to gain: the earliest rank keeps the contested GPU, the later
   * one computes on the CPU, whatever ranks come after. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "A;A;AB", 0, &s), "A-B");
  ck_assert_int_eq(s.on_gpu, 2);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, "A;A;AB", 0, NULL), "A-B");
  /* The NUMA-style split (--gpu-bind=closest): halves of the node. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "ABCD;ABCD;ABCD;ABCD;ABCD;EFGH;EFGH;EFGH;EFGH", 1, NULL), "-ABCDEFGH");
}
END_TEST

START_TEST(test_cpu_cuda_failures) {
  struct ntk_place_summary s;
  /* backend = cpu: nobody takes a GPU; the GPUs are still counted. */
  ck_assert_str_eq(run(NTK_BACKEND_CPU, 1, ALL8x9, 1, &s), "---------");
  ck_assert_int_eq(s.on_gpu, 0);
  ck_assert_int_eq(s.distinct, 8);
  ck_assert_int_eq(index_of(NTK_BACKEND_CPU, ALL8x9, 1, 3), NTK_PLACE_CPU);
  /* A network the GPU backend does not compute: CPU, or NO_GPU for cuda. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 0, ALL8x9, 1, &s), "---------");
  ck_assert_int_eq(s.on_gpu, 0);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 0, ALL8x9, 1, NULL), "---------");
  /* backend = cuda with too few GPUs: 8 workers, 4 GPUs; four get one,
   * the other four are NO_GPU (the job stops, run.c says how many). */
  const char *four = "ABCD;ABCD;ABCD;ABCD;ABCD;ABCD;ABCD;ABCD;ABCD";
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, four, 1, &s), "-ABCD----");
  ck_assert_int_eq(s.distinct, 4);
  ck_assert_int_eq(s.computing, 8);
  for (int r = 5; r < 9; r++) ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, four, 1, r), NTK_PLACE_NO_GPU);
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, four, 1, 5), NTK_PLACE_CPU);
  /* A rank whose driver fails (no list) takes nothing and changes nothing
   * for the others; under cuda it is the one refused. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "AB;!;AB;AB", 1, &s), "--AB");
  ck_assert_int_eq(index_of(NTK_BACKEND_AUTO, "AB;!;AB;AB", 1, 1), NTK_PLACE_CPU);
  ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, "AB;!;AB", 1, 1), NTK_PLACE_NO_GPU);
  ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, "AB;!;AB", 1, 2), 0);
  /* No GPU anywhere (or every listing failed). */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, ";;", 1, &s), "---");
  ck_assert_int_eq(s.distinct, 0);
  ck_assert_str_eq(run(NTK_BACKEND_CUDA, 1, "!;!", 0, &s), "--");
  ck_assert_int_eq(index_of(NTK_BACKEND_CUDA, "!;!", 0, 0), NTK_PLACE_NO_GPU);
  /* A single-rank job computes itself and takes the first GPU. */
  ck_assert_str_eq(run(NTK_BACKEND_AUTO, 1, "BA", 0, NULL), "B");
  /* The per-slot form agrees with the table (every rank sees ngpus). */
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 3, 4, 1), 3);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_AUTO, 4, 4, 1), NTK_PLACE_CPU);
  ck_assert_int_eq(ntk_backend_place(NTK_BACKEND_CUDA, 4, 4, 1), NTK_PLACE_NO_GPU);
}
END_TEST

/* Brute force: the most ranks that can hold distinct devices. */
static int best(int r, int n, const struct ntk_gpu_view *v, unsigned used) {
  if (r == n) return 0;
  int b = best(r + 1, n, v, used); /* rank r without a GPU */
  if (!v[r].computes) return b;
  for (int k = 0; k < v[r].n; k++) {
    unsigned bit = 1u << (v[r].dev[k].uuid[0] - 'A');
    if (!(used & bit)) {
      int c = 1 + best(r + 1, n, v, used | bit);
      if (c > b) b = c;
    }
  }
  return b;
}

/* Random layouts: up to 7 ranks, 6 GPUs, random subsets in random orders,
 * some listings failed, with and without a coordinator. The table is
 * valid, deterministic, a maximum matching, and the plain greedy one
 * whenever greedy is already maximum. */
START_TEST(test_random_layouts) {
  unsigned long long x = 0x9e3779b97f4a7c15ull;
#define RND() (x ^= x << 13, x ^= x >> 7, x ^= x << 17, x)
  int moved = 0;
  for (int trial = 0; trial < 20000; trial++) {
    struct ntk_gpu_view v[MAXR];
    memset(v, 0, sizeof v);
    int n = 1 + (int)(RND() % 7), g = 1 + (int)(RND() % 6), coord = (int)(RND() % 2);
    for (int r = 0; r < n; r++) {
      v[r].computes = !(coord && r == 0 && n > 1);
      if (RND() % 10 == 0) {
        v[r].n = -1;
        continue;
      }
      char perm[6] = {'A', 'B', 'C', 'D', 'E', 'F'};
      for (int i = g - 1; i > 0; i--) {
        int j = (int)(RND() % (unsigned)(i + 1));
        char t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
      }
      int k = (int)(RND() % (unsigned)(g + 1));
      for (int i = 0; i < k; i++) v[r].dev[v[r].n++].uuid[0] = (unsigned char)perm[i];
    }
    int place[MAXR], again[MAXR];
    struct ntk_place_summary s;
    int pref = RND() % 2 ? NTK_BACKEND_AUTO : NTK_BACKEND_CUDA;
    ntk_backend_place_node(pref, 1, n, v, place, &s);
    check_table(pref, n, v, place, &s);
    ntk_backend_place_node(pref, 1, n, v, again, NULL);
    ck_assert_mem_eq(place, again, (size_t)n * sizeof *place);
    ck_assert_int_eq(s.on_gpu, best(0, n, v, 0));
    /* Plain greedy, written out here. */
    int greedy[MAXR], gcount = 0;
    unsigned taken = 0;
    for (int r = 0; r < n; r++) {
      greedy[r] = -1;
      for (int k = 0; v[r].computes && k < v[r].n; k++) {
        unsigned bit = 1u << (v[r].dev[k].uuid[0] - 'A');
        if (!(taken & bit)) {
          taken |= bit;
          greedy[r] = k;
          gcount++;
          break;
        }
      }
    }
    if (gcount == s.on_gpu) {
      for (int r = 0; r < n; r++)
        if (v[r].computes) ck_assert_int_eq(place[r] >= 0 ? place[r] : -1, greedy[r]);
    } else {
      moved++;
    }
  }
  ck_assert_int_gt(moved, 0); /* the augmenting step did run */
#undef RND
}
END_TEST

/* NTKD_TEST_GPU_UUIDS: per world rank, fake devices instead of CUDA's. */
START_TEST(test_override) {
  struct ntk_gpu_view v;
  setenv("NTKD_TEST_GPU_UUIDS", "A,B;B;;!;gpu-0_x,A;bad tag", 1);
  ntk_backend_gpu_list(1, &v);
  ck_assert_int_eq(v.n, 1);
  ck_assert_int_eq(v.dev[0].uuid[0], 'B');
  ck_assert_str_eq(v.dev[0].name, "test GPU B");
  ntk_backend_gpu_list(2, &v);
  ck_assert_int_eq(v.n, 0);
  ck_assert_msg(v.why[0], "no reason given");
  ntk_backend_gpu_list(3, &v);
  ck_assert_int_eq(v.n, -1);
  ck_assert_ptr_nonnull(strstr(v.why, "driver"));
  ntk_backend_gpu_list(4, &v);
  ck_assert_int_eq(v.n, 2);
  ck_assert_mem_eq(v.dev[0].uuid, "gpu-0_x\0\0\0\0\0\0\0\0\0", NTK_GPU_UUID_BYTES);
  ntk_backend_gpu_list(5, &v);
  ck_assert_int_eq(v.n, -1); /* a tag with a space */
  ntk_backend_gpu_list(9, &v); /* past the end: no device */
  ck_assert_int_eq(v.n, 0);
  /* Ranks 0, 1 and 4 as one node: distinct GPUs by tag. */
  struct ntk_gpu_view node3[3];
  int place[3];
  struct ntk_place_summary s;
  int ranks[3] = {0, 1, 4};
  for (int i = 0; i < 3; i++) {
    ntk_backend_gpu_list(ranks[i], &node3[i]);
    node3[i].computes = 1;
  }
  ntk_backend_place_node(NTK_BACKEND_AUTO, 1, 3, node3, place, &s);
  ck_assert_int_eq(place[0], 0); /* A */
  ck_assert_int_eq(place[1], 0); /* B */
  ck_assert_int_eq(place[2], 0); /* gpu-0_x */
  ck_assert_int_eq(s.distinct, 3);
  char u[32];
  ntk_gpu_uuid_short(node3[0].dev[0].uuid, u, sizeof u);
  ck_assert_str_eq(u, "GPU-41000000");
  unsetenv("NTKD_TEST_GPU_UUIDS");
}
END_TEST

int main(void) {
  Suite *s = suite_create("place");
  TCase *tc = tcase_create("place");
  tcase_set_timeout(tc, 120);
  tcase_add_test(tc, test_all_visible);
  tcase_add_test(tc, test_gpus_per_task);
  tcase_add_test(tc, test_permuted);
  tcase_add_test(tc, test_overlapping);
  tcase_add_test(tc, test_cpu_cuda_failures);
  tcase_add_test(tc, test_random_layouts);
  tcase_add_test(tc, test_override);
  suite_add_tcase(s, tc);
  return tu_run(s);
}
