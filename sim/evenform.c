/* A uniform round's form: its components' classes and the moments seen (see evenform.h). */
#include "evenform.h"

#include <stdlib.h>

#include "grow.h"

void dt_evenform_clear(struct dt_evenform *f)
{
    f->free_end = 0;
    f->n_comps = f->n_lat = f->n_m = 0;
    if (f->cls_start)
        f->cls_start[0] = 0;
}

void dt_evenform_free(struct dt_evenform *f)
{
    free(f->cls_start);
    free(f->lat);
    free(f->m);
    *f = (struct dt_evenform){0};
}

int dt_evenform_add_comp(struct dt_evenform *f, const double *lat, int n)
{
    if (dt_grow((void **)&f->cls_start, &f->cap_comps, f->n_comps + 2, sizeof *f->cls_start) ||
        dt_grow((void **)&f->lat, &f->cap_lat, f->n_lat + n, sizeof *f->lat))
        return -1;
    f->cls_start[0] = 0;
    for (int j = 0; j < n; j++)
        f->lat[f->n_lat++] = lat[j];
    f->cls_start[++f->n_comps] = f->n_lat;
    return 0;
}

int dt_evenform_add_moment(struct dt_evenform *f, struct dt_even_moment m)
{
    if (dt_grow((void **)&f->m, &f->cap_m, f->n_m + 1, sizeof *f->m))
        return -1;
    f->m[f->n_m++] = m;
    return 0;
}

static int cmp_moment(const void *a, const void *b)
{
    const struct dt_even_moment *x = a, *y = b;
    if (x->comp != y->comp)
        return x->comp < y->comp ? -1 : 1;
    return (x->mask > y->mask) - (x->mask < y->mask);
}

void dt_evenform_sort(struct dt_evenform *f)
{
    if (f->n_m == 0) /* f->m may be NULL, which qsort may not be given */
        return;
    qsort(f->m, (size_t)f->n_m, sizeof *f->m, cmp_moment);
    int k = 0;
    for (int i = 0; i < f->n_m; i++)
        if (k == 0 || cmp_moment(&f->m[k - 1], &f->m[i]))
            f->m[k++] = f->m[i];
    f->n_m = k;
}

const struct dt_even_moment *dt_evenform_moment(const struct dt_evenform *f, int comp,
                                                uint32_t mask)
{
    struct dt_even_moment key = {.comp = comp, .mask = mask};
    if (f->n_m == 0)
        return NULL;
    return bsearch(&key, f->m, (size_t)f->n_m, sizeof *f->m, cmp_moment);
}

int dt_evenform_merge(struct dt_evenform *f, const struct dt_evenform *from)
{
    for (int i = 0; i < from->n_m; i++)
        if (dt_evenform_add_moment(f, from->m[i]))
            return -1;
    dt_evenform_sort(f); /* a moment seen by both is the same (it depends on the mask alone) */
    return 0;
}

int dt_evenform_copy(struct dt_evenform *to, const struct dt_evenform *from)
{
    dt_evenform_clear(to);
    to->free_end = from->free_end;
    for (int c = 0; c < from->n_comps; c++)
        if (dt_evenform_add_comp(to, &from->lat[from->cls_start[c]],
                                 from->cls_start[c + 1] - from->cls_start[c]))
            return -1;
    return dt_evenform_merge(to, from);
}
