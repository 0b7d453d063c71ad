/* TEMPORARY (lead): until cg.c lands. */
#include "ntkd/solve_method.h"
ntk_status ntk_solve_cg(const struct ntk_solve_problem *p, struct ntk_ridge_out *o) {
  (void)p, (void)o;
  return ntk_error(NTK_EINPUT, "method = cg is not built yet");
}
