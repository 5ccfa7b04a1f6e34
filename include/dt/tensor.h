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
 * The vocabulary is split too (Megatron-LM's VocabParallelEmbedding and vocab-parallel
 * cross-entropy) where the model ends in a softmax loss on a dense LM head tied to the
 * embedding of its token input: rank k holds token rows [k Vs, (k+1) Vs) of the table,
 * Vs = ceil(V / T) (the last shard padded with zero rows that no token looks up and whose
 * logits the loss leaves out; Megatron pads V to a multiple of 128 T instead), looks up the
 * tokens it holds (zeros for the others; shard 0 adds the position rows, held whole by every
 * rank) and an allreduce sums the lookups; the head computes the logits of its rows and the
 * loss allreduces per token the maximum logit, the target's logit (from its owner) and the
 * sum of exponentials (dtc_tensor_loss), so that no rank holds all V logits.
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
    DT_SHARD_QKV,      /* a q|k|v projection's output columns: the COLUMNS shard of each third */
    DT_SHARD_VOCAB,    /* the LM head's and the loss softmax's vocabulary columns [index x Vs,
                          +Vs), Vs = dt_shard_vocab_rows (the last shards padded) */
    DT_SHARD_VOCAB_TABLE, /* an embedding's token rows [index x Vs, +Vs) (its other tables
                          whole): its output is a partial sum */
    DT_SHARD_SEQ,      /* sequence parallelism: a per-token layer (layernorm, residual add,
                          dropout, activation) on chunk index of count of each micro-batch's
                          tokens; its buffers hold only that chunk */
    DT_SHARD_SEQ_GATHER /* the same, read by a column-parallel layer: it computes its chunk
                          into the whole buffer, which an allgather then fills */
};

/* Vocabulary rows (or logit columns) per rank when V is split over T ranks: ceil(V / T). */
long dt_shard_vocab_rows(long vocab, int count);
/* Of those, the real ones of shard index (the rest is padding): V - index x Vs, within
 * [0, Vs]. */
long dt_shard_vocab_valid(long vocab, int count, int index);
/* Floats of the token table a tied layer l reads on a rank of view v: its vocabulary shard's
 * rows (padding included) under DT_SHARD_VOCAB, the whole table otherwise (what a pipeline's
 * last stage holds as its copy of the first stage's table). */
long dt_shard_tied_floats(const struct dt_model *m, const struct dt_layer_view *v, int l);
/* Floats per sample of the vocabulary-parallel loss's statistics on a rank of view v (0 when
 * the last layer is not a DT_SHARD_VOCAB shard): three planes of (rows x groups) floats,
 * the per-token maximum logit, target logit and sum of exponentials (plane j at j x rows x
 * groups of the last layer's KEEP buffer, after anything else it keeps). */
long dt_shard_loss_stats(const struct dt_model *m, const struct dt_layer_view *v);

/* Sequence parallelism (Korthikanti et al. 2022, --sequence-parallel on; seqpar.c). Between
 * a partial sum (a row-parallel output, a vocabulary-parallel lookup) and the next column-
 * parallel input, the per-token layers run on 1/t of the tokens: the g allreduce of the
 * partial sum becomes a reduce-scatter, the f identity before the column-parallel layer an
 * allgather, and in backward their duals (allgather, reduce-scatter). The chunk is the
 * dt_chunk of a micro-batch's rows x tokens x width elements (t divides the tokens): the
 * layout is (rows, tokens, width), so a chunk is a run of whole tokens; per-token layers do not
 * care which. The layers' parameters (layernorm gains and biases) are whole on every rank and
 * their gradients partial sums, allreduced over the tensor group (dtc_tensor_grads). */
/* Whether a shard kind runs on a chunk of the tokens (SEQ, SEQ_GATHER). */
bool dt_shard_chunked(int kind);
/* Whether layer l is a partial sum whose readers run on chunks: its g is a reduce-scatter. */
bool dt_shard_scatters(const struct dt_model *m, const struct dt_layer_view *v, int l);
/* The dtype of the floats layer l keeps on a rank of view v (NULL: whole model) when the
 * precision stores in storage (dt_precision_storage): the vocabulary-parallel loss's
 * statistics stay float32, as frameworks keep softmax statistics; the rest is storage. */
enum dt_dtype dt_shard_keep_dtype(const struct dt_model *m, const struct dt_layer_view *v, int l,
                                  enum dt_dtype storage);

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
/* The packed layout of view v's shards: every layer's shard in model order (a tensor rank's
 * parameters as --tp lays them out; the model's own layout without --tp). Its floats, and
 * the copy of every layer between it and the model's layout; v's param_offsets are not read
 * (ZeRO-3 points them at its staging buffer). */
long dt_shard_packed_floats(const struct dt_model *m, const struct dt_layer_view *v);
void dt_shard_copy_packed(const struct dt_model *m, const struct dt_layer_view *v,
                          float *packed, float *full, bool to_full);

#endif
