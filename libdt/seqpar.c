/* Sequence parallelism (Korthikanti et al. 2022, "Reducing Activation Recomputation in Large
 * Transformer Models", section 4.2.2) on top of tensor parallelism: which layers run on the
 * rank's share of the tokens (DT_SHARD_SEQ, DT_SHARD_SEQ_GATHER of dt/tensor.h) and which
 * collective replaces each of Megatron's f/g allreduces around them. */
#include <stdlib.h>

#include "compile.h"
#include "dt/tensor.h"

bool dt_shard_chunked(int kind)
{
    return kind == DT_SHARD_SEQ || kind == DT_SHARD_SEQ_GATHER;
}

bool dtc_seqpar_fits(const struct dt_plan_options *o, char *why, size_t whylen)
{
    if (!o->sequence_parallel)
        return true;
    if (o->tp < 2) {
        snprintf(why, whylen, "--sequence-parallel on splits the tokens over a tensor group: "
                 "it needs --tp 2 or more");
        return false;
    }
    return true;
}

/* Whether layer l works token by token on (tokens, width) and t divides its tokens. */
static bool per_token(const struct dt_layer *L, int t)
{
    bool kind = L->kind == DT_L_LAYERNORM || L->kind == DT_L_ADD || L->kind == DT_L_DROPOUT ||
                L->kind == DT_L_RELU || L->kind == DT_L_GELU || L->kind == DT_L_TANH ||
                L->kind == DT_L_SIGMOID;
    return kind && L->out_shape.rank == 2 && L->out_shape.d[0] % t == 0;
}

/* Layers whose output is a partial sum over the tensor group (a g allreduce follows them). */
static bool partial(enum dt_shard_kind k)
{
    return k == DT_SHARD_ROWS || k == DT_SHARD_VOCAB_TABLE;
}

/* A dense layer that reads its input whole and holds a part of its output (an f before it). */
static bool column_entry(const struct dt_model *m, const enum dt_shard_kind *kind, int c)
{
    return m->layers[c].kind == DT_L_DENSE &&
           (kind[c] == DT_SHARD_COLUMNS || kind[c] == DT_SHARD_QKV || kind[c] == DT_SHARD_VOCAB);
}

/* Whether layer j's output may feed a chunked layer: a partial sum (reduce-scattered) or a
 * whole embedding every rank of the group computes alike (a pipeline stage's, not split by
 * vocabulary): each reader takes its chunk, and in backward an allgather makes the gradient
 * whole again (Megatron-LM's scatter_to_sequence_parallel_region and its dual). Other whole
 * layers do not: a region between them would only add allgathers. */
static bool splits(const struct dt_model *m, const enum dt_shard_kind *kind, int j)
{
    return partial(kind[j]) ||
           (kind[j] == DT_SHARD_NONE && m->layers[j].kind == DT_L_EMBEDDING);
}

/* Whether layer c reads a chunked layer's output whole, after an allgather: a column-parallel
 * input (f), or the LM head when every rank of the group runs it whole (a pipeline's last
 * stage); in backward the first's input gradient is a partial sum (reduce-scattered), the
 * second's whole. */
static bool gathers_for(const struct dt_model *m, const enum dt_shard_kind *kind, int c)
{
    return column_entry(m, kind, c) || (kind[c] == DT_SHARD_NONE && m->layers[c].kind ==
                                        DT_L_DENSE && c == m->layers[m->n_layers - 1].in[0]);
}

static bool reads(const struct dt_model *m, int c, int l)
{
    for (int q = 0; q < m->layers[c].n_in; q++)
        if (m->layers[c].in[q] == l)
            return true;
    return false;
}

/* Whether candidate l stays one: its inputs are candidates or split (splits) with only
 * candidates reading them; its readers are candidates, or one layer that gathers it (its
 * sole reader). */
static bool stays(const struct dt_model *m, const int *readers, const enum dt_shard_kind *kind,
                  const bool *seq, int l)
{
    const struct dt_layer *L = &m->layers[l];
    for (int k = 0; k < L->n_in; k++) {
        int j = L->in[k];
        if (j < 0 || (!seq[j] && !splits(m, kind, j)))
            return false;
        for (int c = j + 1; c < m->n_layers && !seq[j]; c++)
            if (reads(m, c, j) && !seq[c])
                return false;
    }
    for (int c = l + 1; c < m->n_layers; c++)
        if (reads(m, c, l) && !seq[c] && !(gathers_for(m, kind, c) && readers[l] == 1))
            return false;
    return true;
}

int dtc_seqpar_mark(const struct dt_model *m, const int *readers, int t, enum dt_shard_kind *kind)
{
    bool *seq = calloc((size_t)m->n_layers, sizeof *seq);
    if (!seq)
        return -1;
    for (int l = 0; l < m->n_layers; l++)
        seq[l] = kind[l] == DT_SHARD_NONE && per_token(&m->layers[l], t);
    for (bool changed = true; changed;) { /* drop candidates until every one stays */
        changed = false;
        for (int l = 0; l < m->n_layers; l++)
            if (seq[l] && !stays(m, readers, kind, seq, l)) {
                seq[l] = false;
                changed = true;
            }
    }
    int marked = 0;
    for (int l = 0; l < m->n_layers; l++) {
        if (!seq[l])
            continue;
        kind[l] = DT_SHARD_SEQ;
        for (int c = l + 1; c < m->n_layers; c++)
            if (!seq[c] && reads(m, c, l) && gathers_for(m, kind, c))
                kind[l] = DT_SHARD_SEQ_GATHER;
        marked++;
    }
    free(seq);
    return marked;
}

bool dt_shard_scatters(const struct dt_model *m, const struct dt_layer_view *v, int l)
{
    int c = dtc_first_reader(m, l);
    return partial(v[l].shard_kind) && c >= 0 && dt_shard_chunked(v[c].shard_kind);
}

int dtc_seqpar_gathers(const struct dt_model *m, const struct dt_layer_view *v, int l,
                       int *inputs)
{
    const struct dt_layer *L = &m->layers[l];
    int n = 0;
    if (!dt_shard_chunked(v[l].shard_kind))
        return 0;
    for (int k = 0; k < L->n_in; k++) {
        int j = L->in[k];
        bool seen = false;
        for (int q = 0; q < n; q++)
            seen |= inputs[q] == j;
        bool split = j >= 0 && (dt_shard_scatters(m, v, j) || (v[j].shard_kind == DT_SHARD_NONE &&
                                                              m->layers[j].kind == DT_L_EMBEDDING));
        /* the lowest reader runs its backward last: then every chunk has been written */
        if (!seen && split && dt_layer_needs_dact(m, j) &&
            dtc_first_reader(m, j) == l)
            inputs[n++] = j;
    }
    return n;
}
