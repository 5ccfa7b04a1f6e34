/* A round of flows all sent at time 0 on an empty fabric, timed without playing each flow
 * through the engine where the fabric shares evenly.
 *
 * The engine (engine.h) starts a flow's transfer after its route's latency and shares the
 * links max-min among the flows in transfer. Flows that share no link, directly or through
 * other flows, never change each other's rates: the round splits into components (flows
 * joined by the shared links they cross), each timed on its own; the round ends when the last
 * component does (or a flow with nothing to share: no bytes, or only links of infinite
 * capacity, which ends when its latency is over).
 *
 * Within a component, flows with the same latency and bytes form a class. While every flow in
 * transfer has the same smallest fair share r = min over its links of capacity / (flows in
 * transfer on the link, a flow counted once per crossing), max-min gives every one of them
 * exactly r: progressive filling raises all rates together, the first level at which a link
 * saturates is r (no link saturates below, since r is every flow's smallest share), and every
 * flow crosses a link that saturates at r (the one that gives its share), so every flow is
 * frozen at r in that first level. Every flow of a class then started together, always had
 * the same rate as the others and has the same bytes left: a class is one flow, and the
 * component's time is an event loop over its classes (starts, ends), the engine's arithmetic
 * repeated on one flow per class (the rate r = capacity / count as the engine divides it; a
 * flow's bytes left brought up to date only when its rate changes; its end at now + left /
 * rate). A component where some moment's shares are not even (or with more than
 * DT_EVENSHARE_MAX_CLASSES classes) is played on the engine instead, its flows alone in their
 * order: the engine solves each component of flows on its own, so the rest of the round does
 * not change its time.
 *
 * Exactness: the engine's general max-min solve (maxmin.c) takes rates off the links as it
 * freezes flows, so a link's later share (capacity less k r, over count less k) can round an
 * ulp above r; there a flow's rate, and its end, could differ from the class's in the last
 * bits. tests/test_evenshare.c holds the two to each other on many rounds. */
#ifndef DT_SIM_EVENSHARE_H
#define DT_SIM_EVENSHARE_H

#include <stdbool.h>

#include "dt/error.h"
#include "engine.h"
#include "evenform.h"

#define DT_EVENSHARE_MAX_CLASSES 16 /* more in a component: played on the engine */

struct dt_evenshare;

int dt_evenshare_create(struct dt_evenshare **out, struct dt_error *err);
void dt_evenshare_destroy(struct dt_evenshare *es);

/* A new round, without flows. */
void dt_evenshare_clear(struct dt_evenshare *es);
/* Adds a flow of `bytes` over route[0..n_hops-1] (links of sim; checked as dt_sim_flow checks
 * them), sent at 0. */
int dt_evenshare_flow(struct dt_evenshare *es, const struct dt_sim *sim, double bytes,
                      const int *route, int n_hops, struct dt_error *err);
/* *s: the time the round's last flow ends, as the engine would play them all from a fabric
 * with no flow and its clock at 0. sim is restarted and left with the uneven components'
 * flows played (nothing on it when every component was even). */
int dt_evenshare_time(struct dt_evenshare *es, struct dt_sim *sim, double *s,
                      struct dt_error *err);

/* The last dt_evenshare_time's form (evenform.h) where its flows all carried the same bytes
 * (> 0) and every component was even; else NULL. Valid until the next round. */
const struct dt_evenform *dt_evenshare_form(const struct dt_evenshare *es);
/* *s: the time dt_evenshare_time gives the form's round with every flow carrying `bytes`
 * (> 0), from the form alone; false where it reaches a moment the form has not seen (or not
 * even): then time the round from its flows. */
bool dt_evenshare_form_time(const struct dt_evenform *f, double bytes, double *s);

/* Flows of the last dt_evenshare_time: in even components, and played on the engine. */
void dt_evenshare_counts(const struct dt_evenshare *es, long *even, long *played);

#endif
