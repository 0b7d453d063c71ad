/* Dataset readers: .npy, MNIST-style IDX (plain or .gz) and CIFAR-10 binary
 * batches, into one row-major (N, d) matrix in the working precision. */
#ifndef NTKD_DATA_H
#define NTKD_DATA_H

#include <stddef.h>
#include <stdint.h>

#include "job/config.h"
#include "base/status.h"
#include "kernels/dataset.h"


/* Load [data] of `job` in precision `elem` (4 or 8): the first `count`
 * samples, multiplied by `scale` (default 1/255 for uint8 data, else 1);
 * only those are read. Errors (NTK_EINPUT) name the file and what is wrong:
 * not a regular file (a FIFO, device or socket is refused before it is
 * opened), truncated, wrong type, bad header (sizes that overflow), NaN/Inf
 * values. NTK_EINTERRUPTED if a stop signal (ntk_stop_requested()) arrives
 * while reading. Rank-local. */
ntk_status ntk_data_load(const struct ntk_job *job, int elem, struct ntk_dataset *ds);

/* All the samples of a kernel job: [data], followed by [test] when the
 * job has one (then ds->n_train is the number of [data] samples). The test
 * set is read with [data]'s format, layout and scale and must have the
 * same sample shape. Where the job has a [data] pattern (and [test]
 * pattern), each sample's pattern follows its features (ds->pattern; the
 * files must hold one V x V matrix per sample read). Rank-local. */
ntk_status ntk_data_load_job(const struct ntk_job *job, int elem, struct ntk_dataset *ds);

/* Where a load puts the values. place(ctx, shape, &x) is called at most
 * once, when the shape is known and the file is plain and holds that many
 * values: x then memory for shape->n * shape->d values of shape->elem
 * bytes, owned by the caller (the load leaves it alone on failure too), or
 * NULL for memory of the load's own; an error returned ends the load with
 * it. Not called for compressed files, CIFAR-10 batches, a job with a
 * [test] set or one with patterns. */
struct ntk_data_sink {
  ntk_status (*place)(void *ctx, const struct ntk_dataset *shape, void **x);
  void *ctx;
};

/* ntk_data_load_job into the sink's memory where it gives some (NULL: as
 * ntk_data_load_job). ds->x is then that memory. Rank-local. */
ntk_status ntk_data_load_to(const struct ntk_job *job, int elem, const struct ntk_data_sink *sink,
                            struct ntk_dataset *ds);

void ntk_data_free(struct ntk_dataset *ds);

/* Class labels of the first `n` samples: an IDX labels file (magic
 * 0x00000801, one dimension of uint8; plain or .gz) or a 1-D .npy of
 * uint8, int32 or int64 (by extension, as [data] format auto). The file
 * must hold at least n labels, exactly n with `exact` (when the data were
 * not cut by a count); every label must lie in 0..classes-1. Errors
 * (NTK_EINPUT) name the file; NTK_EINTERRUPTED as ntk_data_load. Rank-local;
 * the caller frees *labels. */
ntk_status ntk_labels_load(const char *path, size_t n, int exact, size_t classes, int32_t **labels);

/* What labels hold: how many, the largest (0 for none), how many distinct. */
struct ntk_label_counts {
  size_t n, max, distinct;
};

/* Count y[0..n), labels as ntk_labels_load returned them (each below its
 * `classes`, here `limit`). Memory: a bitmap of `limit` bits, never one
 * sized by the labels' values. NTK_ENOMEM. Rank-local. */
ntk_status ntk_labels_count(const int32_t *y, size_t n, size_t limit, struct ntk_label_counts *out);

/* "PATH: 10 classes (0..9), 60000 labels", or "PATH: 11 classes in
 * 0..255, 60000 labels" where some never occur. */
void ntk_labels_describe(const char *path, const struct ntk_label_counts *c, char *buf, size_t cap);

/* The classes a kernel regression solves for, from its train labels ytr
 * and test labels yte (read with ntk_labels_load against job->classes, or
 * NTK_LABELS_MAX where the job states none): job->classes when stated;
 * else 0 .. the largest label (at least 2), refused (NTK_ECONFIG, at the
 * labels key holding that label) when more than half of those classes
 * occur in neither file: a stray label (255 among 0..9) would otherwise
 * size the one-hot targets, the predictions and the MSE's divisor. `say`:
 * one line per file on stderr (ntk_labels_describe). Rank-local. */
ntk_status ntk_labels_classes(const struct ntk_job *job, const int32_t *ytr, size_t ntr, const int32_t *yte, size_t nte,
                              int say, size_t *classes);

/* [data] format = auto: the format a path's name says (.npy/.npy.gz npy,
 * .bin/.bin.gz CIFAR-10, anything else IDX). */
ntk_data_format ntk_data_guess_format(const char *path);

#endif
