/* A round's time by classes where the fabric shares evenly (see evenshare.h). */
#include "evenshare.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "evenform.h"
#include "grow.h"

enum class_state { WAITING, MOVING, DONE };

/* Flows of one component with the same latency and bytes: one flow of the engine's. */
struct flow_class {
    double lat, bytes;   /* what makes the class */
    double left, rate, t_upd, end; /* as the engine's flow record: bytes left at t_upd */
    int first, n;        /* its flows: es->byclass[first .. first + n - 1] */
    enum class_state state;
    bool has_end;
};

struct dt_evenshare {
    /* the round's flows */
    int n_flows, cap_start, cap_lat, cap_bytes, cap_comp;
    double *lat, *bytes;
    int *start;          /* flow i's route: hop[start[i] .. start[i + 1] - 1] */
    int n_hops, cap_hops;
    int *hop;
    int *comp;           /* component of flow i; -1: nothing to share (ends after its latency) */
    double free_end;     /* the last of those */
    /* the links of the round's fabric */
    int n_links, cap_links, cap_llat, cap_parent, cap_cnt, cap_neck, cap_lcomp;
    double *bw, *llat;   /* capacity (INFINITY: not shared), latency */
    int *parent;         /* union-find of the shared links crossed; -1: not crossed */
    int *cnt;            /* flows in transfer on it, once per crossing */
    bool *neck;          /* its share is the smallest */
    int *lcomp;          /* component of a crossed link's root */
    int *touched, n_touched, cap_touched;
    /* components: flows and links grouped by component */
    int n_comps, cap_cstart, cap_order, cap_lstart, cap_lorder, cap_uneven;
    int *cstart, *order, *lstart, *lorder;
    bool *uneven;
    /* one component's classes */
    struct flow_class cls[DT_EVENSHARE_MAX_CLASSES];
    int n_cls, cap_flow_cls, cap_byclass;
    unsigned char *flow_cls;
    int *byclass;
    long even, played;
    /* the last round's form (evenform.h): its classes and moments; lost: one not kept */
    struct dt_evenform form;
    bool form_lost;
};

static int oom(struct dt_error *err)
{
    return dt_fail(err, DT_ENOMEM, "", 0, 0, "out of memory (even-share round)");
}

#define GROW(arr, capv, n) dt_grow((void **)&es->arr, &es->capv, (n), sizeof *es->arr)

int dt_evenshare_create(struct dt_evenshare **out, struct dt_error *err)
{
    *out = calloc(1, sizeof **out);
    if (!*out)
        return oom(err);
    dt_evenshare_clear(*out);
    return DT_OK;
}

void dt_evenshare_destroy(struct dt_evenshare *es)
{
    if (!es)
        return;
    void *arrays[] = {es->lat, es->bytes, es->start, es->hop, es->comp, es->bw, es->llat,
                      es->parent, es->cnt, es->neck, es->lcomp, es->touched, es->cstart,
                      es->order, es->lstart, es->lorder, es->uneven, es->flow_cls,
                      es->byclass};
    for (size_t i = 0; i < sizeof arrays / sizeof *arrays; i++)
        free(arrays[i]);
    dt_evenform_free(&es->form);
    free(es);
}

void dt_evenshare_clear(struct dt_evenshare *es)
{
    es->n_links = -1; /* read at the first flow: the round may be on another fabric */
    es->n_flows = es->n_hops = 0;
    es->free_end = 0;
}

/* The fabric's links (capacity, latency), read at a round's first flow. */
static int read_links(struct dt_evenshare *es, const struct dt_sim *sim, struct dt_error *err)
{
    if (es->n_links >= 0)
        return DT_OK;
    int n = dt_sim_n_links(sim);
    if (GROW(bw, cap_links, n) || GROW(llat, cap_llat, n) || GROW(parent, cap_parent, n) ||
        GROW(cnt, cap_cnt, n) || GROW(neck, cap_neck, n) || GROW(lcomp, cap_lcomp, n))
        return oom(err);
    for (int l = 0; l < n; l++) {
        dt_sim_link_params(sim, l, &es->bw[l], &es->llat[l]);
        es->parent[l] = -1;
        es->cnt[l] = 0;
        es->neck[l] = false;
    }
    es->n_touched = 0;
    es->n_links = n;
    return DT_OK;
}

static int root(int *parent, int l)
{
    while (parent[l] != l) {
        parent[l] = parent[parent[l]];
        l = parent[l];
    }
    return l;
}

/* Shared link l joins the component of shared link m (m < 0: l starts its own). */
static int join(struct dt_evenshare *es, int l, int m, struct dt_error *err)
{
    if (es->parent[l] < 0) {
        if (GROW(touched, cap_touched, es->n_touched + 1))
            return oom(err);
        es->touched[es->n_touched++] = l;
        es->parent[l] = l;
    }
    if (m >= 0) {
        int a = root(es->parent, l), b = root(es->parent, m);
        if (a != b)
            es->parent[a > b ? a : b] = a < b ? a : b;
    }
    return DT_OK;
}

int dt_evenshare_flow(struct dt_evenshare *es, const struct dt_sim *sim, double bytes,
                      const int *route, int n_hops, struct dt_error *err)
{
    int rc = read_links(es, sim, err);
    if (rc)
        return rc;
    if (!(bytes >= 0) || !isfinite(bytes))
        return dt_fail(err, DT_EINPUT, "", 0, 0, "flow of %g bytes: must be finite and >= 0",
                       bytes);
    if (n_hops < 0 || n_hops > DT_SIM_MAX_HOPS)
        return dt_fail(err, DT_EINPUT, "", 0, 0, "flow route of %d hops: at most %d", n_hops,
                       DT_SIM_MAX_HOPS);
    int i = es->n_flows;
    if (GROW(lat, cap_lat, i + 1) || GROW(bytes, cap_bytes, i + 1) ||
        GROW(comp, cap_comp, i + 1) || GROW(start, cap_start, i + 2) ||
        GROW(hop, cap_hops, es->n_hops + n_hops))
        return oom(err);
    double lat = 0; /* summed in route order, as the engine sums it */
    int first_shared = -1;
    for (int h = 0; h < n_hops; h++) {
        int l = route[h];
        if (l < 0 || l >= es->n_links)
            return dt_fail(err, DT_EINPUT, "", 0, 0, "flow route: link %d does not exist", l);
        lat += es->llat[l];
        if (isfinite(es->bw[l]) && bytes > 0) {
            if ((rc = join(es, l, first_shared, err)))
                return rc;
            first_shared = first_shared < 0 ? l : first_shared;
        }
        es->hop[es->n_hops + h] = l;
    }
    es->start[i] = es->n_hops;
    es->n_hops += n_hops;
    es->start[i + 1] = es->n_hops;
    es->lat[i] = lat;
    es->bytes[i] = bytes;
    es->comp[i] = first_shared; /* a link for now: its component's number in group() */
    if (first_shared < 0 && lat > es->free_end)
        es->free_end = lat;
    es->n_flows++;
    return DT_OK;
}

/* Counting sort of items 0..n-1 by key[i] in 0..k-1 (key < 0: left out) into out, with
 * bucket c at out[first[c] .. first[c + 1] - 1]. */
static void sort_by(const int *key, int n, int k, int *first, int *out)
{
    for (int c = 0; c <= k; c++)
        first[c] = 0;
    for (int i = 0; i < n; i++)
        if (key[i] >= 0)
            first[key[i] + 1]++;
    for (int c = 0; c < k; c++)
        first[c + 1] += first[c];
    for (int i = 0; i < n; i++)
        if (key[i] >= 0)
            out[first[key[i]]++] = i;
    for (int c = k; c > 0; c--)
        first[c] = first[c - 1];
    first[0] = 0;
}

/* Numbers the components (in the order of their first link crossed) and groups the flows
 * and the links by component. */
static int group(struct dt_evenshare *es, struct dt_error *err)
{
    int n = 0;
    for (int k = 0; k < es->n_touched; k++)
        es->lcomp[es->touched[k]] = -1;
    for (int k = 0; k < es->n_touched; k++) {
        int r = root(es->parent, es->touched[k]);
        if (es->lcomp[r] < 0)
            es->lcomp[r] = n++;
    }
    es->n_comps = n;
    if (GROW(cstart, cap_cstart, n + 1) || GROW(lstart, cap_lstart, n + 1) ||
        GROW(order, cap_order, es->n_flows) || GROW(lorder, cap_lorder, es->n_links) ||
        GROW(uneven, cap_uneven, n))
        return oom(err);
    for (int i = 0; i < es->n_flows; i++)
        if (es->comp[i] >= 0)
            es->comp[i] = es->lcomp[root(es->parent, es->comp[i])];
    sort_by(es->comp, es->n_flows, n, es->cstart, es->order);
    /* the links: by the component of their root (cnt, all 0 between plays, as the key) */
    for (int l = 0; l < es->n_links; l++)
        es->cnt[l] = es->parent[l] < 0 ? -1 : es->lcomp[root(es->parent, l)];
    sort_by(es->cnt, es->n_links, n, es->lstart, es->lorder);
    for (int l = 0; l < es->n_links; l++)
        es->cnt[l] = 0;
    return DT_OK;
}

/* Component c's classes in es->cls, its flows grouped by class in es->byclass; false when
 * it has more than DT_EVENSHARE_MAX_CLASSES. */
static bool classes(struct dt_evenshare *es, int c)
{
    int a = es->cstart[c], b = es->cstart[c + 1];
    int count[DT_EVENSHARE_MAX_CLASSES] = {0};
    es->n_cls = 0;
    for (int k = a; k < b; k++) {
        int i = es->order[k], j = 0;
        while (j < es->n_cls && (es->cls[j].lat != es->lat[i] || es->cls[j].bytes != es->bytes[i]))
            j++;
        if (j == DT_EVENSHARE_MAX_CLASSES) {
            es->form_lost = true; /* the form's components would be numbered wrong */
            return false;
        }
        if (j == es->n_cls)
            es->cls[es->n_cls++] = (struct flow_class){.lat = es->lat[i], .bytes = es->bytes[i]};
        es->flow_cls[k - a] = (unsigned char)j;
        count[j]++;
    }
    double lat[DT_EVENSHARE_MAX_CLASSES];
    for (int j = 0; j < es->n_cls; j++)
        lat[j] = es->cls[j].lat;
    es->form_lost |= dt_evenform_add_comp(&es->form, lat, es->n_cls) != 0;
    for (int j = 0, w = 0; j < es->n_cls; w += count[j], j++) {
        es->cls[j].first = w;
        es->cls[j].n = 0;
        es->cls[j].left = es->cls[j].bytes;
        es->cls[j].state = WAITING;
    }
    for (int k = a; k < b; k++) {
        struct flow_class *cl = &es->cls[es->flow_cls[k - a]];
        es->byclass[cl->first + cl->n++] = es->order[k];
    }
    return true;
}

/* Class j's flows enter (+1) or leave (-1) their shared links. */
static void move_class(struct dt_evenshare *es, int j, int step)
{
    const struct flow_class *cl = &es->cls[j];
    for (int k = cl->first; k < cl->first + cl->n; k++) {
        int i = es->byclass[k];
        for (int h = es->start[i]; h < es->start[i + 1]; h++)
            if (isfinite(es->bw[es->hop[h]]))
                es->cnt[es->hop[h]] += step;
    }
}

/* The smallest share on component c's links, each link marked whether it gives it. */
static double smallest_share(struct dt_evenshare *es, int c)
{
    double r = INFINITY;
    for (int k = es->lstart[c]; k < es->lstart[c + 1]; k++) {
        int l = es->lorder[k];
        if (es->cnt[l] > 0 && es->bw[l] / es->cnt[l] < r)
            r = es->bw[l] / es->cnt[l];
    }
    for (int k = es->lstart[c]; k < es->lstart[c + 1]; k++) {
        int l = es->lorder[k];
        es->neck[l] = es->cnt[l] > 0 && es->bw[l] / es->cnt[l] == r;
    }
    return r;
}

/* Whether every flow in transfer crosses a link of the smallest share (then max-min gives
 * each that share). */
static bool shares_even(const struct dt_evenshare *es)
{
    for (int j = 0; j < es->n_cls; j++) {
        const struct flow_class *cl = &es->cls[j];
        for (int k = cl->first; cl->state == MOVING && k < cl->first + cl->n; k++) {
            int i = es->byclass[k];
            bool neck = false;
            for (int h = es->start[i]; h < es->start[i + 1] && !neck; h++)
                neck = es->neck[es->hop[h]];
            if (!neck)
                return false;
        }
    }
    return true;
}

/* The engine's apply_rate and settle on the class's flow. */
static void set_rate(struct flow_class *cl, double r, double now)
{
    if (r == cl->rate && cl->has_end)
        return;
    double moved = cl->rate * (now - cl->t_upd);
    if (moved > cl->left)
        moved = cl->left;
    if (moved > 0)
        cl->left -= moved;
    cl->t_upd = now;
    cl->rate = r;
    cl->end = now + cl->left / r;
    cl->has_end = true;
}

/* Who plays a component's classes: the round's flows (es: the links' counts moved, the
 * shares found and kept as moments of its form) or a form's moments (form). */
struct player {
    struct dt_evenshare *es;
    const struct dt_evenform *form;
    int c; /* the component */
};

/* The next event of the classes: a start or an end; INFINITY: none left. */
static double next_event(const struct flow_class *cls, int n_cls)
{
    double t = INFINITY;
    for (int j = 0; j < n_cls; j++) {
        const struct flow_class *cl = &cls[j];
        if (cl->state == WAITING && cl->lat < t)
            t = cl->lat;
        if (cl->state == MOVING && cl->end < t)
            t = cl->end;
    }
    return t;
}

/* The classes whose start or end is at now start or end; the classes in transfer after. */
static uint32_t step_classes(const struct player *p, struct flow_class *cls, int n_cls,
                             double now)
{
    uint32_t moving = 0;
    for (int j = 0; j < n_cls; j++) {
        struct flow_class *cl = &cls[j];
        if (cl->state == WAITING && cl->lat == now) {
            if (p->es)
                move_class(p->es, j, +1);
            cl->state = MOVING;
            cl->t_upd = now;
            cl->rate = 0;
            cl->has_end = false;
        } else if (cl->state == MOVING && cl->end == now) {
            if (p->es)
                move_class(p->es, j, -1);
            cl->state = DONE;
        }
        moving |= (uint32_t)(cl->state == MOVING) << j;
    }
    return moving;
}

/* *r: the share of every class of `moving` now; false where the shares are not even (or, by
 * a form, where the moment was not seen). By the flows, the moment is kept in es's form. */
static bool share(const struct player *p, uint32_t moving, double *r)
{
    if (p->form) {
        const struct dt_even_moment *m = dt_evenform_moment(p->form, p->c, moving);
        *r = m ? m->r : 0;
        return m && m->even;
    }
    struct dt_evenshare *es = p->es;
    *r = smallest_share(es, p->c);
    bool even = shares_even(es);
    struct dt_even_moment m = {p->c, moving, *r, even};
    es->form_lost |= dt_evenform_add_moment(&es->form, m) != 0;
    return even;
}

/* The classes played from their starts: *end the last one's end; false when some moment's
 * shares are not even (or not in the form). */
static bool play_classes(const struct player *p, struct flow_class *cls, int n_cls,
                         double *end)
{
    double now;
    while ((now = next_event(cls, n_cls)) < INFINITY) {
        *end = now;
        uint32_t moving = step_classes(p, cls, n_cls, now);
        if (!moving)
            continue;
        double r;
        if (!share(p, moving, &r))
            return false;
        for (int j = 0; j < n_cls; j++)
            if (cls[j].state == MOVING)
                set_rate(&cls[j], r, now);
    }
    return true;
}

/* Component c played by classes: *end its last flow's end; false (its links' counts back to
 * 0) when its shares are not even at some moment. */
static bool play_component(struct dt_evenshare *es, int c, double *end)
{
    if (!classes(es, c))
        return false;
    struct player p = {es, NULL, c};
    if (play_classes(&p, es->cls, es->n_cls, end))
        return true;
    for (int k = es->lstart[c]; k < es->lstart[c + 1]; k++)
        es->cnt[es->lorder[k]] = 0;
    return false;
}

/* The uneven components' flows, in their order, on the engine from a fresh start. */
static int play_uneven(struct dt_evenshare *es, struct dt_sim *sim, double *s,
                       struct dt_error *err)
{
    int rc = dt_sim_restart(sim, err);
    for (int i = 0; i < es->n_flows && !rc; i++)
        if (es->comp[i] >= 0 && es->uneven[es->comp[i]]) {
            rc = dt_sim_flow(sim, es->bytes[i], &es->hop[es->start[i]],
                             es->start[i + 1] - es->start[i], -1, -1, (uint64_t)i, err);
            es->played++;
        }
    struct dt_sim_completion c;
    while (!rc && (rc = dt_sim_next(sim, &c, err)) == DT_OK && c.kind != DT_SIM_END)
        ;
    *s = dt_sim_now(sim);
    return rc;
}

int dt_evenshare_time(struct dt_evenshare *es, struct dt_sim *sim, double *s,
                      struct dt_error *err)
{
    es->even = es->played = 0;
    int rc = read_links(es, sim, err);
    if (!rc)
        rc = group(es, err);
    if (!rc && (GROW(flow_cls, cap_flow_cls, es->n_flows) ||
                GROW(byclass, cap_byclass, es->n_flows)))
        rc = oom(err);
    if (rc)
        return rc;
    dt_evenform_clear(&es->form);
    es->form.free_end = es->free_end;
    es->form_lost = false;
    double last = es->free_end;
    bool any_uneven = false;
    for (int c = 0; c < es->n_comps; c++) {
        double end = 0;
        es->uneven[c] = !play_component(es, c, &end);
        any_uneven |= es->uneven[c];
        if (!es->uneven[c]) {
            es->even += es->cstart[c + 1] - es->cstart[c];
            last = end > last ? end : last;
        }
    }
    es->form_lost |= any_uneven;
    dt_evenform_sort(&es->form);
    double played = 0;
    if (any_uneven)
        rc = play_uneven(es, sim, &played, err);
    *s = played > last ? played : last;
    return rc;
}

const struct dt_evenform *dt_evenshare_form(const struct dt_evenshare *es)
{
    if (es->form_lost || es->n_flows == 0 || !(es->bytes[0] > 0))
        return NULL;
    for (int i = 1; i < es->n_flows; i++)
        if (es->bytes[i] != es->bytes[0])
            return NULL;
    return &es->form;
}

bool dt_evenshare_form_time(const struct dt_evenform *f, double bytes, double *s)
{
    double last = f->free_end;
    struct flow_class cls[DT_EVENSHARE_MAX_CLASSES];
    for (int c = 0; c < f->n_comps; c++) {
        int a = f->cls_start[c], n = f->cls_start[c + 1] - a;
        for (int j = 0; j < n; j++)
            cls[j] = (struct flow_class){.lat = f->lat[a + j], .bytes = bytes, .left = bytes,
                                         .state = WAITING};
        struct player p = {NULL, f, c};
        double end = 0;
        if (!play_classes(&p, cls, n, &end))
            return false;
        last = end > last ? end : last;
    }
    *s = last;
    return true;
}

void dt_evenshare_counts(const struct dt_evenshare *es, long *even, long *played)
{
    *even = es->even;
    *played = es->played;
}
