/* What a training step costs besides its compute and communication: reading its data from
 * storage (the price of the nodes: dt_topology_nodes_price_per_h). */
#ifndef DT_SIM_EPOCH_H
#define DT_SIM_EPOCH_H

#include "dt/costmodel.h"
#include "dt/model.h"
#include "dt/plan.h"

/* Bytes one training sample occupies as read: the model's dataset size over its samples when
 * it gives them (`dataset: {bytes: ...}`), else one byte per input value (8-bit pixels, as
 * MNIST and CIFAR files store them) or four per token id. */
double dt_sample_read_bytes(const struct dt_model *m);

/* Seconds the slowest node takes to read one step's samples: the samples its ranks load
 * (LOAD ops of the step program) x dt_sample_read_bytes / its read bandwidth (cp's read_bw
 * when a calibration sets it, else the node group's `data_read`). Nodes without a read
 * bandwidth count 0: reading is not modelled there. */
double dt_step_read_s(const struct dt_plan *plan, const struct dt_cost_params *cp);
/* dt_step_read_s in two parts, for a caller that reads one plan at many cost parameters (a
 * fit): the samples each node's ranks load per step (a malloc'd array of the topology's
 * n_nodes, NULL when out of memory), and the read's seconds from them at cp. */
double *dt_step_node_samples(const struct dt_plan *plan);
double dt_step_read_from(const struct dt_plan *plan, const double *node_samples,
                         const struct dt_cost_params *cp);

/* One step of plan as dtsim counts it, simulated at group_cp (one per node group): the
 * player's iteration, the loader's read (dt_step_read_s at the first group's), the step (the
 * slower of the two: the loader reads ahead) and the per-rank means of compute,
 * communication and idle seconds. */
struct dt_step {
    double sim_s, read_s, iter_s, compute_s, comm_s, idle_s;
};
int dt_step_simulate(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                     struct dt_step *out, struct dt_error *err);
/* dt_step_simulate's step from the player's result and the read's seconds (for a caller
 * that played the plan, or a part of it, itself: validate/fastsim.c). */
struct dt_sim_result;
void dt_step_fill(const struct dt_sim_result *res, double read_s, struct dt_step *out);

#endif
