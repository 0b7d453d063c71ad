/* The MLP's forward and backward passes with cblas_sgemm, softmax
 * cross-entropy, initialisation. Pure functions on
 * plain arrays: no MPI, no I/O, so the unit tests check them directly. */
#include <cblas.h>
#include <math.h>
#include <string.h>

#include "backend/mlp.h"
#include "base/rng.h"

void ntk_mlp_init(struct ntk_mlp *m, const size_t *sizes, size_t nsizes) {
  memset(m, 0, sizeof *m);
  m->nsizes = nsizes;
  size_t off = 0;
  for (size_t l = 0; l < nsizes; l++) m->sizes[l] = sizes[l];
  for (size_t l = 0; l + 1 < nsizes; l++) {
    m->w_off[l] = off;
    off += sizes[l] * sizes[l + 1];
    m->b_off[l] = off;
    off += sizes[l + 1];
  }
  m->nparams = off;
}


/* Uniform in (0, 1]: never 0, so log() in Box-Muller is finite. */
static double uniform(uint64_t *s) { return ((double)(ntk_splitmix64(s) >> 11) + 1.0) * 0x1.0p-53; }

void ntk_mlp_init_params(const struct ntk_mlp *m, uint64_t seed, float *params) {
  uint64_t s = seed ^ 0x6D6C7020696E6974ull; /* "mlp init": apart from the shuffles' streams */
  memset(params, 0, m->nparams * sizeof *params);
  for (size_t l = 0; l + 1 < m->nsizes; l++) {
    double std = 1.0 / sqrt((double)m->sizes[l]);
    float *w = params + m->w_off[l];
    size_t n = m->sizes[l] * m->sizes[l + 1];
    for (size_t i = 0; i < n; i += 2) {
      double r = sqrt(-2.0 * log(uniform(&s))), a = 2.0 * M_PI * uniform(&s);
      w[i] = (float)(std * r * cos(a));
      if (i + 1 < n) w[i + 1] = (float)(std * r * sin(a));
    }
  }
}


static size_t max_width(const struct ntk_mlp *m) {
  size_t w = 0;
  for (size_t l = 1; l < m->nsizes; l++) w = m->sizes[l] > w ? m->sizes[l] : w;
  return w;
}

size_t ntk_mlp_work_floats(const struct ntk_mlp *m, size_t batch) {
  size_t acts = 0;
  for (size_t l = 1; l < m->nsizes; l++) acts += batch * m->sizes[l];
  return acts + 2 * batch * max_width(m);
}

double ntk_softmax_xent(const float *logits, const int32_t *y, size_t b, size_t k, float *dlogits,
                        size_t *correct) {
  double loss = 0;
  for (size_t i = 0; i < b; i++) {
    const float *z = logits + i * k;
    size_t arg = 0;
    for (size_t c = 1; c < k; c++)
      if (z[c] > z[arg]) arg = c;
    if (arg == (size_t)y[i]) ++*correct;
    /* Shift by the max so exp() cannot overflow; sum in double. */
    double mx = z[arg], sum = 0;
    for (size_t c = 0; c < k; c++) sum += exp((double)z[c] - mx);
    loss += log(sum) + mx - (double)z[y[i]];
    if (dlogits) {
      float *d = dlogits + i * k;
      for (size_t c = 0; c < k; c++) d[c] = (float)(exp((double)z[c] - mx) / sum);
      d[y[i]] -= 1.0f;
    }
  }
  return loss;
}

/* Activations after each layer into work (layer l at offsets in order);
 * returns the logits. ReLU after every layer but the last. */
static float *forward(const struct ntk_mlp *m, const float *params, const float *x, size_t b, float *work) {
  const float *in = x;
  float *out = work;
  for (size_t l = 0; l + 1 < m->nsizes; l++) {
    size_t ni = m->sizes[l], no = m->sizes[l + 1];
    out = l ? out + b * ni : work;
    const float *bias = params + m->b_off[l];
    for (size_t i = 0; i < b; i++) memcpy(out + i * no, bias, no * sizeof *out);
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)b, (int)no, (int)ni, 1.0f, in, (int)ni,
                params + m->w_off[l], (int)no, 1.0f, out, (int)no);
    if (l + 2 < m->nsizes)
      for (size_t i = 0; i < b * no; i++) out[i] = out[i] > 0.0f ? out[i] : 0.0f;
    in = out;
  }
  return out;
}

double ntk_mlp_eval(const struct ntk_mlp *m, const float *params, const float *x, const int32_t *y, size_t b,
                    float *work, size_t *correct) {
  if (!b) return 0;
  float *logits = forward(m, params, x, b, work);
  return ntk_softmax_xent(logits, y, b, m->sizes[m->nsizes - 1], NULL, correct);
}

double ntk_mlp_grad(const struct ntk_mlp *m, const float *params, const float *x, const int32_t *y, size_t b,
                    float *work, float *grad, size_t *correct) {
  if (!b) {
    memset(grad, 0, m->nparams * sizeof *grad);
    return 0;
  }
  size_t L = m->nsizes - 1, acts = 0;
  for (size_t l = 1; l <= L; l++) acts += b * m->sizes[l];
  float *logits = forward(m, params, x, b, work);
  float *delta = work + acts, *next = delta + b * max_width(m);
  double loss = ntk_softmax_xent(logits, y, b, m->sizes[L], delta, correct);
  /* Walk back: the input of layer l is the activation before it. */
  float *act_end = logits;
  for (size_t l = L; l-- > 0;) {
    size_t ni = m->sizes[l], no = m->sizes[l + 1];
    const float *in = l ? act_end - b * ni : x;
    /* dW = in^T delta, db = column sums of delta. */
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, (int)ni, (int)no, (int)b, 1.0f, in, (int)ni, delta,
                (int)no, 0.0f, grad + m->w_off[l], (int)no);
    float *gb = grad + m->b_off[l];
    memset(gb, 0, no * sizeof *gb);
    for (size_t i = 0; i < b; i++)
      for (size_t j = 0; j < no; j++) gb[j] += delta[i * no + j];
    if (!l) break;
    /* delta of the layer below: (delta W^T) masked by ReLU' (post-ReLU > 0). */
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)b, (int)ni, (int)no, 1.0f, delta, (int)no,
                params + m->w_off[l], (int)no, 0.0f, next, (int)ni);
    for (size_t i = 0; i < b * ni; i++)
      if (!(in[i] > 0.0f)) next[i] = 0.0f;
    float *t = delta;
    delta = next;
    next = t;
    act_end = (float *)in;
  }
  return loss;
}
