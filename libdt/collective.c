/* Collective algorithms expanded into per-member rounds of transfers.
 * The algorithms follow MPICH's (Thakur, Rabenseifner and Gropp 2005): the same pre- and
 * post-steps for non-power-of-two groups, the same chunking. */
#include "dt/collective.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>

void dt_schedule_init(struct dt_schedule *s)
{
    memset(s, 0, sizeof *s);
    s->last = INT_MAX;
}

void dt_schedule_free(struct dt_schedule *s)
{
    free(s->round_start);
    free(s->xfers);
    dt_schedule_init(s);
}

void dt_chunk(long count, int n, int i, long *offset, long *len)
{
    long base = count / n, extra = count % n;
    *len = base + (i < extra ? 1 : 0);
    *offset = i * base + (i < extra ? i : extra);
}

/* Whether the round being generated lies in the window (is stored). */
static bool keeping(const struct dt_schedule *s)
{
    return s->seen - 1 >= s->first && s->seen - 1 < s->last;
}

/* Opens a new round (counted; stored when in the window). */
static int round_open(struct dt_schedule *s)
{
    s->seen++;
    if (!keeping(s))
        return DT_OK;
    if (s->n_rounds + 2 > s->cap_rounds) {
        int cap = s->cap_rounds ? 2 * s->cap_rounds : 4; /* lazy: a round at a time */
        int *rs = realloc(s->round_start, (size_t)cap * sizeof *rs);
        if (!rs)
            return DT_ENOMEM;
        s->round_start = rs;
        s->cap_rounds = cap;
    }
    if (s->n_rounds == 0)
        s->round_start[0] = s->n_xfers;
    s->n_rounds++;
    s->round_start[s->n_rounds] = s->n_xfers;
    return DT_OK;
}

static int add(struct dt_schedule *s, bool send, int peer, long offset, long count, bool sum)
{
    if (count <= 0 || !keeping(s))
        return DT_OK; /* an empty chunk moves nothing; a round outside the window is skipped */
    if (s->n_xfers == s->cap_xfers) {
        int cap = s->cap_xfers ? 2 * s->cap_xfers : 4;
        struct dt_xfer *x = realloc(s->xfers, (size_t)cap * sizeof *x);
        if (!x)
            return DT_ENOMEM;
        s->xfers = x;
        s->cap_xfers = cap;
    }
    s->xfers[s->n_xfers++] = (struct dt_xfer){send, peer, offset, count, sum};
    s->round_start[s->n_rounds] = s->n_xfers;
    return DT_OK;
}

/* One round holding a send and/or a receive (a sendrecv). */
static int sendrecv(struct dt_schedule *s, int to, long soff, long scount, int from, long roff,
                    long rcount, bool sum)
{
    int rc = round_open(s);
    if (!rc && to >= 0)
        rc = add(s, true, to, soff, scount, false);
    if (!rc && from >= 0)
        rc = add(s, false, from, roff, rcount, sum);
    return rc;
}

int dt_schedule_p2p(bool send, int peer, long count, bool sum, struct dt_schedule *s)
{
    s->first = 0; /* every round kept */
    s->last = INT_MAX;
    s->seen = s->n_rounds;
    return send ? sendrecv(s, peer, 0, count, -1, 0, 0, false)
                : sendrecv(s, -1, 0, 0, peer, 0, count, sum);
}

static int mod(int a, int p) { return ((a % p) + p) % p; }

static int clamp(long v, int lo, int hi) { return v < lo ? lo : v > hi ? hi : (int)v; }

/* The steps [*lo, *hi) of a phase of n_steps one-round steps that fall in s's window; the
 * steps before *lo are counted here, the caller counts those after *hi (skip_after). */
static void window_steps(struct dt_schedule *s, int n_steps, int *lo, int *hi)
{
    *lo = clamp((long)s->first - s->seen, 0, n_steps);
    *hi = clamp((long)s->last - s->seen, *lo, n_steps);
    s->seen += *lo;
}

static void skip_after(struct dt_schedule *s, int n_steps, int hi)
{
    s->seen += n_steps - hi;
}

/* A ring of p members of the group, member k being group index base + k * stride, over the
 * floats [off, off + n): the whole group (base 0, stride 1) or a sub-ring of it (rail-ring). */
struct ring {
    int p, me, base, stride;
    long off, n;
};

static struct ring flat_ring(int p, int me, long n) { return (struct ring){p, me, 0, 1, 0, n}; }

/* Step `step` of a phase of p - 1 ring steps: member me sends chunk me - step - shift to its
 * right neighbour and receives chunk me - step - shift - 1 from its left (mod p), where a
 * reduce-scatter (sum: shift 1) adds what it receives and an allgather (shift 0) keeps it.
 * Lazy expansion asks for one step at a time, a million times on a large ring: O(1), with one
 * division (the chunk size) and no mod. */
static inline void ring_xfers(const struct ring *r, int step, bool sum, struct dt_xfer x[2])
{
    int p = r->p, me = r->me;
    long q = r->n / p, extra = r->n % p;
    int c = me - step - (sum ? 1 : 0); /* the chunk sent: >= -p, one wrap at most */
    if (c < 0)
        c += p;
    int rcv = c == 0 ? p - 1 : c - 1;
    x[0] = (struct dt_xfer){true, r->base + (me + 1 == p ? 0 : me + 1) * r->stride,
                            r->off + c * q + (c < extra ? c : extra), q + (c < extra ? 1 : 0),
                            false};
    x[1] = (struct dt_xfer){false, r->base + (me == 0 ? p - 1 : me - 1) * r->stride,
                            r->off + rcv * q + (rcv < extra ? rcv : extra),
                            q + (rcv < extra ? 1 : 0), sum};
}

static int ring_step(const struct ring *r, int step, bool sum, struct dt_schedule *s)
{
    struct dt_xfer x[2];
    ring_xfers(r, step, sum, x);
    return sendrecv(s, x[0].peer, x[0].offset, x[0].count, x[1].peer, x[1].offset, x[1].count,
                    sum);
}

/* The p - 1 steps of a ring phase that fall in s's window. */
static int ring_phase(const struct ring *r, bool sum, struct dt_schedule *s)
{
    int lo, hi;
    window_steps(s, r->p - 1, &lo, &hi);
    for (int step = lo; step < hi; step++) {
        int rc = ring_step(r, step, sum, s);
        if (rc)
            return rc;
    }
    skip_after(s, r->p - 1, hi);
    return DT_OK;
}

/* Ring reduce-scatter: after p-1 steps member me holds the sum of chunk me. */
static int ring_reduce_scatter(const struct ring *r, struct dt_schedule *s)
{
    return ring_phase(r, true, s);
}

/* Ring allgather: member me starts with chunk me and ends with all. */
static int ring_allgather(const struct ring *r, struct dt_schedule *s)
{
    return ring_phase(r, false, s);
}

/* The multi-level ring allreduce over nodes of g consecutive members: a ring reduce-scatter
 * inside the node leaves local member i the node's sum of chunk i; a ring allreduce of chunk
 * i along rail i (member i of every node) sums it over the nodes; a ring allgather inside the
 * node spreads the chunks. 2(g-1) + 2(p/g - 1) rounds (NCCL's and ASTRA-sim's
 * multi-dimensional ring). */
static int rail_ring_allreduce(int p, int g, int me, long n, struct dt_schedule *s)
{
    int node = me / g, i = me % g;
    struct ring in_node = {g, i, node * g, 1, 0, n}, rail = {p / g, node, i, g, 0, 0};
    dt_chunk(n, g, i, &rail.off, &rail.n);
    int rc = ring_reduce_scatter(&in_node, s);
    if (!rc)
        rc = ring_reduce_scatter(&rail, s);
    if (!rc)
        rc = ring_allgather(&rail, s);
    return rc ? rc : ring_allgather(&in_node, s);
}

/* Makes room for one round of up to two transfers (a lazily filled schedule keeps its
 * array: this allocates once per activity): one cache line, read by every flow event of
 * the round, rather than two as often as one. */
static int one_round_room(struct dt_schedule *s)
{
    if (s->cap_xfers < 2) {
        _Static_assert(2 * sizeof(struct dt_xfer) == 64, "two transfers fill one line");
        struct dt_xfer *x = aligned_alloc(64, 2 * sizeof *x);
        if (!x)
            return DT_ENOMEM;
        free(s->xfers); /* none or one transfer, rewritten anyway */
        s->xfers = x;
        s->cap_xfers = 2;
    }
    return DT_OK;
}

/* Step `step` of ring r written as s's only round, straight into its arrays: what
 * ring_step's sendrecv stores for a round in the window (an empty chunk moves nothing), with
 * none of the window's bookkeeping; lazy expansion asks for a ring round a million times. */
static int ring_round_only(const struct ring *r, int step, bool sum, struct dt_schedule *s)
{
    if (one_round_room(s))
        return DT_ENOMEM;
    struct dt_xfer *x = s->xfers;
    ring_xfers(r, step, sum, x);
    int n = 2;
    if (x[1].count <= 0)
        n--;
    if (x[0].count <= 0)
        x[0] = x[--n]; /* the receive, or nothing */
    s->n_rounds = 1; /* round_start left unset (collective.h) */
    s->n_xfers = n;
    return DT_OK;
}

/* Lazy expansion's fast path (see collective.h); the same round as rail_ring_allreduce's. */
int dt_coll_ring_round(int p, int g, int me, long n, int round, struct dt_schedule *s)
{
    int node = me / g, i = me % g, nodes = p / g, step = round;
    int total = 2 * (g - 1) + 2 * (nodes - 1);
    s->n_rounds = s->n_xfers = 0;
    s->first = round;
    s->last = round + 1;
    s->seen = total;
    if (round >= total)
        return DT_OK;
    bool rail = false, sum = false;
    if (step < g - 1)
        sum = true;
    else if ((step -= g - 1) < nodes - 1)
        rail = true, sum = true;
    else if ((step -= nodes - 1) < nodes - 1)
        rail = true;
    else
        step -= nodes - 1;
    struct ring r; /* only the ring this round runs on */
    if (rail) {
        r = (struct ring){nodes, node, i, g, 0, 0};
        dt_chunk(n, g, i, &r.off, &r.n);
    } else {
        r = (struct ring){g, i, node * g, 1, 0, n};
    }
    return ring_round_only(&r, step, sum, s);
}

static int rail_ring_round(int p, int g, int me, long n, int round, struct dt_schedule *s,
                           int *total)
{
    *total = 2 * (g - 1) + 2 * (p / g - 1);
    return dt_coll_ring_round(p, g, me, n, round, s);
}

static int pof2_below(int p)
{
    int q = 1;
    while (q * 2 <= p)
        q *= 2;
    return q;
}

/* MPICH's fold of a non-power-of-two group: the first 2*rem members pair up, even ones
 * hand their vector to the odd one and sit out. Returns the member's new rank or -1. */
static int fold_in(int p, int me, long n, struct dt_schedule *s, int *rc)
{
    int rem = p - pof2_below(p);
    *rc = DT_OK;
    if (me < 2 * rem) {
        if (me % 2 == 0) {
            *rc = sendrecv(s, me + 1, 0, n, -1, 0, 0, false);
            return -1;
        }
        *rc = sendrecv(s, -1, 0, 0, me - 1, 0, n, true);
        return me / 2;
    }
    return me - rem;
}

static int fold_out(int p, int me, long n, struct dt_schedule *s)
{
    int rem = p - pof2_below(p);
    if (me < 2 * rem) {
        if (me % 2 == 0)
            return sendrecv(s, -1, 0, 0, me + 1, 0, n, false);
        return sendrecv(s, me - 1, 0, n, -1, 0, 0, false);
    }
    return DT_OK;
}

static int real_rank(int p, int newrank)
{
    int rem = p - pof2_below(p);
    return newrank < rem ? newrank * 2 + 1 : newrank + rem;
}

static int recursive_doubling_allreduce(int p, int me, long n, struct dt_schedule *s)
{
    int rc;
    int newrank = fold_in(p, me, n, s, &rc);
    if (rc)
        return rc;
    int pof2 = pof2_below(p);
    if (newrank >= 0)
        for (int mask = 1; mask < pof2; mask <<= 1) {
            int dst = real_rank(p, newrank ^ mask);
            if ((rc = sendrecv(s, dst, 0, n, dst, 0, n, true)))
                return rc;
        }
    return fold_out(p, me, n, s);
}

/* Sum of the counts of pieces [from, to) when n floats are cut in pof2 pieces. */
static void piece_span(long n, int pof2, int from, int to, long *offset, long *len)
{
    long o0, l0, o1, l1;
    dt_chunk(n, pof2, from, &o0, &l0);
    dt_chunk(n, pof2, to - 1, &o1, &l1);
    *offset = o0;
    *len = to > from ? o1 + l1 - o0 : 0;
}

static int rabenseifner_allreduce(int p, int me, long n, struct dt_schedule *s)
{
    int rc;
    int newrank = fold_in(p, me, n, s, &rc);
    if (rc)
        return rc;
    int pof2 = pof2_below(p);
    if (newrank >= 0) {
        /* reduce-scatter by recursive halving */
        int send_idx = 0, recv_idx = 0, last_idx = pof2, mask = 1;
        while (mask < pof2) {
            int newdst = newrank ^ mask, dst = real_rank(p, newdst);
            long so, sl, ro, rl;
            if (newrank < newdst) {
                send_idx = recv_idx + pof2 / (mask * 2);
                piece_span(n, pof2, send_idx, last_idx, &so, &sl);
                piece_span(n, pof2, recv_idx, send_idx, &ro, &rl);
            } else {
                recv_idx = send_idx + pof2 / (mask * 2);
                piece_span(n, pof2, send_idx, recv_idx, &so, &sl);
                piece_span(n, pof2, recv_idx, last_idx, &ro, &rl);
            }
            if ((rc = sendrecv(s, dst, so, sl, dst, ro, rl, true)))
                return rc;
            send_idx = recv_idx;
            mask <<= 1;
            if (mask < pof2)
                last_idx = recv_idx + pof2 / mask;
        }
        /* allgather by recursive doubling */
        mask >>= 1;
        while (mask > 0) {
            int newdst = newrank ^ mask, dst = real_rank(p, newdst);
            long so, sl, ro, rl;
            if (newrank < newdst) {
                if (mask != pof2 / 2)
                    last_idx = last_idx + pof2 / (mask * 2);
                recv_idx = send_idx + pof2 / (mask * 2);
                piece_span(n, pof2, send_idx, recv_idx, &so, &sl);
                piece_span(n, pof2, recv_idx, last_idx, &ro, &rl);
            } else {
                recv_idx = send_idx - pof2 / (mask * 2);
                piece_span(n, pof2, send_idx, last_idx, &so, &sl);
                piece_span(n, pof2, recv_idx, send_idx, &ro, &rl);
            }
            if ((rc = sendrecv(s, dst, so, sl, dst, ro, rl, false)))
                return rc;
            if (newrank > newdst)
                send_idx = recv_idx;
            mask >>= 1;
        }
    }
    return fold_out(p, me, n, s);
}

/* ---- NCCL's double binary tree allreduce (Sanders, Speck and Traeff 2009; NCCL 2.4) ----
 * Two binary trees over the group, each reducing then broadcasting half of the vector,
 * pipelined in chunks of at most DT_TREE_CHUNK floats. The second tree is the first
 * mirrored (even p) or shifted by one (odd p), so that the leaves of one are inner nodes of
 * the other. Both are in-order trees on positions 0..p-1: position 0 is the root with one
 * child, the largest power of two below p; position q > 0 with lowest set bit b has the
 * children q - b/2 and the largest q + c < p (c = b/2, b/4, ..., 1), its height is log2(b).
 * Rounds are timed by height going up and by depth going down so that every message is
 * received in the round it is sent or later: a member never waits for a round that waits
 * for it, whatever the other tree does (each round holds both trees' transfers). */
static int tree_parent(int p, int q)
{
    if (q == 0)
        return -1;
    int b = q & -q, up = (q ^ b) | (b << 1);
    return up < p ? up : q ^ b;
}

static int tree_children(int p, int q, int child[2])
{
    int n = 0;
    if (q == 0) {
        if (p > 1)
            child[n++] = pof2_below(p - 1);
        return n;
    }
    int b = q & -q;
    if (b >= 2)
        child[n++] = q - b / 2;
    for (int c = b / 2; c >= 1; c /= 2)
        if (q + c < p) {
            child[n++] = q + c;
            break;
        }
    return n;
}

static int log2_int(int v)
{
    int l = 0;
    while (v > 1) {
        v >>= 1;
        l++;
    }
    return l;
}

static int tree_height(int p, int q)
{
    return q > 0 ? log2_int(q & -q) : p > 1 ? 1 + log2_int(pof2_below(p - 1)) : 0;
}

static int tree_depth(int p, int q)
{
    int d = 0;
    for (; q > 0; q = tree_parent(p, q))
        d++;
    return d;
}

/* Member me's position in tree t, and the member at position q of tree t. Three members
 * are the one size whose shifted tree shares a parent-child edge with the first: there both
 * halves use the first tree (a shared edge in two trees would reorder the pair's messages). */
static int tree_pos(int p, int t, int me)
{
    if (t == 0 || p == 3)
        return me;
    return p % 2 == 0 ? p - 1 - me : (me + 1) % p;
}

static int tree_member(int p, int t, int q)
{
    if (t == 0 || p == 3)
        return q;
    return p % 2 == 0 ? p - 1 - q : (q + p - 1) % p;
}

long dt_tree_chunks(long count)
{
    long half = (count + 1) / 2;
    return half > DT_TREE_CHUNK ? (half + DT_TREE_CHUNK - 1) / DT_TREE_CHUNK : 1;
}

/* Tree t's transfers of member me in round r (reduce rounds first, then broadcast rounds). */
static int tree_round(int p, int me, long n, int t, int r, int reduce_rounds,
                      struct dt_schedule *s)
{
    long k = dt_tree_chunks(n), ho, hl;
    dt_chunk(n, 2, t, &ho, &hl);
    int q = tree_pos(p, t, me), child[2], nc = tree_children(p, q, child), up = tree_parent(p, q);
    long j_send, j_recv;
    bool reduce = r < reduce_rounds;
    if (reduce) { /* chunk j goes up in round j + height, arrives in the parent's round before */
        j_send = up >= 0 ? r - tree_height(p, q) : -1;
        j_recv = nc ? r - tree_height(p, q) + 1 : -1;
    } else {      /* chunk j goes down in round j + depth after the reduce rounds */
        int d = tree_depth(p, q);
        j_send = nc ? r - reduce_rounds - d : -1;
        j_recv = up >= 0 ? r - reduce_rounds - d + 1 : -1;
    }
    long o, l;
    int rc = DT_OK;
    if (j_send >= 0 && j_send < k) {
        dt_chunk(hl, (int)k, (int)j_send, &o, &l);
        if (reduce)
            rc = add(s, true, tree_member(p, t, up), ho + o, l, false);
        for (int c = 0; c < nc && !reduce && !rc; c++)
            rc = add(s, true, tree_member(p, t, child[c]), ho + o, l, false);
    }
    if (!rc && j_recv >= 0 && j_recv < k) {
        dt_chunk(hl, (int)k, (int)j_recv, &o, &l);
        if (!reduce)
            rc = add(s, false, tree_member(p, t, up), ho + o, l, false);
        for (int c = 0; c < nc && reduce && !rc; c++)
            rc = add(s, false, tree_member(p, t, child[c]), ho + o, l, true);
    }
    return rc;
}

int dt_tree_rounds(int p, long count)
{
    if (p < 2)
        return 0;
    /* both trees have the same shape on their positions: one root height, which is also
     * their deepest leaf's depth */
    return 2 * (int)(dt_tree_chunks(count) + tree_height(p, 0) - 1);
}

/* The floats member me receives in round r (tree_round's receives, both trees). */
static long tree_round_recv(int p, int me, long n, int r, int reduce_rounds)
{
    long k = dt_tree_chunks(n), sum = 0;
    for (int t = 0; t < 2; t++) {
        long ho, hl, o, l;
        dt_chunk(n, 2, t, &ho, &hl);
        int q = tree_pos(p, t, me), child[2], nc = tree_children(p, q, child);
        bool up = tree_parent(p, q) >= 0, reduce = r < reduce_rounds;
        int from = reduce ? nc : up;
        long j = reduce ? r - tree_height(p, q) + 1 : r - reduce_rounds - tree_depth(p, q) + 1;
        if (from && j >= 0 && j < k) {
            dt_chunk(hl, (int)k, (int)j, &o, &l);
            sum += from * l;
        }
    }
    return sum;
}

long dt_tree_widest_recv(int p, int me, long count)
{
    int total = dt_tree_rounds(p, count), half = total / 2;
    long widest = 0;
    /* a tree's receives in a phase take chunks 0, 1, ... from the round its first arrives,
     * and chunks never grow (dt_chunk): the widest round is one where some tree's first
     * chunk arrives, every other tree then receiving one no smaller than later */
    for (int t = 0; t < 2 && p > 1; t++) {
        int q = tree_pos(p, t, me), child[2];
        int first[2] = {tree_children(p, q, child) ? tree_height(p, q) - 1 : -1,
                        tree_parent(p, q) >= 0 ? half + tree_depth(p, q) - 1 : -1};
        for (int f = 0; f < 2; f++) {
            long w = first[f] >= 0 && first[f] < total
                         ? tree_round_recv(p, me, count, first[f], half) : 0;
            widest = w > widest ? w : widest;
        }
    }
    return widest;
}

static int tree_allreduce(int p, int me, long n, struct dt_schedule *s)
{
    int total = dt_tree_rounds(p, n), half = total / 2, lo, hi;
    window_steps(s, total, &lo, &hi);
    for (int r = lo; r < hi; r++) {
        int rc = round_open(s);
        for (int t = 0; t < 2 && !rc; t++)
            rc = tree_round(p, me, n, t, r, half, s);
        if (rc)
            return rc;
    }
    skip_after(s, total, hi);
    return DT_OK;
}

static int binomial_reduce(int p, int me, int root, long n, struct dt_schedule *s)
{
    int rel = mod(me - root, p);
    for (int mask = 1; mask < p; mask <<= 1) {
        if (rel & mask)
            return sendrecv(s, mod(rel - mask + root, p), 0, n, -1, 0, 0, false);
        if (rel + mask < p) {
            int rc = sendrecv(s, -1, 0, 0, mod(rel + mask + root, p), 0, n, true);
            if (rc)
                return rc;
        }
    }
    return DT_OK;
}

static int binomial_bcast(int p, int me, int root, long n, struct dt_schedule *s)
{
    int rel = mod(me - root, p), mask = 1, rc;
    while (mask < p) {
        if (rel & mask) {
            if ((rc = sendrecv(s, -1, 0, 0, mod(rel - mask + root, p), 0, n, false)))
                return rc;
            break;
        }
        mask <<= 1;
    }
    for (mask >>= 1; mask > 0; mask >>= 1)
        if (rel + mask < p && (rc = sendrecv(s, mod(rel + mask + root, p), 0, n, -1, 0, 0, false)))
            return rc;
    return DT_OK;
}

/* Linear: the root exchanges with every other member in one round. */
static int linear(bool reduce, int p, int me, int root, long n, struct dt_schedule *s)
{
    int rc = round_open(s);
    if (rc)
        return rc;
    if (me != root)
        return add(s, reduce, root, 0, n, false);
    for (int i = 0; i < p && !rc; i++)
        if (i != root)
            rc = add(s, !reduce, i, 0, n, reduce);
    return rc;
}

/* Direct: every member exchanges its chunk with every other member in one round. */
static int direct(bool reduce_scatter, int p, int me, long n, struct dt_schedule *s)
{
    int rc = round_open(s);
    long mo, ml;
    dt_chunk(n, p, me, &mo, &ml);
    for (int i = 0; i < p && !rc; i++) {
        if (i == me)
            continue;
        long o, l;
        dt_chunk(n, p, i, &o, &l);
        if (reduce_scatter) {
            rc = add(s, true, i, o, l, false);
            if (!rc)
                rc = add(s, false, i, mo, ml, true);
        } else {
            rc = add(s, true, i, mo, ml, false);
            if (!rc)
                rc = add(s, false, i, o, l, false);
        }
    }
    return rc;
}

enum dt_coll_alg dt_coll_library_choice(enum dt_coll_kind kind, int p, long count)
{
    /* MPICH 4.0 defaults (src/mpi/coll, MPIR_CVAR_*_SHORT_MSG_SIZE): allreduce uses
     * recursive doubling up to 2048 bytes or fewer floats than pof2, else Rabenseifner's
     * reduce-scatter+allgather. Reduce and bcast are modelled as binomial (MPICH switches
     * to scatter/gather variants above 2 KiB / 12 KiB: a known simplification). */
    switch (kind) {
    case DT_COLL_ALLREDUCE:
        return count * 4 <= 2048 || count < pof2_below(p) ? DT_ALG_RECURSIVE_DOUBLING
                                                            : DT_ALG_RABENSEIFNER;
    case DT_COLL_REDUCE_SCATTER:
    case DT_COLL_ALLGATHER:
        return DT_ALG_RING;
    default:
        return DT_ALG_BINOMIAL;
    }
}

int dt_coll_direct_rounds(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, long count,
                          long *widest, long summed[2])
{
    bool reduce = kind == DT_COLL_REDUCE_SCATTER || kind == DT_COLL_ALLREDUCE;
    if (alg != DT_ALG_DIRECT || p < 2 || count < p ||
        !(reduce || kind == DT_COLL_ALLGATHER))
        return 0;
    long first_offset;
    dt_chunk(count, p, 0, &first_offset, widest); /* the first chunks are the widest */
    summed[0] = reduce ? (p - 1) * *widest : 0; /* its own chunk from every other member */
    summed[1] = 0;
    return kind == DT_COLL_ALLREDUCE ? 2 : 1;
}

int dt_coll_ring_repeats(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, long count,
                         int r)
{
    if (alg == DT_ALG_LIBRARY)
        alg = dt_coll_library_choice(kind, p, count);
    bool ring_kind = kind == DT_COLL_ALLREDUCE || kind == DT_COLL_REDUCE_SCATTER ||
                     kind == DT_COLL_ALLGATHER;
    int phases = kind == DT_COLL_ALLREDUCE ? 2 : 1;
    if (alg != DT_ALG_RING || !ring_kind || p < 2 || r < 0 || r >= phases * (p - 1))
        return 0;
    return p - 2 - r % (p - 1);
}

int dt_coll_schedule(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int me, int root,
                     long count, struct dt_schedule *s, struct dt_error *err)
{
    int total;
    return dt_coll_schedule_rounds(kind, alg, p, me, root, count, 0, INT_MAX, s, &total, err);
}

int dt_coll_schedule_rounds(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int me,
                            int root, long count, int first, int n, struct dt_schedule *s,
                            int *total, struct dt_error *err)
{
    s->n_rounds = 0;
    s->n_xfers = 0;
    s->seen = 0;
    s->first = first < 0 ? 0 : first;
    s->last = n > INT_MAX - s->first ? INT_MAX : s->first + n;
    *total = 0;
    if (p < 1 || me < 0 || me >= p || root < 0 || root >= p || count < 0)
        return dt_fail(err, DT_EINTERNAL, NULL, 0, 0,
                       "bad collective arguments (p=%d me=%d root=%d count=%ld)", p, me, root,
                       count);
    if (alg == DT_ALG_RAIL_RING && root > 0 && p % root != 0)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0,
                       "rail-ring: %d members are not nodes of %d", p, root);
    if (alg == DT_ALG_LIBRARY)
        alg = dt_coll_library_choice(kind, p, count);
    if (p == 1)
        return DT_OK;
    int rc = -1;
    if (kind == DT_COLL_ALLREDUCE && n == 1 && (alg == DT_ALG_RING || alg == DT_ALG_RAIL_RING)) {
        rc = rail_ring_round(p, alg == DT_ALG_RAIL_RING && root ? root : p, me, count, s->first,
                             s, total); /* sets *total itself */
        return rc == DT_ENOMEM ? dt_fail(err, rc, NULL, 0, 0, "out of memory") : rc;
    }
    struct ring ring = flat_ring(p, me, count);
    switch (kind) {
    case DT_COLL_ALLREDUCE:
        if (alg == DT_ALG_RING) {
            rc = ring_reduce_scatter(&ring, s);
            if (!rc)
                rc = ring_allgather(&ring, s);
        } else if (alg == DT_ALG_RAIL_RING) {
            rc = rail_ring_allreduce(p, root ? root : p, me, count, s);
        } else if (alg == DT_ALG_RECURSIVE_DOUBLING) {
            rc = recursive_doubling_allreduce(p, me, count, s);
        } else if (alg == DT_ALG_RABENSEIFNER) {
            rc = rabenseifner_allreduce(p, me, count, s);
        } else if (alg == DT_ALG_DIRECT) {
            rc = direct(true, p, me, count, s);
            if (!rc)
                rc = direct(false, p, me, count, s);
        } else if (alg == DT_ALG_TREE) {
            rc = tree_allreduce(p, me, count, s);
        }
        break;
    case DT_COLL_REDUCE:
        if (alg == DT_ALG_BINOMIAL)
            rc = binomial_reduce(p, me, root, count, s);
        else if (alg == DT_ALG_LINEAR)
            rc = linear(true, p, me, root, count, s);
        break;
    case DT_COLL_BCAST:
        if (alg == DT_ALG_BINOMIAL)
            rc = binomial_bcast(p, me, root, count, s);
        else if (alg == DT_ALG_LINEAR)
            rc = linear(false, p, me, root, count, s);
        break;
    case DT_COLL_REDUCE_SCATTER:
        if (alg == DT_ALG_RING)
            rc = ring_reduce_scatter(&ring, s);
        else if (alg == DT_ALG_DIRECT)
            rc = direct(true, p, me, count, s);
        break;
    case DT_COLL_ALLGATHER:
        if (alg == DT_ALG_RING)
            rc = ring_allgather(&ring, s);
        else if (alg == DT_ALG_DIRECT)
            rc = direct(false, p, me, count, s);
        break;
    default:
        break;
    }
    if (rc == -1)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "no %s algorithm for %s",
                       dt_coll_alg_name(alg), dt_coll_kind_name(kind));
    if (rc == DT_ENOMEM)
        return dt_fail(err, rc, NULL, 0, 0, "out of memory");
    *total = s->seen;
    return rc;
}
