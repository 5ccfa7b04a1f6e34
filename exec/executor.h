/* Walks one rank's ops of a plan with real kernels and MPI: the executed strategy is the
 * simulated one, op for op.
 *
 * LOAD      calls the caller's loader, which copies this rank's batch into the executor's
 *           input buffers;
 * COMPUTE   forward/backward of one layer on the CPU network (exec/cpu/net.h). The last
 *           forward also zeroes the gradients and computes the loss; its gradient is seeded
 *           with 1/global batch per sample, i.e. the local mean gradient times grad_scale, so
 *           that the SUM of the ranks' gradients is the global mean. UPDATE runs the optimizer
 *           over the op's region (a parameter-server shard is just a region);
 * COLL      is expanded by dt_coll_schedule (libdt/collective.c, the simulator's expansion) into
 *           rounds of MPI_Irecv into scratch + MPI_Isend + wait, then sum or copy into the
 *           region; DT_ALG_LIBRARY calls the MPI library's collective on the group's
 *           communicator instead. A non-blocking COLL posts its first round at its place,
 *           advances a round whenever the executor polls it (after every compute op and while
 *           it waits for anything), and completes at the WAIT naming its handle;
 * SEND/RECV point-to-point transfers of a region (RECV into scratch, then sum or copy);
 * WAIT      completes a non-blocking op.
 *
 * Tags: blocking collectives use one tag, each handle its own, so that messages of
 * overlapping collectives never match each other (MPI orders messages of one tag between
 * two ranks, which keeps the rounds of one collective in order).
 */
#ifndef DTX_EXECUTOR_H
#define DTX_EXECUTOR_H

#include <mpi.h>
#include <stdbool.h>
#include <stdint.h>

#include "cpu/net.h"
#include "dt/error.h"
#include "dt/plan.h"

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

/* Fills this rank's batch: x (batch x input floats) and y (batch x label rows). */
typedef void (*dtx_load_fn)(void *ctx, float *x, int *y);

struct dtx_exec;

/* Prepares the executor of this rank (MPI rank of comm) for plan: schedules of every
 * collective, scratch buffers, one communicator per plan group (collective over comm: every
 * rank must call it). The plan's rank count must equal comm's size; the net must have been
 * built for at least this rank's batch. plan, net and comm must outlive the executor. */
int dtx_exec_create(const struct dt_plan *plan, struct dtk_net *net, MPI_Comm comm,
                    const struct dtx_optimizer *opt, struct dtx_exec **out, struct dt_error *err);
void dtx_exec_destroy(struct dtx_exec *ex);

/* Runs one iteration. loss: the mean loss of this rank's batch; correct: rows predicted
 * right. times: NULL or this rank's n_ops entries, relative to t0 (an MPI_Wtime value). */
int dtx_exec_iteration(struct dtx_exec *ex, dtx_load_fn load, void *load_ctx, double *loss,
                       long *correct, struct dtx_op_time *times, double t0,
                       struct dt_error *err);

/* Optimizer steps taken so far. */
long dtx_exec_steps(const struct dtx_exec *ex);

/* A 64-bit hash of the parameters' bits (FNV-1a over 32-bit words). */
uint64_t dtx_params_hash(const float *p, long n);
/* Whether every rank holds bit-identical parameters (collective over the executor's comm). */
bool dtx_exec_params_agree(struct dtx_exec *ex);

/* Bytes of scratch (receive buffers) the executor allocated. */
double dtx_exec_scratch_bytes(const struct dtx_exec *ex);

#endif
