/* The expansion of a collective, by its algorithm, into per-rank rounds of point-to-point
 * transfers. One function, two users: dtsim turns the transfers into flows on the topology,
 * dtexec into MPI_Isend/MPI_Irecv (so the executed algorithm is literally the simulated one).
 *
 * Semantics of a round: a rank posts all transfers of the round at once, waits for all of
 * them, then (for receives with sum) adds the received floats into its buffer. Offsets and
 * counts are in floats, relative to the collective's region. Reductions are sums.
 */
#ifndef DT_COLLECTIVE_H
#define DT_COLLECTIVE_H

#include <stdbool.h>

#include "dt/plan.h"

struct dt_xfer {
    bool send;    /* send to peer, else receive from peer */
    int peer;     /* index within the group */
    long offset;  /* first float of the region */
    long count;
    bool sum;     /* receive: add into the buffer (else overwrite) */
};

/* A schedule for ONE member of the group: rounds of transfers. Round r holds
 * xfers[round_start[r] .. round_start[r+1]-1] (linear algorithms post p-1 in one round).
 * A window (dt_coll_schedule_rounds) keeps only some rounds: the others are counted in
 * `seen` but not stored, so a simulator can hold one round of each member at a time.
 * A schedule that stores one round holds its transfers from 0 and may leave round_start
 * unset (a lazily filled ring round, a line apart from the transfers, is written and read
 * millions of times): read a round's span with dt_schedule_round. */
struct dt_schedule {
    int n_rounds, cap_rounds;
    int *round_start;   /* n_rounds + 1 entries */
    int n_xfers, cap_xfers;
    struct dt_xfer *xfers;
    int first, last;    /* the window: rounds first <= r < last are stored */
    int seen;           /* rounds generated so far, stored or not */
};

/* Stored round r's transfers: xfers[*lo .. *hi). */
static inline void dt_schedule_round(const struct dt_schedule *s, int r, int *lo, int *hi)
{
    if (s->n_rounds == 1) {
        *lo = 0;
        *hi = s->n_xfers;
        return;
    }
    *lo = s->round_start[r];
    *hi = s->round_start[r + 1];
}

void dt_schedule_init(struct dt_schedule *s);
void dt_schedule_free(struct dt_schedule *s);

/* Fills s with member `me`'s rounds for collective kind/alg over p members on `count`
 * floats (root: group index for reduce/bcast; for an allreduce by DT_ALG_RAIL_RING the
 * members per node, consecutive in the group, 0 meaning all p). DT_ALG_LIBRARY is resolved
 * first with dt_coll_library_choice. Returns DT_EINPUT for a combination that does not
 * exist (e.g. bcast by ring, a rail-ring whose nodes do not divide p). */
int dt_coll_schedule(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int me, int root,
                     long count, struct dt_schedule *s, struct dt_error *err);

/* Lazy expansion: fills s with rounds [first, first + n) of the same schedule only (round
 * first becomes s's round 0) and sets *total to the member's number of rounds. A ring's round
 * costs O(1) whatever its place; the other algorithms replay their O(log p) steps. */
int dt_coll_schedule_rounds(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int me,
                            int root, long count, int first, int n, struct dt_schedule *s,
                            int *total, struct dt_error *err);
/* As dt_coll_schedule_rounds(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, p, me, g, count, round, 1,
 * s, ...) for arguments it accepted (2 <= p, 0 <= me < p, g divides p; g = p: DT_ALG_RING),
 * without checking them again: round `round` alone, its phase and step found by arithmetic.
 * A player that asked for round 0 through dt_coll_schedule_rounds asks for the others here (a
 * million times on a large ring). 0, or DT_ENOMEM. */
int dt_coll_ring_round(int p, int g, int me, long count, int round, struct dt_schedule *s);

/* Fills s with one round holding one transfer: a plan's SEND or RECV of `count` floats
 * to/from peer (a global rank here: the "group" is the whole plan). */
int dt_schedule_p2p(bool send, int peer, long count, bool sum, struct dt_schedule *s);

/* NCCL's double binary tree allreduce (DT_ALG_TREE): each tree carries half of the vector
 * in dt_tree_chunks(count) pipelined chunks of at most DT_TREE_CHUNK floats (512 KiB in
 * fp32), and every member has dt_tree_rounds(p, count) = 2 (chunks + h - 1) rounds, h the
 * trees' height (log2 p for a power of two): reduce rounds, then broadcast rounds. */
#define DT_TREE_CHUNK 131072L
long dt_tree_chunks(long count);
int dt_tree_rounds(int p, long count);
/* The most floats member me receives in one round of that allreduce (its receive scratch),
 * without expanding its schedule (a 1.3B-parameter gradient's has about 9,900 rounds). */
long dt_tree_widest_recv(int p, int me, long count);

/* The rounds of a direct collective (DT_ALG_DIRECT: reduce-scatter, allgather, or the two as
 * an allreduce) over p members of count floats when in each every member sends every other
 * member one chunk (peers in rank order), none empty (count >= p): its rounds (1 or 2), with
 * *widest the largest chunk (the others one float less at most) and summed[r] the most floats
 * a member sums after round r. 0 for other collectives, and where a chunk is empty. */
int dt_coll_direct_rounds(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, long count,
                          long *widest, long summed[2]);

/* How many rounds after round r of a flat ring (DT_ALG_RING, or the library's choice of it:
 * allreduce, reduce-scatter, allgather) are round r again but for which chunk each member
 * sends and receives: the rest of r's phase (each of its p - 1 rounds sends every chunk once,
 * to and from the same neighbours). 0 for other collectives and past the last round. */
int dt_coll_ring_repeats(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, long count,
                         int r);

/* The algorithm MPICH 4.0 uses by default for this collective and message size. */
enum dt_coll_alg dt_coll_library_choice(enum dt_coll_kind kind, int p, long count);

/* How chunk i of n chunks of `count` floats is placed (first chunks one float larger). */
void dt_chunk(long count, int n, int i, long *offset, long *len);

#endif
