/* dtsim --links: how busy each network link was over one simulated iteration, and the N
 * busiest. The player fills a report at the end of a run (dt_sim_options.links); dtsim prints
 * it as a table section, CSV rows or a JSON object. Links of unlimited capacity (a
 * non-blocking switch's latency) are left out: they cannot be a bottleneck. */
#ifndef DT_SIM_LINKS_H
#define DT_SIM_LINKS_H

#include <stdio.h>

#include "dt/error.h"
#include "engine.h"
#include "network.h"

struct dt_link_use {
    int id;              /* the engine's link number */
    char name[40];       /* as network.c names it: "node 3 nic-up 7", "leaf-up 12-5" */
    double capacity_Bps; /* per direction */
    double bytes;        /* carried over the iteration */
    double busy_s;       /* with at least one flow moving bytes */
    double util;         /* busy_s / iteration time */
    int max_flows;       /* most flows at once */
};

struct dt_link_report {
    int want;            /* how many of the busiest to keep */
    bool filled;         /* a run filled it (later runs of a calibration interval do not) */
    double iter_s;
    int n_links;         /* links of finite capacity */
    int n_used;          /* of those, links that carried bytes */
    double mean_util;    /* mean busy share over the used links */
    int n;               /* entries in top: min(want, n_used) */
    struct dt_link_use *top; /* busiest first: busy time, then bytes, then link order */
};

/* Ranks the links of a finished run; keeps the report's `want` busiest. */
int dt_link_report_fill(struct dt_link_report *rep, const struct dt_sim *sim,
                        const struct dt_simnet *net, double iter_s, struct dt_error *err);
void dt_link_report_free(struct dt_link_report *rep);

/* One section per report: a text table, CSV rows (prefix: the caller's leading columns, with
 * their trailing comma), or a JSON object (no trailing newline). */
void dt_link_report_table(const struct dt_link_report *rep, const char *title, FILE *out);
void dt_link_report_csv_header(FILE *out);
void dt_link_report_csv(const struct dt_link_report *rep, const char *prefix, FILE *out);
void dt_link_report_json(const struct dt_link_report *rep, FILE *out);

#endif
