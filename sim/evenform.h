/* What a round timed by classes (evenshare.h) needs to be timed again at other bytes, without
 * its flows: a round whose flows all carry the same bytes, of which only the latencies and
 * the routes make the components and the classes (a class: the flows of one latency), so that
 * another size changes only when each class ends. The share the moving classes get depends on
 * which classes are moving alone (the flows in transfer on each link), so each moment seen
 * (component, moving classes) keeps its share; a size that reaches a moment not seen is timed
 * from its flows again, and what it sees is added. tests/test_evenshare holds a form's times
 * to the engine's. */
#ifndef DT_SIM_EVENFORM_H
#define DT_SIM_EVENFORM_H

#include <stdbool.h>
#include <stdint.h>

/* Component comp with the classes of mask in transfer: every one gets share r when even
 * (else the engine plays the component). */
struct dt_even_moment {
    int comp;
    uint32_t mask;
    double r;
    bool even;
};

struct dt_evenform {
    double free_end;       /* the last end of the flows with nothing to share */
    int n_comps;
    int *cls_start;        /* component c's class latencies: lat[cls_start[c] .. [c + 1] - 1] */
    double *lat;
    int n_lat, cap_lat, cap_comps;
    struct dt_even_moment *m; /* sorted by (comp, mask), one each */
    int n_m, cap_m;
};

/* An empty form (no component). */
void dt_evenform_clear(struct dt_evenform *f);
void dt_evenform_free(struct dt_evenform *f);
/* Component n_comps, with latencies lat[0..n-1] in class order; 0, or -1 out of memory. */
int dt_evenform_add_comp(struct dt_evenform *f, const double *lat, int n);
/* Keeps a moment (unsorted until dt_evenform_sort); 0, or -1 out of memory. */
int dt_evenform_add_moment(struct dt_evenform *f, struct dt_even_moment m);
/* Sorts the moments and keeps one of each. */
void dt_evenform_sort(struct dt_evenform *f);
/* The moment (comp, mask), or NULL when not seen (moments sorted). */
const struct dt_even_moment *dt_evenform_moment(const struct dt_evenform *f, int comp,
                                                uint32_t mask);
/* Adds from's moments to f (the same round's form: the same components and classes); 0, or
 * -1 out of memory. */
int dt_evenform_merge(struct dt_evenform *f, const struct dt_evenform *from);
/* Makes `to` (empty or a form) a copy of `from`; 0, or -1 out of memory. */
int dt_evenform_copy(struct dt_evenform *to, const struct dt_evenform *from);

#endif
