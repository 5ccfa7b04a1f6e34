/* The emitters every strategy's compile function is built from (libdt only). */
#ifndef DT_COMPILE_H
#define DT_COMPILE_H

#include "dt/plan.h"
#include "dt/tensor.h"

/* Appends an op to rank's step program (DT_ENOMEM when out of memory). */
int dtc_push(struct dt_plan *plan, int rank, struct dt_op op);
/* Appends an op to rank's eval program. */
int dtc_push_eval(struct dt_plan *plan, int rank, struct dt_op op);
/* Appends an op to rank's eval program when eval, else to its step program. */
int dtc_push_to(struct dt_plan *plan, int rank, struct dt_op op, bool eval);

struct dt_op dtc_coll(enum dt_coll_kind kind, enum dt_coll_alg alg, int group, int root,
                      enum dt_buf buf, long offset, long count);
struct dt_op dtc_zero(enum dt_buf buf, long offset, long count);
struct dt_op dtc_update(long offset, long count, long opt_offset);

/* LOAD of micro-batch mb: rows [row0, row0 + rows) of the step batch into slot. */
struct dt_op dtc_load(const struct dt_plan *plan, int rank, int mb, int slot, int row0, int rows);
/* Forward or backward of layer l for micro-batch mb in slot. */
struct dt_op dtc_compute(enum dt_phase ph, int l, int mb, int slot, int row0, int rows);
/* LOSS of micro-batch mb: its gradient averaged over `scale` samples. */
struct dt_op dtc_loss(const struct dt_plan *plan, int mb, int slot, int rows, double scale);

/* Labels per sample of the model's loss (1 for a class, T per token, H*W per pixel, the
 * output size for a sigmoid). */
long dtc_labels_per_sample(const struct dt_model *m);

/* The optimizer step of rank r over parameters [offset, offset + count), its optimizer state
 * and master weights at opt_offset (updates false: a rank that updates none). fp32: UPDATE.
 * Mixed precision: UNSCALE and its flag's MAX over all ranks, UPDATE of the master weights,
 * their cast COPY into the parameters, RESCALE; a rank that updates nothing still takes part
 * in the flag's reduction and keeps its loss scale in step (precision.c). */
int dtc_optimizer_step(struct dt_plan *plan, int r, bool updates, long offset, long count,
                       long opt_offset);
/* The pieces of that step for plans that update several regions (ZeRO), each nothing in
 * fp32: UNSCALE of GRADS [offset, + count) and the flag's MAX over all ranks (one rank's
 * overflow skips every rank's step); an UPDATE op (dtc_update, its grads region set or not)
 * and then the cast COPY of the MASTER weights it updated into its PARAMS region (the UPDATE
 * alone in fp32); the RESCALE of the loss scale. */
int dtc_overflow_check(struct dt_plan *plan, int r, long offset, long count);
int dtc_update_cast(struct dt_plan *plan, int r, struct dt_op update);
int dtc_rescale(struct dt_plan *plan, int r);
/* Mixed precision: the rank's master weights and loss-scaler buffers (none in fp32). */
int dtc_precision_buffers(struct dt_plan *plan, int r);

/* Fills rank's buffer table from its view, slots, the parameters it updates and the receive
 * buffers its ops need; sets eval_rows. Call after its programs are complete. */
int dtc_finish_rank(struct dt_plan *plan, int rank);

/* A probe or floor of a pipeline with --tp (probe_tensor.c): T when only tensor rank 0 of
 * each stage and replica needs building (T > 1, and every tensor group in one node group),
 * else 0 (dt_plan.probe_tensor). */
int dtc_probe_tensor_width(const struct dt_plan *plan);
/* Whether the ranks such a plan built stand for their dropped tensor peers: each collective
 * on a tensor group receives as much at every member's index (else the plan is built with
 * every tensor rank). */
bool dtc_probe_tensor_alike(const struct dt_plan *plan);
/* Whether two collectives receive alike at each index of the same group (probe_tensor.c):
 * the probes' checks skip a collective like the last one checked. */
bool dtc_same_scratch(const struct dt_op *a, const struct dt_op *b);
/* A probe of a pipeline (probe_replica.c): whether its first replica alone may stand for the
 * last (D > 1, the same rows in both, each pair of ranks in one node group). */
bool dtc_probe_replica_ok(const struct dt_plan *plan);
/* Whether the ranks such a plan built stand for their dropped last-replica peers: each
 * collective on a group holding both receives as much at either's index (else the plan is
 * built with the last replica). */
bool dtc_probe_replica_alike(const struct dt_plan *plan);

/* --recompute (recompute.c): rank r's step program with each segment's recomputation before
 * its backward (dtc_finish_rank calls it first). */
int dtc_recompute_program(struct dt_plan *plan, int r);
/* The regions op writes in rank r's memory (at most 2; their number), and whether one of
 * them overlaps region `read` (plan_check.c; rows held in ws_rows rows overlap every row
 * while rank r's ws_rows is 0). Backward and loss ops are not counted. */
int dtc_written(const struct dt_plan *plan, int r, const struct dt_op *op, struct dt_region *w);
bool dtc_any_overlap(const struct dt_plan *plan, int r, const struct dt_region *w, int n,
                     const struct dt_region *read);
/* Where region g's elements lie in rank r's memory (plan_check.c): its buffer kind as the
 * region names it (region_buf), the buffer and, for ACT and DACT, the layer's own storage or
 * the shared one (layer -1: the recomputation workspace, as KEEP, or the gradient pool), and
 * elements [lo, hi) there; empty: no elements. Two regions of rank r overlap when their spans
 * do (dtc_spans_overlap): a span computed once serves every comparison. */
struct dtc_span {
    int region_buf, buf, layer;
    long lo, hi;
    bool empty;
};
struct dtc_span dtc_span_of(const struct dt_plan *plan, int r, const struct dt_region *g);
bool dtc_spans_overlap(const struct dtc_span *a, const struct dtc_span *b);
/* Transformer blocks (recompute.c; the segments of --recompute full): block[l] is layer l's
 * block, -1 outside every block (embedding, final norm, head); returns how many blocks (0: a
 * model without attention), -1 when out of memory. */
int dtc_blocks(const struct dt_model *m, int *block);

/* The algorithm of the options' gradient exchange among replicas: the registry's for the
 * data-parallel strategies, --grad-alg for the pipelines. */
enum dt_coll_alg dtc_grad_alg(const struct dt_plan_options *o);

/* The data-parallel strategies and the pipelines (pipeline.c). */
int dtc_compile_data_parallel(struct dt_plan *plan, struct dt_error *err);
int dtc_compile_pipeline(struct dt_plan *plan, struct dt_error *err);
bool dtc_pipeline_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                       char *why, size_t whylen);

/* ZeRO stages 1-3 over ring, mpi-allreduce or ps-sharded (zero.c): whether the options fit,
 * and the compile function dtc_compile_data_parallel hands a plan with --zero to. */
bool dtc_zero_fits(const struct dt_plan_options *o, char *why, size_t whylen);
int dtc_compile_zero(struct dt_plan *plan, struct dt_error *err);

/* The first layer with parameters (n_layers when none has): backward stops there. */
int dtc_first_trainable(const struct dt_model *m);

/* Tensor parallelism (tensor.c): the placement of T-rank tensor groups, Megatron's order
 * (tensor ranks innermost: rank r is shard r % T of data-parallel replica r / T). */
struct dtc_tensor {
    int T;              /* ranks per tensor group */
    enum dt_coll_alg alg; /* of the f/g allreduces */
    int *dp_group;      /* per rank: the group of its data-parallel peers (-1: one replica) */
    int *tp_group;      /* per rank: its tensor group */
};
bool dtc_tensor_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                     char *why, size_t whylen);
/* The shard kind of every layer for T ranks, the pipelines' (the same for every tensor rank
 * and every stage; the first and last stage hold 1/T of the token table, as Megatron-LM's do)
 * and the data-parallel families' alike: dense pairs, the vocabulary-parallel head, with seq
 * the sequence-parallel layers; returns the number of pairs and heads, -1 when out of memory. */
int dtc_tensor_cut(const struct dt_model *m, int T, bool seq, enum dt_shard_kind *kind);
/* Cuts the model into shards (pairs and the vocabulary-parallel head), one view per tensor
 * rank, the groups, and each rank's view, parameters and replica index. */
int dtc_tensor_init(struct dt_plan *plan, int T, enum dt_coll_alg alg, struct dtc_tensor *t);
void dtc_tensor_free(struct dtc_tensor *t);
/* Emits what follows layer l's forward or backward on rank r (slot, rows: its micro-batch's):
 * the allreduce g of a row-parallel layer's output after its forward, the allreduce f of a
 * column-parallel layer's input gradient after its backward; nothing otherwise, or when t is
 * NULL. eval: into the eval program. */
int dtc_tensor_after(struct dt_plan *plan, int r, const struct dtc_tensor *t, enum dt_phase ph,
                     int l, int slot, int rows, bool eval);
/* Pushes the loss op `loss` of rank r; where the last layer is a vocabulary shard, as its three
 * parts with the tensor group's allreduces of the per-token statistics between them
 * (dt_shard_loss_stats: the maximum after DT_LOSS_MAX, the target logit and the sum of
 * exponentials after DT_LOSS_SUMS). eval: into the eval program. */
int dtc_tensor_loss(struct dt_plan *plan, int r, const struct dtc_tensor *t, struct dt_op loss,
                    bool eval);

/* After the backward of layer l on rank r: the tensor group's allreduce of its gradients
 * where they are partial sums (a sequence-parallel layer's parameters); call it where the
 * gradients are complete for the step (the last micro-batch, or each one under ZeRO-2/3). */
int dtc_tensor_grads(struct dt_plan *plan, int r, const struct dtc_tensor *t, int l);

/* Sequence parallelism (seqpar.c, dt/tensor.h): whether the options allow it; marks the
 * per-token layers between partial sums and column-parallel inputs in kind (readers: each
 * layer's reader count) and returns how many (-1: out of memory); the inputs of chunked layer
 * l whose gradient's allgather follows l's backward (inputs: up to DT_MAX_INPUTS). */
bool dtc_seqpar_fits(const struct dt_plan_options *o, char *why, size_t whylen);
int dtc_seqpar_mark(const struct dt_model *m, const int *readers, int t, enum dt_shard_kind *kind);
int dtc_seqpar_gathers(const struct dt_model *m, const struct dt_layer_view *v, int l,
                       int *inputs);

/* The first layer after j that reads it, or -1 (tensor.c; a pair's next layer, a partial
 * sum's reader under sequence parallelism). */
int dtc_first_reader(const struct dt_model *m, int j);



#endif
