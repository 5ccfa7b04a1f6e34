/* The plan: the seam between simulation and execution (DESIGN.md, "Plan v2").
 *
 * A strategy compiles (model, topology, parallel config) into, for every rank:
 *   - a BUFFER TABLE: every allocation the rank makes (parameters, gradients, optimizer state,
 *     activations as slots x rows, activation gradients, kept state, input staging, receive
 *     buffers), each with a dtype; dtexec allocates exactly these and dtsim's memory figure is
 *     their sum (dt_plan_rank_memory);
 *   - a LAYER VIEW: which layers the rank runs, where each one's parameters start in the
 *     rank's own (packed) parameter buffer, and which shard of a layer it holds (tensor
 *     parallelism, dt/tensor.h);
 *   - a STEP PROGRAM and an EVAL PROGRAM: ordered ops. What used to be implicit (when
 *     gradients are zeroed, where the loss is seeded, which rows a micro-batch uses) is an op
 *     both executors see;
 *   - its data-parallel index and count (which shard of the data it reads: the stages of one
 *     pipeline read the same samples) and the group of ranks that must end a step with equal
 *     parameters (its replicas).
 * dtsim gives each op a cost and plays all ranks as discrete events; dtexec walks the same ops
 * with real kernels and MPI. Nothing about a strategy lives elsewhere.
 *
 * Ops of one rank run in program order. A non-blocking op (COLL, SEND or RECV with
 * nonblocking) starts at its place and completes at the WAIT that names its handle. A region
 * is (buffer, first element, elements[, layer]): it tells the simulator how many bytes move
 * and the executor which elements. Activation regions (ACT, DACT) name their layer; their
 * offset is in elements of that layer's buffer (row x the layer's output size).
 */
#ifndef DT_PLAN_H
#define DT_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

#include "dt/error.h"
#include "dt/model.h"
#include "dt/topology.h"

enum dt_dtype { DT_TYPE_F32, DT_TYPE_BF16, DT_TYPE_F16, DT_TYPE_I32, DT_TYPE_COUNT };
size_t dt_dtype_size(enum dt_dtype t);
const char *dt_dtype_name(enum dt_dtype t);

enum dt_buf {
    DT_BUF_PARAMS,  /* the rank's parameters: its layers' in model order, packed */
    DT_BUF_GRADS,   /* their gradients, same layout */
    DT_BUF_OPT,     /* optimizer state of the parameters it updates: per moment one block */
    DT_BUF_STATE,   /* non-trained state of its layers (batchnorm running statistics) */
    DT_BUF_ACT,     /* one layer's outputs: rows x output size (region names the layer) */
    DT_BUF_DACT,    /* their gradients: layer -1, the pool of one slot's rows that the
                       gradients live in turn share (struct dt_dact_layout); a layer: its own,
                       for every slot */
    DT_BUF_KEEP,    /* what its layers keep for backward besides outputs (masks, statistics,
                       caches, argmax): floats and ints per row; layer -1: the recomputation
                       workspace (--recompute, struct dt_recompute_layout) */
    DT_BUF_INPUT,   /* loaded samples and labels: rows */
    DT_BUF_COMM,    /* receive buffers of collectives and of summing receives: one pool per
                       dtype of the regions they receive, by what is in flight (commpool.h) */
    DT_BUF_MASTER,  /* mixed precision: fp32 master copy of the parameters it updates (at the
                       offsets of one optimizer-state block) */
    DT_BUF_SCALER,  /* mixed precision: the dynamic loss scale's scalars (DT_SCALER_*) */
    DT_BUF_COUNT
};
const char *dt_buf_name(enum dt_buf b);

/* The loss scaler's elements (fp32): the scale the loss is multiplied by, the clean steps
 * since it last changed, and the step's overflow flag (1 when a gradient is inf or NaN). */
enum { DT_SCALER_SCALE, DT_SCALER_CLEAN, DT_SCALER_FLAG, DT_SCALER_ELEMS };

/* One allocation of a rank. */
struct dt_buffer {
    enum dt_buf kind;
    enum dt_dtype dtype;
    int layer;      /* ACT, DACT, KEEP: the layer; -1 otherwise */
    double elems;
};

struct dt_region {
    enum dt_buf buf;
    long offset;    /* first element */
    long count;     /* elements */
    int layer;      /* ACT/DACT: the layer */
};

enum dt_op_kind {
    DT_OP_COMPUTE,  /* forward or backward of one layer on rows [slot x rows, +samples) */
    DT_OP_SEND,     /* region to peer, with tag */
    DT_OP_RECV,     /* region from peer, with tag (sum: add instead of overwrite) */
    DT_OP_COLL,     /* collective over a group: src region (dst: out of place, or count 0) */
    DT_OP_WAIT,     /* completes a non-blocking op */
    DT_OP_LOAD,     /* copies rows [row0, row0 + samples) of this rank's step batch into the
                       input slot */
    DT_OP_ZERO,     /* zeroes a region */
    DT_OP_LOSS,     /* loss of a micro-batch on the last layer; seeds its gradient with
                       1/scale per sample (scale: the step's samples over all replicas) */
    DT_OP_UPDATE,   /* optimizer step over a params region (its grads at the same offsets,
                       its optimizer state at dst.offset of each moment's block); under mixed
                       precision it updates MASTER at dst.offset from the 2-byte gradients,
                       and is skipped when SCALER[FLAG] is set */
    DT_OP_COPY,     /* region to dst (sum: add); MASTER to PARAMS casts to their dtype */
    DT_OP_UNSCALE,  /* mixed precision: divides a GRADS region by the loss scale and sets the
                       flag (dst: SCALER[FLAG]) to 1 if any of it is inf or NaN, else 0 */
    DT_OP_RESCALE   /* mixed precision: updates the loss scale from the (reduced) flag, as
                       PyTorch's GradScaler: halved on overflow, doubled after
                       DT_SCALER_GROWTH_INTERVAL clean steps (region: SCALER) */
};

/* Dynamic loss scaling (PyTorch's GradScaler defaults). */
#define DT_SCALER_INIT 65536.0
#define DT_SCALER_GROWTH_INTERVAL 2000

/* A LOSS op's part: the whole loss, or under a vocabulary-parallel head (dt/tensor.h) one of
 * three with the tensor group's allreduces of per-token statistics between them: the local
 * maximum logit, the target's logit and the sum of exponentials, then the loss and the logits'
 * gradient from the group's statistics. */
enum dt_loss_part { DT_LOSS_WHOLE, DT_LOSS_MAX, DT_LOSS_SUMS, DT_LOSS_FINISH };

/* How a COLL combines its members' data (reduce, allreduce, reduce-scatter). */
enum dt_reduction { DT_RED_SUM, DT_RED_MAX };

enum dt_phase {
    DT_PH_FORWARD,          /* layer forward */
    DT_PH_BACKWARD          /* layer backward: data (if needed) and weights */
};

enum dt_coll_kind { DT_COLL_ALLREDUCE, DT_COLL_REDUCE, DT_COLL_BCAST, DT_COLL_REDUCE_SCATTER,
                    DT_COLL_ALLGATHER, DT_COLL_KIND_COUNT };

enum dt_coll_alg {
    DT_ALG_LINEAR,       /* every rank to/from the root directly (seed 002's mpi4py pattern) */
    DT_ALG_BINOMIAL,     /* binomial tree (MPICH's reduce and short bcast) */
    DT_ALG_RING,         /* ring: reduce-scatter + allgather in 2(p-1) steps of n/p */
    DT_ALG_RECURSIVE_DOUBLING,
    DT_ALG_RABENSEIFNER, /* recursive-halving reduce-scatter + recursive-doubling allgather */
    DT_ALG_DIRECT,       /* reduce-scatter/allgather by direct exchange (sharded PS) */
    DT_ALG_LIBRARY,      /* the MPI library's own collective (dtsim models MPICH's choice) */
    DT_ALG_TREE,         /* NCCL's double binary tree allreduce (dt/collective.h) */
    DT_ALG_RAIL_RING,    /* multi-level ring allreduce: in the node, along rails, in the node
                            (the op's root: members per node) */
    DT_ALG_COUNT
};

struct dt_op {
    enum dt_op_kind kind;
    enum dt_phase phase;     /* COMPUTE */
    int layer;               /* COMPUTE, LOSS: layer index (global); -1 otherwise */
    int samples;             /* COMPUTE, LOAD, LOSS: rows of the micro-batch */
    int micro;               /* micro-batch index within the step (0 without micro-batches) */
    int slot;                /* activation / input slot: rows [slot x slot_rows, +samples) */
    int row0;                /* LOAD, COMPUTE: first row of the step batch (dropout's masks) */
    int peer;                /* SEND/RECV: the other rank */
    int tag;                 /* SEND/RECV */
    bool sum;                /* RECV, COPY: add into the destination instead of overwriting */
    struct dt_region region; /* SEND/RECV/COLL/UPDATE/ZERO/COPY: source (or the region) */
    struct dt_region dst;    /* COLL/COPY: destination (COLL: count 0 = in place);
                                UPDATE: offset of its optimizer state */
    enum dt_coll_kind coll;  /* COLL */
    enum dt_coll_alg alg;    /* COLL */
    enum dt_reduction reduction; /* COLL: sum (default) or max */
    int group;               /* COLL: index into plan->groups */
    int root;                /* COLL reduce/bcast: index of the root within the group;
                                allreduce by DT_ALG_RAIL_RING: members per node (0: all) */
    bool nonblocking;        /* COLL/SEND/RECV: completes at a WAIT */
    int handle;              /* non-blocking op: its handle (unique per rank); WAIT: awaited */
    double bytes;            /* LOAD: bytes of input data copied */
    double scale;            /* LOSS: samples the step's gradient is averaged over */
    enum dt_loss_part loss_part; /* LOSS: the whole loss, or a part of a vocabulary-parallel
                                    one */
    struct dt_region grads;  /* UPDATE: its gradients when they are not at the parameters'
                                offsets (ZeRO-2's gradient shard); count 0: same offsets */
    enum dt_precision precision; /* COMPUTE: the precision its math runs at (the plan's;
                                    dt_plan_push and dtc_push_eval stamp it) */
    int shards;              /* COMPUTE: the layer's work is split over this many tensor-
                                parallel ranks (dt/tensor.h; dtc_push stamps it); 0 or 1: whole */
    bool recompute;          /* COMPUTE forward: a re-run, before the backward that needs them,
                                of a forward whose outputs were not kept (--recompute); COPY,
                                COLL: ZeRO-3's gather of its parameters again */
    bool grads_f32;          /* the plan's gradients are f32 under a 2-byte precision
                                (--grad-precision fp32; dt_plan_push stamps it) */
};

/* The dtype of buffer kind b as op's cost sees it: dt_buf_dtype at its precision, GRADS f32
 * when grads_f32. */
enum dt_dtype dt_op_buf_dtype(const struct dt_op *op, enum dt_buf b);

/* Whether two ops cost the same at any parameters: field by field (ops are built from compound
 * literals whose padding is unspecified), every field but where in the step they run (micro,
 * slot, row0), which no cost reads. Equal ops (plan_share.c) also agree on those three. */
bool dt_op_same_cost(const struct dt_op *a, const struct dt_op *b);

struct dt_group {
    int n;
    int *ranks; /* global ranks, in group order */
};

/* Which layers a rank runs and where their parameters live in its buffer. Shared by the ranks
 * that run the same layers (plan->views). */
struct dt_layer_view {
    bool runs;              /* the rank computes this layer */
    bool holds;             /* it holds the layer's output: it runs it, or a layer it runs
                               reads it (a received activation) */
    bool dact_received;     /* the output's gradient arrives from another rank (overwritten
                               there, not zeroed by this rank's readers) */
    bool act_until_sent;    /* the output is only sent (no backward of the rank reads it):
                               held until its sends complete, in ws_rows rows (row r at r mod
                               ws_rows), as Megatron-LM frees a stage's output once sent */
    long param_offset;      /* first parameter in the rank's packed buffer (runs only) */
    bool grads_apart;       /* its gradients are at grad_offset, not at param_offset (ZeRO-2:
                               a staging buffer apart from the gradient shard) */
    long grad_offset;
    /* tensor parallelism: which part of the layer it holds (enum dt_shard_kind of
     * dt/tensor.h: whole, output columns, weight input rows), shard index of count */
    int shard_kind, shard_index, shard_count;
};

/* Parameters [packed_offset, + count) of the rank's view's packed layout (dt_shard_copy_packed:
 * the model's layout without --tp, its tensor shards packed with it) held at the rank's
 * PARAMS[offset] (ZeRO-3's shards: the rank owns them; its layer view points at the staging
 * buffer they are gathered into). */
struct dt_param_range {
    long packed_offset, offset, count;
};

struct dt_program {
    int n_ops, cap_ops;
    struct dt_op *ops;
};

struct dt_rank_plan {
    int n_ops, cap_ops;         /* the step program: one training step */
    struct dt_op *ops;
    struct dt_program eval;     /* the eval program: forward of eval_rows test rows (slot 0) */
    int view;                   /* index into plan->views */
    int stage;                  /* pipeline stage (0 without pipelines) */
    int dp_index, dp_count;     /* data shard: which of how many replicas */
    int replicas;               /* group of ranks that end a step with equal parameters */
    int batch;                  /* samples this rank's replica processes per step */
    int slot_rows, slots;       /* rows of one activation slot, and slots */
    int eval_rows;              /* rows the eval program handles at a time */
    int ws_rows;                /* --recompute, or outputs held until sent: rows of the
                                   workspace and of those outputs (the widest compute op's,
                                   rounded up to whole slots); row b of an op is at b mod
                                   ws_rows there */
    long n_params;              /* parameters it holds */
    long n_updated;             /* parameters it runs the optimizer on */
    long n_grads;               /* gradients it holds, when not n_params (ZeRO-2) */
    int n_owned;                /* ZeRO-3: the model's parameters it owns (NULL: its view's */
    struct dt_param_range *owned; /* layers, at their param_offset) */
    bool first, last;           /* runs the first / last layer (loads inputs / labels) */
    bool updates;               /* runs an UPDATE op */
    int n_bufs, cap_bufs;
    struct dt_buffer *bufs;     /* the buffer table */
    /* ops, eval.ops, bufs point into the plan's pool, shared with the ranks whose arrays are
     * equal (dt_plan_share_rank); the builders copy them before a change */
    bool shared_ops, shared_eval, shared_bufs;
};

/* The strategies (registry in strategy.c: names, descriptions, citations, fits, compile). */
enum dt_strategy {
    DT_STRAT_SEQUENTIAL,
    DT_STRAT_REDUCE_BCAST_LINEAR,
    DT_STRAT_REDUCE_BCAST_BINOMIAL,
    DT_STRAT_ALLREDUCE_RING,
    DT_STRAT_ALLREDUCE_RECURSIVE_DOUBLING,
    DT_STRAT_ALLREDUCE_RABENSEIFNER,
    DT_STRAT_ALLREDUCE_HIERARCHICAL,
    DT_STRAT_ALLREDUCE_LIBRARY,
    DT_STRAT_PS_CENTRAL,
    DT_STRAT_PS_SHARDED,
    DT_STRAT_GPIPE,
    DT_STRAT_NAIVE_MP,
    DT_STRAT_1F1B,
    DT_STRAT_INTERLEAVED,
    DT_STRAT_ALLREDUCE_TREE,
    DT_STRAT_ALLREDUCE_RAIL_RING, /* multi-level ring: in the node, per rail, in the node */
    DT_STRAT_COUNT
};

enum dt_scaling { DT_SCALING_WEAK, DT_SCALING_STRONG };
enum dt_recompute { DT_RECOMPUTE_NONE, DT_RECOMPUTE_FULL, DT_RECOMPUTE_SELECTIVE,
                    DT_RECOMPUTE_COUNT };
const char *dt_recompute_name(enum dt_recompute r);
/* The dtype activations, gradients and communication are stored in at a compute precision:
 * fp32 and tf32 keep f32, bf16 and fp8 (whose GEMM inputs are cast per op, as Transformer
 * Engine does) bf16, fp16 f16. */
enum dt_dtype dt_precision_storage(enum dt_precision p);
/* Whether a precision trains mixed (bf16, fp16, fp8: 2-byte storage, fp32 master weights,
 * loss scaling); fp32 and tf32 keep everything in f32. */
bool dt_plan_mixed(enum dt_precision p);
/* The dtype of a buffer kind's floats at a precision (the plan's, or an op's): under mixed
 * precision parameters, gradients, activations, their gradients, kept floats and
 * communication take the 2-byte storage dtype; optimizer state, master weights, the scaler,
 * batchnorm statistics and the loaded input stay f32 (the ints of INPUT and KEEP are I32
 * entries of their own). */
enum dt_dtype dt_buf_dtype(enum dt_precision p, enum dt_buf b);
struct dt_plan_options;
/* The dtype of the gradients (DT_BUF_GRADS) and so of their collectives: --grad-precision
 * when given, else the compute precision's storage (dt_precision_storage). fp32 under mixed
 * precision is what PyTorch's autocast + GradScaler, TensorFlow's AMP graph rewrite and
 * Megatron-LM's --accumulate-allreduce-grads-in-fp32 keep; 16-bit what Megatron-LM's and
 * DeepSpeed's fp16/bf16 optimizers keep. */
enum dt_dtype dt_plan_grad_dtype(const struct dt_plan_options *o);
/* dt_buf_dtype at the options' precision, with GRADS at dt_plan_grad_dtype. */
enum dt_dtype dt_plan_buf_dtype(const struct dt_plan_options *o, enum dt_buf b);
/* Whether the options' gradient dtype is one the plans support: f32, or the compute
 * precision's own 2-byte storage (why says why not, naming --grad-precision). */
bool dt_plan_grad_dtype_fits(const struct dt_plan_options *o, char *why, size_t whylen);
enum dt_optimizer { DT_OPTIM_ADAM, DT_OPTIM_SGD, DT_OPTIM_MOMENTUM, DT_OPTIM_COUNT };

#define DT_MAX_STAGES 256

/* The parallel config: everything that shapes a plan, parsed once (dt_parallel_set) for
 * dtsim, dtexec, run records and dtvalidate. */
struct dt_plan_options {
    enum dt_strategy strategy;
    enum dt_scaling scaling;
    int batch;              /* weak: per replica and step (data parallelism: per micro-batch
                               under --accumulate; pipelines: split into the micro-batches);
                               strong: global per step */
    double bucket_bytes;    /* > 0: gradient buckets of this size, overlapped with backward */
    int n_ranks;            /* ranks to use; 0 = all ranks of the topology */
    int accumulate;         /* micro-batches accumulated per step by data parallelism (1) */
    int dp;                 /* pipelines: data-parallel replicas (0 = ranks / stages) */
    int pp;                 /* pipelines: stages (0 = 2) */
    int chunks;             /* interleaved: model chunks per stage (0 = 2) */
    int micro_batches;      /* pipelines: micro-batches per step (0 = stages; naive-mp: 1) */
    enum dt_coll_alg grad_alg; /* pipelines: replicas' allreduce (0 = linear means ring) */
    bool grad_alg_given;
    int n_stage_cuts;       /* --stages: first layer of each stage after the first */
    int stage_cuts[DT_MAX_STAGES];
    enum dt_optimizer optimizer;
    int tp;                 /* tensor-parallel ranks per layer (0 = 1) */
    int zero;               /* ZeRO stage 0-3 (Rajbhandari et al. 2020) */
    bool sequence_parallel; /* with --tp: reduce-scatter/allgather around norms and dropout */
    enum dt_recompute recompute; /* activation recomputation */
    enum dt_precision precision; /* compute precision (fp32 default); storage dtypes follow
                                    (dt_precision_storage) */
    enum dt_precision grad_precision; /* --grad-precision: the gradients' dtype (and so their
                                         collectives'), when given (dt_plan_grad_dtype) */
    bool grad_precision_given;
};

struct dt_plan {
    enum dt_strategy strategy;
    struct dt_plan_options opt;
    const struct dt_model *model;       /* borrowed */
    const struct dt_topology *topo;     /* borrowed */
    int n_ranks;
    struct dt_rank_plan *ranks;
    int n_groups;
    struct dt_group *groups;
    int n_views;
    struct dt_layer_view **views;       /* n_views x model->n_layers */
    int global_batch;                   /* samples per step, all replicas */
    int stages, chunks, micro_batches, dp;
    int *chunk_first;                   /* stages x chunks + 1: first layer of each chunk */
    double lr_scale;        /* learning rate factor (seed 002: x processes under weak scaling) */
    int next_handle;
    /* a probe (dt_plan_probe): the ranks of the middle data-parallel replicas get no ops and
     * no buffers; the first and the last replica's ranks are built as in the full plan */
    bool probe;
    /* a pipeline's probe or floor with --tp (probe_tensor.c): the T tensor ranks of a stage
     * and replica hold the same buffers and ops up to peers, so only tensor rank 0 (rank
     * mod probe_tensor) is built; 0 where they may differ (all built) */
    int probe_tensor;
    /* a pipeline's probe whose last replica gets the first's rows (probe_replica.c): only the
     * first replica is built, its ranks standing for the last's; false where they may differ */
    bool probe_replica;
    /* a pipeline's memory floor (dt_plan_floor): the first replica's ranks get their buffer
     * tables from their views and slots alone, no ops; the other ranks nothing */
    bool floor;
    int n_recompute;                    /* --recompute: each view's layout (NULL until a rank */
    struct dt_recompute_layout **recompute;    /* of the view asks: dt_plan_recompute) */
    int n_dact;                         /* activation-gradient layouts per view and slot */
    struct dt_dact_layout **dact;       /* rule (dt_plan_dact: [2 view + (slots > 1)]) */
    struct dt_plan_pool *pool;          /* the arrays ranks share (plan_share.c) */
};

/* ---- the registry ---- */
struct dt_plan;
struct dt_strategy_info {
    const char *name;
    const char *description;
    const char *citation;
    bool pipeline;          /* takes --pp/--micro-batches/--dp */
    bool data_parallel;     /* synchronises replicas of the whole model */
    /* whether the options fit n ranks of the model (why says why not), beyond the ranks the
     * topology has (dt_strategy_fits_options checks those first) */
    bool (*fits)(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                 char *why, size_t whylen);
    /* fills a plan allocated by dt_plan_alloc with the family's programs and buffers */
    int (*compile)(struct dt_plan *plan, struct dt_error *err);
    /* data parallelism: the algorithm of its gradient exchange (hierarchical: of its
     * node-local reduce and broadcast); the pipelines take --grad-alg (dtc_grad_alg) */
    enum dt_coll_alg alg;
};
const struct dt_strategy_info *dt_strategy_info(enum dt_strategy s);
const char *dt_strategy_name(enum dt_strategy s);
const char *dt_strategy_description(enum dt_strategy s);
/* Parses a strategy name ("ring", "gpipe", ...); -1 if unknown. */
int dt_strategy_parse(const char *name);
const char *dt_coll_kind_name(enum dt_coll_kind k);
/* "compute", "send", "recv", "coll", "wait", "load", "zero", "loss", "update", "copy": the
 * kind column of dtexec's per-op CSV, which dtvalidate reads back. */
const char *dt_op_kind_name(enum dt_op_kind k);
const char *dt_coll_alg_name(enum dt_coll_alg a);
const char *dt_phase_name(enum dt_phase p);
const char *dt_optimizer_name(enum dt_optimizer o);
/* Optimizer state elements per updated parameter: Adam 2, momentum 1, SGD 0. */
int dt_optimizer_moments(enum dt_optimizer o);

/* Default options (weak scaling, batch 128, ring for pipelines' replicas, Adam). */
void dt_plan_options_init(struct dt_plan_options *o);

/* Sets one parallel-config option from its flag's text ("--pp", "4"); the flag names are
 * those of dtsim and dtexec. Returns 1 if `flag` is not a parallel-config flag, 0 when set,
 * DT_EINPUT with err naming the flag on a bad value. */
int dt_parallel_set(struct dt_plan_options *o, const char *flag, const char *value,
                    struct dt_error *err);
/* Iterations in an epoch, for dtsim and dtexec alike: every step takes a full global batch
 * and the final partial batch is dropped (as PyTorch's DistributedSampler with drop_last):
 * floor(samples / global_batch); 0 when the dataset holds no full batch (an error for both). */
long dt_epoch_iterations(long samples, long global_batch);
/* Sets every "key=value" pair of text (blank-separated, keys as flag names without dashes:
 * what dt_parallel_format writes, a run record's "parallel"). On error, *at is the offset of
 * the bad pair in text and err says what is wrong with it (DT_EINPUT). */
int dt_parallel_set_pairs(struct dt_plan_options *o, const char *text, int *at,
                          struct dt_error *err);
/* The getopt long options of the parallel config (terminated by a zero entry); each has
 * has_arg = required_argument and val = 0x400 + index. */
struct option;
const struct option *dt_parallel_longopts(void);
/* A program's own long options followed by the parallel config's, terminated, into out (cap
 * entries); returns how many, or -1 when they do not fit. */
int dt_parallel_merge_longopts(const struct option *own, int n_own, struct option *out,
                               int cap);
/* One line per parallel-config flag for --help. */
void dt_parallel_usage(FILE *out);
/* Writes "key=value" pairs of the config that differ from the defaults, e.g.
 * "pp=2 micro-batches=4" (empty for plain data parallelism). */
void dt_parallel_format(const struct dt_plan_options *o, char *buf, size_t len);

/* Whether the strategy can run on n ranks of topo with these options; why says why not. */
bool dt_strategy_fits(enum dt_strategy s, const struct dt_topology *topo, int n_ranks,
                      char *why, size_t whylen);
bool dt_strategy_fits_options(const struct dt_plan_options *o, const struct dt_model *m,
                              const struct dt_topology *topo, int n_ranks, char *why,
                              size_t whylen);

/* The ranks a plan of these options uses on topo: n_ranks when set, 1 for sequential,
 * dp x pp (x tp) for a pipeline given --dp, else all of the topology's. */
int dt_plan_ranks(const struct dt_plan_options *o, const struct dt_topology *topo);
/* The parallel shape of those ranks: T tensor ranks, S stages (1 for the data-parallel
 * strategies, --pp for a pipeline, 2 by default) and D data-parallel replicas (a pipeline's
 * --dp, else the ranks / (S T)). */
void dt_plan_shape(const struct dt_plan_options *o, const struct dt_topology *topo, int *T,
                   int *S, int *D);

/* Compiles a plan. The model and topology must outlive it. */
int dt_plan_build(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err);
/* The plan of the first and last data-parallel replicas only (dt_plan.probe): what a
 * search needs to size every rank (the middle replicas' ranks repeat the first's and the
 * last's: same ops, shards no larger than the first's) at a fraction of the cost; where that
 * does not hold (trees, hierarchies, recursive halving on other than powers of two) the whole
 * plan. Not checked, not for executing or simulating. dt_plan_dropped: the ranks left empty. */
int dt_plan_probe(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err);
bool dt_plan_dropped(const struct dt_plan *plan, int rank);
/* A pipeline's floor plan (dt_plan.floor), no ops compiled: the first replica's ranks each
 * hold the buffer table of its stage's view and slots (dtc_finish_rank's, with the receive
 * pool and the workspaces' rows that only ops size left at their least), the other ranks
 * nothing; its dt_plan_peak_memory is a lower bound of the probe's, and a far closer one
 * than dt_plan_memory_floor's (the real stage cut). DT_EINPUT for a strategy other than a
 * pipeline's. Not checked, not for executing or simulating. */
int dt_plan_floor(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, struct dt_plan **out, struct dt_error *err);
/* A lower bound of dt_plan_peak_memory(probe) with no plan compiled (probe_floor.c), for
 * --recommend to discard configs over a memory limit. A rank holds its parameters' states
 * (bytes per parameter as ZeRO shards them over the D replicas) and, for each of its slots
 * (the micro-batches its schedule holds at once, dt_pipeline_slots; 1 without a pipeline)
 * of slot rows (replica 0's, the largest), the bytes each row keeps: the ACT and KEEP
 * buffers of its layers outside the recomputation workspace. Whatever the stage cut, one
 * tensor rank's stages of a replica hold between them at least its shards of every layer
 * (the chain, dt_plan_chain_floor: a cut only adds what crosses it, and a stage recomputes
 * no layer the whole model would keep), so the bound is the least peak over every split of
 * the chain's parameters and kept bytes over the stages (the kept bytes on the stages of
 * fewest slots first). Activation gradients, buffers, inputs and workspaces only add. */
struct dt_chain_floor {
    double params;    /* parameters of the chain (the least over the tensor ranks) */
    double row_bytes; /* bytes one sample row keeps over the chain's layers */
};
/* Depends on the model, the strategy's tensor cut (pipeline or not), tp, sequence
 * parallelism, recompute and precision only: callers may reuse it across the rest. */
int dt_plan_chain_floor(const struct dt_model *m, const struct dt_plan_options *o,
                        struct dt_chain_floor *out);
double dt_plan_memory_floor(const struct dt_model *m, const struct dt_topology *topo,
                            const struct dt_plan_options *o, const struct dt_chain_floor *c);
/* The activation slots of stage s of a pipeline of these options (pipeline.c's schedule:
 * closed forms for GPipe, naive-mp and 1F1B, interleaved's counted without its units). */
int dt_pipeline_slots(const struct dt_plan_options *o, int s);
/* The same, the schedule walked unit by unit whatever the strategy; -1 when out of memory. */
int dt_pipeline_slots_walked(const struct dt_plan_options *o, int s);
void dt_plan_destroy(struct dt_plan *plan);

/* Builders used by the strategies (and by tests). dt_plan_push, dt_plan_push_eval and
 * dt_plan_add_buffer add nothing to a probe's dropped rank (dt_plan_dropped). The op pushed
 * is copied as it is, then stamped in place: it must not lie in the program it goes to. */
int dt_plan_push(struct dt_plan *plan, int rank, const struct dt_op *op);
/* op with what its cost reads from the plan's options (dt_plan_push stamps every op so):
 * the precision, and whether the gradients are f32 apart from it (grads_f32). */
struct dt_op dt_plan_stamp(const struct dt_plan *plan, const struct dt_op *op);
/* Appends an op to rank's eval program (stamped with the plan's precision). */
int dt_plan_push_eval(struct dt_plan *plan, int rank, const struct dt_op *op);
int dt_program_push(struct dt_program *p, const struct dt_op *op);
/* Room for at least cap ops in rank's step program (not when it is interned). */
int dt_plan_reserve(struct dt_plan *plan, int rank, int cap);
/* Room for at least cap ops in p (its ops kept). */
int dt_program_reserve(struct dt_program *p, int cap);
int dt_plan_add_group(struct dt_plan *plan, int n, const int *ranks);
/* Rank's index in group g, or -1 when it is not a member. */
int dt_group_index(const struct dt_group *g, int rank);
int dt_plan_add_buffer(struct dt_plan *plan, int rank, enum dt_buf kind, enum dt_dtype dtype,
                       int layer, double elems);
/* A layer view of its own (a pipeline stage's); its index, or -1 when out of memory. */
int dt_plan_add_view(struct dt_plan *plan);
/* Allocates a plan of n ranks with every rank running every layer (view 0) and no ops:
 * the start of every compile function and of hand-made plans in tests. */
int dt_plan_alloc(const struct dt_model *model, const struct dt_topology *topo,
                  const struct dt_plan_options *opt, int n_ranks, struct dt_plan **out);

/* Activation recomputation (--recompute, recompute.c). Checkpoint segments are runs of layers
 * whose only input from before is the output of the layer ending the previous segment (a
 * "cut": no later layer reads an earlier one). `full` (Chen et al. 2016; Megatron's full
 * recomputation) keeps a segment's input and its last layer; the layers inside it keep their
 * outputs and kept state in a workspace shared by all segments, and their forward runs again
 * before the segment's backward. A segment is a transformer block (from the cut before an
 * attention layer to the cut before the next; the last block has as many cuts as the one
 * before), layers outside blocks (embedding, final norm, head) are kept; a model without
 * attention is cut into segments of ceil(sqrt(L)) layers at cuts. A pipeline stage boundary
 * inside a segment splits it into parts, each recomputed from what its rank receives; a layer
 * that another rank reads is kept (it is sent); a part that comes back to a rank after another
 * rank's (interleaved chunks) is a segment of its own there. The workspace holds one micro-batch: a rank
 * recomputes a segment just before its backward, which nothing interrupts, so its rows
 * (dt_rank_plan's ws_rows) are those of the widest op. `selective` (Korthikanti et al. 2022)
 * recomputes only the attention scores: an attention layer's kept state (the B x heads x T x T
 * probabilities; a fused `attention` layer keeps q, k, v and the context with them) goes to
 * the workspace and the layer's forward runs again before its backward; a model without
 * attention recomputes nothing, as in Megatron, where selective touches only the attention
 * core. */
struct dt_recompute_layout {
    int n_layers;
    int *segment;           /* per layer: its segment (part), -1 in none; < n_layers */
    bool *act_ws, *keep_ws; /* its output / its kept state lives in the workspace */
    long *act_at, *keep_at, *ikeep_at; /* where, in floats (ints) per row of the workspace */
    long ws_floats, ws_ints;           /* the workspace per row: the largest segment's */
    bool any;               /* some layer is recomputed */
};
/* The layout of a view's layers under mode (v NULL: every layer whole). DT_ENOMEM or DT_OK. */
int dt_recompute_init(struct dt_recompute_layout *rc, const struct dt_model *m,
                      const struct dt_layer_view *v, enum dt_recompute mode);
void dt_recompute_free(struct dt_recompute_layout *rc);
/* The plan's layout for a view (computed once; NULL without --recompute or out of memory). */
const struct dt_recompute_layout *dt_plan_recompute(struct dt_plan *plan, int view);
/* The layout of a rank of a built plan (NULL when nothing is recomputed there). */
const struct dt_recompute_layout *dt_plan_rank_recompute(const struct dt_plan *plan, int rank);
/* The rows a rank's recomputation workspace needs (dt_rank_plan's ws_rows), from its step and
 * eval programs. */
int dt_plan_ws_rows(const struct dt_rank_plan *rp);
/* Activation gradients by liveness (dact.c). Only one micro-batch runs backward at a time on
 * a rank, and frameworks free an activation gradient once the layer's backward has read it:
 * layer j's gradient is live from the backward of its last reader (the first to write it; the
 * loss for the last layer and its inputs) to its own backward. The gradients of a rank's
 * layers share one pool of one slot's rows (DT_BUF_DACT, layer -1), each at an offset that no
 * gradient live at the same time overlaps (greedy by size, first fit). A layer keeps a buffer
 * of its own for every slot (DT_BUF_DACT, its index) when its gradient outlives one slot's
 * contiguous backward: it crosses ranks (received from a later stage's readers, or sent back
 * to an earlier stage: a non-blocking SEND/RECV writes or reads it at any time before its
 * WAIT), a reader in another chunk of the stage reads it, it is written by the loss while
 * other micro-batches are in flight (several slots), or no layer of the rank writes it. A
 * DACT region of a pooled layer names the rows of its slot (slot x slot_rows + row, as
 * every activation region) and lies inside one slot; the executor finds row r at r mod
 * slot_rows of the layer's place in the pool. */
struct dt_dact_layout {
    int n_layers;
    long *at;       /* per layer: its gradient's offset in the pool in elements per row; -1:
                       a buffer of its own (or none) */
    long pool;      /* the pool's elements per row */
    long peak;      /* the most elements per row live at once (pool >= peak) */
};
/* The layout of a view's gradients (v NULL: every layer whole); chunk_first: the plan's
 * chunks (n_chunks + 1 first layers; NULL: one chunk); multi_slot: the rank holds several
 * slots. DT_ENOMEM or DT_OK. */
int dt_dact_init(struct dt_dact_layout *d, const struct dt_model *m,
                 const struct dt_layer_view *v, const int *chunk_first, int n_chunks,
                 bool multi_slot);
void dt_dact_free(struct dt_dact_layout *d);
/* The layout of rank r's gradients (computed once per view and slot rule; NULL out of
 * memory), and that of a built plan's rank (NULL: none computed, every layer its own). */
const struct dt_dact_layout *dt_plan_dact(struct dt_plan *plan, int rank);
const struct dt_dact_layout *dt_plan_rank_dact(const struct dt_plan *plan, int rank);
void dt_plan_dact_free(struct dt_plan *plan);
/* Whether layer l's gradient is in rank r's pool. */
bool dt_plan_dact_pooled(const struct dt_plan *plan, int rank, int l);

/* Sharing (plan_share.c): a finished rank's step program, eval program and buffer table are
 * stored once per distinct content in the plan's pool and the rank points at them; at 16,384
 * ranks of data parallelism this takes the plan from about 1.8 GB to a few MB. dt_plan_build
 * shares every rank; compile functions share each rank as they finish it (dtc_finish_rank)
 * to keep the peak low. Readers see rp->ops, rp->eval.ops and rp->bufs as before. */
int dt_plan_share_rank(struct dt_plan *plan, int rank);
int dt_plan_share(struct dt_plan *plan);
/* Distinct programs (step and eval) in the pool. */
int dt_plan_distinct_programs(const struct dt_plan *plan);
/* Gives rank private copies of its shared arrays: the builders' copy on write, and code
 * that edits a built plan in place (the checker's tests). */
int dt_plan_unshare_rank(struct dt_plan *plan, int rank);
void dt_plan_pool_free(struct dt_plan *plan);

/* Elements of one buffer kind (all layers for ACT/DACT/KEEP: use dt_plan_buffer_layer). */
double dt_plan_buffer_elems(const struct dt_plan *plan, int rank, enum dt_buf kind);
/* The dtype of a region of rank's buffers: its buffer's (dt_buf_dtype), but for a layer's KEEP
 * (dt_shard_keep_dtype: the vocabulary-parallel loss's statistics are float32). */
enum dt_dtype dt_plan_region_dtype(const struct dt_plan *plan, int rank,
                                   const struct dt_region *g);
double dt_plan_buffer_layer(const struct dt_plan *plan, int rank, enum dt_buf kind, int layer);

/* A rank's memory from its buffer table, by what frameworks report. */
struct dt_memory {
    double weights, grads, optimizer, activations, comm, input, state;
    double total;
};
void dt_plan_rank_memory(const struct dt_plan *plan, int rank, struct dt_memory *m);
/* Each field's largest value over the plan's ranks (not one rank's row: the largest total
 * and the largest gradients may sit on different ranks). */
void dt_plan_peak_memory(const struct dt_plan *plan, struct dt_memory *peak);

/* Rows of one activation slot and elements per row that layer i keeps (dt_plan_rank_memory's
 * and exec/cpu/net.c's one size function). keep_ints: int elements per row. */
void dt_layer_keep(const struct dt_model *m, int i, long *keep_floats, long *keep_ints);
/* Whether layer i's output gradient is needed (this or an earlier layer trains). */
bool dt_layer_needs_dact(const struct dt_model *m, int i);
/* Whether a layer's backward reads its own output (tanh, sigmoid, softmax: the kernels'
 * derivatives from y), so that its output is kept until then. */
bool dt_layer_backward_reads_output(const struct dt_layer *L);
/* Whether a layer is a view of its input's storage (a flatten of a layer's output), and the
 * layer whose storage layer j's output is (through such views). */
bool dt_layer_is_view(const struct dt_layer *L);
int dt_layer_storage(const struct dt_model *m, int j);
/* Floats per row of layer i's output storage (0 for a flatten view). */
long dt_layer_act_floats(const struct dt_model *m, int i);
/* Receive-buffer floats a collective member needs in the executor (widest round summed over
 * receives; the library's reduce-scatter: its chunk). */
long dt_coll_scratch_floats(const struct dt_op *op, int group_size, int me);

/* One line for dtsim --summary: bytes per parameter (weights, gradients, optimizer state with
 * the master weights of mixed precision) and per sample (what a rank's buffer table holds per
 * row) at the options' precision and optimizer. */
void dt_precision_print_memory(const struct dt_model *m, const struct dt_plan_options *o,
                               FILE *out);

/* Checks a plan: regions inside the buffer table, every handle started once and waited once
 * after, the same collectives in the same order on every member of a group, every SEND
 * matched by a RECV of the same size (source, tag and order). */
int dt_plan_check(const struct dt_plan *plan, struct dt_error *err);

/* Name of an op in traces, the same in dtsim and dtexec: "load", "forward conv2d",
 * "backward dense", "update", "allreduce/ring", "wait", "send", "recv", "zero", "loss". */
const char *dt_op_name(const struct dt_plan *plan, const struct dt_op *op, char *buf, size_t len);

/* The op's name in a trace (dtsim's and dtexec's alike): dt_op_name, with " mb N" after
 * compute and loss ops when the step has several micro-batches ("forward dense mb 3"). */
const char *dt_op_trace_name(const struct dt_plan *plan, const struct dt_op *op, char *buf,
                             size_t len);

/* A trace event's `"ts": T, "dur": D` (microseconds) for the span [t0_s, t1_s]: both ends are
 * rounded to the nanosecond and the duration is their difference, so that an op that starts
 * when the previous one ends never overlaps it in the trace. */
void dt_trace_span(FILE *f, double t0_s, double t1_s);

/* Human-readable listing of every rank's ops (for --dump-plan and tests). */
void dt_plan_print(const struct dt_plan *plan, FILE *out);

#endif
