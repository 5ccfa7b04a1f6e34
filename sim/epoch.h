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

/* One step of plan as dtsim counts it, simulated at group_cp (one per node group): the
 * player's iteration, the loader's read (dt_step_read_s at the first group's), the step (the
 * slower of the two: the loader reads ahead) and the per-rank means of compute,
 * communication and idle seconds. */
struct dt_step {
    double sim_s, read_s, iter_s, compute_s, comm_s, idle_s;
};
int dt_step_simulate(const struct dt_plan *plan, const struct dt_cost_params *group_cp,
                     struct dt_step *out, struct dt_error *err);

#endif
