/* What a training run costs besides its iterations' compute and communication: reading the
 * data from storage, and the price of the nodes it holds. */
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

/* USD per hour of the first `nodes` nodes of topo; 0 when one of them has no price. */
double dt_nodes_price_per_h(const struct dt_topology *topo, int nodes);

#endif
