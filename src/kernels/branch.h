/* Residual blocks in the engines: FanOut(n) parallel(b1, ..., bn) FanInSum
 * (or FanInConcat, FanInProd) arrives flattened as FORK b1 NEXT ... NEXT bn JOIN
 * (src/kernels/arch.c). A stack keeps, per open block, the block's input and the
 * weighted sum of the branches finished so far, for any array of n values
 * (an FC tile, a CNN pair's covariance, a per-sample variance row):
 *   FORK  save the input;
 *   NEXT  add w times the branch's result to the sum (the first: copy),
 *         restore the input;
 *   JOIN  result = sum + w times the last branch, then divided by div
 *         unless div is 0.
 * w and div come from ntk_widths_step (src/kernels/arch.h): FanInSum
 * w = 1, div = 0; FanInConcat div = the sum of the weights, w = 1 for
 * equal widths and each branch's width otherwise, as stax weights a
 * channel concatenation. w = 1 is exact, so a sum rounds as it did
 * unweighted. The additions go left to right, so every engine and the
 * variances round alike.
 * FanInProd (prod): the sum holds the product of the branches' g so far
 * and t by the product rule, as stax's FanInProd: t' = t_acc g + g_acc t,
 * g' = g_acc g, entry by entry (w = 1, div = 0). Pure; no I/O. */
#ifndef NTKD_BRANCH_H
#define NTKD_BRANCH_H

#include <stddef.h>
#include <string.h>

#define NTK_BRANCH_MAXDEPTH 16

/* branch_fork_f, branch_next_f, branch_join_f and the _d ones. */
#define EACH_PRECISION_FILE "kernels/branch_impl.h"
#include "kernels/each_precision.h"

#endif
