/* The fully-connected layers on one kernel entry (src/kernels/fc_entry.h),
 * written once for both precisions: fc_entry.h includes this file through
 * each_precision.h (REAL, MAP, RSQRT; ntk_fc_entry becomes ntk_fc_entry_f
 * and ntk_fc_entry_d). */

#define ntk_fc_entry SFX(ntk_fc_entry)

static NTK_HD inline void ntk_fc_entry(const struct ntk_fc_entry_layer *L, size_t nl, const REAL *var, size_t n,
                                       size_t i, size_t j, int self, REAL *g, REAL *t) {
  REAL gv = *g, tv = 0, stack[4 * NTK_FC_ENTRY_MAXDEPTH];
  int depth = 0;
  for (size_t l = 0; l < nl; l++) {
    const struct ntk_fc_entry_layer *y = &L[l];
    const REAL *vl = var + l * n;
    REAL td, *s;
    switch ((ntk_layer_kind)y->kind) {
    case NTK_LAYER_DENSE:
      if (y->standard) {
        tv = ((REAL)y->fan * gv + (REAL)y->one) + (REAL)y->w2 * tv;
        gv = (REAL)y->w2 * gv + (REAL)y->b2;
      } else {
        gv = (REAL)y->w2 * gv + (REAL)y->b2;
        tv = gv + (REAL)y->w2 * tv;
      }
      break;
    case NTK_LAYER_MAP:
    case NTK_LAYER_LAYERNORM:
      gv = MAP(&y->map, gv, vl[i], vl[j], RSQRT(vl[i]), RSQRT(vl[j]), &td);
      tv *= td;
      break;
    case NTK_LAYER_IDENTITY:
    case NTK_LAYER_FLATTEN: break;
    case NTK_LAYER_DROPOUT: /* a sample with itself (its NNGP: the variance, below) */
      if (self) tv *= (REAL)y->drop;
      break;
    case NTK_LAYER_FORK:
      s = stack + 4 * depth++;
      s[0] = gv;
      s[1] = tv;
      break;
    case NTK_LAYER_NEXT:
      s = stack + 4 * (depth - 1);
      if (y->prod && !y->first) { /* FanInProd: the product rule (branch.h) */
        s[3] = s[3] * gv + s[2] * tv;
        s[2] *= gv;
      } else {
        s[2] = y->first ? (REAL)y->fanw * gv : s[2] + (REAL)y->fanw * gv;
        s[3] = y->first ? (REAL)y->fanw * tv : s[3] + (REAL)y->fanw * tv;
      }
      gv = s[0];
      tv = s[1];
      break;
    case NTK_LAYER_JOIN:
      s = stack + 4 * --depth;
      if (y->branches < 2) break;
      if (y->prod) {
        tv = s[3] * gv + s[2] * tv;
        gv = s[2] * gv;
        break;
      }
      gv = s[2] + (REAL)y->fanw * gv;
      tv = s[3] + (REAL)y->fanw * tv;
      if (y->fandiv != 0) {
        gv /= (REAL)y->fandiv;
        tv /= (REAL)y->fandiv;
      }
      break;
    case NTK_LAYER_CONV: /* ntk_fc_entry_layers refuses them */
    case NTK_LAYER_AVGPOOL:
    case NTK_LAYER_GLOBALAVGPOOL:
    case NTK_LAYER_ATTENTION:
    case NTK_LAYER_RESIZE:
    case NTK_LAYER_AGGREGATE:
    case NTK_LAYER_KINDS: gv = (REAL)NAN; break;
    }
    if (self) gv = var[(l + 1) * n + i];
  }
  *g = gv;
  *t = tv;
}

#undef ntk_fc_entry
