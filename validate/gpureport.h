/* `dtvalidate gpu`: per-device GPU calibrations fitted on NVIDIA's published throughput
 * (validate/data/gpu-published.csv, read by published.c) and the honest reports of what they
 * predict:
 *   1. per device (v100, a100): the fit on all its rows the simulator can run, in sample;
 *      with --dir DIR, written as DIR/v100.yaml and DIR/a100.yaml (what is shipped in
 *      calibrations/);
 *   2. fit on a device's 1-GPU rows, predict its multi-GPU rows (target: within 5%);
 *   3. fit on one framework's rows of a device, predict the other frameworks' rows;
 *   4. fit on V100, predict A100 from its datasheet (topology), and the reverse (target:
 *      within 15%);
 *   5. per framework: its 1-GPU rows (from the device's 1-GPU fit) -> its multi-GPU rows; its
 *      calibration on all its rows (from the device's; DIR/DEVICE-FRAMEWORK.yaml) and what it
 *      predicts of the same framework on the other device.
 * Every row left out (the simulator cannot run it yet) is listed with the reason. */
#ifndef DTV_GPUREPORT_H
#define DTV_GPUREPORT_H

#include <stdbool.h>
#include <stdio.h>

#include "calibrate.h"

struct dtv_gpu_options {
    const char *table;          /* default gpu-published.csv (validate/data/) */
    const struct dtv_fitspec *spec; /* NULL: dtv_fitspec_default on each fit's rows */
    const char *dir;            /* write DIR/DEVICE.yaml; NULL: nothing written */
    FILE *verbose;              /* the fits' notes (dropped parameters), or NULL */
};

/* Prints the reports to out; DT_EINPUT for a bad table (err at file:line:column). */
int dtv_gpu_report(const struct dtv_gpu_options *o, FILE *out, struct dt_error *err);

#endif
