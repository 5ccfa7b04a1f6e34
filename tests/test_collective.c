/* Tests of the collective expansions: every member's rounds are played in-process on real
 * vectors and the result is compared with the direct sum (the independent reference). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "dt/plan.h"

/* One in-flight message: a copy of the sender's floats at the time it posted the round. */
struct msg {
    int from, to;
    long count;
    double *data;
    struct msg *next;
};

struct member {
    struct dt_schedule s;
    double *v;     /* this member's vector */
    int round;     /* current round */
    bool posted;   /* sends of the current round have been posted */
    bool *got;     /* per xfer of the current round: received */
};

/* Plays the schedules to completion; returns false on deadlock or mismatch. Messages between
 * a pair are matched in order (MPI's non-overtaking rule). */
static bool play(struct member *m, int p)
{
    struct msg *queue = NULL, **tail = &queue;
    bool progress = true;
    while (progress) {
        progress = false;
        for (int me = 0; me < p; me++) {
            struct member *x = &m[me];
            if (x->round >= x->s.n_rounds)
                continue;
            int a = x->s.round_start[x->round], b = x->s.round_start[x->round + 1];
            if (!x->posted) {
                for (int i = a; i < b; i++) {
                    struct dt_xfer *t = &x->s.xfers[i];
                    x->got[i - a] = t->send;
                    if (!t->send)
                        continue;
                    struct msg *g = calloc(1, sizeof *g);
                    g->from = me;
                    g->to = t->peer;
                    g->count = t->count;
                    g->data = malloc((size_t)t->count * sizeof(double));
                    memcpy(g->data, x->v + t->offset, (size_t)t->count * sizeof(double));
                    *tail = g;
                    tail = &g->next;
                }
                x->posted = true;
                progress = true;
            }
            bool done = true;
            for (int i = a; i < b; i++) {
                struct dt_xfer *t = &x->s.xfers[i];
                if (x->got[i - a])
                    continue;
                /* first message from t->peer to me */
                struct msg **pp = &queue;
                while (*pp && !((*pp)->from == t->peer && (*pp)->to == me))
                    pp = &(*pp)->next;
                if (!*pp) {
                    done = false;
                    continue;
                }
                struct msg *g = *pp;
                if (g->count != t->count)
                    return false;
                for (long k = 0; k < t->count; k++)
                    x->v[t->offset + k] = t->sum ? x->v[t->offset + k] + g->data[k] : g->data[k];
                *pp = g->next;
                if (tail == &g->next)
                    tail = pp;
                free(g->data);
                free(g);
                x->got[i - a] = true;
                progress = true;
            }
            if (done) {
                x->round++;
                x->posted = false;
                progress = true;
            }
        }
    }
    bool ok = queue == NULL;
    for (int me = 0; me < p; me++)
        ok = ok && m[me].round == m[me].s.n_rounds;
    while (queue) {
        struct msg *g = queue->next;
        free(queue->data);
        free(queue);
        queue = g;
    }
    return ok;
}

/* Member i starts with v[k] = (i+1) * 1000 + k (distinct, exact in double). */
static double start_value(int i, long k) { return (i + 1) * 1000.0 + k; }
static double sum_value(int p, long k) { return 1000.0 * p * (p + 1) / 2 + (double)p * k; }

static void run(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int root, long n)
{
    struct member *m = calloc((size_t)p, sizeof *m);
    for (int i = 0; i < p; i++) {
        dt_schedule_init(&m[i].s);
        struct dt_error err;
        assert_int_equal(dt_coll_schedule(kind, alg, p, i, root, n, &m[i].s, &err), DT_OK);
        m[i].v = malloc((size_t)(n ? n : 1) * sizeof(double));
        m[i].got = malloc((size_t)(m[i].s.n_xfers + 1) * sizeof(bool));
        for (long k = 0; k < n; k++)
            m[i].v[k] = start_value(i, k);
    }
    assert_true(play(m, p));
    for (int i = 0; i < p; i++) {
        for (long k = 0; k < n; k++) {
            long off, len;
            double want;
            bool check = true;
            switch (kind) {
            case DT_COLL_ALLREDUCE: want = sum_value(p, k); break;
            case DT_COLL_REDUCE: want = sum_value(p, k); check = i == root; break;
            case DT_COLL_BCAST: want = start_value(root, k); break;
            case DT_COLL_REDUCE_SCATTER:
                dt_chunk(n, p, i, &off, &len);
                want = sum_value(p, k);
                check = k >= off && k < off + len;
                break;
            default: /* allgather: member j contributes chunk j */
                for (int j = 0; j < p; j++) {
                    dt_chunk(n, p, j, &off, &len);
                    if (k >= off && k < off + len)
                        want = start_value(j, k);
                }
                break;
            }
            if (check && m[i].v[k] != want)
                fail_msg("%s/%s p=%d root=%d n=%ld: member %d float %ld is %g, want %g",
                         dt_coll_kind_name(kind), dt_coll_alg_name(alg), p, root, n, i, k,
                         m[i].v[k], want);
        }
        dt_schedule_free(&m[i].s);
        free(m[i].v);
        free(m[i].got);
    }
    free(m);
}

static const long counts[] = {0, 1, 3, 7, 64, 1001};

/* Ensure that every allreduce algorithm leaves the exact sum on every member, for group
 * sizes 1..9 (powers of two and not) and counts smaller and larger than the group. */
static void test_allreduce_all_algorithms(void **state)
{
    (void)state;
    enum dt_coll_alg algs[] = {DT_ALG_RING, DT_ALG_RECURSIVE_DOUBLING, DT_ALG_RABENSEIFNER,
                               DT_ALG_DIRECT, DT_ALG_LIBRARY, DT_ALG_TREE, DT_ALG_RAIL_RING};
    for (size_t a = 0; a < sizeof algs / sizeof algs[0]; a++)
        for (int p = 1; p <= 9; p++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                run(DT_COLL_ALLREDUCE, algs[a], p, 0, counts[c]);
}

/* Ensure the double binary tree leaves the exact sum when pipelined in several chunks per
 * tree, on group sizes whose trees are mirrored (even), shifted (odd) and the one that
 * shares its first tree (3), and on larger groups; and that its round count is
 * 2 (chunks + log2 p - 1) for powers of two (reduce up log2 p levels, broadcast down). */
static void test_tree_pipelined(void **state)
{
    (void)state;
    const long n = 2 * 3 * DT_TREE_CHUNK + 5; /* 4 chunks per half */
    assert_int_equal(dt_tree_chunks(n), 4);
    assert_int_equal(dt_tree_chunks(2 * DT_TREE_CHUNK), 1);
    const int sizes[] = {2, 3, 4, 5, 6, 7};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        run(DT_COLL_ALLREDUCE, DT_ALG_TREE, sizes[i], 0, n);
    const int big[] = {16, 17, 31, 33, 64, 100};
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        run(DT_COLL_ALLREDUCE, DT_ALG_TREE, big[i], 0, 1001);
    for (int lg = 1; lg <= 14; lg++) {
        struct dt_schedule s;
        struct dt_error err;
        int total;
        dt_schedule_init(&s);
        assert_int_equal(dt_coll_schedule_rounds(DT_COLL_ALLREDUCE, DT_ALG_TREE, 1 << lg, 1, 0,
                                                 1000, 0, 1, &s, &total, &err), DT_OK);
        assert_int_equal(total, 2 * lg);
        assert_int_equal(dt_tree_rounds(1 << lg, n), 2 * (4 + lg - 1));
        dt_schedule_free(&s);
    }
}

/* Ensure the multi-level ring (rail-ring: the op's root is members per node) leaves the
 * exact sum on every member for nodes of 1 to 4 members and 1 to 5 nodes, counts below and
 * above the members, each window alone its round of the whole (the lazy expansion); that a
 * member has 2(g-1) + 2(n-1) rounds, the first g - 1 inside its node (peers of its node),
 * then 2(n-1) along its rail (peers of its local index); and that nodes that do not divide
 * the group are refused. */
static void check_windows(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int root,
                          long n);

static void test_rail_ring(void **state)
{
    (void)state;
    for (int g = 1; g <= 4; g++)
        for (int nodes = 1; nodes <= 5; nodes++) {
            int p = g * nodes;
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++)
                run(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, p, g < p ? g : 0, counts[c]);
            check_windows(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, p, g < p ? g : 0, 1001);
        }
    struct dt_schedule s;
    struct dt_error err;
    dt_schedule_init(&s);
    const int g = 8, nodes = 6, me = 8 * 2 + 5; /* local member 5 of node 2 */
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, g * nodes, me, g,
                                      1 << 20, &s, &err), DT_OK);
    assert_int_equal(s.n_rounds, 2 * (g - 1) + 2 * (nodes - 1));
    for (int r = 0; r < s.n_rounds; r++)
        for (int i = s.round_start[r]; i < s.round_start[r + 1]; i++) {
            int peer = s.xfers[i].peer;
            bool rail = r >= g - 1 && r < g - 1 + 2 * (nodes - 1);
            if (rail ? peer % g != 5 || peer / g == 2 : peer / g != 2 || peer == me)
                fail_msg("round %d: peer %d is not on member %d's %s", r, peer, me,
                         rail ? "rail" : "node");
        }
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, 10, 0, 4, 100, &s,
                                      &err), DT_EINPUT);
    assert_non_null(strstr(err.msg, "rail-ring"));
    dt_schedule_free(&s);
}

/* Ensure that reduce and bcast (linear and binomial) are right for every root. */
static void test_reduce_bcast_every_root(void **state)
{
    (void)state;
    enum dt_coll_alg algs[] = {DT_ALG_LINEAR, DT_ALG_BINOMIAL};
    for (size_t a = 0; a < 2; a++)
        for (int p = 1; p <= 9; p++)
            for (int root = 0; root < p; root++) {
                run(DT_COLL_REDUCE, algs[a], p, root, 37);
                run(DT_COLL_BCAST, algs[a], p, root, 37);
            }
}

/* Ensure that reduce-scatter leaves chunk i summed on member i and allgather gathers all
 * chunks, for ring and direct exchange. */
static void test_reduce_scatter_allgather(void **state)
{
    (void)state;
    enum dt_coll_alg algs[] = {DT_ALG_RING, DT_ALG_DIRECT};
    for (size_t a = 0; a < 2; a++)
        for (int p = 1; p <= 9; p++)
            for (size_t c = 0; c < sizeof counts / sizeof counts[0]; c++) {
                run(DT_COLL_REDUCE_SCATTER, algs[a], p, 0, counts[c]);
                run(DT_COLL_ALLGATHER, algs[a], p, 0, counts[c]);
            }
}

/* Ensure that ring allreduce takes 2(p-1) rounds of ceil(n/p) floats at most per transfer,
 * which is what its alpha-beta cost 2(p-1)(alpha + n/(p beta)) counts. */
static void test_ring_round_structure(void **state)
{
    (void)state;
    struct dt_schedule s;
    dt_schedule_init(&s);
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RING, 8, 3, 0, 800, &s, NULL),
                     DT_OK);
    assert_int_equal(s.n_rounds, 2 * (8 - 1));
    for (int i = 0; i < s.n_xfers; i++)
        assert_int_equal(s.xfers[i].count, 100);
    dt_schedule_free(&s);
}

/* Ensure that recursive doubling on 8 members takes log2(8) = 3 full-vector exchanges, and
 * on 6 members (rem = 2) adds MPICH's fold-in and fold-out steps for the first 4. */
static void test_recursive_doubling_rounds(void **state)
{
    (void)state;
    struct dt_schedule s;
    dt_schedule_init(&s);
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING, 8, 5, 0, 10,
                                      &s, NULL), DT_OK);
    assert_int_equal(s.n_rounds, 3);
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING, 6, 0, 0, 10,
                                      &s, NULL), DT_OK);
    assert_int_equal(s.n_rounds, 2); /* rank 0 folds in (send) and out (receive) */
    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING, 6, 1, 0, 10,
                                      &s, NULL), DT_OK);
    assert_int_equal(s.n_rounds, 1 + 2 + 1); /* fold in, log2(4) exchanges, fold out */
    dt_schedule_free(&s);
}

/* Ensure that MPICH's default choice follows its 2048-byte threshold. */
static void test_library_choice(void **state)
{
    (void)state;
    assert_int_equal(dt_coll_library_choice(DT_COLL_ALLREDUCE, 8, 512),
                     DT_ALG_RECURSIVE_DOUBLING); /* 2048 bytes: still short */
    assert_int_equal(dt_coll_library_choice(DT_COLL_ALLREDUCE, 8, 513), DT_ALG_RABENSEIFNER);
}

/* Ensure that a combination that does not exist is refused, not silently replaced. */
static void test_unknown_combination(void **state)
{
    (void)state;
    struct dt_schedule s;
    struct dt_error err;
    dt_schedule_init(&s);
    assert_int_equal(dt_coll_schedule(DT_COLL_BCAST, DT_ALG_RING, 4, 0, 0, 10, &s, &err),
                     DT_EINPUT);
    assert_non_null(strstr(err.msg, "bcast"));
    dt_schedule_free(&s);
}

/* s holds one round (none past the end), round r of full. */
static void assert_same_round(const struct dt_schedule *one, const struct dt_schedule *full,
                              int r)
{
    assert_int_equal(one->n_rounds, r < full->n_rounds ? 1 : 0);
    if (r == full->n_rounds)
        return;
    int a = full->round_start[r], b = full->round_start[r + 1], lo, hi;
    dt_schedule_round(one, 0, &lo, &hi);
    assert_int_equal(hi - lo, b - a);
    for (int i = 0; i < b - a; i++) { /* field by field: padding differs */
        const struct dt_xfer *x = &one->xfers[lo + i];
        const struct dt_xfer *y = &full->xfers[a + i];
        assert_true(x->send == y->send && x->peer == y->peer && x->sum == y->sum);
        assert_true(x->offset == y->offset && x->count == y->count);
    }
}

/* Each round asked for alone (the simulator's lazy expansion) is the same round of the full
 * schedule, and the member's round count is the same, for every algorithm and member. */
static void check_windows(enum dt_coll_kind kind, enum dt_coll_alg alg, int p, int root, long n)
{
    struct dt_schedule full, one;
    struct dt_error err;
    dt_schedule_init(&full);
    dt_schedule_init(&one);
    for (int me = 0; me < p; me++) {
        assert_int_equal(dt_coll_schedule(kind, alg, p, me, root, n, &full, &err), DT_OK);
        for (int r = 0; r <= full.n_rounds; r++) {
            int total = -1;
            assert_int_equal(dt_coll_schedule_rounds(kind, alg, p, me, root, n, r, 1, &one,
                                                     &total, &err), DT_OK);
            assert_int_equal(total, full.n_rounds);
            assert_same_round(&one, &full, r);
        }
    }
    dt_schedule_free(&full);
    dt_schedule_free(&one);
}

static void test_lazy_rounds(void **state)
{
    (void)state;
    const int ps[] = {1, 2, 3, 5, 8, 12};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
        int p = ps[i];
        for (enum dt_coll_alg a = DT_ALG_RING; a < DT_ALG_COUNT; a++)
            if (a != DT_ALG_LINEAR && a != DT_ALG_BINOMIAL)
                check_windows(DT_COLL_ALLREDUCE, a, p, 0, 37);
        check_windows(DT_COLL_ALLREDUCE, DT_ALG_TREE, p, 0, 2 * DT_TREE_CHUNK + 3);
        for (int root = 0; root < p; root += 2) {
            check_windows(DT_COLL_REDUCE, DT_ALG_BINOMIAL, p, root, 11);
            check_windows(DT_COLL_BCAST, DT_ALG_BINOMIAL, p, root, 11);
            check_windows(DT_COLL_REDUCE, DT_ALG_LINEAR, p, root, 11);
            check_windows(DT_COLL_BCAST, DT_ALG_LINEAR, p, root, 11);
        }
        check_windows(DT_COLL_REDUCE_SCATTER, DT_ALG_RING, p, 0, 3);
        check_windows(DT_COLL_ALLGATHER, DT_ALG_DIRECT, p, 0, 29);
    }
}

/* A (rail-)ring allreduce's round from dt_coll_ring_round is the same round of the full
 * schedule, for every member, node size and round, chunks empty or not (3 floats on more
 * members than that). */
static void test_ring_round_fast(void **state)
{
    (void)state;
    struct dt_schedule full, one;
    dt_schedule_init(&full);
    dt_schedule_init(&one);
    const int ps[] = {2, 3, 4, 6, 12};
    const long ns[] = {3, 37};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (int g = 1; g <= ps[i]; g++)
            for (size_t k = 0; k < 2 && ps[i] % g == 0; k++)
                for (int me = 0; me < ps[i]; me++) {
                    int root = g == ps[i] ? 0 : g; /* 0: one node of all */
                    assert_int_equal(dt_coll_schedule(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, ps[i],
                                                      me, root, ns[k], &full, NULL), DT_OK);
                    for (int r = 0; r <= full.n_rounds; r++) {
                        assert_int_equal(dt_coll_ring_round(ps[i], g, me, ns[k], r, &one), 0);
                        assert_same_round(&one, &full, r);
                    }
                }
    dt_schedule_free(&full);
    dt_schedule_free(&one);
}

/* The widest round's receives of member me, summed, from its expanded schedule: what
 * dt_coll_scratch_floats gives in closed form for some algorithms (the reference). */
static long expanded_scratch(const struct dt_op *op, int p, int me)
{
    struct dt_schedule s;
    dt_schedule_init(&s);
    long widest = 0;
    assert_int_equal(dt_coll_schedule(op->coll, op->alg, p, me, op->root, op->region.count, &s,
                                      NULL), DT_OK);
    for (int r = 0; r < s.n_rounds; r++) {
        long f = 0;
        for (int i = s.round_start[r]; i < s.round_start[r + 1]; i++)
            f += s.xfers[i].send ? 0 : s.xfers[i].count;
        widest = f > widest ? f : widest;
    }
    dt_schedule_free(&s);
    return widest;
}

/* Ensure that a member's receive scratch (closed forms for the ring, rail-ring, direct and tree
 * collectives) is its expanded schedule's widest round, for every member of groups of 2-9,
 * 16, 17 and 64, counts below and above the group size. */
static void test_scratch_closed_forms(void **state)
{
    (void)state;
    const struct {
        enum dt_coll_kind kind;
        enum dt_coll_alg alg;
    } cases[] = {{DT_COLL_ALLREDUCE, DT_ALG_RING},           {DT_COLL_REDUCE_SCATTER, DT_ALG_RING},
                 {DT_COLL_ALLGATHER, DT_ALG_RING},           {DT_COLL_ALLREDUCE, DT_ALG_DIRECT},
                 {DT_COLL_REDUCE_SCATTER, DT_ALG_DIRECT},    {DT_COLL_ALLGATHER, DT_ALG_DIRECT},
                 {DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING},      {DT_COLL_ALLREDUCE, DT_ALG_RABENSEIFNER},
                 {DT_COLL_ALLREDUCE, DT_ALG_TREE}};
    const int ps[] = {2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 64};
    const long ns[] = {0, 1, 3, 7, 64, 1001};
    long checked = 0;
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
            for (size_t k = 0; k < sizeof ns / sizeof *ns; k++)
                for (int me = 0; me < ps[i]; me++) {
                    struct dt_op op = {.kind = DT_OP_COLL, .coll = cases[c].kind,
                                       .alg = cases[c].alg, .region = {.count = ns[k]}};
                    if (cases[c].alg == DT_ALG_RAIL_RING) /* nodes of 2 where they divide */
                        op.root = ps[i] % 2 || ps[i] == 2 ? 0 : 2;
                    long got = dt_coll_scratch_floats(&op, ps[i], me);
                    long want = expanded_scratch(&op, ps[i], me);
                    if (got != want)
                        fail_msg("%s/%s p=%d me=%d n=%ld: scratch %ld, schedule %ld",
                                 dt_coll_kind_name(op.coll), dt_coll_alg_name(op.alg), ps[i],
                                 me, ns[k], got, want);
                    checked++;
                }
    /* the tree's pipelined chunks (DT_TREE_CHUNK floats a half): several, the last ones
     * shorter by a float or by most of a chunk */
    const long tree_ns[] = {2 * DT_TREE_CHUNK, 2 * DT_TREE_CHUNK + 1, 2 * DT_TREE_CHUNK + 3,
                            6 * DT_TREE_CHUNK + 1, 9 * DT_TREE_CHUNK - 5, 10 * DT_TREE_CHUNK + 7};
    for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
        for (size_t k = 0; k < sizeof tree_ns / sizeof *tree_ns; k++)
            for (int me = 0; me < ps[i]; me++) {
                struct dt_op op = {.kind = DT_OP_COLL, .coll = DT_COLL_ALLREDUCE,
                                   .alg = DT_ALG_TREE, .region = {.count = tree_ns[k]}};
                long got = dt_coll_scratch_floats(&op, ps[i], me);
                long want = expanded_scratch(&op, ps[i], me);
                if (got != want)
                    fail_msg("tree p=%d me=%d n=%ld: scratch %ld, schedule %ld", ps[i], me,
                             tree_ns[k], got, want);
                checked++;
            }
    print_message("%ld members' scratch checked\n", checked);
}

/* Whether round b of every member is round a but for which chunk each sends and receives:
 * the same transfers (direction, peer, sum), and over the group the same chunk sizes sent. */
static bool same_but_chunks(const struct dt_schedule *m, int p, int a, int b)
{
    long sent_a = 0, sent_b = 0;
    for (int me = 0; me < p; me++) {
        const struct dt_schedule *s = &m[me];
        if (a >= s->n_rounds || b >= s->n_rounds)
            return false;
        int na = s->round_start[a + 1] - s->round_start[a];
        if (na != s->round_start[b + 1] - s->round_start[b])
            return false;
        for (int i = 0; i < na; i++) {
            const struct dt_xfer *x = &s->xfers[s->round_start[a] + i];
            const struct dt_xfer *y = &s->xfers[s->round_start[b] + i];
            if (x->send != y->send || x->peer != y->peer || x->sum != y->sum)
                return false;
            sent_a += x->send ? x->count * x->count : 0; /* the sizes' multiset, summarised */
            sent_b += y->send ? y->count * y->count : 0;
        }
    }
    return sent_a == sent_b;
}

/* Ensure that the rounds dt_coll_ring_repeats says repeat round r do (every member, groups of
 * 2-9, 16 and 17, counts with no empty chunk), that no round repeats past its phase or its
 * collective, and that other algorithms repeat nothing. */
static void test_ring_repeats(void **state)
{
    (void)state;
    const enum dt_coll_kind kinds[] = {DT_COLL_ALLREDUCE, DT_COLL_REDUCE_SCATTER,
                                       DT_COLL_ALLGATHER};
    const enum dt_coll_alg algs[] = {DT_ALG_RING, DT_ALG_LIBRARY};
    const int ps[] = {2, 3, 4, 5, 6, 7, 8, 9, 16, 17};
    const long ns[] = {17, 64, 1001};
    long checked = 0;
    for (size_t k = 0; k < 3; k++)
        for (size_t a = 0; a < 2; a++)
            for (size_t i = 0; i < sizeof ps / sizeof *ps; i++)
                for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
                    int p = ps[i];
                    if (algs[a] == DT_ALG_LIBRARY &&
                        dt_coll_library_choice(kinds[k], p, ns[c]) != DT_ALG_RING) {
                        assert_int_equal(dt_coll_ring_repeats(kinds[k], algs[a], p, ns[c], 0), 0);
                        continue;
                    }
                    struct dt_schedule *m = calloc((size_t)p, sizeof *m);
                    assert_non_null(m);
                    for (int me = 0; me < p; me++) {
                        dt_schedule_init(&m[me]);
                        assert_int_equal(dt_coll_schedule(kinds[k], algs[a], p, me, 0, ns[c],
                                                          &m[me], NULL), DT_OK);
                    }
                    int rounds = m[0].n_rounds;
                    for (int r = 0; r <= rounds; r++) {
                        int rep = dt_coll_ring_repeats(kinds[k], algs[a], p, ns[c], r);
                        if (r + rep >= rounds && rep > 0)
                            fail_msg("%s p=%d: round %d repeats %d past the last round %d",
                                     dt_coll_kind_name(kinds[k]), p, r, rep, rounds - 1);
                        for (int j = 1; j <= rep; j++, checked++)
                            if (!same_but_chunks(m, p, r, r + j))
                                fail_msg("%s/%s p=%d n=%ld: round %d is not round %d again",
                                         dt_coll_kind_name(kinds[k]),
                                         dt_coll_alg_name(algs[a]), p, ns[c], r + j, r);
                    }
                    for (int me = 0; me < p; me++)
                        dt_schedule_free(&m[me]);
                    free(m);
                }
    assert_int_equal(dt_coll_ring_repeats(DT_COLL_ALLREDUCE, DT_ALG_DIRECT, 8, 64, 0), 0);
    assert_int_equal(dt_coll_ring_repeats(DT_COLL_ALLREDUCE, DT_ALG_RAIL_RING, 8, 64, 0), 0);
    assert_int_equal(dt_coll_ring_repeats(DT_COLL_ALLREDUCE, DT_ALG_RECURSIVE_DOUBLING, 8, 64,
                                          0), 0);
    print_message("%ld repeated rounds checked\n", checked);
}

/* Whether round r of the members' schedules m is dt_coll_direct_rounds's: every member sends
 * every other one chunk, peers in rank order, the largest widest and none below widest - 1,
 * and the most a member sums is summed. */
static bool direct_round_as_said(const struct dt_schedule *m, int p, int r, long widest,
                                 long summed)
{
    long most = 0, most_sum = 0;
    for (int me = 0; me < p; me++) {
        int lo, hi, next = me == 0 ? 1 : 0;
        long sum = 0;
        dt_schedule_round(&m[me], r, &lo, &hi);
        for (int i = lo; i < hi; i++) {
            const struct dt_xfer *x = &m[me].xfers[i];
            sum += !x->send && x->sum ? x->count : 0;
            if (!x->send)
                continue;
            if (x->peer != next || x->count < widest - 1 || x->count > widest)
                return false;
            most = x->count > most ? x->count : most;
            next = next + 1 == me ? next + 2 : next + 1;
        }
        if (next != p)
            return false; /* a peer left out */
        most_sum = sum > most_sum ? sum : most_sum;
    }
    return most == widest && most_sum == summed;
}

/* Ensure that dt_coll_direct_rounds describes the direct collectives' expanded schedules
 * (every member, groups of 2-9, 16, 17 and 64, counts from one float a member to many, with
 * and without a remainder) and says 0 where a chunk is empty and for other algorithms. */
static void test_direct_rounds(void **state)
{
    (void)state;
    const enum dt_coll_kind kinds[] = {DT_COLL_ALLREDUCE, DT_COLL_REDUCE_SCATTER,
                                       DT_COLL_ALLGATHER};
    const int ps[] = {2, 3, 4, 5, 6, 7, 8, 9, 16, 17, 64};
    long checked = 0;
    for (size_t k = 0; k < 3; k++)
        for (size_t i = 0; i < sizeof ps / sizeof *ps; i++) {
            int p = ps[i];
            const long ns[] = {1, p - 1, p, p + 1, 2L * p - 1, 3L * p, 1001, 100003};
            for (size_t c = 0; c < sizeof ns / sizeof *ns; c++) {
                long widest, summed[2];
                int rounds = dt_coll_direct_rounds(kinds[k], DT_ALG_DIRECT, p, ns[c], &widest,
                                                   summed);
                assert_int_equal(rounds > 0, ns[c] >= p);
                if (!rounds)
                    continue;
                struct dt_schedule *m = calloc((size_t)p, sizeof *m);
                assert_non_null(m);
                for (int me = 0; me < p; me++) {
                    dt_schedule_init(&m[me]);
                    assert_int_equal(dt_coll_schedule(kinds[k], DT_ALG_DIRECT, p, me, 0, ns[c],
                                                      &m[me], NULL), DT_OK);
                    assert_int_equal(m[me].n_rounds, rounds);
                }
                for (int r = 0; r < rounds; r++, checked++)
                    if (!direct_round_as_said(m, p, r, widest, summed[r]))
                        fail_msg("%s p=%d n=%ld: round %d is not as said (widest %ld, summed "
                                 "%ld)", dt_coll_kind_name(kinds[k]), p, ns[c], r, widest,
                                 summed[r]);
                for (int me = 0; me < p; me++)
                    dt_schedule_free(&m[me]);
                free(m);
            }
        }
    long w, sm[2];
    assert_int_equal(dt_coll_direct_rounds(DT_COLL_ALLREDUCE, DT_ALG_RING, 8, 64, &w, sm), 0);
    assert_int_equal(dt_coll_direct_rounds(DT_COLL_ALLGATHER, DT_ALG_LIBRARY, 8, 64, &w, sm), 0);
    assert_int_equal(dt_coll_direct_rounds(DT_COLL_BCAST, DT_ALG_DIRECT, 8, 64, &w, sm), 0);
    print_message("%ld direct rounds checked\n", checked);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_allreduce_all_algorithms),
        cmocka_unit_test(test_tree_pipelined),
        cmocka_unit_test(test_rail_ring),
        cmocka_unit_test(test_reduce_bcast_every_root),
        cmocka_unit_test(test_reduce_scatter_allgather),
        cmocka_unit_test(test_ring_round_structure),
        cmocka_unit_test(test_recursive_doubling_rounds),
        cmocka_unit_test(test_library_choice),
        cmocka_unit_test(test_unknown_combination),
        cmocka_unit_test(test_lazy_rounds),
        cmocka_unit_test(test_ring_round_fast),
        cmocka_unit_test(test_scratch_closed_forms),
        cmocka_unit_test(test_ring_repeats),
        cmocka_unit_test(test_direct_rounds),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
