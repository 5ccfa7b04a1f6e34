/* Checkpoints of a dtexec run: --checkpoint DIR --checkpoint-every N writes, --resume DIR
 * continues from the newest complete one.
 *
 * One file per rank, holding exactly the PARAMS, OPT and STATE buffers of the rank's buffer
 * table (include/dt/plan.h), and under mixed precision MASTER and SCALER, each in its table
 * dtype and in table order: a checkpoint follows whatever the plan shards
 * (pipeline stages, and tensor parallelism or ZeRO when they come) with no gather, no single
 * writer and no rank holding more than its own share; ranks on nodes without a shared disk
 * each keep their own files. Besides the buffers, a rank's file holds the position
 * (optimizer steps taken, epoch, next iteration within it), the caller's running sums of the
 * epoch, the loss scale, the steps skipped on overflow and the run's
 * identity (model, strategy, ranks, parallel config with the precision, optimizer). Format
 * version 2 (magic DTCKPT2); version 1 (float32 only, the same layout) is still read. Gradients, activations and what layers keep are not
 * saved: every step starts by zeroing or overwriting them.
 *
 * Files in DIR (step: optimizer steps taken, 12 digits):
 *   step-000000000012.rank-00000.ckpt   one per rank
 *   step-000000000012.manifest          rank 0's, written once every rank's file is in place:
 *                                       the position and each rank file's size and CRC
 * Each is written to NAME.tmp, fsynced, renamed to NAME, and the directory fsynced; each ends
 * with the CRC-32 (zlib) of everything before it. Layout, in the machine's byte order: a fixed
 * header (struct in checkpoint.c), then a table (rank file: kind, dtype, elements of each saved
 * buffer; manifest: bytes and CRC of each rank's file), then the buffers (rank file), then the
 * CRC. After step S is complete every rank removes its files of every step but S and the
 * previous complete one: DIR holds at most the newest two.
 *
 * A step is valid when its manifest's CRC holds and every rank's file holds its own CRC and the
 * size and CRC its manifest lists. --resume tries steps from the newest; an invalid one is
 * skipped with a one-line warning naming the file and why; a valid manifest of another run's
 * shape is refused (DT_EINPUT). Rank 0 reads the manifests and broadcasts; each rank checks its
 * own file; a reduction decides: every rank resumes from the same step.
 */
#ifndef DTX_CHECKPOINT_H
#define DTX_CHECKPOINT_H

#include <mpi.h>
#include <stdint.h>

#include "dt/error.h"
#include "dt/plan.h"
#include "executor.h"

#define DTX_CKPT_SUMS 5 /* running figures of the epoch the caller keeps in a checkpoint */

/* Where a run stands between two steps. */
struct dtx_ckpt_pos {
    long step;          /* optimizer steps taken */
    int epoch;          /* 0-based epoch of the next iteration */
    long iter;          /* next iteration within it (the epoch's iterations: its end) */
    double sums[DTX_CKPT_SUMS]; /* this rank's running sums of that epoch (the caller's) */
};

/* Checkpointing of one rank. */
struct dtx_ckpt {
    const char *dir;            /* --checkpoint DIR (NULL: resume only) */
    const struct dt_plan *plan;
    struct dtx_exec *ex;
    MPI_Comm comm;
    int rank, size;
    const char *prog;           /* names warnings */
    char identity[1024];        /* what a resume must match */
    long kept;                  /* the newest complete step of DIR this run knows, or -1 */
    void *entries;              /* rank 0: every rank's file size and CRC for the manifest */
};

/* Prepares checkpointing of plan's rank (comm's rank) run by ex; run: the caller's part of
 * the identity (e.g. "optimizer=adam-torch"). Rank-local status (DT_ENOMEM). */
int dtx_ckpt_init(struct dtx_ckpt *c, const char *dir, const struct dt_plan *plan,
                  struct dtx_exec *ex, MPI_Comm comm, const char *run, const char *prog,
                  struct dt_error *err);
void dtx_ckpt_free(struct dtx_ckpt *c);

/* --checkpoint DIR: creates it when missing (one level), checks that this rank can create
 * files in it, and (rank 0) that it holds no checkpoint unless it is resume_dir (NULL: none):
 * a new run never deletes another run's checkpoints. Rank-local status, DT_EINPUT naming the
 * flag. */
int dtx_ckpt_prepare(const char *dir, const char *resume_dir, int rank, struct dt_error *err);

/* Writes step pos->step (collective). Rank-local status: DT_ESYS naming the file on the rank
 * that failed (and no manifest: the step is not complete). */
int dtx_ckpt_save(struct dtx_ckpt *c, const struct dtx_ckpt_pos *pos, struct dt_error *err);

/* Loads the newest valid step of dir into the executor's buffers, sets its step count (the
 * step decides the dropout masks), and fills *pos (collective; rank 0 prints the warnings).
 * Every rank returns the same status: DT_EINPUT when dir cannot be read, holds no
 * checkpoint, no valid one, or one of another shape (err filled on rank 0 at least). */
int dtx_ckpt_resume(struct dtx_ckpt *c, const char *dir, struct dtx_ckpt_pos *pos,
                    struct dt_error *err);

#endif
