/* Threads of the CPU backend (layers.h, parallel.h): the thread count, which is OpenBLAS's,
 * and the pool that runs the kernels' parallel tasks.
 *
 * The pool: workers 1..T-1 are started on first use and kept. A run publishes its job under
 * the mutex with a new generation number; workers spin a little on the generation (jobs come
 * every fraction of a millisecond within a training step), then sleep on a condition
 * variable. Tasks are claimed one at a time under the mutex (tasks are whole blocks of work,
 * so the lock is cheap), which also makes a late worker harmless: it can only claim tasks of
 * the job whose generation it saw, and only while that job has tasks left. The caller takes
 * tasks too, then waits for the ones still running. OpenBLAS is set to one thread for the
 * run (tasks call it side by side; its own pool would fight this one for the cores), which
 * also makes dtk_num_threads() 1 inside tasks, and set back after. */
#include "layers.h"

#include <cblas.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "parallel.h"

/* Workers at most (a thread count above it is clamped). */
#define MAX_THREADS 64
/* Generation polls before a worker sleeps: about 50 us of spinning. */
#define SPIN_POLLS 2000

void dtk_set_num_threads(int n)
{
    openblas_set_num_threads(n < 1 ? 1 : n);
}

int dtk_num_threads(void)
{
    int n = openblas_get_num_threads();
    return n < 1 ? 1 : n > MAX_THREADS ? MAX_THREADS : n;
}

struct pool {
    pthread_mutex_t mu;
    pthread_cond_t wake;     /* a new job (or more workers) */
    pthread_cond_t finished; /* the last task of a job ended */
    int started;             /* workers running: ids 1..started */
    _Atomic unsigned gen;    /* generation of the current job */
    /* the job, under mu */
    dtk_task_fn fn;
    void *ctx;
    long n, next;
    _Atomic long done;       /* written under mu, read without it while the caller spins */
    int threads;             /* ids below it take tasks */
    unsigned first_seen[MAX_THREADS]; /* the generation a starting worker has seen */
};

static struct pool pool = {.mu = PTHREAD_MUTEX_INITIALIZER,
                           .wake = PTHREAD_COND_INITIALIZER,
                           .finished = PTHREAD_COND_INITIALIZER};

/* Set on pool threads while they run a task: a nested run is then done in place. */
static _Thread_local bool in_task;

bool dtk_in_task(void)
{
    return in_task;
}

static void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#endif
}

/* Runs tasks of generation gen as thread t until none is left. */
static void take_tasks(unsigned gen, int t)
{
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.gen) == gen && t < pool.threads && pool.next < pool.n) {
        long i = pool.next++;
        dtk_task_fn fn = pool.fn;
        void *ctx = pool.ctx;
        pthread_mutex_unlock(&pool.mu);
        in_task = true;
        fn(ctx, i, t);
        in_task = false;
        pthread_mutex_lock(&pool.mu);
        if (atomic_fetch_add(&pool.done, 1) + 1 == pool.n)
            pthread_cond_signal(&pool.finished);
    }
    pthread_mutex_unlock(&pool.mu);
}

static void *worker(void *arg)
{
    int id = (int)(intptr_t)arg;
    unsigned seen = pool.first_seen[id]; /* written before pthread_create */
    for (;;) {
        unsigned g = atomic_load(&pool.gen);
        for (int k = 0; k < SPIN_POLLS && g == seen; k++) {
            cpu_relax();
            g = atomic_load(&pool.gen);
        }
        if (g == seen) {
            pthread_mutex_lock(&pool.mu);
            while ((g = atomic_load(&pool.gen)) == seen)
                pthread_cond_wait(&pool.wake, &pool.mu);
            pthread_mutex_unlock(&pool.mu);
        }
        seen = g;
        take_tasks(g, id);
    }
    return NULL;
}

/* Starts workers up to id threads - 1 (under mu); returns the threads available. */
static int start_workers(int threads)
{
    while (pool.started < threads - 1) {
        pool.first_seen[pool.started + 1] = atomic_load(&pool.gen);
        pthread_t tid;
        pthread_attr_t attr;
        pthread_attr_init(&attr);
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        int rc = pthread_create(&tid, &attr, worker, (void *)(intptr_t)(pool.started + 1));
        pthread_attr_destroy(&attr);
        if (rc)
            break;
        pool.started++;
    }
    return pool.started + 1;
}

/* One caller at a time (the kernels run from one thread). */
void dtk_parallel(long n, int threads, dtk_task_fn fn, void *ctx)
{
    if (threads > MAX_THREADS)
        threads = MAX_THREADS;
    if (threads > n)
        threads = (int)n;
    if (threads < 2 || in_task) {
        for (long i = 0; i < n; i++)
            fn(ctx, i, 0);
        return;
    }
    const int blas = openblas_get_num_threads();
    if (blas != 1)
        openblas_set_num_threads(1);
    pthread_mutex_lock(&pool.mu);
    int avail = start_workers(threads);
    pool.fn = fn;
    pool.ctx = ctx;
    pool.n = n;
    pool.next = 0;
    atomic_store(&pool.done, 0);
    pool.threads = avail < threads ? avail : threads;
    unsigned gen = atomic_load(&pool.gen) + 1;
    atomic_store(&pool.gen, gen);
    pthread_cond_broadcast(&pool.wake);
    pthread_mutex_unlock(&pool.mu);

    take_tasks(gen, 0);
    /* the others' last tasks: spin briefly, then sleep */
    for (int k = 0; k < SPIN_POLLS && atomic_load(&pool.done) < n; k++)
        cpu_relax();
    pthread_mutex_lock(&pool.mu);
    while (atomic_load(&pool.done) < n)
        pthread_cond_wait(&pool.finished, &pool.mu);
    pthread_mutex_unlock(&pool.mu);
    if (blas != 1)
        openblas_set_num_threads(blas);
}

struct range_job {
    dtk_range_fn fn;
    void *ctx;
    long n, part;
};

static void range_task(void *ctx, long i, int t)
{
    const struct range_job *r = ctx;
    (void)t;
    long lo = i * r->part, hi = lo + r->part < r->n ? lo + r->part : r->n;
    r->fn(r->ctx, lo, hi);
}

void dtk_parallel_range(long n, long min, dtk_range_fn fn, void *ctx)
{
    int T = dtk_num_threads();
    if (T < 2 || n < min || n < 32 || in_task) {
        fn(ctx, 0, n);
        return;
    }
    struct range_job r = {fn, ctx, n, ((n + T - 1) / T + 15) / 16 * 16};
    dtk_parallel((n + r.part - 1) / r.part, T, range_task, &r);
}
