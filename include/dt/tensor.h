/* Tensor parallelism (Shoeybi et al. 2019, Megatron-LM): which part of a layer a rank holds.
 *
 * A dense layer followed (through elementwise activations and dropout) by another dense is cut
 * into a column-parallel then a row-parallel layer over the T ranks of a tensor group: shard k
 * of the first holds output columns [k U/T, (k+1) U/T) of its weight and bias, the activations
 * between run on those columns only, and shard k of the second holds the same input rows of
 * its weight (and the whole bias, added by shard 0) and computes a partial sum of the full
 * output, which an allreduce completes. Every other layer runs whole on every rank of the group.
 * Attention is cut by heads the same way: the q|k|v projection is column-parallel on each of
 * its three parts (DT_SHARD_QKV: rank k holds heads [k H/T, (k+1) H/T) of q, k and v), the
 * attention core runs on those heads (a column shard of its output) and the output
 * projection is row-parallel.
 * The shard fields of struct dt_layer_view (plan.h) say which part a rank's view holds; these
 * functions give the sizes and the packing that dtsim's buffer table and dtexec's network
 * share. */
#ifndef DT_TENSOR_H
#define DT_TENSOR_H

#include "dt/plan.h"

enum dt_shard_kind {
    DT_SHARD_NONE,     /* the whole layer */
    DT_SHARD_COLUMNS,  /* output columns (last dimension) [index x n/count, +n/count) */
    DT_SHARD_ROWS,     /* a dense layer's input rows of its weight: a partial sum of the output */
    DT_SHARD_QKV       /* a q|k|v projection's output columns: the COLUMNS shard of each third */
};

/* Whether a shard of this kind holds a part of the layer's output (COLUMNS, QKV). */
bool dt_shard_splits_output(int kind);

/* Parameters of layer l held by a rank of view v (packed: the shard's weight rows, then its
 * bias). */
long dt_shard_params(const struct dt_model *m, const struct dt_layer_view *v, int l);
/* Floats per sample of layer l's output on such a rank (0 for a flatten view). */
long dt_shard_act_floats(const struct dt_model *m, const struct dt_layer_view *v, int l);
/* What layer l keeps for backward per sample on such a rank (dt_layer_keep of its shard). */
void dt_shard_keep(const struct dt_model *m, const struct dt_layer_view *v, int l,
                   long *keep_floats, long *keep_ints);
/* Copies layer l's shard from the model's flat parameter vector (full, at the layer's
 * param_offset) into the rank's packed buffer (at v[l].param_offset), or back (to_full). */
void dt_shard_copy(const struct dt_model *m, const struct dt_layer_view *v, int l,
                   float *packed, float *full, bool to_full);

#endif
