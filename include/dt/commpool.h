/* Receive buffers by what is in flight: the offsets of a program's collectives and summing
 * receives in one pool per dtype (DT_BUF_COMM), the rule dtsim sizes the buffer by and dtexec
 * addresses it with.
 *
 * An op's receive scratch (dt_coll_scratch_floats) is live from its start to its completion:
 * a blocking op only during itself, a non-blocking one until the WAIT of its handle (a
 * non-blocking op never waited stays live to the program's end). Ops live at the same time
 * get disjoint ranges; others may share. Each op is placed when it starts, at the lowest
 * offset free of the ops then in flight. The step and eval programs never run at once: the
 * rank's pool is the larger of their two. */
#ifndef DT_COMMPOOL_H
#define DT_COMMPOOL_H

#include "dt/plan.h"

/* The pool's elements for the ops[0..n) of rank's program whose regions have dtype; at
 * (n longs, or NULL): each op's offset, -1 for an op with no scratch in that dtype. peak (or
 * NULL): the most elements live at once (a lower bound of the pool). -1: out of memory. */
long dt_comm_pool(const struct dt_plan *plan, int rank, const struct dt_op *ops, int n,
                  enum dt_dtype dtype, long *at, long *peak);

/* The rank's DT_BUF_COMM elements of dtype: the larger of its step and eval pools. */
long dt_comm_pool_rank(const struct dt_plan *plan, int rank, enum dt_dtype dtype);

#endif
