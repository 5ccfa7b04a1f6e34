/* Plots of a validation with gnuplot, PNG and SVG, named after what they show:
 *   PREFIX-strong-scaling-epoch-time     epoch time vs processes (one node): measured points,
 *                                        predicted line with its 95% interval band
 *   PREFIX-strong-scaling-speedup        speedup vs processes (epoch of 1 process / epoch)
 *   PREFIX-strong-scaling-efficiency     speedup / processes
 *   PREFIX-weak-scaling-iteration-time   time per iteration vs processes (fixed batch per
 *                                        process: flat is ideal)
 *   PREFIX-nodes-effect-epoch-time       the same processes spread over more nodes (seed 002,
 *                                        Figure 9)
 *   PREFIX-breakdown-CONFIG              predicted compute / exposed communication / idle per
 *                                        iteration, stacked, one bar per strategy, with the
 *                                        measured iteration time where there is one
 *   PREFIX-predicted-vs-measured         every run, with interval bars, and y = x
 * Each plot's data (.dat) and script (.gp) stay beside it so that it can be redrawn. */
#ifndef DTV_PLOT_H
#define DTV_PLOT_H

#include <stdio.h>

#include "check.h"
#include "dt/calibration.h"

/* cal: the calibration the breakdown bars use (NULL: defaults). Returns DT_OK, or DT_ESYS
 * when gnuplot is missing or fails (the scripts are written all the same). log gets one line
 * per file written. */
int dtv_plot(const char *dir, const char *prefix, const char *title,
             const struct dtv_runset *set, const struct dtv_check *c,
             const struct dt_calibration *cal, FILE *log, struct dt_error *err);

/* The gnuplot program (configure's GNUPLOT, or $GNUPLOT); NULL when there is none. */
const char *dtv_gnuplot(void);

#endif
