/* A lower bound of a parallel config's simulated iteration, from the model's layer costs
 * alone (no plan compiled): what --recommend orders and prunes its candidates by.
 *
 * Every rank of a replica runs each layer's forward and backward on its share of the
 * micro-batch; dtsim charges each such op at least dt_cost_compute of it at the node group's
 * cost parameters (the player's are the same or slower: co-located ranks share memory
 * bandwidth), and ops of a rank do not overlap. Let w be one micro-batch's work of the whole
 * model on one rank of a tensor group (each layer at the cheaper of its whole and its 1/T
 * share), m the micro-batches (accumulation steps) and S the stages:
 *  - data parallelism (S = 1): iteration >= m w;
 *  - gpipe, 1f1b, naive-mp: stage s cannot start before micro-batch 0 went forward through
 *    the stages before it, and after its last backward that micro-batch's backward still
 *    crosses them, so iteration >= P_s + m w_s for every s (P_s: the work of stages < s per
 *    micro-batch). Whatever the cut, the least X with P_s + m w_s <= X for all s and
 *    sum w_s = w is X = w / (1 - (1 - 1/m)^S): a bound that needs no partition;
 *  - interleaved: its busiest stage, iteration >= m w / S.
 * Recomputation, updates, loading and communication only add, and are left out. */
#ifndef DT_SIM_BOUND_H
#define DT_SIM_BOUND_H

#include "dt/costmodel.h"
#include "dt/plan.h"

/* The work w of each (precision, micro-batch rows, tensor width) met so far: a search asks
 * for the same few thousands of times. Zero-initialise; free with dt_rec_bound_free. */
struct dt_rec_bound_cache {
    struct dt_rec_work { int prec, rows, tp; double w; } *e;
    int n, cap;
};
void dt_rec_bound_free(struct dt_rec_bound_cache *c);

/* Seconds; 0 when the config has no whole micro-batch per replica (its compile refuses it),
 * -1 when out of memory. */
double dt_rec_bound(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    long global_batch, struct dt_rec_bound_cache *cache);

/* Bytes per device no config can go below: its busiest rank holds at least 1/(S T) of the
 * model's parameters (tensor shards and stages split them, replicated layers do not), each
 * with its weight, gradient, optimizer moments and (mixed precision) fp32 master copy,
 * ZeRO's shares over the D replicas as Rajbhandari et al. count them; activations and
 * buffers only add. */
double dt_rec_memory_bound(const struct dt_model *m, const struct dt_topology *topo,
                           const struct dt_plan_options *o);

#endif
