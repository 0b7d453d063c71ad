/* Job identity: XXH3-128 over a canonical description and the data bytes. */
#include "ntkd/jobhash.h"

#include <stdio.h>
#include <string.h>
#include <xxhash.h>

void ntk_job_identity(const struct ntk_job *job, const struct ntk_arch *arch, const struct ntk_dataset *data,
                      struct ntk_store_info *info) {
  memset(info, 0, sizeof *info);
  info->n = data->n;
  info->d = data->d;
  info->tile = (uint32_t)job->tile;
  info->elem = (uint32_t)data->elem;
  info->kernels = (uint32_t)job->kernels;
  info->n_train = data->n_train;
  info->test_test = data->n_train && job->test.test_test;

  static char canon[1 << 20];
  ntk_arch_canonical(arch, canon, sizeof canon);
  char head[320];
  /* The split is appended only when there is one, so that the hash of a
   * job without a test set is what it always was. */
  char split[64] = "";
  if (info->n_train)
    snprintf(split, sizeof split, " n_train=%llu test_test=%d", (unsigned long long)info->n_train, info->test_test);
  int hl = snprintf(head, sizeof head, "ntkd-job-v1 n=%zu d=%zu h=%zu w=%zu c=%zu elem=%d kernels=%d%s arch=",
                    data->n, data->d, data->h, data->w, data->c, data->elem, job->kernels, split);
  XXH3_state_t *s = XXH3_createState();
  XXH3_128bits_reset(s);
  XXH3_128bits_update(s, head, (size_t)hl);
  XXH3_128bits_update(s, canon, strlen(canon));
  XXH3_128bits_update(s, data->x, data->n * data->d * (size_t)data->elem);
  XXH128_hash_t h = XXH3_128bits_digest(s);
  XXH3_freeState(s);
  XXH128_canonical_t c;
  XXH128_canonicalFromHash(&c, h);
  memcpy(info->job_hash, c.digest, 16);

  snprintf(info->description, sizeof info->description,
           "kernel=%s precision=%s n=%zu d=%zu data=%.200s%s%s%.200s arch=%.400s",
           job->kernels & NTK_KERNEL_NTK ? "nngp+ntk" : "nngp", data->elem == 4 ? "float32" : "float64",
           data->n, data->d, job->data_path[0], job->ndata > 1 ? " (+more)" : "",
           data->n_train ? " test=" : "", data->n_train ? job->test.path[0] : "", canon);
}
