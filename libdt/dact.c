/* Activation gradients by liveness (dt/plan.h, struct dt_dact_layout): which layers' gradients
 * share the rank's pool, and where each one sits in it. */
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/tensor.h"

/* A pooled gradient: live from the backward of layer hi (its last reader; the loss: the last
 * layer) down to that of layer lo (its own), w elements per row. */
struct live {
    int lo, hi;
    long w, at;
};

static long width(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    return v ? dt_shard_act_floats(m, v, l) : dt_layer_act_floats(m, l);
}

static int chunk_of(const int *chunk_first, int n_chunks, int l)
{
    int c = 0;
    while (chunk_first && c + 1 < n_chunks && chunk_first[c + 1] <= l)
        c++;
    return c;
}

/* Whether layer o's gradient can live in the pool (see plan.h): reader[o] is its last reader
 * on the rank (-1: none), cross[o] whether a reader is in another chunk, spread[o] whether
 * the rank's readers are in more than one chunk. A gradient that crosses ranks is pooled
 * when it lives inside one backward unit: sent back to the stage it came from after the one
 * chunk that reads it here (the pipeline waits for that send before the pool is written
 * again), or received from a later stage for a layer read here only in its own chunk (the
 * pipeline zeroes it and lands the sum at that chunk's backward). */
static bool poolable(const struct dt_model *m, const struct dt_layer_view *v, int o,
                     const int *reader, const bool *cross, const bool *spread, bool multi_slot)
{
    int last = m->n_layers - 1;
    if (!dt_layer_needs_dact(m, o) || width(m, v, o) == 0 || (v && !v[o].holds))
        return false;
    if (v && !v[o].runs) /* received: its gradient is sent back */
        return reader[o] >= 0 && !spread[o];
    bool received = v && v[o].dact_received;
    if (received && cross[o])
        return false;
    if (reader[o] < 0 && o != last && !received)
        return false; /* nothing here writes it */
    bool by_loss = o == last || reader[o] == last;
    return !(multi_slot && (by_loss || cross[o]));
}

/* The backward of a received gradient's layer o starts with its chunk's: its last layer. */
static int chunk_last(const int *chunk_first, int n_chunks, int n_layers, int o)
{
    return chunk_first ? chunk_first[chunk_of(chunk_first, n_chunks, o) + 1] - 1 : n_layers - 1;
}

static int by_width(const void *a, const void *b)
{
    const struct live *x = a, *y = b;
    if (x->w != y->w)
        return x->w > y->w ? -1 : 1;
    return y->lo - x->lo; /* ties: the later layer first, for a stable layout */
}

static int by_offset(const void *a, const void *b)
{
    const struct live *x = *(const struct live *const *)a, *y = *(const struct live *const *)b;
    return (x->at > y->at) - (x->at < y->at);
}

/* Greedy by size, first fit: each gradient, widest first, at the lowest offset where it
 * overlaps no placed gradient live at the same time. near: scratch for n pointers. */
static long place(struct live *g, int n, const struct live **near)
{
    qsort(g, (size_t)n, sizeof *g, by_width);
    long pool = 0;
    for (int i = 0; i < n; i++) {
        int c = 0;
        for (int j = 0; j < i; j++)
            if (g[j].lo <= g[i].hi && g[i].lo <= g[j].hi)
                near[c++] = &g[j];
        qsort(near, (size_t)c, sizeof *near, by_offset);
        long at = 0;
        for (int j = 0; j < c && near[j]->at < at + g[i].w; j++)
            at = near[j]->at + near[j]->w > at ? near[j]->at + near[j]->w : at;
        g[i].at = at;
        pool = at + g[i].w > pool ? at + g[i].w : pool;
    }
    return pool;
}

/* The most elements per row live at once over the backward. */
static long peak(const struct live *g, int n, int n_layers)
{
    long *delta = calloc((size_t)n_layers + 1, sizeof *delta), best = 0, live = 0;
    if (!delta)
        return -1;
    for (int i = 0; i < n; i++) { /* time runs from layer n_layers - 1 down to 0 */
        delta[n_layers - 1 - g[i].hi] += g[i].w;
        delta[n_layers - g[i].lo] -= g[i].w;
    }
    for (int t = 0; t < n_layers; t++) {
        live += delta[t];
        best = live > best ? live : best;
    }
    free(delta);
    return best;
}

/* reader[o]: o's last reader that runs here; cross[o]: a reader in another chunk; spread[o]:
 * readers in two chunks or more (readers come in layer order: one in a chunk other than the
 * previous reader's). */
static void readers(const struct dt_model *m, const struct dt_layer_view *v,
                    const int *chunk_first, int n_chunks, int *reader, bool *cross, bool *spread)
{
    for (int l = 0; l < m->n_layers; l++)
        reader[l] = -1;
    for (int c = 0; c < m->n_layers; c++) {
        const struct dt_layer *L = &m->layers[c];
        if ((v && !v[c].runs) || dt_layer_is_view(L))
            continue; /* a view writes nothing: its readers write its owner's gradient */
        for (int k = 0; k < L->n_in; k++) {
            int o = dt_layer_storage(m, L->in[k]);
            if (o < 0)
                continue;
            int ch = chunk_of(chunk_first, n_chunks, c);
            spread[o] |= reader[o] >= 0 && chunk_of(chunk_first, n_chunks, reader[o]) != ch;
            reader[o] = c > reader[o] ? c : reader[o];
            cross[o] |= ch != chunk_of(chunk_first, n_chunks, o);
        }
    }
}

int dt_dact_init(struct dt_dact_layout *d, const struct dt_model *m,
                 const struct dt_layer_view *v, const int *chunk_first, int n_chunks,
                 bool multi_slot)
{
    int n = m->n_layers, k = 0;
    memset(d, 0, sizeof *d);
    d->n_layers = n;
    d->at = malloc((size_t)n * sizeof *d->at);
    int *reader = malloc((size_t)n * sizeof *reader);
    bool *cross = calloc((size_t)n, sizeof *cross), *spread = calloc((size_t)n, sizeof *spread);
    struct live *g = malloc((size_t)n * sizeof *g);
    const struct live **near = malloc((size_t)n * sizeof *near);
    int rc = d->at && reader && cross && spread && g && near ? DT_OK : DT_ENOMEM;
    if (!rc)
        readers(m, v, chunk_first, n_chunks, reader, cross, spread);
    for (int o = 0; o < n && !rc; o++) {
        d->at[o] = -1;
        if (!poolable(m, v, o, reader, cross, spread, multi_slot))
            continue;
        /* a received gradient lands as its chunk's backward starts */
        int top = v && v[o].runs && v[o].dact_received ? chunk_last(chunk_first, n_chunks, n, o)
                                                        : o;
        g[k++] = (struct live){o, reader[o] > top ? reader[o] : top, width(m, v, o), 0};
    }
    if (!rc) {
        d->pool = place(g, k, near);
        d->peak = peak(g, k, n);
        rc = d->peak < 0 ? DT_ENOMEM : DT_OK;
    }
    for (int i = 0; i < k && !rc; i++)
        d->at[g[i].lo] = g[i].at;
    free(reader);
    free(cross);
    free(spread);
    free(g);
    free(near);
    if (rc)
        dt_dact_free(d);
    return rc;
}

void dt_dact_free(struct dt_dact_layout *d)
{
    free(d->at);
    memset(d, 0, sizeof *d);
}

static int layout_index(const struct dt_plan *plan, int rank)
{
    const struct dt_rank_plan *rp = &plan->ranks[rank];
    return 2 * rp->view + (rp->slots > 1);
}

const struct dt_dact_layout *dt_plan_dact(struct dt_plan *plan, int rank)
{
    int x = layout_index(plan, rank);
    if (x >= plan->n_dact) {
        struct dt_dact_layout **a = realloc(plan->dact, (size_t)(x + 1) * sizeof *a);
        if (!a)
            return NULL;
        for (int i = plan->n_dact; i <= x; i++)
            a[i] = NULL;
        plan->dact = a;
        plan->n_dact = x + 1;
    }
    if (!plan->dact[x]) {
        struct dt_dact_layout *d = malloc(sizeof *d);
        const struct dt_rank_plan *rp = &plan->ranks[rank];
        if (!d || dt_dact_init(d, plan->model, plan->views[rp->view], plan->chunk_first,
                               plan->stages * plan->chunks, rp->slots > 1)) {
            free(d);
            return NULL;
        }
        plan->dact[x] = d;
    }
    return plan->dact[x];
}

const struct dt_dact_layout *dt_plan_rank_dact(const struct dt_plan *plan, int rank)
{
    int x = layout_index(plan, rank);
    return x < plan->n_dact ? plan->dact[x] : NULL;
}

bool dt_plan_dact_pooled(const struct dt_plan *plan, int rank, int l)
{
    const struct dt_dact_layout *d = dt_plan_rank_dact(plan, rank);
    return d && d->at[l] >= 0;
}

void dt_plan_dact_free(struct dt_plan *plan)
{
    for (int i = 0; i < plan->n_dact; i++) {
        if (plan->dact[i])
            dt_dact_free(plan->dact[i]);
        free(plan->dact[i]);
    }
    free(plan->dact);
    plan->dact = NULL;
    plan->n_dact = 0;
}
