/* The discrete-event core: order, relative scheduling, moves and cancels. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>

#include "eventq.h"

static struct dt_eventq *new_queue(void)
{
    struct dt_eventq *q = NULL;
    assert_int_equal(dt_eventq_create(&q, NULL), DT_OK);
    return q;
}

/* Ensure that events come out by time, whatever the order they were written in. */
static void test_order_by_time(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    /* times 3, 1, 2 written in that order: expected out 1, 2, 3 (data says which) */
    assert_int_equal(dt_eventq_schedule(q, 3.0, 0, 3, NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 1.0, 0, 1, NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 2.0, 0, 2, NULL, NULL), DT_OK);
    struct dt_event ev;
    for (uint32_t want = 1; want <= 3; want++) {
        assert_true(dt_eventq_pop(q, &ev));
        assert_int_equal(ev.data, want);
        assert_true(ev.t == (double)want);
        assert_true(dt_eventq_now(q) == (double)want);
    }
    assert_false(dt_eventq_pop(q, &ev));
    dt_eventq_destroy(q);
}

/* Ensure that simultaneous events come out in the order they were inserted. */
static void test_ties_by_insertion(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    /* 100 events at the same time, plus earlier and later ones interleaved: the ties must
     * keep their insertion order 0..99 (a heap alone does not: the sequence number does) */
    for (uint32_t i = 0; i < 100; i++) {
        assert_int_equal(dt_eventq_schedule(q, 5.0, 1, i, NULL, NULL), DT_OK);
        assert_int_equal(dt_eventq_schedule(q, (double)(i % 7), 2, i, NULL, NULL), DT_OK);
        assert_int_equal(dt_eventq_schedule(q, 6.0 + i, 3, i, NULL, NULL), DT_OK);
    }
    struct dt_event ev;
    uint32_t next = 0;
    double last_t = 0;
    uint64_t last_seq = 0;
    int n = 0;
    while (dt_eventq_pop(q, &ev)) {
        assert_true(ev.t >= last_t);
        if (ev.t == last_t && n > 0)
            assert_true(ev.seq > last_seq);
        last_t = ev.t;
        last_seq = ev.seq;
        if (ev.kind == 1)
            assert_int_equal(ev.data, next++);
        n++;
    }
    assert_int_equal(next, 100);
    assert_int_equal(n, 300);
    dt_eventq_destroy(q);
}

/* Ensure that an event in the past (negative offset) or at a non-finite offset is refused and
 * leaves the queue unchanged. */
static void test_refuses_past(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    struct dt_error err;
    assert_int_equal(dt_eventq_schedule(q, -1e-12, 0, 0, NULL, &err), DT_EINPUT);
    assert_int_equal(dt_eventq_schedule(q, NAN, 0, 0, NULL, &err), DT_EINPUT);
    assert_int_equal(dt_eventq_schedule(q, INFINITY, 0, 0, NULL, &err), DT_EINPUT);
    assert_int_equal(dt_eventq_size(q), 0);
    uint32_t id;
    assert_int_equal(dt_eventq_schedule(q, 1.0, 0, 0, &id, NULL), DT_OK);
    assert_int_equal(dt_eventq_reschedule(q, id, -0.5, &err), DT_EINPUT);
    double t;
    assert_true(dt_eventq_peek(q, &t));
    assert_true(t == 1.0);
    dt_eventq_destroy(q);
}

/* Ensure that offsets are relative to the current time. */
static void test_relative_to_now(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    struct dt_event ev;
    assert_int_equal(dt_eventq_schedule(q, 2.0, 0, 0, NULL, NULL), DT_OK);
    assert_true(dt_eventq_pop(q, &ev));
    /* now = 2; an offset of 0.5 lands at 2.5 */
    assert_int_equal(dt_eventq_schedule(q, 0.5, 0, 1, NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 0.0, 0, 2, NULL, NULL), DT_OK);
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 2);
    assert_true(ev.t == 2.0);
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 1);
    assert_true(ev.t == 2.5);
    dt_eventq_destroy(q);
}

/* Ensure that a moved event takes its new time and counts as written at the move (it goes
 * after an event already at that time), and that a cancelled one never comes out. */
static void test_reschedule_cancel(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    uint32_t a, b, c;
    assert_int_equal(dt_eventq_schedule(q, 1.0, 0, 'a', &a, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 4.0, 0, 'b', &b, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 3.0, 0, 'c', &c, NULL), DT_OK);
    assert_int_equal(dt_eventq_reschedule(q, a, 4.0, NULL), DT_OK); /* a: 1 -> 4, after b */
    assert_int_equal(dt_eventq_cancel(q, c, NULL), DT_OK);
    assert_int_equal(dt_eventq_cancel(q, c, NULL), DT_EINPUT);       /* no longer pending */
    struct dt_event ev;
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 'b');
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 'a');
    assert_true(ev.t == 4.0);
    assert_false(dt_eventq_pop(q, &ev));
    dt_eventq_destroy(q);
}

/* Pop one event from q and check it is the reference's next among the first `made`: the live
 * one of least (time, sequence), which is then marked gone. Returns its index. */
static int pop_reference_earliest(struct dt_eventq *q, int made, int *live, const double *t_of,
                                  const uint64_t *seq_of)
{
    int best = -1;
    for (int i = 0; i < made; i++)
        if (live[i] && (best < 0 || t_of[i] < t_of[best] ||
                        (t_of[i] == t_of[best] && seq_of[i] < seq_of[best])))
            best = i;
    struct dt_event ev;
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, (uint32_t)best);
    assert_true(ev.t == t_of[best]);
    live[best] = 0;
    return best;
}

/* Ensure that a random mix of schedules, moves, cancels and pops always pops what a plain
 * reference (a linear scan for the smallest (time, sequence)) says is next, and that a peek
 * between them sees the earliest time. Times are drawn from a few values so that many events
 * share a time, from many so that most do not, and a few ulps apart (the radix heap's deepest
 * bins). */
static void test_against_reference(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    enum { N = 3000 };
    static double t_of[N];
    static uint64_t seq_of[N];
    static uint32_t id_of[N];
    static int live[N];
    uint64_t x = 12345, seq = 0;
#define NEXT() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    int n_live = 0, made = 0;
    for (int round = 0; round < 20000; round++) {
        int op = (int)(NEXT() % 11);
        int kind = (int)(NEXT() % 3);
        double delay = kind == 0   ? (double)(NEXT() % 4)
                       : kind == 1 ? (double)(NEXT() % 100000) / 7.0
                                   : nextafter(1.0, 2.0) + (double)(NEXT() % 8) * 0x1p-52;
        if (op < 4 && made < N) { /* schedule */
            int i = made++;
            assert_int_equal(dt_eventq_schedule(q, delay, 0, (uint32_t)i, &id_of[i], NULL),
                             DT_OK);
            t_of[i] = dt_eventq_now(q) + delay;
            seq_of[i] = seq++;
            live[i] = 1;
            n_live++;
        } else if (op < 6 && n_live > 0) { /* move or cancel a live one */
            int i = (int)(NEXT() % (uint64_t)made);
            if (!live[i])
                continue;
            if (op == 4) {
                assert_int_equal(dt_eventq_reschedule(q, id_of[i], delay, NULL), DT_OK);
                t_of[i] = dt_eventq_now(q) + delay;
                seq_of[i] = seq++;
            } else {
                assert_int_equal(dt_eventq_cancel(q, id_of[i], NULL), DT_OK);
                live[i] = 0;
                n_live--;
            }
        } else if (op == 10) { /* peek: the earliest time, which the next pop must keep */
            double t = -1, want = INFINITY;
            for (int i = 0; i < made; i++)
                if (live[i] && t_of[i] < want)
                    want = t_of[i];
            assert_int_equal(dt_eventq_peek(q, &t), n_live > 0);
            if (n_live > 0)
                assert_true(t == want);
        } else if (n_live > 0) { /* pop and compare with the reference */
            pop_reference_earliest(q, made, live, t_of, seq_of);
            n_live--;
        }
        assert_int_equal(dt_eventq_size(q), (size_t)n_live);
    }
#undef NEXT
    dt_eventq_destroy(q);
}

/* Ensure that events written as a simulation writes them, at now plus one of a few recurring
 * delays (more of them than the queue has lanes, so that some go to the radix heap), come out
 * by (time, sequence) as the reference says: integer delays make many times equal across
 * lanes and the radix heap, where the earlier written must come first. */
static void test_streams_against_reference(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    enum { N = 6000 };
    static const double delay[] = {1, 2, 3, 5, 8, 13, 21};
    static double t_of[N];
    static uint64_t seq_of[N];
    static int live[N];
    uint64_t x = 777;
#define NEXT() (x = x * 6364136223846793005ULL + 1442695040888963407ULL, x >> 33)
    int n_live = 0, made = 0, ties = 0;
    while (made < N || n_live > 0) {
        for (int k = (int)(NEXT() % 3); k > 0 && made < N; k--) { /* write 0-2 events */
            int i = made++;
            double d = delay[NEXT() % (sizeof delay / sizeof *delay)];
            assert_int_equal(dt_eventq_schedule(q, d, 0, (uint32_t)i, NULL, NULL), DT_OK);
            t_of[i] = dt_eventq_now(q) + d;
            seq_of[i] = (uint64_t)i;
            live[i] = 1;
            n_live++;
        }
        if (n_live == 0)
            continue;
        int best = pop_reference_earliest(q, made, live, t_of, seq_of), also_then = 0;
        for (int i = 0; i < made; i++) /* live events at the popped one's time */
            also_then += live[i] && t_of[i] == t_of[best];
        ties += also_then > 0;
        n_live--;
    }
#undef NEXT
    assert_true(ties > 100); /* times shared by several events were many */
    dt_eventq_destroy(q);
}

/* Ensure that two buckets of one time come out in the order they were made when the later is
 * in another lane, or in a lane while the earlier is in the radix heap. The writes place them
 * so (sim/eventq.c: best fit, 4 lanes): 'a' behind 0.2 in a lane that then takes 6, 'b' in an
 * emptied lane; then 'c' in the radix heap as every lane's tail is later, 'd' in a lane
 * emptied after it. */
static void test_ties_across_lanes(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    uint32_t x, id10;
    assert_int_equal(dt_eventq_schedule(q, 0.5, 0, 'x', &x, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 0.2, 0, 'e', NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_cancel(q, x, NULL), DT_OK); /* its lane is empty again */
    assert_int_equal(dt_eventq_schedule(q, 5, 0, 'a', NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 6, 0, 'f', NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 5, 0, 'b', NULL, NULL), DT_OK);
    const double later[] = {13, 12, 11, 10}; /* one lane's tail each */
    for (int k = 0; k < 4; k++)
        assert_int_equal(dt_eventq_schedule(q, later[k], 0, 'g', k == 3 ? &id10 : NULL, NULL),
                         DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 7, 0, 'c', NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_cancel(q, id10, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 20, 0, 'g', NULL, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 7, 0, 'd', NULL, NULL), DT_OK);
    const char want[] = "eabfcd";
    struct dt_event ev;
    for (int k = 0; want[k]; k++) {
        assert_true(dt_eventq_pop(q, &ev));
        assert_int_equal(ev.data, want[k]);
    }
    dt_eventq_destroy(q);
}

/* Ensure that moving an event to the time it already has puts it behind the others there,
 * and that cancelling the only event of a time leaves the queue consistent. */
static void test_same_time_moves(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    uint32_t a, b, c;
    assert_int_equal(dt_eventq_schedule(q, 1.0, 0, 'a', &a, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 1.0, 0, 'b', &b, NULL), DT_OK);
    assert_int_equal(dt_eventq_schedule(q, 2.0, 0, 'c', &c, NULL), DT_OK);
    assert_int_equal(dt_eventq_reschedule(q, a, 1.0, NULL), DT_OK); /* a goes behind b */
    assert_int_equal(dt_eventq_reschedule(q, c, 2.0, NULL), DT_OK); /* alone: stays */
    assert_int_equal(dt_eventq_cancel(q, c, NULL), DT_OK);
    struct dt_event ev;
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 'b');
    assert_true(dt_eventq_pop(q, &ev));
    assert_int_equal(ev.data, 'a');
    assert_false(dt_eventq_pop(q, &ev));
    double t;
    assert_false(dt_eventq_peek(q, &t));
    dt_eventq_destroy(q);
}

/* Ensure that an event given new data keeps its time and place, and that only a pending one
 * can be given any. */
static void test_set_data(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    uint32_t id[3];
    for (int k = 0; k < 3; k++)
        assert_int_equal(dt_eventq_schedule(q, 1.0, 0, (uint32_t)('a' + k), &id[k], NULL), DT_OK);
    assert_int_equal(dt_eventq_set_data(q, id[1], 'x', NULL), DT_OK);
    const char want[] = "axc";
    struct dt_event ev;
    for (int k = 0; k < 3; k++) {
        assert_true(dt_eventq_pop(q, &ev));
        assert_int_equal(ev.data, want[k]);
        assert_true(ev.t == 1.0);
    }
    assert_int_equal(dt_eventq_set_data(q, id[1], 'y', NULL), DT_EINPUT);
    dt_eventq_destroy(q);
}

/* Ensure that a peek at the next event names the one the next pop removes (kind and data),
 * across ties, moves and cancels, and nothing once the queue is empty. */
static void test_peek_event_is_next_pop(void **state)
{
    (void)state;
    struct dt_eventq *q = new_queue();
    static const double t[6] = {1, 1, 1, 2, 2, 1}; /* buckets of several, a tie apart */
    uint32_t id[6];
    for (uint32_t k = 0; k < 6; k++)
        assert_int_equal(dt_eventq_schedule(q, t[k], (int)k + 10, k, &id[k], NULL), DT_OK);
    assert_int_equal(dt_eventq_reschedule(q, id[1], 3.0, NULL), DT_OK);
    assert_int_equal(dt_eventq_cancel(q, id[4], NULL), DT_OK);
    int kind;
    uint32_t data;
    struct dt_event ev;
    for (int n = 0; n < 5; n++) {
        assert_true(dt_eventq_peek_event(q, &kind, &data));
        assert_true(dt_eventq_pop(q, &ev));
        assert_int_equal(kind, ev.kind);
        assert_int_equal(data, ev.data);
    }
    assert_false(dt_eventq_peek_event(q, &kind, &data));
    dt_eventq_destroy(q);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_order_by_time),
        cmocka_unit_test(test_ties_by_insertion),
        cmocka_unit_test(test_refuses_past),
        cmocka_unit_test(test_relative_to_now),
        cmocka_unit_test(test_reschedule_cancel),
        cmocka_unit_test(test_against_reference),
        cmocka_unit_test(test_streams_against_reference),
        cmocka_unit_test(test_ties_across_lanes),
        cmocka_unit_test(test_same_time_moves),
        cmocka_unit_test(test_set_data),
        cmocka_unit_test(test_peek_event_is_next_pop),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
