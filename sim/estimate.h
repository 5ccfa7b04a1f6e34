/* A rough, cheap forecast of how long dtsim will take to simulate a plan, so that a run of
 * minutes is announced before it starts (dtsim warns on stderr above DT_ESTIMATE_WARN_S). */
#ifndef DT_SIM_ESTIMATE_H
#define DT_SIM_ESTIMATE_H

#include "dt/plan.h"

/* Seconds above which dtsim warns before a simulation. */
#define DT_ESTIMATE_WARN_S 60.0

/* Flows the simulation of one iteration starts: one per SEND, and for every member of every
 * collective the sends of its first round times its number of rounds (exact for rings, the
 * algorithms large runs use; an estimate for the others). Costs O(ranks x ops), no
 * expansion of whole schedules. */
double dt_estimate_flows(const struct dt_plan *plan);

/* Seconds of simulation for that many flows, at the rate measured on the reference machine
 * (see estimate.c); *rate gets the flows/s used. */
double dt_estimate_seconds(double flows, double *rate);

#endif
