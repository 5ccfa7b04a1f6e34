/* The symmetric estimate of a pipeline's iteration (dtsim --recommend on large clusters):
 * the data-parallel replicas of a pipeline run the same program on equal shares of the
 * batch, so one replica (S stages x T tensor ranks, the first of the topology's ranks) is
 * simulated whole, without the replicas' gradient allreduce, and that allreduce is added in
 * closed form: the ring's 2 (D - 1) steps of n / D bytes each (ZeRO-1's reduce-scatter plus
 * allgather move the same), n the largest stage's gradient bytes, at the network's per-rank
 * bandwidth and latency when the D replicas span nodes (the node's when they do not).
 * An estimate, not a simulation: the ring's reduction passes, the stages' allreduces
 * overlapping one another's remaining backward, the replica's placement on nodes nearer
 * than Megatron's order puts them, and ZeRO-1's smaller update are left out
 * (tests/test_dtsim_recommend.sh holds it to the full simulation on small shapes).
 * Inside the replica, tensor symmetry: the T ranks of a stage do the same work in lockstep
 * (tensor rank 0 holds the largest shards) and their collectives stay on the node's own
 * links, so only tensor rank 0 of each stage is played and each tensor-group collective
 * takes its closed form (its schedule's rounds at the device link's latency and bandwidth,
 * plus the sums) instead of flows: what the full simulation gives when nothing else uses
 * those links (tests/test_symmetry.c holds the two together). */
#ifndef DT_SIM_SYMMETRY_H
#define DT_SIM_SYMMETRY_H

#include "dt/costmodel.h"
#include "dt/plan.h"
#include "epoch.h"
#include "symround.h"

/* Whether the estimate applies to o: a pipeline (gpipe, 1f1b, interleaved) with D > 1
 * replicas under the ring allreduce. */
bool dt_sym_applies(const struct dt_plan_options *o, const struct dt_topology *topo);

/* --recommend estimates (rather than simulates) the pipelines and the data-parallel
 * strategies on more ranks than this: DT_SYM_MIN_RANKS, or the environment's
 * DTSIM_SYM_MIN_RANKS (a test and expert knob, dtsim(1); dt_sym_check_env rejects a value
 * that is not a number >= 0). */
#define DT_SYM_MIN_RANKS 128
int dt_sym_min_ranks(void);
int dt_sym_check_env(struct dt_error *err);
/* Whether --recommend estimates o: it applies and o has over dt_sym_min_ranks() ranks. */
bool dt_sym_used(const struct dt_plan_options *o, const struct dt_topology *topo);

/* The data-parallel mode: every rank of an allreduce strategy (any ZeRO stage, buckets,
 * tensor widths) runs the same program on its share of the batch, so rank 0 alone is played
 * (the largest shards and share), the tensor groups' collectives in the closed form below
 * and every other collective, blocking or not, from its rounds solved on the fabric with
 * every group like its own running it at once (symround.h). An estimate: the members'
 * rounds in lockstep, concurrent collectives of one rank one after another, and the sums
 * off the device (tests/test_symmetry.c holds it to the full simulation). */
bool dt_sym_dp_applies(const struct dt_plan_options *o, const struct dt_topology *topo);
bool dt_sym_dp_used(const struct dt_plan_options *o, const struct dt_topology *topo);

/* The closed form the estimate adds: seconds of a ring allreduce of `bytes` over D replicas
 * whose neighbours are `stride` ranks apart (increasing in bytes). */
double dt_sym_allreduce_s(const struct dt_topology *topo, int D, int stride, double bytes);

/* Plays a one-replica plan (dp 1) with tensor symmetry: tensor rank 0 of each stage, the
 * tensor groups' collectives in closed form at closed_cp (per node group; the group_cp of
 * the rest but for the tests' controls). out: as dt_step_simulate's, means over the ranks
 * played. */
int dt_sym_replica_step(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                        const struct dt_cost_params *closed_cp, struct dt_step *out,
                        struct dt_error *err);

/* Iteration, and per-rank means of compute, communication and idle seconds (the replica's,
 * communication plus the allreduce). */
struct dt_sym_result {
    double iter_s, compute_s, comm_s, idle_s, allreduce_s;
};
/* Replica simulations kept by their replica's options (what its plan depends on), for the
 * candidates that differ only in what the closed-form allreduce sees (D, ZeRO <= 1, ...). */
struct dt_sym_cache {
    struct dt_sym_replica *e;
    int n, cap;
    struct dt_symround *world; /* the data-parallel mode's fabric and collective times */
};
void dt_sym_cache_free(struct dt_sym_cache *c);

/* cache: NULL, or one shared by calls at the same model, topology and group_cp. */
int dt_sym_estimate(const struct dt_model *m, const struct dt_topology *topo,
                    const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                    struct dt_sym_cache *cache, struct dt_sym_result *out,
                    struct dt_error *err);

/* The data-parallel mode: plan (rank 0 with ops: a probe does) played as above, at group_cp. */
int dt_sym_dp_step(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                   struct dt_symround *world, struct dt_step *out, struct dt_error *err);
/* As dt_sym_estimate for the data-parallel mode (allreduce_s 0: its collectives are in the
 * play); cache: NULL, or shared as there (its fabric kept for the next calls); probe: o's
 * probe (dt_plan_probe) when the caller has it, else NULL (compiled here). */
int dt_sym_dp_estimate(const struct dt_model *m, const struct dt_topology *topo,
                       const struct dt_cost_params *group_cp, const struct dt_plan_options *o,
                       const struct dt_plan *probe, struct dt_sym_cache *cache,
                       struct dt_sym_result *out, struct dt_error *err);

#endif
