/* Per-link utilisation of one iteration (see links.h). */
#include "links.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/table.h"

static int busiest_first(const void *pa, const void *pb)
{
    const struct dt_link_use *a = pa, *b = pb;
    if (a->busy_s != b->busy_s)
        return a->busy_s < b->busy_s ? 1 : -1;
    if (a->bytes != b->bytes)
        return a->bytes < b->bytes ? 1 : -1;
    return (a->id > b->id) - (a->id < b->id); /* qsort is not stable: link order decides */
}

int dt_link_report_fill(struct dt_link_report *rep, const struct dt_sim *sim,
                        const struct dt_simnet *net, double iter_s, struct dt_error *err)
{
    if (rep->filled)
        return DT_OK;
    int n_links = dt_sim_n_links(sim), n_used = 0;
    struct dt_link_use *all = calloc((size_t)n_links + 1, sizeof *all);
    if (!all)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    double util_sum = 0;
    rep->n_links = 0;
    for (int l = 0; l < n_links; l++) {
        double bw, lat;
        dt_sim_link_params(sim, l, &bw, &lat);
        if (!isfinite(bw))
            continue;
        rep->n_links++;
        struct dt_sim_link_stats st;
        dt_sim_link_stats(sim, l, &st);
        if (!(st.bytes > 0))
            continue;
        struct dt_link_use *u = &all[n_used++];
        u->id = l;
        snprintf(u->name, sizeof u->name, "%s", net->link_name[l]);
        u->capacity_Bps = bw;
        u->bytes = st.bytes;
        u->busy_s = st.busy_s;
        u->util = iter_s > 0 ? st.busy_s / iter_s : 0;
        u->max_flows = st.max_flows;
        util_sum += u->util;
    }
    qsort(all, (size_t)n_used, sizeof *all, busiest_first);
    rep->iter_s = iter_s;
    rep->n_used = n_used;
    rep->mean_util = n_used ? util_sum / n_used : 0;
    rep->n = n_used < rep->want ? n_used : rep->want;
    rep->top = all;
    rep->filled = true;
    return DT_OK;
}

void dt_link_report_free(struct dt_link_report *rep)
{
    if (rep)
        free(rep->top);
}

void dt_link_report_table(const struct dt_link_report *rep, const char *title, FILE *out)
{
    fprintf(out, "\nBusiest links of %s (iteration %.6g ms): %d of %d links carried bytes, busy "
                 "%.1f %% of the iteration on average\n",
            title, rep->iter_s * 1e3, rep->n_used, rep->n_links, 100 * rep->mean_util);
    struct dt_table *tb = dt_table_new(6);
    if (!tb)
        return;
    const char *heads[] = {"link", "GB/s", "MB", "busy ms", "busy %", "max flows"};
    for (int c = 0; c < 6; c++)
        dt_table_column(tb, c, heads[c], c == 0);
    for (int i = 0; i < rep->n; i++) {
        const struct dt_link_use *u = &rep->top[i];
        dt_table_cell(tb, "%s", u->name);
        dt_table_cell(tb, "%.4g", u->capacity_Bps / 1e9);
        dt_table_cell(tb, "%.4g", u->bytes / 1e6);
        dt_table_cell(tb, "%.4g", u->busy_s * 1e3);
        dt_table_cell(tb, "%.1f", 100 * u->util);
        dt_table_cell(tb, "%d", u->max_flows);
    }
    if (dt_table_print(tb, out))
        fprintf(out, "(out of memory)\n");
    dt_table_destroy(tb);
}

void dt_link_report_csv_header(FILE *out)
{
    fprintf(out, "strategy,nodes,ppn,ranks,link,capacity_Bps,bytes,busy_s,utilisation,"
                 "max_flows\n");
}

void dt_link_report_csv(const struct dt_link_report *rep, const char *prefix, FILE *out)
{
    for (int i = 0; i < rep->n; i++) {
        const struct dt_link_use *u = &rep->top[i];
        fprintf(out, "%s%s,%.9g,%.9g,%.9g,%.6g,%d\n", prefix, u->name, u->capacity_Bps,
                u->bytes, u->busy_s, u->util, u->max_flows);
    }
}

void dt_link_report_json(const struct dt_link_report *rep, FILE *out)
{
    fprintf(out, "{\"links\": %d, \"used\": %d, \"mean_utilisation\": %.6g, \"busiest\": [",
            rep->n_links, rep->n_used, rep->mean_util);
    for (int i = 0; i < rep->n; i++) {
        const struct dt_link_use *u = &rep->top[i];
        fprintf(out, "%s{\"link\": \"%s\", \"capacity_Bps\": %.9g, \"bytes\": %.9g, "
                     "\"busy_s\": %.9g, \"utilisation\": %.6g, \"max_flows\": %d}",
                i ? ", " : "", u->name, u->capacity_Bps, u->bytes, u->busy_s, u->util,
                u->max_flows);
    }
    fputs("]}", out);
}
