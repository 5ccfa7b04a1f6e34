/* A collective's time when every group like its own runs it at once (the data-parallel
 * symmetric estimate, symmetry.h): its schedule's rounds (dt_coll_schedule) in lockstep, each
 * round's transfers of every member of the group, and of the groups that are the same ranks
 * shifted (the data-parallel groups of the other tensor ranks), started together on the real
 * fabric and shared max-min by the engine (NIC sharing, rails, oversubscription count; the
 * engine's time found by classes of flows where the fabric shares evenly, evenshare.h); a
 * round lasts until its last transfer ends, plus the largest sum a member runs after it.
 * Rounds alike are solved once whatever their sums (chunks one float apart taken as equal:
 * a ring's 2 (p - 1) rounds are one solve, a direct reduce-scatter's and allgather's of one
 * size too), and collectives by (kind, algorithm, group, count, bytes), both in hash tables
 * (memo.h). A round whose transfers all carry one count is timed from the form of an earlier
 * round on the same pairs (evenform.h) where that form has seen what its size reaches: its
 * flows are not routed nor classed again. */
#ifndef DT_SIM_SYMROUND_H
#define DT_SIM_SYMROUND_H

#include "dt/costmodel.h"
#include "dt/plan.h"

struct dt_symround;

/* The fabric of topo (all its ranks) at cp, and an empty cache. */
int dt_symround_create(const struct dt_topology *topo, const struct dt_cost_params *cp,
                       struct dt_symround **out, struct dt_error *err);
void dt_symround_destroy(struct dt_symround *sr);

/* *s: seconds of op (a COLL of plan, whose group and the groups `shifts[0..n_shifts-1]`
 * ranks away run it at once) at elem_bytes per float, the sums at cp on dev; *busy_s: the
 * part of it the links are busy (each round's time less its time with no bytes). */
int dt_symround_time(struct dt_symround *sr, const struct dt_plan *plan, const struct dt_op *op,
                     const int *shifts, int n_shifts, double elem_bytes,
                     const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                     double *s, double *busy_s, struct dt_error *err);

/* Round solves, rounds timed by a form of an earlier solve (evenform.h) and collectives
 * timed so far (for the tests and the bench's counts). */
void dt_symround_counts(const struct dt_symround *sr, long *solves, long *by_form,
                        long *collectives);

#endif
