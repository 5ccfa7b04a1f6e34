/* Activation recomputation (--recompute): which layers are recomputed and where their
 * outputs and kept state live (dt/plan.h, struct dt_recompute_layout), and the plan's recompute ops
 * (dtc_recompute_program). */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/tensor.h"

static bool is_attention(const struct dt_layer *L)
{
    return L->kind == DT_L_ATTENTION || L->kind == DT_L_ATTENTION_CORE;
}

/* cut[c]: no layer after c reads a layer (or the input) before c. */
static void find_cuts(const struct dt_model *m, bool *cut)
{
    int lowest = m->n_layers; /* the lowest input of the layers after c */
    for (int c = m->n_layers - 1; c >= 0; c--) {
        cut[c] = lowest >= c;
        for (int k = 0; k < m->layers[c].n_in; k++)
            lowest = m->layers[c].in[k] < lowest ? m->layers[c].in[k] : lowest;
    }
}

/* The cut that ends the block starting after `start` with `cuts` cuts in it (-1: none). */
static int nth_cut_after(const bool *cut, int n, int start, int cuts)
{
    for (int l = start + 1; l < n; l++)
        if (cut[l] && --cuts == 0)
            return l;
    return -1;
}

/* The last cut before layer a (-1: none). */
static int cut_before(const bool *cut, int a)
{
    while (--a >= 0 && !cut[a])
        ;
    return a;
}

/* Transformer blocks: from the cut before an attention layer to the cut before the next
 * attention layer's block (the last block: as many cuts as the one before it). */
static void block_segments(const struct dt_model *m, const bool *cut, int *seg)
{
    int n = m->n_layers, s = 0, cuts_before = 2;
    for (int a = 0; a < n; a++) {
        if (!is_attention(&m->layers[a]))
            continue;
        int next = a + 1;
        while (next < n && !is_attention(&m->layers[next]))
            next++;
        int begin = cut_before(cut, a), cuts = 0;
        int end = next < n ? cut_before(cut, next) : nth_cut_after(cut, n, begin, cuts_before);
        if (end <= begin) /* no cut before the next attention: one block holds both */
            continue;
        for (int l = begin + 1; l <= end; l++) {
            seg[l] = s;
            cuts += cut[l];
        }
        s++;
        cuts_before = cuts;
    }
}

/* Chen et al. 2016: segments of ceil(sqrt(L)) layers, ending at cuts. */
static void sqrt_segments(const struct dt_model *m, const bool *cut, int *seg)
{
    int n = m->n_layers, len = (int)ceil(sqrt((double)n)), s = 0, first = 0;
    for (int l = 0; l < n; l++) {
        seg[l] = s;
        if (l == n - 1 || (cut[l] && l - first + 1 >= len)) {
            s++;
            first = l + 1;
        }
    }
}

/* Whether layer l is inside its segment (not its last layer) and the rank runs it: what the
 * layer keeps for its backward is recomputed with the rank's part of the segment (Megatron
 * recomputes whole layers; an attention core's probabilities are the most), even at the end
 * of a part that a pipeline stage boundary cuts short. */
static bool in_segment(const struct dt_model *m, const struct dt_layer_view *v, const int *seg,
                       int l)
{
    return seg[l] >= 0 && l < m->n_layers - 1 && seg[l + 1] == seg[l] && (!v || v[l].runs);
}

/* Whether layer l's output is recomputed too: l is inside its segment, the rank runs the next
 * layer and only the rank reads it (sent[l]: a layer of another rank reads it). A segment cut
 * by a pipeline stage boundary is recomputed part by part: each part starts from what the
 * rank receives, and ends on what it sends, which it keeps anyway. */
static bool interior(const struct dt_model *m, const struct dt_layer_view *v, const int *seg,
                     const bool *sent, int l)
{
    return in_segment(m, v, seg, l) && (!v || (v[l + 1].runs && !sent[l]));
}

static void sizes(const struct dt_model *m, const struct dt_layer_view *v, int l, long *act,
                  long *kf, long *ki)
{
    if (v) {
        *act = dt_shard_act_floats(m, v, l);
        dt_shard_keep(m, v, l, kf, ki);
    } else {
        *act = dt_layer_act_floats(m, l);
        dt_layer_keep(m, l, kf, ki);
    }
}

/* Offsets of each segment's recomputed tensors from the workspace's start; its size. */
static void place(struct dt_recompute_layout *rc, const struct dt_model *m, const struct dt_layer_view *v)
{
    long f = 0, i = 0;
    for (int l = 0; l < m->n_layers; l++) {
        if (l > 0 && rc->segment[l] != rc->segment[l - 1])
            f = i = 0;
        if (!rc->act_ws[l] && !rc->keep_ws[l])
            continue; /* in no workspace: not sized (a stage's view runs few of the layers) */
        long act, kf, ki;
        sizes(m, v, l, &act, &kf, &ki);
        if (rc->act_ws[l]) {
            rc->act_at[l] = f;
            f += act;
        }
        if (rc->keep_ws[l]) {
            rc->keep_at[l] = f;
            rc->ikeep_at[l] = i;
            f += kf;
            i += ki;
        }
        rc->ws_floats = f > rc->ws_floats ? f : rc->ws_floats;
        rc->ws_ints = i > rc->ws_ints ? i : rc->ws_ints;
        rc->any |= rc->act_ws[l] || rc->keep_ws[l];
    }
}

/* sent[l]: a layer the rank does not run reads layer l (v NULL: none). */
static void find_sent(const struct dt_model *m, const struct dt_layer_view *v, bool *sent)
{
    for (int k = 0; v && k < m->n_layers; k++)
        for (int j = 0; j < m->layers[k].n_in && !v[k].runs; j++)
            if (m->layers[k].in[j] >= 0)
                sent[m->layers[k].in[j]] = true;
}

/* Gives each part of a segment that the rank runs apart from an earlier part of it (an
 * interleaved pipeline: a segment longer than a chunk comes back to the rank a chunk later) a
 * segment of its own, numbered after the others (parts <= layers: under n_layers): each part
 * is recomputed before its own backward, as the workspace holds one part at a time. */
static void split_parts(int *seg, const struct dt_layer_view *v, int n)
{
    int next = 0, orig = -1, id = -1;
    bool ran = false, gap = false;
    for (int l = 0; l < n; l++)
        next = seg[l] + 1 > next ? seg[l] + 1 : next;
    for (int l = 0; v && l < n; l++) {
        if (seg[l] < 0)
            continue;
        if (seg[l] != orig) {
            orig = id = seg[l];
            ran = gap = false;
        }
        if (!v[l].runs) {
            gap = ran;
            continue;
        }
        if (gap)
            id = next++;
        ran = true;
        gap = false;
        seg[l] = id;
    }
}

static void mark(struct dt_recompute_layout *rc, const struct dt_model *m, const struct dt_layer_view *v,
                 enum dt_recompute mode, const bool *cut, const bool *sent)
{
    int n = m->n_layers;
    if (mode == DT_RECOMPUTE_SELECTIVE) { /* each attention layer is a segment of its own */
        for (int l = 0; l < n; l++) {
            bool a = is_attention(&m->layers[l]) && (!v || v[l].runs);
            rc->segment[l] = a ? l : -1;
            rc->keep_ws[l] = a;
        }
        return;
    }
    bool blocks = false;
    for (int l = 0; l < n; l++)
        blocks |= is_attention(&m->layers[l]);
    (blocks ? block_segments : sqrt_segments)(m, cut, rc->segment);
    for (int l = 0; l < n; l++) {
        rc->keep_ws[l] = in_segment(m, v, rc->segment, l);
        rc->act_ws[l] = interior(m, v, rc->segment, sent, l);
    }
    /* a kept flatten view keeps the output it is a view of */
    for (int l = n - 1; l >= 0; l--) {
        const struct dt_layer *L = &m->layers[l];
        if (dt_layer_is_view(L) && !rc->act_ws[l])
            rc->act_ws[L->in[0]] = rc->keep_ws[L->in[0]] = false;
    }
    split_parts(rc->segment, v, n);
}

int dtc_blocks(const struct dt_model *m, int *block)
{
    int n = m->n_layers, count = 0;
    bool *cut = calloc((size_t)n, sizeof *cut), attention = false;
    if (!cut)
        return -1;
    for (int l = 0; l < n; l++) {
        block[l] = -1;
        attention |= is_attention(&m->layers[l]);
    }
    find_cuts(m, cut);
    if (attention)
        block_segments(m, cut, block);
    free(cut);
    for (int l = 0; l < n; l++)
        count = block[l] >= count ? block[l] + 1 : count;
    return count;
}

int dt_recompute_init(struct dt_recompute_layout *rc, const struct dt_model *m,
                      const struct dt_layer_view *v, enum dt_recompute mode)
{
    int n = m->n_layers;
    memset(rc, 0, sizeof *rc);
    rc->n_layers = n;
    rc->segment = malloc((size_t)n * sizeof *rc->segment);
    rc->act_ws = calloc((size_t)n, sizeof *rc->act_ws);
    rc->keep_ws = calloc((size_t)n, sizeof *rc->keep_ws);
    rc->act_at = calloc((size_t)n, sizeof *rc->act_at);
    rc->keep_at = calloc((size_t)n, sizeof *rc->keep_at);
    rc->ikeep_at = calloc((size_t)n, sizeof *rc->ikeep_at);
    bool *cut = calloc((size_t)n, sizeof *cut), *sent = calloc((size_t)n, sizeof *sent);
    if (!rc->segment || !rc->act_ws || !rc->keep_ws || !rc->act_at || !rc->keep_at ||
        !rc->ikeep_at || !cut || !sent) {
        free(cut);
        free(sent);
        dt_recompute_free(rc);
        return DT_ENOMEM;
    }
    for (int l = 0; l < n; l++)
        rc->segment[l] = -1;
    find_cuts(m, cut);
    find_sent(m, v, sent);
    if (mode != DT_RECOMPUTE_NONE)
        mark(rc, m, v, mode, cut, sent);
    free(cut);
    free(sent);
    place(rc, m, v);
    return DT_OK;
}

void dt_recompute_free(struct dt_recompute_layout *rc)
{
    free(rc->segment);
    free(rc->act_ws);
    free(rc->keep_ws);
    free(rc->act_at);
    free(rc->keep_at);
    free(rc->ikeep_at);
    memset(rc, 0, sizeof *rc);
}

const struct dt_recompute_layout *dt_plan_recompute(struct dt_plan *plan, int view)
{
    if (plan->opt.recompute == DT_RECOMPUTE_NONE)
        return NULL;
    if (view >= plan->n_recompute) {
        struct dt_recompute_layout **a = realloc(plan->recompute, (size_t)(view + 1) * sizeof *a);
        if (!a)
            return NULL;
        for (int i = plan->n_recompute; i <= view; i++)
            a[i] = NULL;
        plan->recompute = a;
        plan->n_recompute = view + 1;
    }
    if (!plan->recompute[view]) {
        struct dt_recompute_layout *rc = malloc(sizeof *rc);
        if (!rc || dt_recompute_init(rc, plan->model, plan->views[view], plan->opt.recompute)) {
            free(rc);
            return NULL;
        }
        plan->recompute[view] = rc;
    }
    return plan->recompute[view];
}

const struct dt_recompute_layout *dt_plan_rank_recompute(const struct dt_plan *plan, int rank)
{
    int v = plan->ranks[rank].view;
    const struct dt_recompute_layout *rc = v < plan->n_recompute ? plan->recompute[v] : NULL;
    return rc && rc->any ? rc : NULL;
}

static int widest_compute(const struct dt_op *ops, int n)
{
    int most = 0;
    for (int i = 0; i < n; i++)
        if (ops[i].kind == DT_OP_COMPUTE && ops[i].samples > most)
            most = ops[i].samples;
    return most;
}

int dt_plan_ws_rows(const struct dt_rank_plan *rp)
{
    int a = widest_compute(rp->ops, rp->n_ops), b = widest_compute(rp->eval.ops, rp->eval.n_ops);
    int per = rp->slot_rows > 0 ? rp->slot_rows : 1, slots = ((a > b ? a : b) + per - 1) / per;
    return per * (slots < 1 ? 1 : slots > rp->slots && rp->slots > 0 ? rp->slots : slots);
}

/* ---- the step program ---- */

/* The ops that follow layer l's forward at index f (tensor parallelism's g allreduce of its
 * output): blocking collectives on its ACT. */
static int after_forward(const struct dt_rank_plan *rp, int f, int l)
{
    int n = 0;
    for (int i = f + 1; i < rp->n_ops; i++, n++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind != DT_OP_COLL || op->nonblocking || op->region.buf != DT_BUF_ACT ||
            op->region.layer != l)
            break;
    }
    return n;
}

/* ZeRO-3 (zero.c) fills a unit's parameter staging before the forward of its first layer and
 * again before the backward of its last: a COPY of the rank's chunk into PARAMS, then an
 * allgather of PARAMS. A recomputed forward fills it once more, as DeepSpeed's stage 3
 * gathers a checkpointed layer's parameters again for its recomputation. */
static bool fills_params(const struct dt_op *op)
{
    return (op->kind == DT_OP_COPY && op->dst.buf == DT_BUF_PARAMS) ||
           (op->kind == DT_OP_COLL && op->region.buf == DT_BUF_PARAMS);
}

/* Pushes the fill that starts at op lo again, flagged as the recomputation's. */
static int push_fill(struct dt_program *out, const struct dt_rank_plan *rp, int lo)
{
    int rc = DT_OK;
    for (int i = lo; i < rp->n_ops && fills_params(&rp->ops[i]) && !rc; i++) {
        struct dt_op op = rp->ops[i];
        op.recompute = true;
        rc = dt_program_push(out, &op);
    }
    return rc;
}

/* Whether the fills at a and b gather the same unit: the same ops on the same ranges. */
static bool same_fill(const struct dt_rank_plan *rp, int a, int b)
{
    const struct dt_op *x = &rp->ops[a], *y = &rp->ops[b], *end = rp->ops + rp->n_ops;
    for (; x < end && y < end && fills_params(x) && fills_params(y); x++, y++)
        if (x->kind != y->kind || x->region.offset != y->region.offset ||
            x->region.count != y->region.count || x->dst.offset != y->dst.offset)
            return false;
    return (x == end || !fills_params(x)) && (y == end || !fills_params(y));
}

/* Where the fills and gradient zeroings right before backward op b start, if there is a
 * fill among them (the staging of b's unit: the recomputation goes before it); else b. */
static int fill_start(const struct dt_rank_plan *rp, int b)
{
    int j = b;
    bool any = false;
    while (j > 0 && (fills_params(&rp->ops[j - 1]) || rp->ops[j - 1].kind == DT_OP_ZERO))
        any |= fills_params(&rp->ops[--j]);
    return any ? j : b;
}

/* Whether a backward from op b on reads parameters from the staging before the next fill
 * (a unit of several layers, --bucket, cut by a segment's end). */
static bool reads_staging(const struct dt_plan *plan, const struct dt_rank_plan *rp, int b)
{
    const struct dt_layer_view *v = plan->views[rp->view];
    for (int i = b; i < rp->n_ops && !fills_params(&rp->ops[i]); i++) {
        const struct dt_op *op = &rp->ops[i];
        if (op->kind == DT_OP_COMPUTE && op->phase == DT_PH_BACKWARD &&
            dt_shard_params(plan->model, v, op->layer) > 0)
            return true;
    }
    return false;
}

/* Per micro-batch mb and segment or layer x of the rank (both < n_layers), at [mb x width +
 * local[x]] (cell), as the walk over the step program goes (one pass, not a search back from
 * every backward). */
struct walk {
    bool *done; /* segment x of mb recomputed */
    int *fwd;   /* the index of layer x's latest forward of mb (-1: none) */
    int *fill;  /* ZeRO-3 (else NULL): the first op of the fill before that forward, if x has
                   parameters (-1: none) */
    int latest; /* ZeRO-3: the first op of the latest fill (-1: none) */
    const struct dt_plan *plan;
    int rank;
    int *sends;          /* handles of the non-blocking SENDs pushed and not yet waited */
    struct dtc_span *read; /* where each one's region lies (dtc_span_of, once per send) */
    int n_sends;
    bool *early;         /* per handle: waited before a recomputed forward, not at its WAIT */
    int *local;          /* layer or segment x's column in a micro-batch's row (-1: none) */
    int *seg_at;         /* segment x's layers re-run: seg_layers[seg_at[x] .. seg_at[x + 1]) */
    int *seg_layers;     /* ascending within a segment (a walk of every layer per segment
                            re-run made a 175B stage's walk layers x micro-batches x parts) */
};

static size_t cell(const struct walk *w, size_t row, int x)
{
    return row + (size_t)w->local[x];
}

/* What the walk sizes its tables by, in one pass over the step program (a pass per quantity
 * read a large program from memory again): micro-batches, handles and SENDs; and local[x]
 * marked 0 for each layer the rank computes. */
struct program_sizes {
    int micros, handles, sends;
};

static struct program_sizes scan_program(const struct dt_rank_plan *rp, int n_layers, int *local)
{
    struct program_sizes z = {1, 0, 0};
    for (int x = 0; x < n_layers; x++)
        local[x] = -1;
    for (int i = 0; i < rp->n_ops; i++) {
        const struct dt_op *op = &rp->ops[i];
        z.micros = op->micro + 1 > z.micros ? op->micro + 1 : z.micros;
        z.handles = op->handle >= z.handles ? op->handle + 1 : z.handles;
        z.sends += op->kind == DT_OP_SEND;
        if (op->kind == DT_OP_COMPUTE && op->layer >= 0 && op->layer < n_layers)
            local[op->layer] = 0;
    }
    return z;
}

/* Columns for the layers the rank computes (marked by scan_program), the layers any segment
 * re-runs and the segments: local[x] for each (ascending), -1 for the others; returns how
 * many. Only these are walked, so a stage's rows hold its own layers, not the model's. */
static int local_columns(const struct dt_recompute_layout *rc, int *local)
{
    int n = rc->n_layers, width = 0;
    for (int l = 0; l < n; l++)
        if (rc->segment[l] >= 0)
            local[l] = local[rc->segment[l]] = 0;
    for (int x = 0; x < n; x++)
        if (local[x] == 0)
            local[x] = width++;
    return width;
}

/* The layers each segment re-runs (its own with an output or kept state in the workspace),
 * grouped by segment in layer order. */
static void segment_layers(const struct dt_recompute_layout *rc, int *at, int *layers)
{
    int n = rc->n_layers;
    for (int x = 0; x <= n; x++)
        at[x] = 0;
    for (int l = 0; l < n; l++)
        if (rc->segment[l] >= 0 && (rc->act_ws[l] || rc->keep_ws[l]))
            at[rc->segment[l] + 1]++;
    for (int x = 0; x < n; x++) /* at[x]: where segment x starts */
        at[x + 1] += at[x];
    for (int l = 0; l < n; l++) /* at[x] moves to where segment x ends */
        if (rc->segment[l] >= 0 && (rc->act_ws[l] || rc->keep_ws[l]))
            layers[at[rc->segment[l]]++] = l;
    for (int x = n; x > 0; x--) /* where x - 1 ends is where x starts */
        at[x] = at[x - 1];
    at[0] = 0;
}

/* The buffers the pending sends read (a bit per kind), empty regions aside. */
static unsigned pending_buffers(const struct walk *w)
{
    unsigned bufs = 0;
    for (int k = 0; k < w->n_sends; k++)
        bufs |= w->read[k].empty ? 0 : 1u << w->read[k].region_buf;
    return bufs;
}

/* Pushes op after the WAITs of the pending sends that read what it writes: a recomputed
 * forward rewrites its layer's rows, which a send of the layer's output (kept as the end of
 * a part that a stage boundary cuts, or held in ws_rows rows until sent) may still read. MPI
 * forbids writing a buffer before its non-blocking send's WAIT (MPI 4.0 section 3.7.2), so
 * that WAIT moves here and the original one goes. */
static int push_after_sends(struct dt_program *out, struct walk *w, const struct dt_op *op)
{
    int rc = DT_OK, kept = 0;
    struct dt_region wr[2]; /* once per op, not per pending send */
    struct dtc_span ws[2];
    int n_wr = w->n_sends ? dtc_written(w->plan, w->rank, op, wr) : 0, n_ws = 0;
    unsigned bufs = n_wr ? pending_buffers(w) : 0;
    for (int k = 0; k < n_wr; k++) /* spans of other buffers, or empty, overlap none */
        if (bufs >> wr[k].buf & 1 && wr[k].count > 0)
            ws[n_ws++] = dtc_span_of(w->plan, w->rank, &wr[k]);
    if (!n_ws)
        return dt_program_push(out, op);
    for (int k = 0; k < w->n_sends; k++) {
        int handle = w->sends[k];
        bool hit = false;
        for (int j = 0; j < n_ws && !hit; j++)
            hit = dtc_spans_overlap(&ws[j], &w->read[k]);
        if (!rc && hit) {
            w->early[handle] = true;
            rc = dt_program_push(out, &(struct dt_op){.kind = DT_OP_WAIT, .layer = -1,
                                                      .handle = handle});
            continue;
        }
        w->read[kept] = w->read[k];
        w->sends[kept++] = handle;
    }
    w->n_sends = kept;
    return rc ? rc : dt_program_push(out, op);
}

/* Pushes an op of the step program into out, keeping the pending sends: a WAIT of a handle
 * waited early goes. */
static int push_step_op(struct dt_program *out, struct walk *w, const struct dt_op *op)
{
    if (op->kind == DT_OP_WAIT) {
        int kept = 0;
        for (int k = 0; k < w->n_sends; k++)
            if (w->sends[k] != op->handle) {
                w->read[kept] = w->read[k];
                w->sends[kept++] = w->sends[k];
            }
        w->n_sends = kept;
        if (w->early[op->handle])
            return DT_OK;
    }
    int rc = push_after_sends(out, w, op);
    if (!rc && op->kind == DT_OP_SEND && op->nonblocking) {
        w->read[w->n_sends] = dtc_span_of(w->plan, w->rank, &op->region);
        w->sends[w->n_sends++] = op->handle;
    }
    return rc;
}

/* Re-runs segment s's recomputed layers for the micro-batch at row of the walk: each one's
 * fill (a new one), its forward (flagged) and the collectives that followed it. *last_fill:
 * the first op of the last fill pushed, if any. */
static int emit_segment(struct dt_program *out, const struct dt_rank_plan *rp, int s,
                        struct walk *w, size_t row, int *last_fill)
{
    int rcode = DT_OK;
    for (int i = w->seg_at[s]; i < w->seg_at[s + 1] && !rcode; i++) {
        int l = w->seg_layers[i];
        int f = w->fwd[cell(w, row, l)];
        if (f < 0)
            continue;
        int fill = w->fill ? w->fill[cell(w, row, l)] : -1;
        if (fill >= 0 && fill != *last_fill) {
            rcode = push_fill(out, rp, fill);
            *last_fill = fill;
        }
        struct dt_op op = rp->ops[f];
        op.recompute = true;
        rcode = rcode ? rcode : push_after_sends(out, w, &op);
        for (int k = 1, n = after_forward(rp, f, l); k <= n && !rcode; k++)
            rcode = push_after_sends(out, w, &rp->ops[f + k]);
    }
    return rcode;
}

/* Segment s recomputed before backward op b, whose preceding ops are the last ones of out.
 * Under ZeRO-3 before the fill of b's unit (pushed again after it), or, when the backward
 * reads a unit filled earlier that the recomputation's last fill replaced, with the latest
 * fill pushed again after it. */
static int recompute_before(struct dt_program *out, const struct dt_plan *plan,
                            const struct dt_rank_plan *rp, int s, int b, struct walk *w,
                            size_t row)
{
    int j = w->fill ? fill_start(rp, b) : b;
    int last_fill = -1;
    out->n_ops -= b - j;
    int rcode = emit_segment(out, rp, s, w, row, &last_fill);
    if (!rcode && last_fill >= 0 && j == b && w->latest >= 0 &&
        !same_fill(rp, last_fill, w->latest) && reads_staging(plan, rp, b))
        rcode = push_fill(out, rp, w->latest);
    for (int k = j; k < b && !rcode; k++)
        rcode = dt_program_push(out, &rp->ops[k]);
    return rcode;
}

/* One op of the step program into the walk's state (before it is pushed). */
static void walk_op(struct walk *w, const struct dt_plan *plan, const struct dt_rank_plan *rp,
                    int i, size_t row)
{
    const struct dt_op *op = &rp->ops[i];
    if (w->fill && fills_params(op) && (i == 0 || !fills_params(&rp->ops[i - 1])))
        w->latest = i;
    if (op->kind != DT_OP_COMPUTE || op->phase != DT_PH_FORWARD)
        return;
    w->fwd[cell(w, row, op->layer)] = i;
    if (w->fill)
        w->fill[cell(w, row, op->layer)] =
            dt_shard_params(plan->model, plan->views[rp->view], op->layer) > 0 ? w->latest : -1;
}

int dtc_recompute_program(struct dt_plan *plan, int r)
{
    struct dt_rank_plan *rp = &plan->ranks[r];
    const struct dt_recompute_layout *rc = dt_plan_recompute(plan, rp->view);
    if (plan->opt.recompute == DT_RECOMPUTE_NONE)
        return DT_OK;
    if (!rc)
        return DT_ENOMEM;
    if (!rc->any)
        return DT_OK;
    int *local = malloc(((size_t)rc->n_layers + 1) * sizeof *local);
    struct program_sizes z = local ? scan_program(rp, rc->n_layers, local)
                                   : (struct program_sizes){1, 0, 0};
    int width = local ? local_columns(rc, local) : 0, handles = z.handles, sends = z.sends;
    size_t cells = (size_t)width * (size_t)z.micros;
    bool zero3 = plan->opt.zero == 3;
    size_t n_layers = (size_t)rc->n_layers, n_sends = (size_t)sends;
    struct walk w = {.done = calloc(cells + 1, sizeof *w.done),
                     .fwd = malloc((cells + 1) * sizeof *w.fwd),
                     .fill = zero3 ? malloc((cells + 1) * sizeof *w.fill) : NULL, .latest = -1,
                     .plan = plan, .rank = r, .local = local,
                     .sends = malloc((n_sends + 1) * sizeof *w.sends),
                     .read = malloc((n_sends + 1) * sizeof *w.read),
                     .early = calloc((size_t)handles + 1, sizeof *w.early),
                     .seg_at = malloc((n_layers + 1) * sizeof *w.seg_at),
                     .seg_layers = malloc((n_layers + 1) * sizeof *w.seg_layers)};
    /* room for the re-run forwards at once (growing by doubling copied the program) */
    int cap = rp->n_ops + rp->n_ops / 2 + 64;
    struct dt_program out = {.ops = malloc((size_t)cap * sizeof *out.ops), .cap_ops = cap};
    int rcode = local && w.done && w.fwd && (w.fill || !zero3) && w.sends && w.read &&
                        w.early && w.seg_at && w.seg_layers && out.ops ? DT_OK : DT_ENOMEM;
    if (!rcode)
        segment_layers(rc, w.seg_at, w.seg_layers);
    for (size_t c = 0; !rcode && c < cells; c++)
        w.fwd[c] = -1;
    for (int i = 0; i < rp->n_ops && !rcode; i++) {
        const struct dt_op *op = &rp->ops[i];
        size_t row = (size_t)op->micro * (size_t)width;
        walk_op(&w, plan, rp, i, row);
        int s = op->kind == DT_OP_COMPUTE && op->phase == DT_PH_BACKWARD
                    ? rc->segment[op->layer] : -1;
        if (s >= 0 && !w.done[cell(&w, row, s)]) {
            w.done[cell(&w, row, s)] = true;
            rcode = recompute_before(&out, plan, rp, s, i, &w, row);
        }
        if (!rcode)
            rcode = push_step_op(&out, &w, op);
    }
    free(w.sends);
    free(w.read);
    free(w.early);
    free(w.seg_at);
    free(w.seg_layers);
    free(local);
    free(w.done);
    free(w.fwd);
    free(w.fill);
    if (rcode) {
        free(out.ops);
        return DT_ENOMEM;
    }
    free(rp->ops);
    rp->ops = out.ops;
    rp->n_ops = out.n_ops;
    rp->cap_ops = out.cap_ops;
    return DT_OK;
}
