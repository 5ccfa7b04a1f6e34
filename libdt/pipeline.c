/* The pipeline family: GPipe, naive model parallelism, 1F1B (PipeDream-Flush) and interleaved
 * 1F1B, each composed with data parallelism (--dp replicas of the pipeline).
 *
 * The model's layers are cut into C = S x V contiguous chunks (S stages, V chunks per stage
 * for interleaved, else 1); chunk c runs on stage c mod S. With --tp T (3D parallelism) each
 * stage's dense pairs are cut over a tensor group of T ranks (tensor.c's cut, the same on
 * every stage), whose ranks run the stage's schedule in lockstep with the f/g allreduces of
 * tensor.c; an activation crossing stages goes from tensor rank k to tensor rank k (a shard
 * when the cut falls inside a pair). Rank (stage s, replica d, tensor rank k) is
 * (s x D + d) x T + k: Megatron-LM's default order (tensor innermost, then data, then
 * pipeline: tensor groups inside a node, the replicas of a stage next). Every rank of
 * replica d reads data shard d; the first stage loads inputs, the last loads labels and
 * seeds the loss.
 *
 * An activation crosses ranks where a layer reads another chunk's layer on another rank
 * (skip connections included): the producer SENDs it (non-blocking) after its chunk's forward,
 * the consumer RECVs it before its first chunk that reads it; in backward the consumer SENDs
 * the accumulated gradient back and the producer receives it summing (it zeroed those rows
 * after its forward: a ZERO op). The producer posts that RECV (non-blocking) as soon as it has
 * sent the activation and WAITs for it before its chunk's backward. A micro-batch keeps one
 * activation slot on a rank from its first forward to its last backward there; slots are
 * assigned in program order, so a rank holds as many as the schedule keeps in flight
 * (liveness), and a slot is reused only after the sends that read it have completed (WAIT).
 * A large send completes only once its receive is posted (MPI's rendezvous), so a gradient
 * receive posted only at the producer's backward could come after the consumer's WAIT for a
 * free slot in the consumer's own schedule's dependencies (a skip connection across
 * interleaved chunks did: a deadlock); posted at the forward, every such WAIT finds it. */
#include <stdlib.h>
#include <string.h>

#include "compile.h"
#include "dt/collective.h"
#include "dt/costmodel.h"
#include "dt/partition.h"

struct pipe {
    struct dt_plan *plan;
    const struct dt_model *m;
    int S, V, D, M, C, T;
    struct dtc_tensor tensor; /* T > 1: the tensor groups (tp_group per rank) */
    int *tied_group;      /* per layer tied to another stage's table: the first of its D x T
                             pairs of ranks that allreduce the table's gradient */
    int *chunk_of;        /* per layer */
    int *owner;           /* per layer: the layer whose storage it is (through flatten views) */
    int *reader;          /* stage x layer: the lowest chunk of the stage that reads the layer
                             while it runs on another stage, or -1 (first_readers) */
    int *recv_at, *recvs; /* chunk c receives owners recvs[recv_at[c] .. recv_at[c + 1] - 1]
                             (those it is the first reader of, ascending): its forward's
                             receives without a scan of every layer per schedule unit */
    int *read_at, *read_by; /* owner o is read by stages read_by[read_at[o] .. read_at[o + 1] - 1] */
    int first_train;
};

/* One unit of a stage's schedule. */
struct work {
    bool fwd;
    int micro, chunk;
};

/* Per-rank emission state. */
struct emit {
    int rank, stage, d, k;
    int *slot_of;         /* per micro-batch (M + 1: the eval micro-batch), -1 when none */
    bool *slot_busy;
    int n_slots;
    int *pending;         /* handles of sends not yet waited: (handle, what it reads) pairs:
                             a slot, HELD_POOL or HELD_RING */
    int n_pending;
    int next_handle;
    int last_ops;         /* the step ops the last rank emitted (room reserved for as many) */
    bool *loaded;         /* per micro-batch */
    bool eval;
    const struct dt_dact_layout *dact; /* the rank's gradient pool (dt_plan_dact) */
    struct early_recvs {  /* the step's early receives (recv_early) by peer and tag, for
                             wait_recv (a search back through the ops was quadratic) */
        long *key;        /* peer x 2^32 + tag, -1: empty (open addressing) */
        int *handle;
        int cap, n;
    } early;
};

static int stage_of_chunk(const struct pipe *p, int c) { return c % p->S; }
static int rank_of(const struct pipe *p, int s, int d, int k)
{
    return (s * p->D + d) * p->T + k;
}

static int tag_of(const struct pipe *p, int layer, int grad, int micro)
{
    return (layer * 2 + grad) * (p->M + 1) + micro;
}

static void micro_rows(const struct pipe *p, int r, int i, int *row0, int *rows)
{
    long off, len;
    dt_chunk(p->plan->ranks[r].batch, p->M, i, &off, &len);
    *row0 = (int)off;
    *rows = (int)len;
}

/* ---- schedules ---- */

static void shape(const struct dt_plan_options *o, int n_ranks, int *S, int *V, int *D, int *M,
                  int *T);

/* The units of stage s in program order; returns how many (2 x M x V). */
static int schedule(const struct pipe *p, int s, struct work *w)
{
    int n = 0, M = p->M, S = p->S, V = p->V, T = M * V;
    enum dt_strategy k = p->plan->strategy;
    if (k == DT_STRAT_GPIPE || k == DT_STRAT_NAIVE_MP) {
        for (int i = 0; i < M; i++)
            w[n++] = (struct work){true, i, s};
        for (int i = 0; i < M; i++)
            w[n++] = (struct work){false, i, s};
        return n;
    }
    /* 1F1B (V = 1) and Megatron's interleaved order: the k-th forward unit runs chunk
     * (k mod SV) / S of micro-batch (k / SV) S + k mod S; backward units run the chunks in
     * reverse. Warm-up: forwards before the first backward. */
    int warm = V == 1 ? S - s - 1 : (M == S ? T : (S - s - 1) * 2 + (V - 1) * S);
    warm = warm < T ? warm : T;
#define UNIT(fwd, k)                                                                         \
    ((struct work){(fwd), ((k) / (S * V)) * S + (k) % S,                                     \
                   ((fwd) ? ((k) % (S * V)) / S : V - 1 - ((k) % (S * V)) / S) * S + s})
    int f = 0, b = 0;
    for (; f < warm; f++)
        w[n++] = UNIT(true, f);
    while (f < T) {
        w[n++] = UNIT(true, f);
        f++;
        w[n++] = UNIT(false, b);
        b++;
    }
    for (; b < T; b++)
        w[n++] = UNIT(false, b);
#undef UNIT
    return n;
}

/* The activation slots the n units w of stage s take: the most micro-batches held at once,
 * each from its first forward there (take_slot) to its backward of the stage's first chunk
 * (backward frees the slot). held: M scratch flags. */
static int most_slots(const struct work *w, int n, int s, bool *held, int M)
{
    int live = 0, most = 0;
    memset(held, 0, (size_t)M * sizeof *held);
    for (int u = 0; u < n; u++) {
        bool *h = &held[w[u].micro];
        if (w[u].fwd && !*h)
            most = ++live > most ? live : most;
        else if (!w[u].fwd && w[u].chunk == s)
            live--;
        *h = w[u].fwd || w[u].chunk != s;
    }
    return most;
}

/* Interleaved: of stage s's first f forward units, how many start a micro-batch there (each
 * round of S V units starts S, in its first S: chunk 0's), and of its first b backward units,
 * how many free one (chunk 0's backward, the last S of each round). */
static long started(long f, int S, int V)
{
    long r = f % ((long)S * V);
    return f / ((long)S * V) * S + (r < S ? r : S);
}

static long freed(long b, int S, int V)
{
    long r = b % ((long)S * V) - (long)(V - 1) * S;
    return b / ((long)S * V) * S + (r > 0 ? r : 0);
}

/* most_slots of stage s's schedule without its units: GPipe and naive-mp hold every
 * micro-batch at once, 1F1B its warm-up forwards and one more (S - s), at most M;
 * interleaved the most started and not freed right after a forward (the warm-up's last, or
 * each of the steady phase's, which alternates a forward and a backward).
 * tests/test_memfloor holds these to the walk on every stage of many shapes. */
static int counted_slots(enum dt_strategy k, int S, int V, int M, int s)
{
    if (k == DT_STRAT_GPIPE || k == DT_STRAT_NAIVE_MP)
        return M;
    if (k == DT_STRAT_1F1B)
        return S - s < M ? S - s : M;
    long T = (long)M * V, warm = M == S ? T : (long)(S - s - 1) * 2 + (long)(V - 1) * S;
    warm = warm < T ? warm : T;
    long most = started(warm, S, V);
    for (long j = 0; warm + j < T; j++) {
        long live = started(warm + 1 + j, S, V) - freed(j, S, V);
        most = live > most ? live : most;
    }
    return (int)most;
}

int dt_pipeline_slots(const struct dt_plan_options *o, int s)
{
    int S, V, D, M, T;
    shape(o, 1, &S, &V, &D, &M, &T);
    return counted_slots(o->strategy, S, V, M, s);
}

int dt_pipeline_slots_walked(const struct dt_plan_options *o, int s)
{
    struct dt_plan plan = {.strategy = o->strategy};
    struct pipe p = {.plan = &plan};
    int T;
    shape(o, 1, &p.S, &p.V, &p.D, &p.M, &T);
    struct work *w = malloc((size_t)(2 * p.M * p.V) * sizeof *w);
    bool *held = malloc((size_t)p.M * sizeof *held);
    int n = w && held ? schedule(&p, s, w) : 0;
    int most = n ? most_slots(w, n, s, held, p.M) : -1;
    free(w);
    free(held);
    return most;
}

/* ---- layer geometry ---- */

/* For every stage and storage owner o running on another stage, the lowest chunk of the
 * stage that reads o; computed once, the emitters ask for it on every schedule unit. */
/* The first readers (p->reader) indexed both ways: by chunk (recv_at, recvs) and by owner
 * (read_at, read_by), for the emitters' per-unit lookups; total: the readers in p->reader. */
static int index_readers(struct pipe *p, int total)
{
    int n = p->m->n_layers;
    p->recv_at = calloc((size_t)p->C + 1, sizeof *p->recv_at);
    p->read_at = calloc((size_t)n + 1, sizeof *p->read_at);
    p->recvs = malloc(((size_t)total + 1) * sizeof *p->recvs);
    p->read_by = malloc(((size_t)total + 1) * sizeof *p->read_by);
    if (!p->recv_at || !p->read_at || !p->recvs || !p->read_by)
        return -1;
    for (int i = 0; i < p->S * n; i++)
        if (p->reader[i] >= 0) {
            p->recv_at[p->reader[i] + 1]++;
            p->read_at[i % n + 1]++;
        }
    for (int c = 0; c < p->C; c++)
        p->recv_at[c + 1] += p->recv_at[c];
    for (int o = 0; o < n; o++)
        p->read_at[o + 1] += p->read_at[o];
    int *next_recv = p->recvs, *fill = calloc((size_t)p->C + (size_t)n, sizeof *fill);
    if (!fill)
        return -1;
    for (int o = 0; o < n; o++) /* owners ascending, stages ascending: the scans' orders */
        for (int s = 0; s < p->S; s++) {
            int c = p->reader[s * n + o];
            if (c < 0)
                continue;
            next_recv[p->recv_at[c] + fill[c]++] = o;
            p->read_by[p->read_at[o] + fill[p->C + o]++] = s;
        }
    free(fill);
    return 0;
}

/* p->reader[s * n + o]: the lowest chunk of stage s with a layer that reads storage owner o
 * (directly or through a view) when o runs on another stage, else -1. One pass over the
 * chunks in order, so the first chunk of a stage to read o is its lowest (a search per
 * stage and owner rescanned the chunks' layers: quadratic in the layers). */
static int first_readers(struct pipe *p)
{
    const struct dt_model *m = p->m;
    int n = m->n_layers, total = 0;
    p->reader = malloc((size_t)p->S * (size_t)n * sizeof *p->reader);
    if (!p->reader)
        return -1;
    for (int i = 0; i < p->S * n; i++)
        p->reader[i] = -1;
    for (int c = 0; c < p->C; c++) {
        int s = stage_of_chunk(p, c);
        for (int j = p->plan->chunk_first[c]; j < p->plan->chunk_first[c + 1]; j++)
            for (int k = 0; k < m->layers[j].n_in; k++) {
                int o = m->layers[j].in[k] >= 0 ? p->owner[m->layers[j].in[k]] : -1;
                if (o < 0 || p->owner[o] != o || stage_of_chunk(p, p->chunk_of[o]) == s ||
                    p->reader[s * n + o] >= 0)
                    continue;
                p->reader[s * n + o] = c;
                total++;
            }
    }
    return index_readers(p, total);
}

/* The stages other than o's that read o (ascending); how many. */
static int reader_stages(const struct pipe *p, int o, const int **stages)
{
    *stages = p->read_by + p->read_at[o];
    return p->read_at[o + 1] - p->read_at[o];
}

/* Rows of layer o's output (b: ACT or DACT) in the emitting rank's slot: its shard's width. */
static struct dt_region act_region(const struct pipe *p, const struct emit *e, enum dt_buf b,
                                   int o, int slot, int rows)
{
    const struct dt_rank_plan *rp = &p->plan->ranks[e->rank];
    long f = dt_shard_act_floats(p->m, p->plan->views[rp->view], o);
    return (struct dt_region){b, (long)slot * rp->slot_rows * f, (long)rows * f, o};
}

/* The tensor group's allreduce after layer l's forward or backward (tensor.c), if any. */
static int tensor_after(const struct pipe *p, const struct emit *e, enum dt_phase ph, int l,
                        int slot, int rows)
{
    return dtc_tensor_after(p->plan, e->rank, p->T > 1 ? &p->tensor : NULL, ph, l, slot, rows,
                            e->eval);
}

/* ---- emission ---- */

/* What a pending send reads besides a slot: a gradient in the rank's pool (waited for before
 * the pool is written again: a backward unit, the loss), an output held until sent (waited
 * for before that layer's next forward); WAIT_ALL: every pending send. */
enum { WAIT_ALL = -1, HELD_POOL = -2, HELD_RING = -3 };

static bool pooled(const struct emit *e, int o)
{
    return e->dact->at[o] >= 0;
}

static bool until_sent(const struct pipe *p, const struct emit *e, int o)
{
    return p->plan->views[p->plan->ranks[e->rank].view][o].act_until_sent;
}

static int push(struct dt_plan *plan, const struct emit *e, struct dt_op op)
{
    return dtc_push_to(plan, e->rank, op, e->eval);
}

/* The WAITs of the pending sends that read slot (or HELD_POOL, HELD_RING, WAIT_ALL). */
static int wait_slot(struct dt_plan *plan, struct emit *e, int slot)
{
    int kept = 0, rc = 0;
    for (int k = 0; k < e->n_pending; k++) {
        int h = e->pending[2 * k], s = e->pending[2 * k + 1];
        if ((s == slot || slot == WAIT_ALL) && !rc) {
            rc = push(plan, e, (struct dt_op){.kind = DT_OP_WAIT, .layer = -1, .handle = h});
            continue;
        }
        e->pending[2 * kept] = h;
        e->pending[2 * kept + 1] = s;
        kept++;
    }
    e->n_pending = rc ? e->n_pending : kept;
    return rc;
}

static int take_slot(struct dt_plan *plan, struct emit *e, int micro)
{
    if (e->slot_of[micro] >= 0)
        return DT_OK;
    int s = 0;
    while (s < e->n_slots && e->slot_busy[s])
        s++;
    if (s == e->n_slots)
        e->n_slots++;
    e->slot_busy[s] = true;
    e->slot_of[micro] = s;
    return wait_slot(plan, e, s);
}

static int send(struct dt_plan *plan, struct emit *e, int peer, int tag, struct dt_region r,
                int slot)
{
    struct dt_op op = {.kind = DT_OP_SEND, .layer = -1, .peer = peer, .tag = tag, .region = r,
                       .nonblocking = true, .handle = e->next_handle++};
    e->pending[2 * e->n_pending] = op.handle;
    e->pending[2 * e->n_pending + 1] = slot;
    e->n_pending++;
    return push(plan, e, op);
}

static int recv(struct dt_plan *plan, const struct emit *e, int peer, int tag,
                struct dt_region r, bool sum)
{
    return push(plan, e, (struct dt_op){.kind = DT_OP_RECV, .layer = -1, .peer = peer,
                                        .tag = tag, .region = r, .sum = sum});
}

/* Zeroes the rows of layer o's gradient that received gradients are summed into. */
static int zero_dact(const struct pipe *p, const struct emit *e, int o, int slot, int rows)
{
    return push(p->plan, e, (struct dt_op){.kind = DT_OP_ZERO, .layer = -1,
                                           .region = act_region(p, e, DT_BUF_DACT, o, slot, rows)});
}

static void early_clear(struct early_recvs *x)
{
    for (int i = 0; i < x->cap; i++)
        x->key[i] = -1;
    x->n = 0;
}

/* The slot of key: where it is, else the empty one it goes in. */
static int early_slot(const struct early_recvs *x, long key)
{
    unsigned long h = (unsigned long)key * 0x9E3779B97F4A7C15UL;
    int i = (int)(h >> 40) & (x->cap - 1);
    while (x->key[i] >= 0 && x->key[i] != key)
        i = (i + 1) & (x->cap - 1);
    return i;
}

static int early_put(struct early_recvs *x, long key, int handle)
{
    if (2 * (x->n + 1) > x->cap) {
        struct early_recvs y = {malloc(sizeof *y.key * (size_t)(x->cap ? 2 * x->cap : 256)),
                                malloc(sizeof *y.handle * (size_t)(x->cap ? 2 * x->cap : 256)),
                                x->cap ? 2 * x->cap : 256, 0};
        if (!y.key || !y.handle) {
            free(y.key);
            free(y.handle);
            return DT_ENOMEM;
        }
        early_clear(&y);
        for (int i = 0; i < x->cap; i++)
            if (x->key[i] >= 0)
                early_put(&y, x->key[i], x->handle[i]);
        free(x->key);
        free(x->handle);
        *x = y;
    }
    int i = early_slot(x, key);
    x->n += x->key[i] < 0;
    x->key[i] = key;
    x->handle[i] = handle;
    return DT_OK;
}

static long early_key(int peer, int tag) { return (long)peer << 32 | (long)(unsigned)tag; }

/* The early, non-blocking summing receive of a gradient (see the top of the file). */
static int recv_early(struct dt_plan *plan, struct emit *e, int peer, int tag,
                      struct dt_region r)
{
    int rc = early_put(&e->early, early_key(peer, tag), e->next_handle);
    return rc ? rc : push(plan, e, (struct dt_op){.kind = DT_OP_RECV, .layer = -1, .peer = peer,
                                                  .tag = tag, .region = r, .sum = true,
                                                  .nonblocking = true,
                                                  .handle = e->next_handle++});
}

/* The WAIT for the receive recv_early posted from peer with tag. */
static int wait_recv(struct dt_plan *plan, const struct emit *e, int peer, int tag)
{
    if (dt_plan_dropped(plan, e->rank)) /* a probe holds no ops of this rank */
        return DT_OK;
    int i = e->early.cap ? early_slot(&e->early, early_key(peer, tag)) : -1;
    if (i < 0 || e->early.key[i] < 0)
        return DT_EINTERNAL;
    return push(plan, e, (struct dt_op){.kind = DT_OP_WAIT, .layer = -1,
                                        .handle = e->early.handle[i]});
}

static int forward(const struct pipe *p, struct emit *e, int i, int c, int rows, int row0)
{
    struct dt_plan *plan = p->plan;
    const struct dt_model *m = p->m;
    int rc = take_slot(plan, e, i), slot = e->slot_of[i];
    if (!rc && (c == 0 || c == p->C - 1) && !e->loaded[i]) {
        e->loaded[i] = true;
        rc = push(plan, e, dtc_load(plan, e->rank, i, slot, row0, rows));
    }
    for (int j = p->recv_at[c]; j < p->recv_at[c + 1] && !rc; j++) {
        int o = p->recvs[j];
        rc = recv(plan, e, rank_of(p, stage_of_chunk(p, p->chunk_of[o]), e->d, e->k),
                  tag_of(p, o, 0, i), act_region(p, e, DT_BUF_ACT, o, slot, rows), false);
    }
    for (int l = plan->chunk_first[c]; l < plan->chunk_first[c + 1] && !rc; l++) {
        if (until_sent(p, e, l)) /* its rows: free once the last micro-batch's are sent */
            rc = wait_slot(plan, e, HELD_RING);
        if (!rc)
            rc = push(plan, e, dtc_compute(DT_PH_FORWARD, l, i, slot, row0, rows));
        if (!rc)
            rc = tensor_after(p, e, DT_PH_FORWARD, l, slot, rows);
    }
    if (!rc && c == p->C - 1 && !e->eval) /* the loss writes the last layer's gradient */
        rc = wait_slot(plan, e, HELD_POOL);
    if (!rc && c == p->C - 1)
        rc = dtc_tensor_loss(plan, e->rank, p->T > 1 ? &p->tensor : NULL,
                             dtc_loss(plan, i, slot, rows, e->eval ? rows : plan->global_batch),
                             e->eval);
    for (int o = plan->chunk_first[c]; o < plan->chunk_first[c + 1] && !rc; o++) {
        const int *st;
        int n = reader_stages(p, o, &st);
        if (n && !e->eval && dt_layer_needs_dact(m, o) && !pooled(e, o))
            rc = zero_dact(p, e, o, slot, rows);
        for (int k = 0; k < n && !rc; k++)
            rc = send(plan, e, rank_of(p, st[k], e->d, e->k), tag_of(p, o, 0, i),
                      act_region(p, e, DT_BUF_ACT, o, slot, rows),
                      until_sent(p, e, o) ? HELD_RING : slot);
        for (int k = 0; k < n && !rc && !e->eval && dt_layer_needs_dact(m, o); k++)
            rc = recv_early(plan, e, rank_of(p, st[k], e->d, e->k), tag_of(p, o, 1, i),
                            act_region(p, e, DT_BUF_DACT, o, slot, rows));
    }
    return rc;
}

static int backward(const struct pipe *p, struct emit *e, int i, int c, int rows, int row0)
{
    struct dt_plan *plan = p->plan;
    const struct dt_model *m = p->m;
    int slot = e->slot_of[i], rc = wait_slot(plan, e, HELD_POOL); /* it writes the pool */
    for (int o = plan->chunk_first[c]; o < plan->chunk_first[c + 1] && !rc; o++) {
        const int *st;
        int n = reader_stages(p, o, &st);
        if (n && dt_layer_needs_dact(m, o) && pooled(e, o)) /* the sums land on zeros */
            rc = zero_dact(p, e, o, slot, rows);
        for (int k = 0; k < n && !rc && dt_layer_needs_dact(m, o); k++)
            rc = wait_recv(plan, e, rank_of(p, st[k], e->d, e->k), tag_of(p, o, 1, i));
    }
    for (int l = plan->chunk_first[c + 1] - 1; l >= plan->chunk_first[c] && !rc; l--)
        if (l >= p->first_train) {
            rc = push(plan, e, dtc_compute(DT_PH_BACKWARD, l, i, slot, row0, rows));
            if (!rc)
                rc = tensor_after(p, e, DT_PH_BACKWARD, l, slot, rows);
        }
    for (int j = p->recv_at[c]; j < p->recv_at[c + 1] && !rc; j++) {
        int o = p->recvs[j];
        if (dt_layer_needs_dact(m, o))
            rc = send(plan, e, rank_of(p, stage_of_chunk(p, p->chunk_of[o]), e->d, e->k),
                      tag_of(p, o, 1, i), act_region(p, e, DT_BUF_DACT, o, slot, rows),
                      pooled(e, o) ? HELD_POOL : slot);
    }
    if (c == e->stage) { /* the micro-batch's last unit on this rank: its slot is free */
        e->slot_busy[slot] = false;
        e->slot_of[i] = -1;
    }
    return rc;
}

/* ---- views, partition, groups ---- */

/* Whether layer l is tied to an embedding on another stage (GPT's output layer on the last
 * stage, its token table on the first). Its stage then holds a copy of the table, packed
 * after its other parameters, and the two ranks allreduce the table's gradient after the
 * backward (tied_allreduce) so that both update it identically, as Megatron-LM does. */
static bool tied_apart(const struct pipe *p, int l)
{
    const struct dt_layer *L = &p->m->layers[l];
    return L->tied && stage_of_chunk(p, p->chunk_of[l]) !=
                          stage_of_chunk(p, p->chunk_of[L->tied_layer]);
}

static double layer_cost(const struct pipe *p, const struct dt_device_spec *dev, int l, int rows)
{
    struct dt_cost_params cp;
    dt_cost_defaults(&cp, dev->kind);
    struct dt_op f = dtc_compute(DT_PH_FORWARD, l, 0, 0, 0, rows);
    struct dt_op b = dtc_compute(DT_PH_BACKWARD, l, 0, 0, 0, rows);
    f = dt_plan_stamp(p->plan, &f); /* as dt_plan_push stamps them */
    b = dt_plan_stamp(p->plan, &b);
    return dt_cost_compute(&cp, dev, p->m, &f) +
           (l >= p->first_train ? dt_cost_compute(&cp, dev, p->m, &b) : 0);
}

/* Whether a rank of stage s sits in node group g. */
static bool stage_in_group(const struct pipe *p, int s, const struct dt_node_group *g)
{
    for (int d = 0; d < p->D; d++)
        for (int k = 0; k < p->T; k++)
            if (dt_topology_group_of_rank(p->plan->topo, rank_of(p, s, d, k)) == g)
                return true;
    return false;
}

/* Each layer's forward and backward cost on the devices of chunk c's stage: on the slowest of
 * them, which the stage's replicas and tensor ranks wait for (a cluster whose node groups hold
 * different devices: a stage on slower cards gets fewer layers). */
static void chunk_costs(const struct pipe *p, int c, int rows, double *cost)
{
    const struct dt_topology *topo = p->plan->topo;
    for (int l = 0; l < p->m->n_layers; l++)
        cost[l] = 0;
    for (int g = 0; g < topo->n_groups; g++) {
        if (!stage_in_group(p, stage_of_chunk(p, c), &topo->groups[g]))
            continue;
        for (int l = 0; l < p->m->n_layers; l++) {
            double t = layer_cost(p, &topo->groups[g].device, l, rows);
            cost[l] = t > cost[l] ? t : cost[l];
        }
    }
}

/* Whether only token chunks (DT_SHARD_SEQ outputs) cross a stage boundary before layer b. */
static bool chunks_cross(const struct pipe *p, const enum dt_shard_kind *kind, int b)
{
    const struct dt_model *m = p->m;
    for (int c = b; c < m->n_layers; c++)
        for (int k = 0; k < m->layers[c].n_in; k++) {
            int j = m->layers[c].in[k];
            if (j >= 0 && j < b && kind[j] != DT_SHARD_SEQ)
                return false;
        }
    return true;
}

/* Under sequence parallelism (kind: the cut), each balanced stage boundary moves to the
 * nearest one (between its neighbours) where only token chunks cross: Megatron-LM's stages
 * end on the residual stream, whose split tensor B x T/t x h is what a stage sends. None
 * there: it stays. */
static void seqpar_boundaries(const struct pipe *p, const enum dt_shard_kind *kind)
{
    int *first = p->plan->chunk_first;
    for (int c = 1; kind && c < p->C; c++)
        for (int d = 0; first[c] - d > first[c - 1] || first[c] + d < first[c + 1]; d++) {
            int back = first[c] - d, ahead = first[c] + d;
            if (back > first[c - 1] && chunks_cross(p, kind, back)) {
                first[c] = back;
                break;
            }
            if (ahead < first[c + 1] && chunks_cross(p, kind, ahead)) {
                first[c] = ahead;
                break;
            }
        }
}

/* Whether a stage boundary before layer b leaves every transformer block whole (and, under
 * sequence parallelism, sends token chunks only). */
static bool between_blocks(const struct pipe *p, const int *block, const enum dt_shard_kind *kind,
                           int b)
{
    bool whole = block[b - 1] < 0 || block[b] != block[b - 1];
    return whole && (!kind || !p->plan->opt.sequence_parallel || chunks_cross(p, kind, b));
}

/* A transformer's stages hold whole blocks, as Megatron-LM's do (a boundary inside a block
 * would send the residual and the block's inner activation, each kept with its gradient per
 * micro-batch in flight): the layers between two boundaries that leave blocks whole form one
 * unit, and the units are balanced by cost. Returns 1 (first[] untouched) for a model without
 * blocks or with fewer units than chunks, DT_ENOMEM, or DT_OK. */
static int block_partition(struct pipe *p, const double *cost, size_t stride,
                           const enum dt_shard_kind *kind)
{
    int n = p->m->n_layers, u = 0, rc = 1, *first = p->plan->chunk_first;
    int rows = stride ? p->C : 1;
    int *block = malloc((size_t)n * sizeof *block);
    int *unit_first = malloc((size_t)(n + 1) * sizeof *unit_first);
    int *cuts = malloc((size_t)(p->C + 1) * sizeof *cuts);
    double *unit_cost = malloc((size_t)rows * (size_t)n * sizeof *unit_cost);
    int blocks = block && unit_first && cuts && unit_cost ? dtc_blocks(p->m, block) : -1;
    for (int l = 0; l < n && blocks > 0; l++)
        if (l == 0 || between_blocks(p, block, kind, l))
            unit_first[u++] = l;
    if (blocks > 0)
        unit_first[u] = n;
    for (int r = 0; r < rows && blocks > 0; r++) /* unit j of part r at unit_cost[r u + j] */
        for (int j = 0; j < u; j++) {
            double *c = &unit_cost[(size_t)r * (size_t)u + (size_t)j];
            *c = 0;
            for (int l = unit_first[j]; l < unit_first[j + 1]; l++)
                *c += cost[(size_t)r * stride + (size_t)l];
        }
    if (blocks < 0 ||
        (u >= p->C && dt_partition_balanced(unit_cost, stride ? (size_t)u : 0, u, p->C, cuts)))
        rc = DT_ENOMEM;
    else if (blocks > 0 && u >= p->C) {
        for (int c = 0; c <= p->C; c++)
            first[c] = unit_first[cuts[c]];
        rc = DT_OK;
    }
    free(block);
    free(unit_first);
    free(cuts);
    free(unit_cost);
    return rc;
}

static int partition(struct pipe *p, int rows, const enum dt_shard_kind *kind,
                     struct dt_error *err)
{
    const struct dt_plan_options *o = &p->plan->opt;
    int n = p->m->n_layers, *first = p->plan->chunk_first;
    if (o->n_stage_cuts) {
        first[0] = 0;
        for (int k = 0; k < o->n_stage_cuts; k++)
            first[k + 1] = o->stage_cuts[k];
        first[p->C] = n;
        if (o->stage_cuts[DT_MAX_STAGES - 1] != n - 1)
            return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--stages: the ranges must end at the "
                           "model's last layer, %d (model %s has %d layers)", n - 1, p->m->name, n);
        return DT_OK;
    }
    /* one row of costs when every node holds the same device, else a row per chunk */
    size_t stride = p->plan->topo->n_groups > 1 ? (size_t)n : 0;
    int cost_rows = stride ? p->C : 1;
    double *cost = malloc((size_t)cost_rows * (size_t)n * sizeof *cost);
    if (!cost)
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int c = 0; c < cost_rows; c++) /* a stage's later chunks cost as its first */
        if (c < p->S)
            chunk_costs(p, c, rows, cost + (size_t)c * (size_t)n);
        else
            memcpy(cost + (size_t)c * (size_t)n, cost + (size_t)(c % p->S) * (size_t)n,
                   (size_t)n * sizeof *cost);
    int rc = block_partition(p, cost, stride, kind);
    if (rc == 1) { /* no blocks to keep whole: any layer boundary */
        rc = dt_partition_balanced(cost, stride, n, p->C, first);
        if (!rc && o->sequence_parallel)
            seqpar_boundaries(p, kind);
    }
    free(cost);
    return rc ? dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
}

/* Whether every stage that reads o reads it first in the chunk right after o's: the one
 * whose forward of a micro-batch follows o's. A skip connection read chunks later is not:
 * its receiver posts the receive only after units that wait for the sender's later work,
 * so the sender's next forward cannot wait for that send (a rendezvous deadlock: gpt3-13b,
 * interleaved, 64 stages x 4 chunks, layer by layer). */
static bool read_by_next_chunk(const struct pipe *p, int o)
{
    const int *st;
    int n = reader_stages(p, o, &st);
    for (int k = 0; k < n; k++)
        if (p->reader[st[k] * p->m->n_layers + o] != p->chunk_of[o] + 1)
            return false;
    return n > 0;
}

/* The outputs a stage only sends (lv[l].act_until_sent): read on another stage, by the next
 * chunk only, by no layer it runs (through views), and not by their own backward; the loss
 * reads the last layer's. */
static void mark_until_sent(const struct pipe *p, struct dt_layer_view *lv)
{
    const struct dt_model *m = p->m;
    int n = m->n_layers;
    for (int l = 0; l < n; l++)
        lv[l].act_until_sent = lv[l].runs && p->owner[l] == l && l < n - 1 &&
                               read_by_next_chunk(p, l) &&
                               !dt_layer_backward_reads_output(&m->layers[l]);
    for (int l = 0; l < n; l++)
        for (int x = 0; lv[l].runs && x < m->layers[l].n_in; x++)
            if (m->layers[l].in[x] >= 0)
                lv[p->owner[m->layers[l].in[x]]].act_until_sent = false;
}

/* The view of stage s's tensor rank k: the layers it runs (their shards' parameters packed,
 * kind: tensor.c's cut, NULL without --tp), and those it holds. */
static int stage_view(struct pipe *p, int s, int k, const enum dt_shard_kind *kind,
                      long *n_params)
{
    struct dt_plan *plan = p->plan;
    const struct dt_model *m = p->m;
    int v = s == 0 && k == 0 ? 0 : dt_plan_add_view(plan);
    if (v < 0)
        return -1;
    struct dt_layer_view *lv = plan->views[v];
    long off = 0;
    for (int l = 0; l < m->n_layers; l++) {
        bool split = kind && kind[l] != DT_SHARD_NONE;
        lv[l] = (struct dt_layer_view){.shard_kind = split ? kind[l] : DT_SHARD_NONE,
                                       .shard_index = split ? k : 0,
                                       .shard_count = split ? p->T : 1};
        lv[l].runs = stage_of_chunk(p, p->chunk_of[l]) == s;
        lv[l].param_offset = lv[l].runs ? off : 0;
        off += lv[l].runs ? dt_shard_params(m, lv, l) : 0;
        if (lv[l].runs && tied_apart(p, l)) /* its copy of the table (or of its shard) */
            off += dt_shard_tied_floats(m, lv, l);
    }
    for (int l = 0; l < m->n_layers; l++) {
        if (!lv[l].runs)
            continue;
        lv[l].holds = true;
        for (int x = 0; x < m->layers[l].n_in; x++) /* inputs, and the views they go through */
            for (int j = m->layers[l].in[x]; j >= 0; j = p->owner[j] == j ? -1 : m->layers[j].in[0])
                lv[j].holds = true;
        lv[l].dact_received = p->read_at[l + 1] > p->read_at[l];
    }
    mark_until_sent(p, lv);
    *n_params = off;
    return v;
}

/* The groups: per stage and tensor rank its D replicas (replicas[s T + k]); with --tp, per
 * stage and replica its T tensor ranks (p->tensor.tp_group of each rank). */
static int pipeline_groups(struct pipe *p, int *replicas)
{
    int n = p->D > p->T ? p->D : p->T, rc = 0;
    int *ranks = malloc((size_t)n * sizeof *ranks);
    if (!ranks)
        return -1;
    for (int s = 0; s < p->S; s++)
        for (int k = 0; k < p->T && !rc; k++) {
            for (int d = 0; d < p->D; d++)
                ranks[d] = rank_of(p, s, d, k);
            rc = (replicas[s * p->T + k] = dt_plan_add_group(p->plan, p->D, ranks)) < 0;
        }
    for (int s = 0; s < p->S && p->T > 1; s++)
        for (int d = 0; d < p->D && !rc; d++) {
            for (int k = 0; k < p->T; k++)
                ranks[k] = rank_of(p, s, d, k);
            int g = dt_plan_add_group(p->plan, p->T, ranks);
            for (int k = 0; k < p->T; k++)
                p->tensor.tp_group[rank_of(p, s, d, k)] = g;
            rc = g < 0;
        }
    for (int l = 0; l < p->m->n_layers && !rc; l++) { /* (table's rank, copy's), d T + k */
        p->tied_group[l] = p->plan->n_groups;
        for (int d = 0; d < p->D && tied_apart(p, l) && !rc; d++)
            for (int k = 0; k < p->T && !rc; k++) {
                int pair[2] = {
                    rank_of(p, stage_of_chunk(p, p->chunk_of[p->m->layers[l].tied_layer]), d, k),
                    rank_of(p, stage_of_chunk(p, p->chunk_of[l]), d, k)};
                rc = dt_plan_add_group(p->plan, 2, pair) < 0;
            }
    }
    free(ranks);
    return rc ? -1 : 0;
}

/* ---- per rank ---- */

/* The allreduce of each tied table's gradient between the table's rank and its copy's (the
 * same replica and tensor rank): the table's first floats on the embedding's stage, the copy
 * after the tied layer's other parameters on the other. */
static int tied_allreduce(const struct pipe *p, int r, int view)
{
    const struct dt_model *m = p->m;
    const struct dt_layer_view *lv = p->plan->views[view];
    int rc = DT_OK;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        int t = m->layers[l].tied_layer, at = lv[l].runs ? l : t;
        if (!tied_apart(p, l) || !lv[at].runs)
            continue;
        long off = lv[at].param_offset + (at == l ? dt_shard_params(m, lv, l) : 0);
        rc = dtc_push(p->plan, r, dtc_coll(DT_COLL_ALLREDUCE, DT_ALG_LIBRARY,
                                           p->tied_group[l] + r / p->T % p->D * p->T + r % p->T, 0,
                                           DT_BUF_GRADS, off, dt_shard_tied_floats(m, lv, l)));
    }
    return rc;
}

/* ZeRO stage 1 over a stage's replicas (Rajbhandari et al. 2020; DeepSpeed composes only
 * this stage with pipelines): the gradients reduce-scattered, the replica updates its chunk
 * (optimizer state and master weights of that chunk only), the parameters allgathered. */
static int zero1_step(const struct pipe *p, int r, int replicas, long n_params)
{
    struct dt_plan *plan = p->plan;
    enum dt_coll_alg alg = dtc_grad_alg(&plan->opt);
    long off, len;
    dt_chunk(n_params, p->D, plan->ranks[r].dp_index, &off, &len);
    plan->ranks[r].n_updated = len;
    int rc = dtc_push(plan, r, dtc_coll(DT_COLL_REDUCE_SCATTER, alg, replicas, 0, DT_BUF_GRADS,
                                        0, n_params));
    if (!rc)
        rc = dtc_optimizer_step(plan, r, true, off, len, 0);
    return rc ? rc : dtc_push(plan, r, dtc_coll(DT_COLL_ALLGATHER, alg, replicas, 0,
                                                DT_BUF_PARAMS, 0, n_params));
}

static void reset_slots(const struct pipe *p, struct emit *e)
{
    memset(e->slot_busy, 0, (size_t)(p->M + 1) * sizeof *e->slot_busy);
    memset(e->loaded, 0, (size_t)(p->M + 1) * sizeof *e->loaded);
    for (int i = 0; i <= p->M; i++)
        e->slot_of[i] = -1;
}

/* What rank r of stage `stage`, replica d, is before its ops: its view, place, parameters. */
static void place_rank(struct pipe *p, int r, int stage, int d, int view, long n_params,
                       int replicas)
{
    struct dt_rank_plan *rp = &p->plan->ranks[r];
    rp->view = view;
    rp->stage = stage;
    rp->dp_index = d;
    rp->dp_count = p->D;
    rp->replicas = replicas;
    rp->n_params = rp->n_updated = n_params;
    rp->first = p->plan->views[view][0].runs;
    rp->last = p->plan->views[view][p->m->n_layers - 1].runs;
    rp->updates = true;
}

/* A memory floor's rank (plan->floor): placed as emit_rank places it, holding the slots its
 * schedule keeps at once, ZeRO-1's first chunk of the optimizer's state, and the buffer
 * table dtc_finish_rank gives it with no ops (what ops size, the receive pool and the
 * workspaces' rows, comes out no larger). */
static int floor_rank(struct pipe *p, int r, int stage, int view, long n_params, int replicas)
{
    struct dt_rank_plan *rp = &p->plan->ranks[r];
    place_rank(p, r, stage, 0, view, n_params, replicas);
    if (dt_plan_dropped(p->plan, r)) /* a tensor rank other than 0 (probe_tensor.c) */
        return DT_OK;
    rp->slots = counted_slots(p->plan->strategy, p->S, p->V, p->M, stage);
    if (p->D > 1 && p->plan->opt.zero == 1) {
        long off, len;
        dt_chunk(n_params, p->D, 0, &off, &len);
        rp->n_updated = len;
    }
    return dtc_finish_rank(p->plan, r);
}

static int emit_rank(struct pipe *p, int r, int stage, int d, int k, int view, long n_params,
                     int replicas, struct work *w, struct emit *e)
{
    struct dt_plan *plan = p->plan;
    struct dt_rank_plan *rp = &plan->ranks[r];
    e->rank = r;
    e->stage = stage;
    e->d = d;
    e->k = k;
    e->n_slots = e->n_pending = e->next_handle = 0;
    early_clear(&e->early);
    e->eval = false; /* rank r placed by the caller (place_rank) */
    /* a stage's ranks emit alike, the next stage's about as many: room for them at once
     * (growing by doubling copied a large program again and again) */
    int rc = dt_plan_reserve(plan, r, e->last_ops);
    rc = rc ? rc : dtc_push(plan, r, dtc_zero(DT_BUF_GRADS, 0, n_params));
    int n = schedule(p, stage, w);
    /* known before emitting: the vocabulary-parallel loss addresses its statistics planes
     * (plane j at j x slots x slot rows) while the schedule is emitted; e->loaded serves
     * as scratch, which reset_slots then clears */
    rp->slots = most_slots(w, n, stage, e->loaded, p->M);
    e->dact = dt_plan_dact(plan, r); /* by view and slots */
    if (!rc && !e->dact)
        rc = DT_ENOMEM;
    reset_slots(p, e);
    for (int u = 0; u < n && !rc; u++) {
        int row0, rows;
        micro_rows(p, r, w[u].micro, &row0, &rows);
        rc = w[u].fwd ? forward(p, e, w[u].micro, w[u].chunk, rows, row0)
                      : backward(p, e, w[u].micro, w[u].chunk, rows, row0);
    }
    if (!rc)
        rc = wait_slot(plan, e, WAIT_ALL);
    for (int l = 0; l < p->m->n_layers && !rc && p->T > 1; l++) /* sequence-parallel norms */
        if (plan->views[view][l].runs)
            rc = dtc_tensor_grads(plan, r, &p->tensor, l);
    if (!rc)
        rc = tied_allreduce(p, r, view);
    if (!rc && p->D > 1 && plan->opt.zero == 1)
        rc = zero1_step(p, r, replicas, n_params);
    else if (!rc && p->D > 1)
        rc = dtc_push(plan, r, dtc_coll(DT_COLL_ALLREDUCE, dtc_grad_alg(&plan->opt), replicas,
                                        0, DT_BUF_GRADS, 0, n_params));
    if (!rc && (p->D == 1 || plan->opt.zero != 1))
        rc = dtc_optimizer_step(plan, r, true, 0, n_params, 0);
    rp->slots = e->n_slots;
    e->last_ops = rp->n_ops;
    return rc;
}

/* The eval program: one micro-batch of eval_rows rows (as many as every rank of the pipeline
 * holds) through the chunks in order; then the rank's buffer table. Handles go on from the
 * step program's. */
static int emit_eval(struct pipe *p, int r, int eval_rows, int first_handle, struct emit *e)
{
    struct dt_plan *plan = p->plan;
    const struct dt_rank_plan *rp = &plan->ranks[r];
    reset_slots(p, e);
    e->rank = r;
    e->stage = rp->stage;
    e->d = rp->dp_index;
    e->k = r % p->T;
    e->n_slots = e->n_pending = 0;
    e->next_handle = first_handle;
    e->eval = true;
    e->dact = dt_plan_dact(plan, r);
    int rc = e->dact ? DT_OK : DT_ENOMEM;
    for (int v = 0; v < p->V && !rc; v++)
        rc = forward(p, e, p->M, v * p->S + rp->stage, eval_rows, 0);
    if (!rc)
        rc = wait_slot(plan, e, WAIT_ALL);
    plan->next_handle = e->next_handle > plan->next_handle ? e->next_handle : plan->next_handle;
    return rc ? rc : dtc_finish_rank(plan, r);
}

/* ---- fits and compile ---- */

static void shape(const struct dt_plan_options *o, int n_ranks, int *S, int *V, int *D, int *M,
                  int *T)
{
    *S = o->pp ? o->pp : 2;
    *V = o->strategy == DT_STRAT_INTERLEAVED ? (o->chunks ? o->chunks : 2) : 1;
    *T = o->tp > 1 ? o->tp : 1;
    *D = o->dp ? o->dp : n_ranks / (*S * *T);
    *M = o->strategy == DT_STRAT_NAIVE_MP ? 1 : (o->micro_batches ? o->micro_batches : *S);
}

bool dtc_pipeline_fits(const struct dt_plan_options *o, const struct dt_model *m, int n_ranks,
                       char *why, size_t whylen)
{
    int S, V, D, M, T;
    shape(o, n_ranks, &S, &V, &D, &M, &T);
    const char *name = dt_strategy_name(o->strategy);
    if (S < 2)
        return snprintf(why, whylen, "a pipeline needs --pp 2 or more"), false;
    if (T > 1 && (D < 1 || D * S * T != n_ranks))
        return snprintf(why, whylen, "%d stages x %d replicas x %d tensor ranks (--pp x --dp x "
                        "--tp) must equal the %d ranks", S, D, T, n_ranks), false;
    if (D < 1 || D * S * T != n_ranks)
        return snprintf(why, whylen, "%d stages x %d replicas (--pp x --dp) must equal the %d "
                        "ranks", S, D, n_ranks), false;
    if (o->strategy == DT_STRAT_NAIVE_MP && o->micro_batches > 1)
        return snprintf(why, whylen, "naive-mp runs one micro-batch (use gpipe or 1f1b for "
                        "--micro-batches %d)", o->micro_batches), false;
    if (o->chunks && o->strategy != DT_STRAT_INTERLEAVED)
        return snprintf(why, whylen, "--chunks applies to interleaved, not to %s", name), false;
    if (o->strategy == DT_STRAT_INTERLEAVED && M % S)
        return snprintf(why, whylen, "interleaved needs micro-batches (%d) divisible by the "
                        "stages (%d), as Megatron-LM does", M, S), false;
    if (o->accumulate > 1)
        return snprintf(why, whylen, "--accumulate is for data parallelism: a pipeline "
                        "accumulates its --micro-batches"), false;
    if (o->bucket_bytes > 0)
        return snprintf(why, whylen, "gradient buckets apply to the allreduce strategies, not "
                        "to %s", name), false;
    if (m && m->n_layers < S * V)
        return snprintf(why, whylen, "model %s has %d layers, fewer than the %d x %d chunks",
                        m->name, m->n_layers, S, V), false;
    if (o->n_stage_cuts && o->n_stage_cuts + 1 != S * V)
        return snprintf(why, whylen, "--stages gives %d ranges for %d x %d chunks",
                        o->n_stage_cuts + 1, S, V), false;
    if (T > 1 && m && !dtc_tensor_fits(o, m, n_ranks, why, whylen))
        return false;
    long replica = o->scaling == DT_SCALING_WEAK ? o->batch : o->batch / D;
    if (replica < M)
        return snprintf(why, whylen, "a replica's batch of %ld samples cannot make %d "
                        "micro-batches", replica, M), false;
    return true;
}

int dtc_compile_pipeline(struct dt_plan *plan, struct dt_error *err)
{
    const struct dt_model *m = plan->model;
    struct pipe p = {.plan = plan, .m = m};
    shape(&plan->opt, plan->n_ranks, &p.S, &p.V, &p.D, &p.M, &p.T);
    p.C = p.S * p.V;
    plan->stages = p.S;
    plan->chunks = p.V;
    plan->dp = p.D;
    plan->micro_batches = p.M;
    plan->global_batch = plan->opt.scaling == DT_SCALING_WEAK ? plan->opt.batch * p.D
                                                              : plan->opt.batch;
    plan->lr_scale = plan->opt.scaling == DT_SCALING_WEAK ? p.D : 1;
    p.chunk_of = malloc((size_t)m->n_layers * sizeof *p.chunk_of);
    p.owner = malloc((size_t)m->n_layers * sizeof *p.owner);
    plan->chunk_first = malloc((size_t)(p.C + 1) * sizeof *plan->chunk_first);
    int *replicas = calloc((size_t)(p.S * p.T), sizeof *replicas);
    p.tied_group = malloc((size_t)m->n_layers * sizeof *p.tied_group);
    enum dt_shard_kind *kind = p.T > 1 ? malloc((size_t)m->n_layers * sizeof *kind) : NULL;
    p.tensor = (struct dtc_tensor){.T = p.T, .alg = dtc_grad_alg(&plan->opt)};
    p.tensor.tp_group = p.T > 1 ? malloc((size_t)plan->n_ranks * sizeof *p.tensor.tp_group)
                                : NULL;
    int *handles = calloc((size_t)plan->n_ranks, sizeof *handles);
    struct work *w = malloc((size_t)(2 * p.M * p.V) * sizeof *w);
    struct emit e = {0};
    e.slot_of = malloc((size_t)(p.M + 1) * sizeof *e.slot_of);
    e.slot_busy = malloc((size_t)(p.M + 1) * sizeof *e.slot_busy);
    e.loaded = malloc((size_t)(p.M + 1) * sizeof *e.loaded);
    e.pending = malloc((size_t)(4 * p.M * p.V * m->n_layers + 2) * 2 * sizeof *e.pending);
    int rc = p.chunk_of && p.owner && plan->chunk_first && replicas && p.tied_group && handles && w &&
                     e.slot_of && e.slot_busy && e.loaded && e.pending &&
                     (p.T == 1 || (kind && p.tensor.tp_group &&
                                   dtc_tensor_cut(m, p.T, plan->opt.sequence_parallel, kind) >= 0))
                 ? DT_OK
                 : dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < plan->n_ranks && !rc; r++) {
        long off, len;
        dt_chunk(plan->global_batch, p.D, r / p.T % p.D, &off, &len);
        plan->ranks[r].batch = (int)len;
        plan->ranks[r].slot_rows = (int)((len + p.M - 1) / p.M);
    }
    if (!rc)
        rc = partition(&p, plan->ranks[0].slot_rows, kind, err);
    p.first_train = m->n_layers;
    for (int l = 0; l < m->n_layers && !rc; l++) {
        for (int c = 0; c < p.C; c++)
            if (l >= plan->chunk_first[c] && l < plan->chunk_first[c + 1])
                p.chunk_of[l] = c;
        const struct dt_layer *L = &m->layers[l];
        p.owner[l] = dt_layer_is_view(L) ? p.owner[L->in[0]] : l;
        if (L->params > 0 && l < p.first_train)
            p.first_train = l;
    }
    if (!rc && first_readers(&p))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc && pipeline_groups(&p, replicas))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int s = 0; s < p.S && !rc; s++)
        for (int k = 0; k < p.T && !rc; k++) {
            long n_params = 0;
            int view = stage_view(&p, s, k, kind, &n_params);
            if (view < 0)
                rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
            if (!rc && plan->floor)
                rc = floor_rank(&p, rank_of(&p, s, 0, k), s, view, n_params,
                                replicas[s * p.T + k]);
            for (int d = 0; d < p.D && !rc && !plan->floor; d++) {
                int r = rank_of(&p, s, d, k);
                place_rank(&p, r, s, d, view, n_params, replicas[s * p.T + k]);
                if (dt_plan_dropped(plan, r)) /* a probe's: nothing to emit */
                    continue;
                rc = emit_rank(&p, r, s, d, k, view, n_params, replicas[s * p.T + k], w, &e);
                handles[r] = e.next_handle;
            }
        }
    /* the middle replicas' rows are between the first's and the last's: the least over
     * those is the least over all */
    int eval_rows = 1 << 30;
    for (int r = 0; r < plan->n_ranks && !rc; r++) { /* a recomputation workspace: one slot */
        if (dt_plan_dropped(plan, r))
            continue;
        int slots = plan->opt.recompute != DT_RECOMPUTE_NONE ? 1 : plan->ranks[r].slots;
        int cap = slots * plan->ranks[r].slot_rows;
        eval_rows = cap < eval_rows ? cap : eval_rows;
    }
    for (int r = 0; r < plan->n_ranks && !rc && !plan->floor; r++) {
        if (dt_plan_dropped(plan, r))
            continue;
        rc = emit_eval(&p, r, eval_rows, handles[r], &e);
        plan->ranks[r].eval_rows = eval_rows;
    }
    if (rc == DT_ENOMEM)
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    else if (rc == DT_EINTERNAL)
        rc = dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "pipeline: a gradient's receive was not "
                     "posted before its wait");
    free(p.chunk_of);
    free(p.owner);
    free(p.reader);
    free(p.recv_at);
    free(p.recvs);
    free(p.read_at);
    free(p.read_by);
    free(replicas);
    free(p.tied_group);
    free(kind);
    free(p.tensor.tp_group);
    free(handles);
    free(w);
    free(e.slot_of);
    free(e.slot_busy);
    free(e.loaded);
    free(e.pending);
    free(e.early.key);
    free(e.early.handle);
    return rc;
}
