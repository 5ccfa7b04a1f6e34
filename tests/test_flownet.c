/* The engine's network and devices: finish times derived by hand for small systems. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "engine.h"

#define REL_TOL 1e-9 /* finish times are a few sums and quotients of doubles */

static void assert_close(double got, double want)
{
    double tol = REL_TOL * fabs(want);
    if (!(fabs(got - want) <= tol))
        fail_msg("got %.17g, want %.17g (relative tolerance %g)", got, want, REL_TOL);
}

enum { MAXC = 64 };
struct run {
    int n;
    struct dt_sim_completion c[MAXC];
};

/* Pulls every completion (the caller reacts to none). */
static void drain(struct dt_sim *sim, struct run *r)
{
    struct dt_sim_completion c;
    r->n = 0;
    for (;;) {
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
        if (c.kind == DT_SIM_END)
            break;
        assert_true(r->n < MAXC);
        r->c[r->n++] = c;
    }
}

/* The completion with this tag. */
static const struct dt_sim_completion *by_tag(const struct run *r, uint64_t tag)
{
    for (int i = 0; i < r->n; i++)
        if (r->c[i].tag == tag)
            return &r->c[i];
    fail_msg("no completion with tag %llu", (unsigned long long)tag);
    return NULL;
}

/* Steps the simulation until a completion of this kind (a timer, or the end). */
static void next_until(struct dt_sim *sim, enum dt_sim_kind kind)
{
    struct dt_sim_completion c;
    do
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
    while (c.kind != kind);
}

static struct dt_sim *new_sim(void)
{
    struct dt_sim *sim = NULL;
    assert_int_equal(dt_sim_create(&sim, NULL), DT_OK);
    return sim;
}

static int link(struct dt_sim *sim, double bw, double lat)
{
    int id;
    assert_int_equal(dt_sim_add_link(sim, bw, lat, &id, NULL), DT_OK);
    return id;
}

/* Ensure that two flows on one link get half its capacity each (exact finish times). */
static void test_two_flows_half_each(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int l = link(sim, 100, 0.5);
    /* 100 B each at 100/2 = 50 B/s after 0.5 s latency: 0.5 + 100/50 = 2.5 s. A third flow
     * alone on its own link of 100 B/s would take 0.5 + 1 s: sharing is what doubles it. */
    assert_int_equal(dt_sim_flow(sim, 100, &l, 1, 0, 1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 100, &l, 1, 0, 1, 2, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 2);
    assert_close(by_tag(&r, 1)->t_end, 2.5);
    assert_close(by_tag(&r, 2)->t_end, 2.5);
    dt_sim_destroy(sim);
}

/* Ensure that a flow over a fast and a slow link moves at the slow link's rate. */
static void test_fast_and_slow(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int route[2] = {link(sim, 1e9, 0), link(sim, 1e6, 0)};
    /* 1e6 B at min(1e9, 1e6) = 1e6 B/s: 1 s */
    assert_int_equal(dt_sim_flow(sim, 1e6, route, 2, -1, -1, 7, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 1);
    assert_close(r.c[0].t_end, 1.0);
    dt_sim_destroy(sim);
}

/* Ensure that the three-link, four-flow line network gets its max-min rates through the
 * engine, and that rates are re-solved when a flow ends. */
static void test_three_links_four_flows(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int L0 = link(sim, 1, 0), L1 = link(sim, 2, 0), L2 = link(sim, 3, 0);
    int all[3] = {L0, L1, L2};
    /* Rates (see test_maxmin): F0 = F1 = 1/2, F2 = 3/2, F3 = 5/2 B/s. Bytes chosen so that
     * F1, F2, F3 end at t = 2, 2, 2 (1, 3, 5 B) and F0 has 2 B: after t = 2, F0 is alone and
     * runs at min(1, 2, 3) = 1 B/s with 2 - 2 * 1/2 = 1 B left: it ends at t = 3. */
    assert_int_equal(dt_sim_flow(sim, 2, all, 3, -1, -1, 0, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 1, &L0, 1, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 3, &L1, 1, -1, -1, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 5, &L2, 1, -1, -1, 3, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 4);
    assert_close(by_tag(&r, 1)->t_end, 2.0);
    assert_close(by_tag(&r, 2)->t_end, 2.0);
    assert_close(by_tag(&r, 3)->t_end, 2.0);
    assert_close(by_tag(&r, 0)->t_end, 3.0);
    dt_sim_destroy(sim);
}

/* Ensure that a flow starting while another runs changes the first one's rate mid-flight. */
static void test_rate_change_mid_flight(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int l = link(sim, 100, 0);
    /* A: 300 B at t = 0, alone at 100 B/s until t = 1 (100 B moved, 200 left).
     * B: 100 B at t = 1; both at 50 B/s: B ends at 1 + 100/50 = 3, when A has 200 - 100 =
     * 100 left; A alone again at 100 B/s ends at 3 + 1 = 4. */
    assert_int_equal(dt_sim_flow(sim, 300, &l, 1, -1, -1, 'A', NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 1.0, 'T', NULL), DT_OK);
    struct dt_sim_completion c;
    assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
    assert_int_equal(c.kind, DT_SIM_TIMER);
    assert_close(c.t_end, 1.0);
    assert_int_equal(dt_sim_flow(sim, 100, &l, 1, -1, -1, 'B', NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 2);
    assert_int_equal(r.c[0].tag, 'B');
    assert_close(r.c[0].t_end, 3.0);
    assert_int_equal(r.c[1].tag, 'A');
    assert_close(r.c[1].t_end, 4.0);
    assert_close(r.c[1].t_start, 0.0);
    dt_sim_destroy(sim);
}

/* Ensure that every hop adds its latency once, before the transfer. */
static void test_latency_per_hop(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int route[3] = {link(sim, 1e6, 1e-3), link(sim, 1e6, 2e-3), link(sim, 1e6, 4e-3)};
    /* 1000 B over three hops of 1e6 B/s: latency 1 + 2 + 4 = 7 ms, transfer 1000/1e6 = 1 ms
     * (the hops are crossed by one fluid flow, not store-and-forward): 8 ms. A 0-byte flow
     * takes exactly the 7 ms of latency. */
    assert_int_equal(dt_sim_flow(sim, 1000, route, 3, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 0, route, 3, -1, -1, 2, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 2);
    assert_close(by_tag(&r, 1)->t_end, 8e-3);
    assert_close(by_tag(&r, 2)->t_end, 7e-3);
    dt_sim_destroy(sim);
}

/* Ensure that a flow over a route checked once (dt_sim_route_check, dt_sim_flow_route) ends
 * exactly when the same flow given its links ends, and that a bad or too long route is refused. */
static void test_checked_route(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int route[3] = {link(sim, 1e6, 1e-3), link(sim, INFINITY, 2e-3), link(sim, 2e6, 4e-3)};
    struct dt_sim_route kept;
    assert_int_equal(dt_sim_route_check(sim, route, 3, &kept, NULL), DT_OK);
    assert_int_equal(kept.n_hops, 3);
    assert_int_equal(kept.n_shared, 2);
    assert_close(kept.lat_s, 7e-3);
    /* one after the other on the same links: 7 ms latency + 1 ms at the slowest 1e6 B/s */
    assert_int_equal(dt_sim_flow_route(sim, 0, 1000, &kept, 0, 1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow_at(sim, 1, 1000, route, 3, 0, 1, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_flow_route(sim, 2, 1000, &kept, 0, 1, 3, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 3);
    assert_close(by_tag(&r, 1)->t_end, 8e-3);
    assert_close(by_tag(&r, 2)->t_end, 1.008);
    assert_close(by_tag(&r, 3)->t_end, 2.008);
    assert_close(dt_sim_endpoint_sent(sim, 0), 3000);
    int bad[2] = {route[0], 99};
    assert_int_equal(dt_sim_route_check(sim, bad, 2, &kept, NULL), DT_EINPUT);
    int longer[DT_SIM_ROUTE_KEPT + 1];
    for (int h = 0; h <= DT_SIM_ROUTE_KEPT; h++)
        longer[h] = route[0];
    assert_int_equal(dt_sim_route_check(sim, longer, DT_SIM_ROUTE_KEPT + 1, &kept, NULL),
                     DT_EINPUT);
    dt_sim_destroy(sim);
}

/* Ensure that the two directions of a full-duplex wire do not share capacity. */
static void test_full_duplex(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int ab = link(sim, 100, 0), ba = link(sim, 100, 0);
    /* 100 B each way at the full 100 B/s: both end at 1 s (2 s if they shared one link) */
    assert_int_equal(dt_sim_flow(sim, 100, &ab, 1, 0, 1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 100, &ba, 1, 1, 0, 2, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_close(by_tag(&r, 1)->t_end, 1.0);
    assert_close(by_tag(&r, 2)->t_end, 1.0);
    dt_sim_destroy(sim);
}

/* Ensure that simultaneous completions come out in the order their work was started. */
static void test_simultaneous_by_insertion(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int d0, d1;
    assert_int_equal(dt_sim_add_device(sim, &d0, NULL), DT_OK);
    assert_int_equal(dt_sim_add_device(sim, &d1, NULL), DT_OK);
    /* five things all ending at t = 1, written in the order of their tags */
    assert_int_equal(dt_sim_timer(sim, 1.0, 10, NULL), DT_OK);
    assert_int_equal(dt_sim_compute(sim, d1, 1.0, 11, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 1.0, 12, NULL), DT_OK);
    assert_int_equal(dt_sim_compute(sim, d0, 1.0, 13, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 1.0, 14, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 5);
    for (int i = 0; i < 5; i++) {
        assert_int_equal(r.c[i].tag, 10 + i);
        assert_true(r.c[i].t_end == 1.0);
    }
    dt_sim_destroy(sim);
}

/* Ensure that the ops of one device run one after another and different devices overlap. */
static void test_devices_serial(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int d0, d1;
    assert_int_equal(dt_sim_add_device(sim, &d0, NULL), DT_OK);
    assert_int_equal(dt_sim_add_device(sim, &d1, NULL), DT_OK);
    /* d0: 2 s then 3 s -> ends at 2 and 5 (the second starts at 2); d1: 3 s -> ends at 3 */
    assert_int_equal(dt_sim_compute(sim, d0, 2.0, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_compute(sim, d0, 3.0, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_compute(sim, d1, 3.0, 3, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 3);
    assert_close(by_tag(&r, 1)->t_end, 2.0);
    assert_close(by_tag(&r, 2)->t_start, 2.0);
    assert_close(by_tag(&r, 2)->t_end, 5.0);
    assert_close(by_tag(&r, 3)->t_end, 3.0);
    assert_close(dt_sim_device_busy(sim, d0), 5.0);
    assert_close(dt_sim_device_busy(sim, d1), 3.0);
    dt_sim_destroy(sim);
}

/* Ensure that an event in the past (negative offset or duration) is refused. */
static void test_refuses_past(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int d, l = link(sim, 1, 0);
    assert_int_equal(dt_sim_add_device(sim, &d, NULL), DT_OK);
    struct dt_error err;
    assert_int_equal(dt_sim_timer(sim, -1.0, 0, &err), DT_EINPUT);
    assert_int_equal(dt_sim_compute(sim, d, -1e-9, 0, &err), DT_EINPUT);
    assert_int_equal(dt_sim_flow(sim, -5, &l, 1, -1, -1, 0, &err), DT_EINPUT);
    assert_int_equal(dt_sim_add_link(sim, 1, -1e-6, NULL, &err), DT_EINPUT);
    int bad = 99;
    assert_int_equal(dt_sim_flow(sim, 5, &bad, 1, -1, -1, 0, &err), DT_EINPUT);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 0); /* nothing was scheduled */
    dt_sim_destroy(sim);
}

/* Ensure that a compute charged without an event and a flow sent at its end (what the player
 * does for a sum folded into the next round) give the completions, device time and counters
 * of the compute's event followed by the flow sent at that event, bit for bit; and that a
 * flow sent in the past is refused. */
static void test_silent_compute_then_flow(void **state)
{
    (void)state;
    struct dt_sim_completion fl[2] = {{0}}, sum = {0}; /* the flow's completion per run */
    double busy[2], t_start = 0, t_end = 0;
    struct dt_sim_counters k[2];
    for (int silent = 0; silent < 2; silent++) {
        struct dt_sim *sim = new_sim();
        int d, l = link(sim, 3e9, 1.7e-6);
        assert_int_equal(dt_sim_add_device(sim, &d, NULL), DT_OK);
        /* the device is busy until 0.25 s: the sum starts then, ends 0.1 s later */
        assert_int_equal(dt_sim_compute(sim, d, 0.25, 7, NULL), DT_OK);
        assert_int_equal(dt_sim_timer(sim, 0.05, 8, NULL), DT_OK);
        struct dt_sim_completion c;
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK); /* the timer: now 0.05 */
        assert_int_equal(c.kind, DT_SIM_TIMER);
        if (silent) {
            assert_int_equal(dt_sim_compute_silent(sim, d, 0.1, &t_start, &t_end, NULL), DT_OK);
            assert_int_equal(dt_sim_flow_at(sim, t_end, 1e6, &l, 1, 0, 1, 9, NULL), DT_OK);
            struct dt_error err;
            assert_int_equal(dt_sim_flow_at(sim, 0.01, 1e6, &l, 1, 0, 1, 9, &err), DT_EINPUT);
            while (dt_sim_next(sim, &c, NULL) == DT_OK && c.kind != DT_SIM_END)
                if (c.tag == 9)
                    fl[1] = c;
        } else {
            assert_int_equal(dt_sim_compute(sim, d, 0.1, 10, NULL), DT_OK);
            while (dt_sim_next(sim, &c, NULL) == DT_OK && c.kind != DT_SIM_END) {
                if (c.tag == 10) {
                    sum = c;
                    assert_int_equal(dt_sim_flow(sim, 1e6, &l, 1, 0, 1, 9, NULL), DT_OK);
                }
                if (c.tag == 9)
                    fl[0] = c;
            }
        }
        busy[silent] = dt_sim_device_busy(sim, d);
        dt_sim_get_counters(sim, &k[silent]);
        dt_sim_destroy(sim);
    }
    assert_true(fl[0].tag == 9 && fl[1].tag == 9);
    assert_true(t_start == 0.25 && t_start == sum.t_start && t_end == sum.t_end);
    assert_true(fl[0].t_start == sum.t_end && fl[1].t_start == fl[0].t_start);
    assert_true(fl[1].t_end == fl[0].t_end && fl[1].bytes == fl[0].bytes);
    assert_close(fl[0].t_end, 0.35 + 1.7e-6 + 1e6 / 3e9);
    assert_true(busy[0] == busy[1]);
    assert_int_equal(k[0].events, k[1].events);
    assert_int_equal(k[0].computes, k[1].computes);
}

/* Ensure that bytes are conserved: per endpoint sent == received once all is delivered, and
 * every link carried exactly the bytes of the flows that crossed it, although rates changed
 * many times on the way. */
static void test_conservation(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    enum { NL = 6, NF = 40 };
    int l[NL];
    for (int i = 0; i < NL; i++)
        l[i] = link(sim, 10.0 * (i + 1), 1e-3 * i);
    double want[NL] = {0}, total = 0;
    uint64_t x = 7;
#define NEXT() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    for (int f = 0; f < NF; f++) {
        int route[3], hops = 1 + (int)(NEXT() % 3);
        for (int h = 0; h < hops; h++) {
            route[h] = l[NEXT() % NL];
        }
        double bytes = 1.0 + (double)(NEXT() % 500);
        int src = (int)(NEXT() % 4), dst = (int)(NEXT() % 4);
        assert_int_equal(dt_sim_flow(sim, bytes, route, hops, src, dst, (uint64_t)f, NULL),
                         DT_OK);
        for (int h = 0; h < hops; h++)
            want[route[h]] += bytes; /* the expected value: sum of bytes crossing each link */
        total += bytes;
        if (f % 5 == 4) { /* stagger: run a little before the next batch */
            struct dt_sim_completion c;
            assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
        }
    }
#undef NEXT
    next_until(sim, DT_SIM_END);
    double sent = 0, recvd = 0;
    for (int e = 0; e < dt_sim_n_endpoints(sim); e++) {
        sent += dt_sim_endpoint_sent(sim, e);
        recvd += dt_sim_endpoint_received(sim, e);
    }
    assert_close(sent, total);
    assert_close(recvd, total);
    for (int i = 0; i < NL; i++) {
        struct dt_sim_link_stats st;
        dt_sim_link_stats(sim, l[i], &st);
        assert_close(st.bytes, want[i]);
    }
    struct dt_sim_counters k;
    dt_sim_get_counters(sim, &k);
    assert_int_equal(k.flows_started, NF);
    assert_int_equal(k.flows_done, NF);
    assert_int_equal(dt_sim_active_flows(sim), 0);
    dt_sim_destroy(sim);
}

/* Ensure that a link's busy time counts only time with a flow in transfer, and its bytes are
 * exact for flows still in flight. */
static void test_link_stats(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int l = link(sim, 100, 0);
    /* 100 B at 100 B/s: busy [0, 1]; idle until the timer at 3; then 50 B: busy [3, 3.5].
     * Busy 1.5 s, 150 B. Half-way through the second (t = 3.25) it has carried 125 B. */
    assert_int_equal(dt_sim_flow(sim, 100, &l, 1, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 3.0, 2, NULL), DT_OK);
    next_until(sim, DT_SIM_TIMER);
    assert_int_equal(dt_sim_flow(sim, 50, &l, 1, -1, -1, 3, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 0.25, 4, NULL), DT_OK);
    struct dt_sim_completion c;
    assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
    assert_int_equal(c.tag, 4);
    struct dt_sim_link_stats st;
    dt_sim_link_stats(sim, l, &st);
    assert_close(st.bytes, 125);
    assert_close(st.busy_s, 1.25);
    next_until(sim, DT_SIM_END);
    dt_sim_link_stats(sim, l, &st);
    assert_close(st.bytes, 150);
    assert_close(st.busy_s, 1.5);
    assert_int_equal(st.max_flows, 1);
    dt_sim_destroy(sim);
}

/* Ensure that an unshared (infinite) link adds latency but takes no part in sharing. */
static void test_unshared_link(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int sw = link(sim, INFINITY, 1.0);
    int a = link(sim, 10, 0), b = link(sim, 10, 0);
    int ra[2] = {a, sw}, rb[2] = {b, sw};
    /* two flows through one non-blocking switch, each on its own 10 B/s port: 10 B each at
     * 10 B/s after 1 s: both end at 2 s (3 s if the switch were a shared 10 B/s link) */
    assert_int_equal(dt_sim_flow(sim, 10, ra, 2, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 10, rb, 2, -1, -1, 2, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_close(by_tag(&r, 1)->t_end, 2.0);
    assert_close(by_tag(&r, 2)->t_end, 2.0);
    struct dt_sim_link_stats st;
    dt_sim_link_stats(sim, sw, &st);
    assert_close(st.bytes, 20);
    dt_sim_destroy(sim);
}

/* Ensure that an unshared link's statistics count the flows in transfer on it mid-way (it
 * keeps no list of them): bytes moved so far, once per crossing, busy time and most flows. */
static void test_unshared_link_mid_flight(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int sw = link(sim, INFINITY, 0);
    int a = link(sim, 10, 0), b = link(sim, 20, 0);
    int ra[2] = {a, sw}, rb[3] = {sw, b, sw}; /* the second crosses the switch twice */
    assert_int_equal(dt_sim_flow(sim, 100, ra, 2, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 100, rb, 3, -1, -1, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 2.0, 3, NULL), DT_OK);
    next_until(sim, DT_SIM_TIMER);
    /* at 2 s: 20 B of the first, 40 B of the second counted twice */
    struct dt_sim_link_stats st;
    dt_sim_link_stats(sim, sw, &st);
    assert_close(st.bytes, 100);
    assert_close(st.busy_s, 2);
    assert_int_equal(st.max_flows, 3);
    next_until(sim, DT_SIM_END);
    dt_sim_link_stats(sim, sw, &st);
    assert_close(st.bytes, 300);
    assert_close(st.busy_s, 10); /* the first ends at 10 s, the second at 5 s */
    dt_sim_destroy(sim);
}

/* Ensure that starts at one timestamp are solved together, and that only the component a
 * change touches is solved again. */
static void test_batched_and_local_solves(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int x = link(sim, 1, 0), y = link(sim, 100, 0);
    /* 4 flows of 100 B start together on y (one solve for all four: they end together at
     * 4 s, leaving y empty, so no second solve); one flow of 10 B on x (its own component:
     * a second solve at t = 0, never touched again). 2 solves of 4 + 1 = 5 flows. */
    for (int i = 0; i < 4; i++)
        assert_int_equal(dt_sim_flow(sim, 100, &y, 1, -1, -1, (uint64_t)i, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 10, &x, 1, -1, -1, 9, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    struct dt_sim_counters k;
    dt_sim_get_counters(sim, &k);
    assert_int_equal(k.solves, 2);
    assert_int_equal(k.solved_flows, 5);
    for (int i = 0; i < 4; i++)
        assert_close(by_tag(&r, (uint64_t)i)->t_end, 4.0);
    assert_close(by_tag(&r, 9)->t_end, 10.0);
    dt_sim_destroy(sim);
}

/* Ensure that a route of DT_SIM_MAX_HOPS hops (past the hops a flow's record holds; the rest
 * lie in a side table) and a link crowded past the one flow its record holds share as a
 * single link would: nine flows on one link of 1e6 B/s, no latency, share it equally; each
 * end hands the rest more (processor sharing): sizes 1000 ... 4000 B end at 9, 9 + 8 = 17,
 * 24, 30 ms, the long flow's 4500 B at 30 + 5 x 0.5 = 32.5, then 5000 ... 8000 B at
 * 32.5 + 4 x 0.5 = 34.5, 37.5, 39.5, 40.5 ms. The first end moves the long flow (the list's
 * last) to the front: its position there must follow for its own end to find it. */
static void test_long_route_crowded_link(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int route[DT_SIM_MAX_HOPS];
    for (int h = 0; h < DT_SIM_MAX_HOPS; h++)
        route[h] = link(sim, 1e6, 0);
    int last = route[DT_SIM_MAX_HOPS - 1];
    for (int k = 1; k <= 8; k++)
        assert_int_equal(dt_sim_flow(sim, 1000.0 * k, &last, 1, -1, -1, (uint64_t)k, NULL),
                         DT_OK);
    assert_int_equal(dt_sim_flow(sim, 4500, route, DT_SIM_MAX_HOPS, -1, -1, 9, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 9);
    const double want_ms[9] = {9, 17, 24, 30, 34.5, 37.5, 39.5, 40.5, 32.5};
    for (int k = 1; k <= 9; k++)
        assert_close(by_tag(&r, (uint64_t)k)->t_end, want_ms[k - 1] * 1e-3);
    struct dt_sim_link_stats st;
    dt_sim_link_stats(sim, last, &st);
    assert_close(st.bytes, 36000 + 4500);
    assert_int_equal(st.max_flows, 9);
    dt_sim_link_stats(sim, route[0], &st);
    assert_close(st.bytes, 4500);
    dt_sim_destroy(sim);

    /* the latency of a long route is every hop's: 25 x 0.1 ms, then 1000 B at 1e6 B/s */
    sim = new_sim();
    for (int h = 0; h < DT_SIM_MAX_HOPS; h++)
        route[h] = link(sim, 1e6, 1e-4);
    assert_int_equal(dt_sim_flow(sim, 1000, route, DT_SIM_MAX_HOPS, -1, -1, 1, NULL), DT_OK);
    drain(sim, &r);
    assert_int_equal(r.n, 1);
    assert_close(r.c[0].t_end, DT_SIM_MAX_HOPS * 1e-4 + 1e-3);
    dt_sim_destroy(sim);
}

/* Ensure that a flow alone on one of its links but not on another (or on one link twice) is
 * solved with the flows it meets, not given its slowest link as a flow alone would be:
 * A over L0 (10 B/s) and L1 (2 B/s) with B on L1 only; A is alone on L0, which it marks
 * for the solve, yet shares L1 with B: 1 B/s each, so 3 B end at 3 s (alone on L1, A would
 * take 1.5 s and B would be left out of the solve). C crosses L2 (4 B/s) twice, its share
 * of it counted twice: 2 B/s, 10 B in 5 s. */
static void test_alone_on_one_link_only(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int L0 = link(sim, 10, 0), L1 = link(sim, 2, 0), L2 = link(sim, 4, 0);
    int a[2] = {L0, L1}, c[2] = {L2, L2};
    assert_int_equal(dt_sim_flow(sim, 3, a, 2, -1, -1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 3, &L1, 1, -1, -1, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 10, c, 2, -1, -1, 3, NULL), DT_OK);
    struct run r;
    drain(sim, &r);
    assert_int_equal(r.n, 3);
    assert_close(by_tag(&r, 1)->t_end, 3.0);
    assert_close(by_tag(&r, 2)->t_end, 3.0);
    assert_close(by_tag(&r, 3)->t_end, 5.0);
    dt_sim_destroy(sim);
}

/* Flows that share links (re-solved as they end), a compute and a timer: the scenario that
 * test_restart_as_new plays twice. */
static void play_shared_scenario(struct dt_sim *sim, const int *links, int dev, struct run *r)
{
    assert_int_equal(dt_sim_flow(sim, 2, links, 3, 0, 3, 0, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 1, &links[0], 1, 1, 2, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 3, &links[1], 1, 2, 1, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 5, &links[2], 1, 3, 0, 3, NULL), DT_OK);
    assert_int_equal(dt_sim_compute(sim, dev, 1.5, 4, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 0.25, 5, NULL), DT_OK);
    drain(sim, r);
}

/* Ensure that a restarted simulator is a new one with the same links: nothing left of the
 * last run (clock, counts, link and device use, endpoints), and the same run again gives the
 * same completions, in the same order, bit for bit. */
static void test_restart_as_new(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int links[3] = {link(sim, 1, 0.125), link(sim, 2, 0), link(sim, 3, 0.5)}, dev;
    assert_int_equal(dt_sim_add_device(sim, &dev, NULL), DT_OK);
    struct run first, again;
    struct dt_sim_counters k1, k2;
    play_shared_scenario(sim, links, dev, &first);
    dt_sim_get_counters(sim, &k1);
    assert_int_equal(dt_sim_restart(sim, NULL), DT_OK);
    assert_true(dt_sim_now(sim) == 0);
    dt_sim_get_counters(sim, &k2);
    assert_int_equal(k2.events + k2.flows_started + k2.solves + k2.max_active_flows, 0);
    assert_int_equal(dt_sim_n_endpoints(sim), 0);
    assert_true(dt_sim_device_busy(sim, dev) == 0);
    struct dt_sim_link_stats ls;
    dt_sim_link_stats(sim, links[0], &ls);
    assert_true(ls.bytes == 0 && ls.busy_s == 0 && ls.max_flows == 0);
    play_shared_scenario(sim, links, dev, &again);
    dt_sim_get_counters(sim, &k2);
    assert_int_equal(again.n, first.n);
    for (int i = 0; i < first.n; i++) {
        const struct dt_sim_completion *a = &again.c[i], *b = &first.c[i];
        assert_true(a->kind == b->kind && a->tag == b->tag && a->src == b->src &&
                    a->dst == b->dst && a->device == b->device);
        assert_true(a->t_start == b->t_start && a->t_end == b->t_end && a->bytes == b->bytes);
    }
    assert_memory_equal(&k2, &k1, sizeof k1);
    dt_sim_destroy(sim);
}

/* Three 100 B flows on their own links of 100 B/s from t = 0 end together at t = 1 (their
 * ends batched behind the first one's event); at t = 0.5 a fourth flow of 50 B joins the link
 * of flow `crowded` (0: the first, 1: the second) and halves its rate. Returns the
 * completions in order. */
static void play_batch_with_one_slowed(int crowded, struct run *r)
{
    struct dt_sim *sim = new_sim();
    int l[3] = {link(sim, 100, 0), link(sim, 100, 0), link(sim, 100, 0)};
    for (int k = 0; k < 3; k++)
        assert_int_equal(dt_sim_flow(sim, 100, &l[k], 1, 0, 1, (uint64_t)k, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 0.5, 9, NULL), DT_OK);
    struct dt_sim_completion c;
    r->n = 0;
    for (;;) {
        assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
        if (c.kind == DT_SIM_END)
            break;
        if (c.kind == DT_SIM_TIMER)
            assert_int_equal(dt_sim_flow(sim, 50, &l[crowded], 1, 0, 1, 3, NULL), DT_OK);
        assert_true(r->n < MAXC);
        r->c[r->n++] = c;
    }
    dt_sim_destroy(sim);
}

/* Ensure that an end batched with others that must move leaves its batch and the others end
 * as before, in order: the batch's first (whose queued event the others follow) and a later
 * one slowed in turn. */
static void test_batched_end_moves(void **state)
{
    (void)state;
    for (int crowded = 0; crowded < 2; crowded++) {
        struct run r;
        play_batch_with_one_slowed(crowded, &r);
        assert_int_equal(r.n, 5);
        assert_int_equal(r.c[0].tag, 9);
        /* the two not slowed at t = 1 in the order they started, the slowed one and the
         * newcomer (50 B/s each for their last 50 B) at 1.5 */
        uint64_t first = crowded == 0 ? 1 : 0;
        assert_int_equal(r.c[1].tag, first);
        assert_int_equal(r.c[2].tag, 2);
        assert_true(r.c[1].t_end == 1.0 && r.c[2].t_end == 1.0);
        for (int i = 3; i < 5; i++) {
            assert_true(r.c[i].tag == (uint64_t)crowded || r.c[i].tag == 3);
            assert_close(r.c[i].t_end, 1.5);
        }
    }
}

/* Ensure that an event written between two flow starts at the same time keeps them apart:
 * the first flow is moving when the timer between them fires, the second not yet. */
static void test_write_between_starts(void **state)
{
    (void)state;
    struct dt_sim *sim = new_sim();
    int a = link(sim, 100, 0.25), b = link(sim, 100, 0.25);
    assert_int_equal(dt_sim_flow(sim, 100, &a, 1, 0, 1, 1, NULL), DT_OK);
    assert_int_equal(dt_sim_timer(sim, 0.25, 2, NULL), DT_OK);
    assert_int_equal(dt_sim_flow(sim, 100, &b, 1, 0, 1, 3, NULL), DT_OK);
    struct dt_sim_completion c;
    assert_int_equal(dt_sim_next(sim, &c, NULL), DT_OK);
    assert_int_equal(c.kind, DT_SIM_TIMER);
    struct dt_sim_link_stats sa, sb;
    dt_sim_link_stats(sim, a, &sa);
    dt_sim_link_stats(sim, b, &sb);
    assert_int_equal(sa.max_flows, 1);
    assert_int_equal(sb.max_flows, 0);
    dt_sim_destroy(sim);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_two_flows_half_each),
        cmocka_unit_test(test_fast_and_slow),
        cmocka_unit_test(test_three_links_four_flows),
        cmocka_unit_test(test_rate_change_mid_flight),
        cmocka_unit_test(test_latency_per_hop),
        cmocka_unit_test(test_checked_route),
        cmocka_unit_test(test_full_duplex),
        cmocka_unit_test(test_simultaneous_by_insertion),
        cmocka_unit_test(test_devices_serial),
        cmocka_unit_test(test_refuses_past),
        cmocka_unit_test(test_silent_compute_then_flow),
        cmocka_unit_test(test_conservation),
        cmocka_unit_test(test_link_stats),
        cmocka_unit_test(test_unshared_link),
        cmocka_unit_test(test_unshared_link_mid_flight),
        cmocka_unit_test(test_batched_and_local_solves),
        cmocka_unit_test(test_long_route_crowded_link),
        cmocka_unit_test(test_alone_on_one_link_only),
        cmocka_unit_test(test_restart_as_new),
        cmocka_unit_test(test_batched_end_moves),
        cmocka_unit_test(test_write_between_starts),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
