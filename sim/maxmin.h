/* Max-min fair sharing of link capacities among flows (progressive filling).
 *
 * The problem: links l = 0..L-1 with capacities c_l > 0 (bytes/s); flows f = 0..F-1, each
 * crossing a list of links R_f (a link listed twice is used twice). Find rates r_f with
 *     sum over f crossing l of r_f <= c_l            for every link l,
 * such that no rate can grow without lowering a rate that is already smaller or equal: every
 * flow crosses a saturated link on which its rate is the largest (its bottleneck).
 *
 * Progressive filling (water-filling) builds that allocation: raise all unfrozen rates
 * together; the first link to saturate is the one with the smallest
 *     share_l = (c_l - rates already frozen on l) / (unfrozen flows on l);
 * freeze its unfrozen flows at share_l, take their rate off every link they cross, repeat
 * until every flow is frozen. Each round costs O(links still carrying unfrozen flows), so a
 * solve is O(L * rounds + sum |R_f|); callers keep problems small by solving one connected
 * component of the flow/link graph at a time.
 *
 * A flow that crosses no link gets rate INFINITY. */
#ifndef DT_SIM_MAXMIN_H
#define DT_SIM_MAXMIN_H

#include "dt/error.h"

struct dt_maxmin; /* a reusable workspace; owned by its creator */

int dt_maxmin_create(struct dt_maxmin **out, struct dt_error *err);
void dt_maxmin_destroy(struct dt_maxmin *mm);

/* Solves one problem. cap: n_links capacities (> 0, finite). Flow f crosses links
 * links[start[f]] .. links[start[f+1]-1] (indices into cap); start has n_flows+1 entries.
 * Writes rate[f] (bytes/s). DT_EINPUT for a bad index or capacity, DT_ENOMEM. */
int dt_maxmin_solve(struct dt_maxmin *mm, int n_links, const double *cap, int n_flows,
                    const int *start, const int *links, double *rate, struct dt_error *err);

/* Rounds of the last solve (links frozen one after another): for statistics. */
int dt_maxmin_rounds(const struct dt_maxmin *mm);

#endif
