/* TEMPORARY (lead): until scalapack.c lands. */
#include "ntkd/solve_method.h"
ntk_status ntk_solve_scalapack(const struct ntk_solve_problem *p, struct ntk_ridge_out *o) {
  (void)p, (void)o;
  return ntk_error(NTK_EINPUT, "method = scalapack is not built yet");
}
size_t ntk_solve_scalapack_bytes(size_t ntr, size_t nte, size_t classes, int nranks) {
  (void)ntr, (void)nte, (void)classes, (void)nranks;
  return 0;
}
