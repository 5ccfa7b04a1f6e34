/* Walks one rank's programs of a plan with real kernels and MPI: the executed strategy is the
 * simulated one, op for op.
 *
 * Buffers: the executor allocates exactly the rank's buffer table (include/dt/plan.h): the
 * network of its layer view (parameters, gradients, state, activations, what layers keep:
 * exec/cpu/net.h), the input and label rows it loads, the optimizer state of the parameters
 * it updates, and a receive buffer per communication op. dtx_exec_alloc_bytes is their sum,
 * which equals dt_plan_rank_memory's total (tests/test_exec_memory.sh checks it).
 *
 * LOAD      calls the caller's loader for rows [row0, row0 + samples) of this rank's step
 *           batch, into the op's slot of the input and label rows;
 * COMPUTE   forward/backward of one layer on rows [slot x slot_rows, + samples);
 * LOSS      the mean loss of the micro-batch, and its gradient seeded with 1/scale per sample;
 * ZERO      zeroes a region; COPY copies (or adds) a region into another;
 * UPDATE    runs the optimizer over a parameter region, its state at the op's offset;
 * COLL      is expanded by dt_coll_schedule (libdt/collective.c, the simulator's expansion) into
 *           rounds of MPI_Irecv into scratch + MPI_Isend + wait, then sum or copy into the
 *           region, on the communicator of the op's group (one per plan group), tagged with
 *           its sequence number in that group; DT_ALG_LIBRARY calls the MPI library's
 *           collective on it instead. A non-blocking COLL advances a round whenever the
 *           executor polls it (after every compute op and while it waits for anything), and
 *           completes at the WAIT naming its handle;
 * SEND/RECV point-to-point transfers of a region on the world communicator with the op's tag
 *           (a summing RECV goes through scratch);
 * WAIT      completes a non-blocking op.
 *
 * The scratch of every op lies in one receive pool per dtype, at the offset dt_comm_pool
 * gives it (dt/commpool.h): ops in flight at once never share a range.
 *
 * Every wait polls; with a watchdog (dtx_exec_set_watchdog) a wait without progress for its
 * limit ends the job naming the silent ranks (exec/watchdog.h), and the blocking library
 * collectives run as their non-blocking forms so that they can be watched.
 */
#ifndef DTX_EXECUTOR_H
#define DTX_EXECUTOR_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu/net.h"
#include "dt/error.h"
#include "dt/plan.h"
#include "watchdog.h"

enum dtx_optimizer_kind { DTX_OPT_ADAM, DTX_OPT_ADAM_TORCH, DTX_OPT_SGD };

struct dtx_optimizer {
    enum dtx_optimizer_kind kind;
    struct dtk_adam adam;   /* lr already multiplied by the plan's lr_scale */
    struct dtk_sgd sgd;
};

/* Timing of one op in one iteration, seconds from the executor's time origin. For a
 * non-blocking op, end_s is when its last round completed (>= start_s + dur_s). */
struct dtx_op_time {
    double start_s, dur_s, end_s;
    double bytes_sent, bytes_recv;
};

/* Fills rows [row0, row0 + rows) of this rank's step batch (eval: of the current chunk) into
 * x (rows x input floats, NULL when the rank loads no inputs) and y (rows x label rows, NULL
 * when it loads no labels). */
typedef void (*dtx_load_fn)(void *ctx, int row0, int rows, float *x, int *y);

struct dtx_exec;

/* Prepares the executor of this rank (MPI rank of comm) for plan: its network (layer view,
 * initialised from init and seed as the whole model would be), buffers, schedules, one
 * communicator per plan group (collective over comm: every rank must call it). The plan's rank
 * count must equal comm's size. plan and comm must outlive the executor. */
int dtx_exec_create(const struct dt_plan *plan, MPI_Comm comm, const struct dtx_optimizer *opt,
                    enum dtk_init init, uint64_t seed, struct dtx_exec **out,
                    struct dt_error *err);
/* The same on a device: gpu < 0 is the CPU (dtx_exec_create); gpu >= 0 runs the compute ops on
 * that CUDA device (--device cuda, exec/cuda_net.h: the plan must pass dtx_cuda_supports).
 * There every buffer of the table lives in GPU memory (dtx_exec_alloc_bytes: what the GPU
 * holds plus the host's receive buffers); communication stages each region through its host
 * copy into the MPI path above (downloaded when the op starts, uploaded when it lands), and
 * what dtx_exec_buffer, dtx_exec_gather_params and dtx_exec_params_agree read is that host
 * copy, downloaded first (writes into it do not reach the GPU). */
int dtx_exec_create_on(const struct dt_plan *plan, MPI_Comm comm,
                       const struct dtx_optimizer *opt, enum dtk_init init, uint64_t seed,
                       int gpu, struct dtx_exec **out, struct dt_error *err);
void dtx_exec_destroy(struct dtx_exec *ex);

/* Watches every wait of the executor from now on (NULL: none; the default). wd must outlive
 * the executor; the watchdog learns each step's time from dtx_exec_iteration. */
void dtx_exec_set_watchdog(struct dtx_exec *ex, struct dtx_watchdog *wd);

/* This rank's network (its layers only). */
struct dtk_net *dtx_exec_net(struct dtx_exec *ex);

/* What the LOSS ops of a program saw: the loss summed over their rows (each micro-batch's mean
 * times its rows), correct predictions and labelled rows; all 0 on ranks without the last
 * layer. */
struct dtx_loss {
    double loss_sum;
    long correct, rows;
};

/* Runs one step. times: NULL or this rank's n_ops entries, relative to t0 (an MPI_Wtime). */
int dtx_exec_iteration(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx,
                       struct dtx_loss *out, struct dtx_op_time *times, double t0,
                       struct dt_error *err);

/* Runs the eval program on one chunk of rows real rows (<= the plan's eval_rows; the loader
 * fills those, the rest is zero): inference mode; adds to out. */
int dtx_exec_eval(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx, int rows,
                  struct dtx_loss *out, struct dt_error *err);

/* Optimizer steps taken so far; a resumed run sets the count it had reached (Adam's bias
 * correction reads it). */
long dtx_exec_steps(const struct dtx_exec *ex);
void dtx_exec_set_steps(struct dtx_exec *ex, long steps);

/* Mixed precision (the plan's precision bf16 or fp16; exec/cpu/net.h stores the network in
 * 2 bytes): MASTER holds the float32 weights, SCALER the loss scale; UNSCALE checks the
 * gradients for inf/NaN (the division by the scale is done in float32 where UPDATE reads
 * them), the flag's MAX over all ranks is a library allreduce, UPDATE of the master weights
 * is skipped when it is set, COPY casts them into the parameters, RESCALE halves the scale
 * after an overflow and doubles it after DT_SCALER_GROWTH_INTERVAL clean steps. 2-byte
 * regions travel as MPI_UINT16_T; reductions add in float32 and round once per hop (the
 * round-based algorithms in the executor, the library's through an MPI_Op of its own).
 * Testing: dtx_exec_set_overflow_at(K) writes inf into rank 0's first gradient at step K. */
void dtx_exec_set_overflow_at(struct dtx_exec *ex, long step);
/* The current loss scale (1 without mixed precision) and the steps skipped on overflow. */
void dtx_exec_scaler(const struct dtx_exec *ex, double *scale, long *skipped);

/* This rank's allocation of one buffer kind of its table that is not per layer (PARAMS, OPT,
 * STATE, and under mixed precision MASTER and SCALER) in the table's dtype
 * (dt_buf_dtype: PARAMS are 2-byte floats under mixed precision), and its elements (*elems);
 * NULL for other kinds. Checkpoints read and write these. */
void *dtx_exec_buffer(struct dtx_exec *ex, enum dt_buf kind, long *elems);
/* The steps skipped on overflow, as a resumed run had counted them. */
void dtx_exec_set_skipped(struct dtx_exec *ex, long skipped);

/* A 64-bit hash of the parameters' bits (FNV-1a over 32-bit words). */
uint64_t dtx_params_hash(const float *p, long n);
/* Whether the replicas of every rank (plan: rank_plan.replicas) hold bit-identical
 * parameters (collective over the executor's comm). */
bool dtx_exec_params_agree(struct dtx_exec *ex);
/* Averages the batchnorm running statistics over each rank's replicas (collective). */
void dtx_exec_sync_state(struct dtx_exec *ex);

/* The full parameter vector in the model's flat order, gathered from the stages (replica 0
 * of each) to rank 0 into full (model->total_params floats; NULL elsewhere); every rank gets
 * its L2 norm and sum (in double). Collective. */
int dtx_exec_gather_params(struct dtx_exec *ex, float *full, double *l2, double *sum,
                           struct dt_error *err);

/* Bytes this rank allocated for its buffer table (the kernels' scratch apart, and with it
 * mixed precision's float32 stage of one layer op: dtk_net_work_bytes). */
double dtx_exec_alloc_bytes(const struct dtx_exec *ex);
/* Bytes of receive buffers it allocated. */
double dtx_exec_scratch_bytes(const struct dtx_exec *ex);

#endif
