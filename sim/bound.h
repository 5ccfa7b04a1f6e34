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
 * Each layer that --recompute runs forward again before its backward (recompute.c) counts
 * that forward once more in w (on the rank that runs it, after the gradient it waits for).
 * Updates and loading only add, and are left out. Communication is bounded on
 * its own (dt_rec_comm_bound) and combined with that (dt_rec_total_bound). */
#ifndef DT_SIM_BOUND_H
#define DT_SIM_BOUND_H

#include "dt/costmodel.h"
#include "dt/plan.h"

/* The work w of each (precision, recompute, micro-batch rows, tensor width) met so far: a search asks
 * for the same few thousands of times. Zero-initialise; free with dt_rec_bound_free. */
struct dt_rec_bound_cache {
    struct dt_rec_work { int prec, recompute, rows, tp; double w; } *e;
    int n, cap;
    /* the memory floor's chains (dt_plan_chain_floor) met so far */
    struct dt_rec_chain {
        bool pipeline, seq;
        int tp, recompute, prec;
        struct dt_chain_floor floor;
    } *chains;
    int n_chains, cap_chains;
};
void dt_rec_bound_free(struct dt_rec_bound_cache *c);

/* Seconds; 0 when the config has no whole micro-batch per replica (its compile refuses it),
 * -1 when out of memory. */
double dt_rec_bound(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    long global_batch, struct dt_rec_bound_cache *cache);

/* A lower bound of the communication of o's iteration, seconds (0: none known):
 *  - a pipeline that --recommend estimates in symmetry mode (symmetry.h): the estimate adds
 *    the closed form of a ring allreduce of its largest stage's gradient bytes over the D
 *    replicas (increasing in the bytes) to the replica's simulation. Those bytes are at least
 *    g P / (S T) (P parameters, g bytes per gradient): the S T ranks of a replica hold every
 *    parameter's gradient between them, tensor-replicated layers and the stages' whole
 *    embeddings only add. So the closed form at g P / (S T), added to the replica's compute
 *    bound (dt_rec_bound), is below the estimate;
 *  - a data-parallel family (S = 1) whose D replicas span nodes of one group, each node
 *    holding whole replicas (T divides its devices): every parameter's sum depends on every
 *    node's contribution, so for each parameter something about it leaves each node in the
 *    iteration, its contribution (a gradient) or its sum (a gradient, or a weight after a
 *    sharded update: ZeRO's allgather): at least P x min(weight, gradient bytes) through the
 *    node's NICs, at most nics x NIC bandwidth (the player's flows never exceed a link's
 *    capacity). This holds whatever the algorithm and however it overlaps the backward;
 *  - anything else: 0.
 * tests/test_bound.c and tests/test_symmetry.c hold both to the simulation and the estimate on many small
 * shapes. */
double dt_rec_comm_bound(const struct dt_model *m, const struct dt_topology *topo,
                         const struct dt_cost_params *group_cp, const struct dt_plan_options *o);

/* The first case's closed form, whatever the number of ranks (the tests hold it to the
 * estimate on small shapes). */
double dt_rec_sym_bound(const struct dt_model *m, const struct dt_topology *topo,
                        const struct dt_plan_options *o);

/* The compute bound and the communication bound of o combined: their sum where the
 * communication bound is the term the symmetric estimate adds, else the larger (the
 * exchange may overlap the backward). */
double dt_rec_total_bound(double compute, double comm, const struct dt_plan_options *o,
                          const struct dt_topology *topo);

/* Bytes per device no config can go below, before compiling it: dt_plan_memory_floor
 * (dt/plan.h: parameters' states as ZeRO shards them and the activations the schedule's
 * in-flight micro-batches keep under o's recompute, over any stage cut), its chain taken
 * from the cache; -1 when out of memory. tests/test_memfloor holds it under the compiled
 * probe's largest rank. */
double dt_rec_memory_floor(const struct dt_model *m, const struct dt_topology *topo,
                           const struct dt_plan_options *o, struct dt_rec_bound_cache *cache);

#endif
