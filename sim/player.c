/* Plays a plan: each rank walks its ops; compute ops occupy the rank's device; a collective
 * runs the rounds of its algorithm (dt_coll_schedule) as flows between the ranks' endpoints;
 * a SEND or RECV is a one-round activity of its own (dt_schedule_p2p), matched as MPI does:
 * by source, destination and tag, in order. As MPI does, a SEND up to the eager limit
 * (cost parameter eager_bytes) moves as soon as it is posted, and a message that arrives
 * before its RECV waits in the mailbox; a larger one (rendezvous) moves only once its RECV is
 * posted, so a plan whose blocking sends wait for each other deadlocks here as under MPI,
 * and the error names the rank and op where it stopped. */
#include "player.h"

#include <limits.h>
#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "dt/collective.h"
#include "engine.h"
#include "grow.h"
#include "matchindex.h"
#include "network.h"

enum tag_kind { TAG_COMPUTE = 1, TAG_REDUCE, TAG_CLOSED }; /* flows: flow_tag */

#define LINK_TID 100000 /* trace tracks of links come after those of ranks */

static uint64_t make_tag(enum tag_kind k, uint32_t index)
{
    return ((uint64_t)k << 32) | index;
}

/* A collective (or a SEND/RECV) in progress on one rank. Every round reads most of it: its
 * fields are ordered without holes (184 bytes; 192 with its 64-byte alignment, the array's
 * too), so that an activity is 3 cache lines of its own (at 224 bytes, the schedule in place,
 * every other activity shared a line with a neighbour: 4 lines a round). A delivery that does
 * not end the round reads and writes only its first line: the sender's outstanding, or the
 * receiver's matching state; the rank is there too, which the round's end reads first (to
 * find the rank's records). */
struct activity {
    _Alignas(64) int outstanding; /* transfers of the current round not yet complete */
    int only_recv, only_src; /* the current round's receive when it has just one (a ring's):
                              * its index in the round's transfers and, until its message came,
                              * its source's global rank (then -1: nothing else matches it);
                              * else -1, -1 */
    int rank;
    int round;
    bool posted;             /* the current round's receives are posted (not summing): only
                              * while round < n_rounds and not done */
    bool done;
    bool p2p;                /* SEND/RECV: transfer peers are global ranks */
    bool rdv_wait;           /* a SEND above the eager limit waiting for its receive */
    double latest_sender_start;
    int n_rounds;
    int op;                  /* the COLL, SEND or RECV op */
    int group, seq;          /* identifies the collective across its members; for SEND/RECV,
                              * P2P_GROUP(tag, source) and the message's place among those of
                              * the same source, destination and tag */
    int me;                  /* index in the group */
    int peer, peer_act;      /* the receiving activity of the last peer sent to, found once
                              * (a ring sends to one peer for many rounds), or -1 */
    int mail_head, mail_tail; /* messages for it not matched yet, arrival order (those that
                               * came before it was posted wait in the matching index) */
    int route_peer;          /* the peer whose checked route is kept in route, or -1 */
    struct dt_schedule *s;   /* lazy: the current round only; eager: every round; NULL for a
                              * lazy ring (its rounds are posted from the player's ring_round)
                              * and once done */
    long sum_floats;         /* floats to add after the round */
    double t_round;
    double elem_bytes;       /* bytes per element on the wire (the op's region's dtype) */
    long reduce_floats;      /* the last sum's size and duration (the same every round) */
    double reduce_s;
    struct dt_sim_route route;
    struct {                 /* a lazily expanded (rail-)ring allreduce, for dt_coll_ring_round: */
        int p, g;            /* its members and members per node (g = p: a flat ring), */
        long count;          /* its floats; p = 0 for any other activity */
    } ring;
};
_Static_assert(sizeof(struct activity) == 192, "3 lines (see above)");
_Static_assert(offsetof(struct activity, n_rounds) <= 64, "a delivery's fields in one line");

/* A message delivered before its receive was posted: a link of its activity's list, or of
 * its key's chain in the matching index while the activity has not started (next: the next
 * to arrive, or the next free slot). */
struct mail {
    int src;
    double t_start;
    int next;
};

/* A delivered flow, from its completion: nothing is kept per flow in flight, as the engine
 * hands back the endpoints and the tag names both activities (flow_tag). */
struct flowrec {
    int act;                 /* the sender's activity */
    int src, dst;
    int group, seq;          /* the sender's, read only when rcv_act is -1 */
    int rcv_act;             /* the receiving activity when it was posted at the send, else -1
                              * (looked up at delivery by the sender's group and seq) */
};

/* A flow's tag: the sender's activity ai and the receiving one (rcv_act, -1 while it is not
 * posted) in one word. */
static uint64_t flow_tag(int ai, int rcv_act)
{
    return (uint64_t)(uint32_t)(rcv_act + 1) << 32 | (uint32_t)ai;
}

/* A rank's state. What a round's end reads and writes (its blocked interval's figures and the
 * compute time its sums add) is one line: 64-byte aligned, the array too. */
struct rankstate {
    _Alignas(64) bool blocked; /* waiting for a compute, a collective or a WAIT */
    int wait_act;            /* activity awaited, or -1 */
    double block_t;
    double blk_idle;         /* while blocked: waiting for peers that had not sent yet */
    double blk_reduce;       /* while blocked: sums of received data on the device (compute) */
    double compute_s;        /* the result's compute_s, summed here (the same terms in the
                              * same order) and copied into it at the end: no line of its own
                              * per round */
    int pc;
    double op_start;
    double links_free;       /* when its closed collectives leave its links (closed_coll) */
    int *handle_act;         /* per handle: activity */
};
_Static_assert(offsetof(struct rankstate, compute_s) + sizeof(double) <= 64,
               "a round's end reads one line");

struct player {
    const struct dt_plan *plan;
    const struct dt_cost_params *cp;
    struct dt_cost_params *cpr; /* per rank: its group's, as its node's ranks share them
                                 * (dt_cost_rank_params) */
    const struct dt_sim_options *opt;
    struct dt_sim *sim;
    struct dt_simnet net;
    struct rankstate *rs;
    struct activity *acts;
    int n_acts, cap_acts;
    struct mail *mail;
    int n_mail, cap_mail, mail_free;
    struct dt_match_index ix;   /* activities and undelivered messages by key; counters */
    struct dt_schedule ring_round; /* a lazy ring's round from load_round to the end of
                                    * post_loaded_round, the only stage that reads its
                                    * transfers (try_match needs only_src): one line for every
                                    * ring, not a line of each activity per round */
    bool eager;                 /* expand every round of a collective when it starts */
    struct dt_sim_result *res;
    struct dt_error *err;
    long trace_events;
    char *link_seen;         /* trace: link tracks already named */
};

static const struct dt_device_spec *device_of(struct player *p, int rank)
{
    return &dt_topology_group_of_node(p->plan->topo, p->net.node_of[rank])->device;
}

/* Whether the trace shows this rank (--trace-ranks). */
static bool traced(const struct player *p, int rank)
{
    return !p->opt->trace_ranks || dt_ranklist_has(p->opt->trace_ranks, rank);
}

static void trace(struct player *p, int tid, const char *name, const char *cat, double t0,
                  double t1)
{
    FILE *f = p->opt ? p->opt->trace : NULL;
    if (!f || p->trace_events > 2000000 || (tid < LINK_TID && !traced(p, tid)))
        return;
    p->trace_events++;
    fprintf(f, ",\n{\"name\": \"%s\", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": %d, \"tid\": %d, ",
            name, cat, p->opt->trace_pid, tid);
    dt_trace_span(f, t0, t1);
    fputc('}', f);
}

static int advance(struct player *p, int rank);

static void block(struct rankstate *r, double now)
{
    r->blocked = true;
    r->block_t = now;
    r->blk_idle = r->blk_reduce = 0;
}

/* The part of [t0, t1] after a rank blocked at block_t. */
static double after(double t0, double t1, double block_t)
{
    /* comparisons, not fmax: its NaN rules cost a library call per flow, times are finite */
    double from = t0 > block_t ? t0 : block_t;
    return t1 - from > 0 ? t1 - from : 0;
}

/* Point-to-point "groups" are negative, one per tag and source, so they never meet a real
 * group and a message matches only the receives of its own source and tag. */
static int p2p_group(const struct player *p, int tag, int src)
{
    return -1 - (tag * p->plan->n_ranks + src);
}

/* The global rank of a transfer's peer. */
static int peer_rank(const struct player *p, const struct activity *a, const struct dt_xfer *x)
{
    return a->p2p ? x->peer : p->plan->groups[a->group].ranks[x->peer];
}

/* The sequence number of rank's next activity of a group (for a SEND, also per
 * destination): a counter kept in the matching index under sequence -1, which no activity
 * has. -1 when out of memory. */
static int next_seq(struct player *p, int rank, int group, int dst)
{
    struct dt_match_entry *e = dt_match_get(&p->ix, rank, group, -1, dst);
    return e ? ++e->act : -1; /* an entry starts with act -1 */
}

/* Index in a->s of the current round: the schedule holds every round (eager, or a single
 * round anyway) or only the current one (lazy). */
static int cur(const struct activity *a)
{
    return a->s->n_rounds == a->n_rounds ? a->round : 0;
}

/* The current round's transfers: a->s->xfers[*lo .. *hi); none for a lazy ring's schedule,
 * which it does not keep. */
static void round_span(const struct activity *a, int *lo, int *hi)
{
    if (!a->s) {
        *lo = *hi = 0;
        return;
    }
    dt_schedule_round(a->s, cur(a), lo, hi);
}

/* The transfers of the round being posted, base[*lo .. *hi): a lazy ring's were just written
 * by load_round into the player's ring_round, any other activity's are in its schedule. */
static struct dt_xfer *posting_round(struct player *p, const struct activity *a, int *lo,
                                     int *hi)
{
    if (a->ring.p > 0) {
        *lo = 0;
        *hi = p->ring_round.n_xfers;
        return p->ring_round.xfers;
    }
    round_span(a, lo, hi);
    return a->s->xfers;
}

/* Frees the activity's own schedule, if it has one. */
static void drop_schedule(struct activity *a)
{
    if (a->s)
        dt_schedule_free(a->s);
    free(a->s);
    a->s = NULL;
}

/* The activity completed: its rounds are no longer needed. */
static void activity_done(struct activity *a)
{
    a->done = true;
    drop_schedule(a);
}

/* A receive of activity a got its message, sent at t_start. */
static void received(struct activity *a, double t_start)
{
    a->outstanding--;
    if (t_start > a->latest_sender_start)
        a->latest_sender_start = t_start;
}

/* Matches a delivered message with a posted receive of the activity's current round: its
 * first receive from src not received yet. */
static bool try_match(struct player *p, struct activity *a, int src, double t_start)
{
    if (!a->posted) /* posted: not done, round < n_rounds */
        return false;
    if (a->only_recv >= 0) { /* one receive: no scan, and its transfer's line not touched */
        if (src != a->only_src)
            return false;
        a->only_src = -1; /* received */
        received(a, t_start);
        return true;
    }
    int lo, hi;
    round_span(a, &lo, &hi);
    for (int i = lo; i < hi; i++) {
        struct dt_xfer *x = &a->s->xfers[i];
        if (!x->send && x->count > 0 && peer_rank(p, a, x) == src) {
            x->count = -x->count; /* received (finish_round restores the sign) */
            received(a, t_start);
            return true;
        }
    }
    return false;
}

static int finish_round(struct player *p, int ai);
static int post_loaded_round(struct player *p, int ai, double t);

/* Bytes per element on the wire: the dtype of the region the activity's op moves (kept in
 * the activity when it starts: it is read for every flow). */
static double elem_bytes(const struct player *p, const struct activity *a)
{
    const struct dt_op *op = &p->plan->ranks[a->rank].ops[a->op];
    return (double)dt_dtype_size(dt_plan_region_dtype(p->plan, a->rank, &op->region));
}

/* The activity that receives activity ai's messages to peer, or -1 while it is not posted:
 * what on_flow would look up, kept per activity for its last peer. Keys are never removed
 * and an entry's activity never changes once set, so a receiver found now is the one the
 * delivery would find. */
static int receiver(struct player *p, int ai, int peer)
{
    struct activity *a = &p->acts[ai];
    if (a->peer != peer || a->peer_act < 0) {
        const struct dt_match_entry *e = dt_match_find(&p->ix, peer, a->group, a->seq, -1);
        a->peer = peer;
        a->peer_act = e ? e->act : -1;
    }
    return a->peer_act;
}

/* Sends transfer x of activity ai at time t0 (now, or when a sum folded in ends). */
static int start_flow(struct player *p, int ai, const struct dt_xfer *x, double t0)
{
    struct activity *a = &p->acts[ai];
    int peer = peer_rank(p, a, x);
    double bytes = a->elem_bytes * x->count;
    uint64_t tag = flow_tag(ai, receiver(p, ai, peer));
    if (a->route_peer != peer) { /* a ring sends to one peer every round: route it once */
        int route[DT_SIM_MAX_HOPS];
        int hops = dt_simnet_route(&p->net, a->rank, peer, route);
        if (hops > DT_SIM_ROUTE_KEPT) /* a long torus route: not kept */
            return dt_sim_flow_at(p->sim, t0, bytes, route, hops, a->rank, peer, tag, p->err);
        a->route_peer = -1;
        int rc = dt_sim_route_check(p->sim, route, hops, &a->route, p->err);
        if (rc)
            return rc;
        a->route_peer = peer;
    }
    return dt_sim_flow_route(p->sim, t0, bytes, &a->route, a->rank, peer, tag, p->err);
}

/* The activity of the message's other side: the receive a SEND matches, or the SEND a
 * receive matches (same group, which names tag and source, and place in their order; a
 * SEND's key also names its destination, as a source sends one tag to several ranks). */
static int other_side(const struct player *p, const struct activity *a, int peer)
{
    bool send = a->s->xfers[0].send;
    const struct dt_match_entry *e =
        dt_match_find(&p->ix, peer, a->group, a->seq, send ? -1 : a->rank);
    return e && e->act >= 0 && p->acts[e->act].p2p ? e->act : -1;
}

static bool receive_posted(const struct player *p, const struct activity *a)
{
    return other_side(p, a, a->s->xfers[0].peer) >= 0;
}

/* A receive was posted: a rendezvous SEND waiting for it starts moving. */
static int release_rendezvous(struct player *p, int ai)
{
    struct activity *a = &p->acts[ai];
    if (!a->p2p || !a->s || a->s->n_xfers < 1 || a->s->xfers[0].send) /* !s: done */
        return DT_OK;
    int si = other_side(p, a, a->s->xfers[0].peer);
    if (si < 0 || !p->acts[si].rdv_wait)
        return DT_OK;
    p->acts[si].rdv_wait = false;
    return start_flow(p, si, &p->acts[si].s->xfers[0], dt_sim_now(p->sim));
}

/* Messages that arrived for a's key before this round was posted: those of its current
 * round's sources are consumed, in arrival order, the rest wait. */
static void consume_mail(struct player *p, struct activity *a)
{
    if (a->p2p && a->s->xfers[0].send)
        return;
    for (int prev = -1, m = a->mail_head; m >= 0;) {
        struct mail *ml = &p->mail[m];
        int next = ml->next;
        if (!try_match(p, a, ml->src, ml->t_start)) {
            prev = m;
            m = next;
            continue;
        }
        if (prev < 0)
            a->mail_head = next;
        else
            p->mail[prev].next = next;
        if (a->mail_tail == m)
            a->mail_tail = prev;
        ml->next = p->mail_free;
        p->mail_free = m;
        m = next;
    }
}

/* Keeps a message for a receive not posted yet: in the list of its activity ai, or while
 * there is none (ai < 0) in the matching index under its key. */
static int post_mail(struct player *p, const struct flowrec *f, int ai, double t_start)
{
    int m = p->mail_free;
    if (m >= 0) {
        p->mail_free = p->mail[m].next;
    } else {
        if (dt_grow((void **)&p->mail, &p->cap_mail, p->n_mail + 1, sizeof *p->mail))
            return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        m = p->n_mail++;
    }
    p->mail[m] = (struct mail){f->src, t_start, -1};
    int *head, *tail;
    if (ai >= 0) {
        head = &p->acts[ai].mail_head;
        tail = &p->acts[ai].mail_tail;
    } else {
        struct dt_match_entry *e = dt_match_get(&p->ix, f->dst, f->group, f->seq, -1);
        if (!e)
            return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        head = &e->mail_head;
        tail = &e->mail_tail;
    }
    if (*tail >= 0)
        p->mail[*tail].next = m;
    else
        *head = m;
    *tail = m;
    return DT_OK;
}

/* Lazy expansion: the collective's current round, asked of libdt/collective.c now that the
 * rank reaches it. */
static int load_round(struct player *p, struct activity *a)
{
    if (a->p2p || p->eager)
        return DT_OK;
    if (a->ring.p > 0)
        return dt_coll_ring_round(a->ring.p, a->ring.g, a->me, a->ring.count, a->round,
                                  &p->ring_round)
                   ? dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory") : DT_OK;
    const struct dt_op *op = &p->plan->ranks[a->rank].ops[a->op];
    int total;
    return dt_coll_schedule_rounds(op->coll, op->alg, p->plan->groups[a->group].n, a->me,
                                   op->root, op->region.count, a->round, 1, a->s, &total,
                                   p->err);
}

/* Posts the current round of activity ai at time t (now, or the end of a sum folded in):
 * starts its sends, consumes delivered messages. */
static int post_round(struct player *p, int ai, double t)
{
    struct activity *a = &p->acts[ai];
    /* round 0 came with the start (a lazy ring's too, but its rounds post from ring_round) */
    int rc = a->round > 0 || a->ring.p > 0 ? load_round(p, a) : DT_OK;
    return rc ? rc : post_loaded_round(p, ai, t);
}

/* As post_round, the round already loaded (posting_round). */
static int post_loaded_round(struct player *p, int ai, double t)
{
    struct activity *a = &p->acts[ai];
    int rc;
    int lo, hi;
    struct dt_xfer *xs = posting_round(p, a, &lo, &hi);
    a->outstanding = hi - lo;
    a->sum_floats = 0;
    a->posted = true;
    a->t_round = t;
    a->latest_sender_start = a->t_round;
    int receives = 0;
    for (int i = lo; i < hi; i++) {
        struct dt_xfer *x = &xs[i];
        if (x->sum)
            a->sum_floats += x->count;
        if (!x->send && x->count > 0 && receives++ == 0)
            a->only_recv = i;
        if (!x->send)
            continue;
        if (a->p2p && a->elem_bytes * x->count > p->cp->eager_bytes &&
            !receive_posted(p, a)) {
            a->rdv_wait = true; /* rendezvous: the data moves once the receive is posted */
            continue;
        }
        if ((rc = start_flow(p, ai, x, t)))
            return rc;
    }
    if (receives != 1)
        a->only_recv = a->only_src = -1;
    else
        a->only_src = peer_rank(p, a, &xs[a->only_recv]);
    consume_mail(p, a);
    return a->outstanding == 0 ? finish_round(p, ai) : DT_OK;
}

/* Whether the sum that ends activity ai's round can be charged without an event of its own:
 * its end only posts the next round, and nothing before it can tell the difference. That
 * holds when the rank waits on this activity (it stays blocked until the activity is done,
 * which cannot come before that round's sends end), the next round sends (so it cannot
 * complete before it is posted; a collective's sends never wait for rendezvous) and no trace
 * is written (its spans would come out in another order). */
static bool sum_folds(const struct player *p, const struct activity *a, int ai)
{
    const struct rankstate *r = &p->rs[a->rank];
    if (a->p2p || p->eager || (p->opt && p->opt->trace) || !r->blocked || r->wait_act != ai ||
        a->round >= a->n_rounds)
        return false;
    return true;
}

/* The sum of activity ai's last round, and the posting of its next round at the sum's end, at
 * once: the device is busy as for a compute, the next round's sends leave when the sum ends
 * (dt_sim_flow_at), messages that arrive meanwhile match its receives directly (the mailbox
 * would hand them over at the same instant). Falls back to the event when the next round
 * turns out not to send. */
static int sum_then_post(struct player *p, int ai, double d)
{
    struct activity *a = &p->acts[ai];
    int rc = load_round(p, a);
    if (rc)
        return rc;
    bool sends = false;
    int lo, hi;
    const struct dt_xfer *xs = posting_round(p, a, &lo, &hi);
    for (int i = lo; i < hi; i++)
        sends |= xs[i].send;
    if (!sends) { /* the round is loaded again when the sum's event posts it */
        a->outstanding = -1;
        return dt_sim_compute(p->sim, a->rank, d, make_tag(TAG_REDUCE, (uint32_t)ai), p->err);
    }
    double t0, t1;
    if ((rc = dt_sim_compute_silent(p->sim, a->rank, d, &t0, &t1, p->err)))
        return rc;
    /* what on_compute charges for a sum */
    struct rankstate *rr = &p->rs[a->rank];
    rr->compute_s += t1 - t0;
    rr->blk_reduce += after(t0, t1, rr->block_t);
    return post_loaded_round(p, ai, t1);
}

/* All transfers of the round are complete: add received floats (a compute on the device),
 * or go on with the next round. */
static int finish_round(struct player *p, int ai)
{
    struct activity *a = &p->acts[ai];
    if (a->only_recv < 0) { /* the scan marked its receives (a single one is not marked) */
        int lo, hi;
        round_span(a, &lo, &hi);
        for (int i = lo; i < hi; i++)
            if (a->s->xfers[i].count < 0)
                a->s->xfers[i].count = -a->s->xfers[i].count;
    }
    if (p->opt && p->opt->trace)
        trace(p, a->rank, "round", "comm", a->t_round, dt_sim_now(p->sim));
    /* the round waited for its last sender from its start until that sender started: idle
     * time of the rank when it was blocked on this activity then */
    struct rankstate *r = &p->rs[a->rank];
    if (r->blocked && r->wait_act == ai) {
        double now = dt_sim_now(p->sim), last = a->latest_sender_start;
        r->blk_idle += after(a->t_round, last < now ? last : now, r->block_t);
    }
    a->posted = false;
    a->round++;
    if (a->sum_floats > 0) {
        if (a->sum_floats != a->reduce_floats) { /* 0 at first; sum_floats > 0 here */
            a->reduce_floats = a->sum_floats;
            a->reduce_s = dt_cost_reduce(&p->cpr[a->rank], device_of(p, a->rank), a->sum_floats,
                                         a->elem_bytes);
        }
        double d = a->reduce_s;
        if (sum_folds(p, a, ai))
            return sum_then_post(p, ai, d);
        a->outstanding = -1; /* reduction in progress */
        return dt_sim_compute(p->sim, a->rank, d, make_tag(TAG_REDUCE, (uint32_t)ai), p->err);
    }
    if (a->round >= a->n_rounds) {
        activity_done(a);
        return DT_OK;
    }
    return post_round(p, ai, dt_sim_now(p->sim));
}

/* A new activity of rank's op op_index (nothing posted), or -1 when out of memory. */
static int new_activity(struct player *p, int rank, int op_index)
{
    if (dt_grow_aligned((void **)&p->acts, &p->cap_acts, p->n_acts + 1, sizeof *p->acts))
        return -1;
    int ai = p->n_acts++;
    struct activity *a = &p->acts[ai];
    memset(a, 0, sizeof *a);
    a->rank = rank;
    a->op = op_index;
    a->peer = a->peer_act = a->route_peer = -1;
    return ai;
}

static int start_activity(struct player *p, int rank, int op_index, int *out)
{
    const struct dt_op *op = &p->plan->ranks[rank].ops[op_index];
    bool p2p = op->kind != DT_OP_COLL;
    int n = p->plan->n_ranks;
    if (p2p ? op->peer < 0 || op->peer >= n || op->peer == rank || op->tag < 0 ||
                  op->tag > (INT_MAX - n) / n
            : op->group < 0 || op->group >= p->plan->n_groups)
        return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0, "rank %d op %d: bad %s", rank,
                       op_index, p2p ? "peer or tag" : "group");
    int ai = new_activity(p, rank, op_index);
    if (ai < 0)
        return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    struct activity *a = &p->acts[ai];
    a->p2p = p2p;
    a->elem_bytes = elem_bytes(p, a);
    if (!(a->s = malloc(sizeof *a->s)))
        return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    dt_schedule_init(a->s);
    int rc;
    if (p2p) {
        a->group = p2p_group(p, op->tag, op->kind == DT_OP_SEND ? rank : op->peer);
        a->seq = next_seq(p, rank, a->group, op->kind == DT_OP_SEND ? op->peer : -1);
        a->me = 0;
        if (a->seq < 0)
            return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        if (dt_schedule_p2p(op->kind == DT_OP_SEND, op->peer, op->region.count, op->sum, a->s))
            return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        a->n_rounds = a->s->n_rounds;
    } else {
        const struct dt_group *g = &p->plan->groups[op->group];
        a->group = op->group;
        a->seq = next_seq(p, rank, op->group, -1);
        a->me = dt_group_index(g, rank);
        if (a->me < 0)
            return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0, "rank %d is not in group %d", rank,
                           op->group);
        if (a->seq < 0)
            return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        /* lazy: round 0 only (and the round count); eager: every round */
        rc = dt_coll_schedule_rounds(op->coll, op->alg, g->n, a->me, op->root,
                                     op->region.count, 0, p->eager ? INT_MAX : 1, a->s,
                                     &a->n_rounds, p->err);
        if (rc)
            return rc;
        if (!p->eager && g->n > 1 && op->coll == DT_COLL_ALLREDUCE &&
            (op->alg == DT_ALG_RING || op->alg == DT_ALG_RAIL_RING)) { /* its later rounds */
            a->ring.p = g->n;
            a->ring.g = op->alg == DT_ALG_RAIL_RING && op->root ? op->root : g->n;
            a->ring.count = op->region.count;
            drop_schedule(a); /* its rounds, 0 too, are posted from the player's ring_round */
        }
    }
    bool sends = p2p && op->kind == DT_OP_SEND;
    struct dt_match_entry *e = dt_match_get(&p->ix, rank, a->group, a->seq, sends ? op->peer : -1);
    if (!e)
        return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    e->act = ai;
    /* messages that came before it now wait in its own list */
    a->mail_head = e->mail_head;
    a->mail_tail = e->mail_tail;
    e->mail_head = e->mail_tail = -1;
    *out = ai;
    if (a->n_rounds == 0) {
        activity_done(a);
        return DT_OK;
    }
    rc = post_round(p, ai, dt_sim_now(p->sim));
    return rc ? rc : release_rendezvous(p, ai);
}

/* Accounts a blocked interval: the idle parts its rounds added (waiting for a peer that had
 * not sent yet), the sums the device ran (compute, counted there), communication the rest. */
static void unblock(struct player *p, int rank)
{
    struct rankstate *r = &p->rs[rank];
    double blocked = dt_sim_now(p->sim) - r->block_t;
    double idle = fmin(r->blk_idle, blocked);
    p->res->rank[rank].idle_s += idle;
    p->res->rank[rank].comm_s += fmax(0, blocked - idle - r->blk_reduce);
    r->blocked = false;
    r->wait_act = -1;
}

/* A non-blocking closed collective: an activity that a timer completes after delay. */
static int closed_activity(struct player *p, int rank, const struct dt_op *op, double delay)
{
    if (op->handle < 0 || op->handle >= p->plan->next_handle)
        return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0, "bad handle %d", op->handle);
    int ai = new_activity(p, rank, p->rs[rank].pc);
    if (ai < 0)
        return dt_fail(p->err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    p->rs[rank].handle_act[op->handle] = ai;
    return dt_sim_timer(p->sim, delay, make_tag(TAG_CLOSED, (uint32_t)ai), p->err);
}

/* A collective the options close (dt_sim_options.closed_coll_s) takes its closed-form time
 * without flows, or longer where the links are still busy with the rank's earlier closed
 * ones: a blocking one as a wait on the rank's device, a non-blocking one as an activity a
 * timer completes. False when it is simulated. */
static bool closed_coll(struct player *p, int rank, const struct dt_op *op, double now, int *rc)
{
    double busy = 0;
    double d = p->opt && p->opt->closed_coll_s
                   ? p->opt->closed_coll_s(p->opt->closed_ctx, rank, op, &busy) : -1;
    if (d < 0)
        return false;
    struct rankstate *r = &p->rs[rank];
    r->links_free = fmax(now, r->links_free) + busy;
    double wait = fmax(d, r->links_free - now);
    if (op->nonblocking) {
        *rc = closed_activity(p, rank, op, wait);
        return true;
    }
    r->wait_act = -1;
    block(r, now);
    *rc = dt_sim_compute(p->sim, rank, wait, make_tag(TAG_CLOSED, (uint32_t)rank), p->err);
    return true;
}

/* Runs rank's ops until one blocks or the program ends. */
static int advance(struct player *p, int rank)
{
    const struct dt_rank_plan *rp = &p->plan->ranks[rank];
    struct rankstate *r = &p->rs[rank];
    const struct dt_model *m = p->plan->model;
    while (!r->blocked && r->pc < rp->n_ops) {
        const struct dt_op *op = &rp->ops[r->pc];
        int rc = DT_OK, ai = -1;
        double now = dt_sim_now(p->sim);
        r->op_start = now;
        switch (op->kind) {
        case DT_OP_COMPUTE:
        case DT_OP_LOAD:
        case DT_OP_UPDATE:
        case DT_OP_ZERO:
        case DT_OP_COPY:
        case DT_OP_UNSCALE:
        case DT_OP_RESCALE:
        case DT_OP_LOSS: {
            double d = dt_cost_op(&p->cpr[rank], device_of(p, rank), m, op);
            /* folded into the last forward, or a few scalars: no event */
            if ((op->kind == DT_OP_LOSS || op->kind == DT_OP_RESCALE) && d <= 0)
                break;
            r->wait_act = -1;
            block(r, now);
            rc = dt_sim_compute(p->sim, rank, d, make_tag(TAG_COMPUTE, (uint32_t)rank), p->err);
            break;
        }
        case DT_OP_COLL:
            if (closed_coll(p, rank, op, now, &rc))
                break;
            /* fall through */
        case DT_OP_SEND:
        case DT_OP_RECV:
            rc = start_activity(p, rank, r->pc, &ai);
            if (rc)
                return rc;
            if (op->nonblocking) {
                if (op->handle < 0 || op->handle >= p->plan->next_handle)
                    return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0, "bad handle %d",
                                   op->handle);
                r->handle_act[op->handle] = ai;
                r->pc++;
                continue;
            }
            if (!p->acts[ai].done) {
                r->wait_act = ai;
                block(r, now);
            }
            break;
        case DT_OP_WAIT:
            if (op->handle < 0 || op->handle >= p->plan->next_handle ||
                r->handle_act[op->handle] < 0)
                return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0,
                               "rank %d waits for handle %d that was not started", rank,
                               op->handle);
            ai = r->handle_act[op->handle];
            if (!p->acts[ai].done) {
                r->wait_act = ai;
                block(r, now);
            }
            break;
        }
        if (rc)
            return rc;
        if (!r->blocked)
            r->pc++;
    }
    if (r->pc >= rp->n_ops && !r->blocked)
        p->res->rank[rank].end_s = dt_sim_now(p->sim);
    return DT_OK;
}

/* An activity finished: the rank waiting on it goes on. */
static int activity_progress(struct player *p, int ai)
{
    struct activity *a = &p->acts[ai];
    struct rankstate *r = &p->rs[a->rank];
    if (a->done && r->blocked && r->wait_act == ai) {
        char buf[128];
        const struct dt_op *op = &p->plan->ranks[a->rank].ops[r->pc];
        if (p->opt && p->opt->trace) /* names are formatted only for a trace */
            trace(p, a->rank, dt_op_name(p->plan, op, buf, sizeof buf), "comm", r->op_start,
                  dt_sim_now(p->sim));
        unblock(p, a->rank);
        r->pc++;
        return advance(p, a->rank);
    }
    return DT_OK;
}

static int on_flow(struct player *p, const struct dt_sim_completion *c)
{
    int act = (int)(c->tag & 0xffffffffu);
    struct flowrec fr = {act, c->src, c->dst, -1, -1, (int)(c->tag >> 32) - 1};
    if (fr.rcv_act < 0) { /* the key to look the receiver up by (else a line not read) */
        fr.group = p->acts[act].group;
        fr.seq = p->acts[act].seq;
    }
    const struct flowrec *f = &fr;
    if (p->opt && p->opt->trace && (traced(p, f->src) || traced(p, f->dst))) {
        /* one track per link the flow crossed */
        int route[DT_SIM_MAX_HOPS], hops = dt_simnet_route(&p->net, f->src, f->dst, route);
        char name[48];
        snprintf(name, sizeof name, "%d->%d", f->src, f->dst);
        for (int h = 0; h < hops; h++) {
            if (!p->link_seen[route[h]]) {
                p->link_seen[route[h]] = 1;
                fprintf(p->opt->trace, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", "
                                       "\"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"%s\"}}",
                        p->opt->trace_pid, LINK_TID + route[h], p->net.link_name[route[h]]);
            }
            trace(p, LINK_TID + route[h], name, "link", c->t_start, c->t_end);
        }
    }
    /* sender side: one transfer of its round done */
    int rc = DT_OK;
    if (--p->acts[f->act].outstanding == 0) {
        rc = finish_round(p, f->act);
        if (!rc)
            rc = activity_progress(p, f->act);
        if (rc)
            return rc;
    }
    /* receiver side: the posted receive of the same collective (or of the same source, tag
     * and place in their order: a SEND/RECV group names its source), or the mailbox */
    int ai = f->rcv_act;
    if (ai < 0) {
        const struct dt_match_entry *e = dt_match_find(&p->ix, f->dst, f->group, f->seq, -1);
        ai = e ? e->act : -1;
    }
    if (ai >= 0 && try_match(p, &p->acts[ai], f->src, c->t_start)) {
        if (p->acts[ai].outstanding == 0) {
            rc = finish_round(p, ai);
            if (!rc)
                rc = activity_progress(p, ai);
        }
        return rc;
    }
    return post_mail(p, f, ai, c->t_start);
}

static int on_compute(struct player *p, const struct dt_sim_completion *c)
{
    enum tag_kind k = (enum tag_kind)(c->tag >> 32);
    uint32_t idx = (uint32_t)(c->tag & 0xffffffffu);
    if (k == TAG_REDUCE) {
        struct activity *a = &p->acts[idx];
        struct rankstate *rr = &p->rs[a->rank];
        rr->compute_s += c->t_end - c->t_start;
        if (rr->blocked) /* compute, not the wait's communication */
            rr->blk_reduce += after(c->t_start, c->t_end, rr->block_t);
        if (p->opt && p->opt->trace)
            trace(p, a->rank, "sum", "compute", c->t_start, c->t_end);
        if (a->round >= a->n_rounds) {
            activity_done(a);
            return activity_progress(p, (int)idx);
        }
        int rc = post_round(p, (int)idx, dt_sim_now(p->sim));
        return rc ? rc : activity_progress(p, (int)idx);
    }
    int rank = (int)idx;
    struct rankstate *r = &p->rs[rank];
    const struct dt_op *op = &p->plan->ranks[rank].ops[r->pc];
    char buf[160];
    if (p->opt && p->opt->trace)
        trace(p, rank, dt_op_trace_name(p->plan, op, buf, sizeof buf), "compute", c->t_start,
              c->t_end);
    *(k == TAG_CLOSED ? &p->res->rank[rank].comm_s : &r->compute_s) +=
        c->t_end - c->t_start;
    /* time queued behind another collective's sums is theirs (compute, counted there); the
     * rest of the wait is communication */
    p->res->rank[rank].comm_s += fmax(0, c->t_start - r->block_t - r->blk_reduce);
    r->blocked = false;
    r->pc++;
    return advance(p, rank);
}

/* The error for a rank that never finished: its op, and for a WAIT the op it waits for. */
static int deadlock(struct player *p, int r)
{
    const struct dt_plan *plan = p->plan;
    const struct dt_op *op = &plan->ranks[r].ops[p->rs[r].pc];
    int ai = op->kind == DT_OP_WAIT ? p->rs[r].handle_act[op->handle] : -1;
    const struct dt_op *on = ai >= 0 ? &plan->ranks[r].ops[p->acts[ai].op] : op;
    char name[128], what[160] = "";
    if (on->kind == DT_OP_SEND || on->kind == DT_OP_RECV)
        snprintf(what, sizeof what, ", %s %s rank %d tag %d",
                 on != op ? "waiting for its" : "a", on->kind == DT_OP_SEND ? "send to" :
                 "receive from", on->peer, on->tag);
    return dt_fail(p->err, DT_EINTERNAL, NULL, 0, 0,
                   "deadlock: rank %d stopped at op %d of %d (%s%s) of the %s plan", r,
                   p->rs[r].pc, plan->ranks[r].n_ops, dt_op_name(plan, op, name, sizeof name),
                   what, dt_strategy_name(plan->strategy));
}

int dt_sim_run(const struct dt_plan *plan, const struct dt_cost_params *cp,
               const struct dt_sim_options *opt, struct dt_sim_result *res, struct dt_error *err)
{
    memset(res, 0, sizeof *res);
    struct player p = {.plan = plan, .cp = cp, .opt = opt, .res = res, .err = err,
                       .mail_free = -1, .eager = opt && opt->eager};
    dt_schedule_init(&p.ring_round);
    int n = plan->n_ranks, rc = dt_sim_create(&p.sim, err);
    if (rc)
        return rc;
    res->n_ranks = n;
    res->rank = calloc((size_t)n, sizeof *res->rank);
    p.rs = aligned_alloc(64, (size_t)n * sizeof *p.rs);
    if (p.rs)
        memset(p.rs, 0, (size_t)n * sizeof *p.rs);
    if (!res->rank || !p.rs) {
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        goto done;
    }
    rc = dt_simnet_build(&p.net, p.sim, plan->topo, n, cp, err);
    if (!rc && !(p.link_seen = calloc((size_t)p.net.n_links + 1, 1)))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    if (!rc && !(p.cpr = dt_cost_rank_params(cp, opt ? opt->group_cp : NULL, plan->topo, n)))
        rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    for (int r = 0; r < n && !rc; r++) {
        int dev;
        rc = dt_sim_add_device(p.sim, &dev, err);
        p.rs[r].handle_act = malloc((size_t)(plan->next_handle + 1) * sizeof(int));
        p.rs[r].wait_act = -1;
        if (!rc && !p.rs[r].handle_act)
            rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
        for (int h = 0; !rc && h <= plan->next_handle; h++)
            p.rs[r].handle_act[h] = -1;
    }
    if (!rc && opt && opt->trace) {
        fprintf(opt->trace, ",\n{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": %d, "
                            "\"args\": {\"name\": \"%s\"}}",
                opt->trace_pid, opt->trace_name ? opt->trace_name : "plan");
        for (int r = 0; r < n; r++)
            if (traced(&p, r))
                fprintf(opt->trace, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", "
                                    "\"pid\": %d, \"tid\": %d, \"args\": {\"name\": \"rank %d\"}}",
                        opt->trace_pid, r, r);
    }
    /* Every rank starts with the per-iteration framework overhead (its ZERO op clears the
     * gradients). */
    for (int r = 0; r < n && !rc; r++) {
        if (opt && opt->played && !opt->played[r])
            continue;
        p.rs[r].blocked = true;
        p.rs[r].pc = -1;
        rc = dt_sim_timer(p.sim, p.cpr[r].iter_overhead_s, (uint64_t)r, err);
    }
    struct dt_sim_completion c;
    while (!rc && (rc = dt_sim_next(p.sim, &c, err)) == DT_OK && c.kind != DT_SIM_END) {
        if (c.kind == DT_SIM_TIMER && c.tag >> 32 == TAG_CLOSED) {
            activity_done(&p.acts[c.tag & 0xffffffffu]);
            rc = activity_progress(&p, (int)(c.tag & 0xffffffffu));
        } else if (c.kind == DT_SIM_TIMER) {
            int r = (int)c.tag;
            p.rs[r].compute_s += c.t_end - c.t_start;
            p.rs[r].blocked = false;
            p.rs[r].pc = 0;
            rc = advance(&p, r);
        } else if (c.kind == DT_SIM_FLOW) {
            rc = on_flow(&p, &c);
        } else {
            rc = on_compute(&p, &c);
        }
    }
    for (int r = 0; r < n && !rc; r++) {
        if (p.rs[r].pc < plan->ranks[r].n_ops && !(opt && opt->played && !opt->played[r]))
            rc = deadlock(&p, r);
        if (res->rank[r].end_s > res->iter_s)
            res->iter_s = res->rank[r].end_s;
    }
    /* Ranks that finish early wait for the slowest: idle until the iteration ends. Their
     * bytes are the engine's endpoint counts (ranks are the endpoints): the same sums in the
     * same order, kept apart from the rank's other figures, a line away, once per flow. */
    for (int r = 0; r < n && !rc; r++) {
        res->rank[r].compute_s = p.rs[r].compute_s;
        res->rank[r].idle_s += res->iter_s - res->rank[r].end_s;
        res->rank[r].bytes_sent = dt_sim_endpoint_sent(p.sim, r);
        res->rank[r].bytes_recv = dt_sim_endpoint_received(p.sim, r);
    }
    if (!rc && opt && opt->on_links)
        rc = opt->on_links(opt->links_ctx, p.sim, &p.net, res->iter_s, err);
    if (!rc && opt && opt->trace) {
        for (int l = 0; l < p.net.n_links; l++) {
            struct dt_sim_link_stats ls;
            dt_sim_link_stats(p.sim, l, &ls);
            res->bytes_on_links += ls.bytes;
        }
    }
    struct dt_sim_counters cnt;
    dt_sim_get_counters(p.sim, &cnt);
    res->events = (long)cnt.events;
    res->flows = (long)cnt.flows_started;
done:
    for (int a = 0; a < p.n_acts; a++)
        drop_schedule(&p.acts[a]);
    free(p.acts);
    free(p.mail);
    dt_match_free(&p.ix);
    dt_schedule_free(&p.ring_round);
    free(p.link_seen);
    free(p.cpr);
    if (p.rs)
        for (int r = 0; r < n; r++) {
            free(p.rs[r].handle_act);
        }
    free(p.rs);
    dt_simnet_free(&p.net);
    dt_sim_destroy(p.sim);
    if (rc)
        dt_sim_result_free(res);
    return rc;
}

void dt_sim_result_free(struct dt_sim_result *res)
{
    free(res->rank);
    res->rank = NULL;
}
