/* Checkpoints of a dtexec run: see checkpoint.h. */
#include "checkpoint.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include "cpu/net.h"

#define MAGIC_RANK "DTCKPT2\n"    /* version 2: mixed precision (2-byte parameters, master
                                  * weights, the loss scaler, the skipped steps' count) */
#define MAGIC_RANK_V1 "DTCKPT1\n" /* float32 only: read as version 2 (its skipped field is 0) */
#define MAGIC_MANIFEST "DTCKMF1\n"
#define MAX_SAVED 16            /* saved buffers per rank */
#define STEP_DIGITS 12

/* The start of both files. */
struct head {
    char magic[8];
    uint32_t rank, n_ranks;     /* manifest: rank = n_ranks */
    int64_t step, epoch, iter;
    double loss_scale;          /* the loss scale (1.0 in float32; SCALER is what is loaded) */
    uint64_t rng[4];            /* unused, 0 (before counter-based dropout masks: the rank's
                                   dropout stream; the step now decides the masks) */
    double sums[DTX_CKPT_SUMS]; /* the rank's running sums (manifest: 0) */
    uint32_t n_entries;
    uint32_t skipped;           /* mixed precision: steps skipped on overflow (version 1: 0) */
    char identity[1024];
};
_Static_assert(sizeof(struct head) == 8 + 8 + 24 + 8 + 32 + 8 * DTX_CKPT_SUMS + 8 + 1024,
               "struct head has no padding");

struct buf_entry {              /* rank file: one saved buffer */
    uint32_t kind, dtype;
    int64_t elems;
};

struct rank_entry {             /* manifest: one rank's file */
    uint64_t bytes;
    uint32_t crc, ok;           /* ok: only while gathering */
};

/* The buffers this rank saves, in its table's order. */
struct saved {
    int n;
    struct buf_entry e[MAX_SAVED];
    void *p[MAX_SAVED];
};

/* Outcome of checking a step. */
enum { CK_OK, CK_SKIP, CK_REFUSE };

/* ---- names ---- */

static void step_path(char *buf, size_t len, const char *dir, long step, int rank)
{
    if (rank < 0)
        snprintf(buf, len, "%s/step-%0*ld.manifest", dir, STEP_DIGITS, step);
    else
        snprintf(buf, len, "%s/step-%0*ld.rank-%05d.ckpt", dir, STEP_DIGITS, step, rank);
}

/* The step of a file named "step-DIGITS" + suffix, or -1. */
static long name_step(const char *name, const char *suffix)
{
    if (strncmp(name, "step-", 5) != 0)
        return -1;
    size_t digits = strspn(name + 5, "0123456789");
    if (digits < STEP_DIGITS || digits > 18 || strcmp(name + 5 + digits, suffix) != 0)
        return -1;
    return strtol(name + 5, NULL, 10);
}

/* The step of one of this rank's files (manifests are rank 0's), or -1. */
static long own_file_step(const char *name, int rank)
{
    char suffix[64];
    for (int tmp = 0; tmp < 2; tmp++) {
        snprintf(suffix, sizeof suffix, ".rank-%05d.ckpt%s", rank, tmp ? ".tmp" : "");
        long s = name_step(name, suffix);
        if (s < 0 && rank == 0)
            s = name_step(name, tmp ? ".manifest.tmp" : ".manifest");
        if (s >= 0)
            return s;
    }
    return -1;
}

static int cmp_desc(const void *a, const void *b)
{
    long x = *(const long *)a, y = *(const long *)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* The steps that have a manifest in dir, newest first (*steps malloc'ed). */
static int list_steps(const char *flag, const char *dir, long **steps, int *n,
                      struct dt_error *err)
{
    *steps = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "%s %s: cannot read the directory: %s", flag,
                       dir, strerror(errno));
    int cap = 0, rc = DT_OK;
    struct dirent *de;
    while (!rc && (de = readdir(d))) {
        long s = name_step(de->d_name, ".manifest");
        if (s < 0)
            continue;
        if (*n == cap) {
            cap = cap ? 2 * cap : 16;
            long *grown = realloc(*steps, (size_t)cap * sizeof **steps);
            if (!grown) {
                rc = dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
                break;
            }
            *steps = grown;
        }
        (*steps)[(*n)++] = s;
    }
    closedir(d);
    if (*n > 1)
        qsort(*steps, (size_t)*n, sizeof **steps, cmp_desc);
    return rc;
}

/* ---- writing: NAME.tmp, fsync, rename, fsync the directory ---- */

struct writer {
    FILE *f;
    char path[PATH_MAX], tmp[PATH_MAX + 8];
    uLong crc;
    uint64_t bytes;
    int errnum;                 /* the first failure's errno */
};

static int w_open(struct writer *w, const char *path, struct dt_error *err)
{
    memset(w, 0, sizeof *w);
    snprintf(w->path, sizeof w->path, "%s", path);
    snprintf(w->tmp, sizeof w->tmp, "%s.tmp", path);
    w->crc = crc32_z(0, NULL, 0);
    if (!(w->f = fopen(w->tmp, "wb")))
        return dt_fail(err, DT_ESYS, w->tmp, 0, 0, "cannot write the checkpoint: %s",
                       strerror(errno));
    return DT_OK;
}

static void w_put(struct writer *w, const void *p, size_t n)
{
    if (n == 0 || w->errnum)
        return;
    if (fwrite(p, 1, n, w->f) != n)
        w->errnum = errno ? errno : EIO;
    w->crc = crc32_z(w->crc, p, n);
    w->bytes += n;
}

static int sync_dir(const char *file, struct dt_error *err)
{
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", file);
    char *slash = strrchr(dir, '/');
    if (slash)
        *slash = 0;
    int fd = open(slash ? dir : ".", O_RDONLY | O_DIRECTORY);
    int rc = fd >= 0 && fsync(fd) == 0 ? DT_OK : DT_ESYS;
    if (rc)
        dt_fail(err, DT_ESYS, dir, 0, 0, "cannot sync the directory: %s", strerror(errno));
    if (fd >= 0)
        close(fd);
    return rc;
}

/* Appends the CRC and puts the file in place; *crc and *bytes: the whole file's. */
static int w_commit(struct writer *w, uint32_t *crc, uint64_t *bytes, struct dt_error *err)
{
    uint32_t c = (uint32_t)w->crc;
    w_put(w, &c, sizeof c);
    if (!w->errnum && (fflush(w->f) != 0 || fsync(fileno(w->f)) != 0))
        w->errnum = errno;
    if (fclose(w->f) != 0 && !w->errnum)
        w->errnum = errno;
    if (!w->errnum && rename(w->tmp, w->path) != 0)
        w->errnum = errno;
    if (w->errnum) {
        unlink(w->tmp);
        return dt_fail(err, DT_ESYS, w->path, 0, 0, "cannot write the checkpoint: %s",
                       strerror(w->errnum));
    }
    *crc = c;
    *bytes = w->bytes;
    return sync_dir(w->path, err);
}

/* ---- reading: the CRC runs over every byte before the last four ---- */

struct reader {
    FILE *f;
    uLong crc;
    uint64_t left;              /* bytes before the trailer not read yet */
    uint64_t size;
};

static bool r_open(struct reader *r, const char *path, char *why, size_t len)
{
    struct stat st;
    memset(r, 0, sizeof *r);
    r->crc = crc32_z(0, NULL, 0);
    if (!(r->f = fopen(path, "rb")) || fstat(fileno(r->f), &st) != 0) {
        snprintf(why, len, "%s: cannot read: %s", path, strerror(errno));
        if (r->f)
            fclose(r->f);
        return false;
    }
    r->size = (uint64_t)st.st_size;
    r->left = r->size >= 4 ? r->size - 4 : 0;
    return true;
}

/* Reads n bytes into p (NULL: discards them); false past the trailer or on a short read. */
static bool r_get(struct reader *r, void *p, uint64_t n)
{
    unsigned char sink[16384];
    if (n > r->left)
        return false;
    while (n > 0) {
        size_t k = p ? (size_t)n : (size_t)(n < sizeof sink ? n : sizeof sink);
        unsigned char *dst = p ? p : sink;
        if (fread(dst, 1, k, r->f) != k)
            return false;
        r->crc = crc32_z(r->crc, dst, k);
        r->left -= k;
        n -= k;
        if (p)
            p = dst + k;
    }
    return true;
}

/* Reads what is left and the trailer: whether the file holds its CRC (*crc: the trailer). */
static bool r_close(struct reader *r, uint32_t *crc)
{
    uint32_t want = 0;
    bool ok = r->size >= 4 && r_get(r, NULL, r->left) && fread(&want, sizeof want, 1, r->f) == 1 &&
              want == (uint32_t)r->crc;
    fclose(r->f);
    *crc = want;
    return ok;
}

/* ---- this rank's state ---- */

/* What a resumed run needs to continue bit-identically: the weights (under mixed precision
 * the 2-byte ones and the float32 masters behind them: a ZeRO rank's masters are a shard, its
 * 2-byte parameters whole), the optimizer's moments, batchnorm's statistics, the loss scaler
 * (scale and clean-step counter). */
static bool saved_kind(enum dt_buf kind)
{
    return kind == DT_BUF_PARAMS || kind == DT_BUF_OPT || kind == DT_BUF_STATE ||
           kind == DT_BUF_MASTER || kind == DT_BUF_SCALER;
}

static uint64_t entry_bytes(const struct buf_entry *e)
{
    return (uint64_t)e->elems * dt_dtype_size((enum dt_dtype)e->dtype);
}

static int saved_buffers(struct dtx_ckpt *c, struct saved *s, struct dt_error *err)
{
    const struct dt_rank_plan *rp = &c->plan->ranks[c->rank];
    memset(s, 0, sizeof *s);
    bool seen[DT_BUF_COUNT] = {false};
    for (int i = 0; i < rp->n_bufs; i++) {
        const struct dt_buffer *b = &rp->bufs[i];
        if (!saved_kind(b->kind))
            continue;
        long elems;
        void *p = dtx_exec_buffer(c->ex, b->kind, &elems);
        enum dt_dtype held = dt_buf_dtype(c->plan->opt.precision, b->kind);
        if (seen[b->kind] || s->n == MAX_SAVED || b->dtype != held || (double)elems != b->elems)
            return dt_fail(err, DT_EINTERNAL, NULL, 0, 0, "rank %d: its %s buffer (%.0f %s "
                           "elements) is not the executor's one allocation of %ld %s",
                           c->rank, dt_buf_name(b->kind), b->elems, dt_dtype_name(b->dtype),
                           elems, dt_dtype_name(held));
        seen[b->kind] = true;
        s->e[s->n] = (struct buf_entry){b->kind, b->dtype, elems};
        s->p[s->n++] = p;
    }
    return DT_OK;
}

static void fill_head(const struct dtx_ckpt *c, struct head *h, const char *magic, int rank,
                      const struct dtx_ckpt_pos *pos, uint32_t n_entries)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, magic, sizeof h->magic);
    h->rank = (uint32_t)rank;
    h->n_ranks = (uint32_t)c->size;
    h->step = pos->step;
    h->epoch = pos->epoch;
    h->iter = pos->iter;
    long skipped;
    dtx_exec_scaler(c->ex, &h->loss_scale, &skipped);
    h->skipped = (uint32_t)skipped;
    h->n_entries = n_entries;
    snprintf(h->identity, sizeof h->identity, "%s", c->identity);
}

int dtx_ckpt_init(struct dtx_ckpt *c, const char *dir, const struct dt_plan *plan,
                  struct dtx_exec *ex, MPI_Comm comm, const char *run, const char *prog,
                  struct dt_error *err)
{
    memset(c, 0, sizeof *c);
    c->dir = dir;
    c->plan = plan;
    c->ex = ex;
    c->comm = comm;
    c->prog = prog;
    c->kept = -1;
    MPI_Comm_rank(comm, &c->rank);
    MPI_Comm_size(comm, &c->size);
    char parallel[512];
    dt_parallel_format(&plan->opt, parallel, sizeof parallel);
    snprintf(c->identity, sizeof c->identity,
             "model=%s params=%ld strategy=%s ranks=%d global-batch=%d scaling=%s bucket=%g "
             "%s%s%s", plan->model->name, plan->model->total_params,
             dt_strategy_name(plan->strategy), plan->n_ranks, plan->global_batch,
             plan->opt.scaling == DT_SCALING_WEAK ? "weak" : "strong", plan->opt.bucket_bytes,
             parallel, parallel[0] ? " " : "", run);
    if (c->rank == 0 && !(c->entries = calloc((size_t)c->size, sizeof(struct rank_entry))))
        return dt_fail(err, DT_ENOMEM, NULL, 0, 0, "out of memory");
    struct saved s;
    return saved_buffers(c, &s, err);
}

void dtx_ckpt_free(struct dtx_ckpt *c)
{
    free(c->entries);
    c->entries = NULL;
}

/* ---- --checkpoint DIR ---- */

static bool same_dir(const char *a, const char *b)
{
    struct stat sa, sb;
    return b && stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int dtx_ckpt_prepare(const char *dir, const char *resume_dir, int rank, struct dt_error *err)
{
    struct stat st;
    if (mkdir(dir, 0777) != 0 && errno != EEXIST)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--checkpoint %s: cannot create the "
                       "directory: %s", dir, strerror(errno));
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--checkpoint %s: not a directory", dir);
    char probe[PATH_MAX];
    snprintf(probe, sizeof probe, "%s/.probe.rank-%05d", dir, rank);
    int fd = open(probe, O_WRONLY | O_CREAT | O_TRUNC, 0666);
    if (fd < 0)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--checkpoint %s: cannot write in it: %s",
                       dir, strerror(errno));
    close(fd);
    unlink(probe);
    if (rank != 0 || same_dir(dir, resume_dir))
        return DT_OK;
    long *steps;
    int n;
    int rc = list_steps("--checkpoint", dir, &steps, &n, err);
    if (!rc && n > 0)
        rc = dt_fail(err, DT_EINPUT, NULL, 0, 0, "--checkpoint %s already holds checkpoints "
                     "(step %ld): continue them with --resume %s, or give an empty directory",
                     dir, steps[0], dir);
    free(steps);
    return rc;
}

/* ---- save ---- */

static int write_rank_file(struct dtx_ckpt *c, const struct dtx_ckpt_pos *pos,
                           struct rank_entry *out, struct dt_error *err)
{
    struct saved s;
    int rc = saved_buffers(c, &s, err);
    if (rc)
        return rc;
    struct head h;
    fill_head(c, &h, MAGIC_RANK, c->rank, pos, (uint32_t)s.n);
    memcpy(h.sums, pos->sums, sizeof h.sums);
    char path[PATH_MAX];
    step_path(path, sizeof path, c->dir, pos->step, c->rank);
    struct writer w;
    if ((rc = w_open(&w, path, err)))
        return rc;
    w_put(&w, &h, sizeof h);
    w_put(&w, s.e, (size_t)s.n * sizeof s.e[0]);
    for (int i = 0; i < s.n; i++)
        w_put(&w, s.p[i], (size_t)entry_bytes(&s.e[i]));
    return w_commit(&w, &out->crc, &out->bytes, err);
}

static int write_manifest(struct dtx_ckpt *c, const struct dtx_ckpt_pos *pos,
                          struct dt_error *err)
{
    struct rank_entry *e = c->entries;
    for (int r = 0; r < c->size; r++)
        e[r].ok = 0; /* gathering only */
    struct head h;
    fill_head(c, &h, MAGIC_MANIFEST, c->size, pos, (uint32_t)c->size);
    char path[PATH_MAX];
    step_path(path, sizeof path, c->dir, pos->step, -1);
    struct writer w;
    int rc = w_open(&w, path, err);
    if (rc)
        return rc;
    w_put(&w, &h, sizeof h);
    w_put(&w, e, (size_t)c->size * sizeof *e);
    uint32_t crc;
    uint64_t bytes;
    return w_commit(&w, &crc, &bytes, err);
}

/* Removes this rank's files of every step but keep_a and keep_b (a failure only warns). */
static void prune(const struct dtx_ckpt *c, long keep_a, long keep_b)
{
    DIR *d = opendir(c->dir);
    struct dirent *de;
    char path[PATH_MAX];
    while (d && (de = readdir(d))) {
        long s = own_file_step(de->d_name, c->rank);
        if (s < 0 || s == keep_a || s == keep_b)
            continue;
        snprintf(path, sizeof path, "%s/%s", c->dir, de->d_name);
        if (unlink(path) != 0)
            fprintf(stderr, "%s: warning: cannot remove the old checkpoint %s: %s\n", c->prog,
                    path, strerror(errno));
    }
    if (d)
        closedir(d);
}

int dtx_ckpt_save(struct dtx_ckpt *c, const struct dtx_ckpt_pos *pos, struct dt_error *err)
{
    struct rank_entry mine = {0, 0, 0};
    int rc = write_rank_file(c, pos, &mine, err);
    mine.ok = rc == DT_OK;
    MPI_Gather(&mine, sizeof mine, MPI_BYTE, c->entries, sizeof mine, MPI_BYTE, 0, c->comm);
    int complete = 1;
    for (int r = 0; c->rank == 0 && r < c->size; r++)
        complete &= ((struct rank_entry *)c->entries)[r].ok != 0;
    if (c->rank == 0 && complete)
        rc = write_manifest(c, pos, err);
    int worst;
    MPI_Allreduce(&rc, &worst, 1, MPI_INT, MPI_MAX, c->comm);
    if (!worst) {
        prune(c, pos->step, c->kept);
        c->kept = pos->step;
    }
    return rc;
}

/* ---- resume ---- */

/* The space-separated words of a that b lacks (an identity's key=value pairs), into buf. */
static void missing_words(const char *a, const char *b, char *buf, size_t len)
{
    size_t n = 0;
    buf[0] = 0;
    for (const char *w = a; *w;) {
        size_t k = strcspn(w, " ");
        bool found = false;
        for (const char *v = b; *v && !found;) {
            size_t m = strcspn(v, " ");
            found = m == k && strncmp(v, w, k) == 0;
            v += m + (v[m] == ' ');
        }
        if (!found && k > 0 && n < len)
            n += (size_t)snprintf(buf + n, len - n, "%s%.*s", n ? " " : "", (int)k, w);
        w += k + (w[k] == ' ');
    }
}

/* Rank 0: reads the manifest of step into h and c->entries. */
static int read_manifest(struct dtx_ckpt *c, const char *dir, long step, struct head *h,
                         char *why, size_t len, struct dt_error *err)
{
    char path[PATH_MAX];
    step_path(path, sizeof path, dir, step, -1);
    struct reader r;
    memset(h, 0, sizeof *h);
    if (!r_open(&r, path, why, len))
        return CK_SKIP;
    bool fits = r_get(&r, h, sizeof *h) && h->n_ranks == (uint32_t)c->size &&
                h->n_entries == (uint32_t)c->size &&
                r_get(&r, c->entries, (uint64_t)c->size * sizeof(struct rank_entry));
    bool whole = r.left == 0;
    uint32_t crc;
    if (!r_close(&r, &crc)) {
        snprintf(why, len, "%s: checksum mismatch (torn or corrupt)", path);
        return CK_SKIP;
    }
    if (memcmp(h->magic, MAGIC_MANIFEST, sizeof h->magic) != 0) {
        snprintf(why, len, "%s: not a dtexec checkpoint manifest", path);
        return CK_SKIP;
    }
    h->identity[sizeof h->identity - 1] = 0;
    if (strcmp(h->identity, c->identity) != 0) {
        char file[512], here[512];
        missing_words(h->identity, c->identity, file, sizeof file);
        missing_words(c->identity, h->identity, here, sizeof here);
        dt_fail(err, DT_EINPUT, NULL, 0, 0, "--resume %s: %s was written by another kind of "
                "run (it has: %s; this run has: %s)", dir, path, file[0] ? file : "-",
                here[0] ? here : "-");
        return CK_REFUSE;
    }
    if (!fits || !whole) {
        snprintf(why, len, "%s: its size does not fit its %u ranks", path, h->n_ranks);
        return CK_SKIP;
    }
    return CK_OK;
}

/* Whether the file's header and table are those of this rank at the manifest's position. */
static bool rank_head_fits(const struct dtx_ckpt *c, const struct head *h, const struct head *m)
{
    bool v1 = memcmp(h->magic, MAGIC_RANK_V1, sizeof h->magic) == 0 && h->skipped == 0;
    return (memcmp(h->magic, MAGIC_RANK, sizeof h->magic) == 0 || v1) &&
           h->rank == (uint32_t)c->rank && h->n_ranks == (uint32_t)c->size &&
           h->step == m->step && h->epoch == m->epoch && h->iter == m->iter &&
           memcmp(h->identity, m->identity, sizeof h->identity) == 0;
}

/* Every rank: reads its file of the manifest's step into its buffers and h. */
static int load_rank_file(struct dtx_ckpt *c, const char *dir, const struct head *m,
                          const struct rank_entry *want, struct head *h, char *why, size_t len)
{
    struct saved s;
    struct dt_error err;
    char path[PATH_MAX];
    step_path(path, sizeof path, dir, (long)m->step, c->rank);
    if (saved_buffers(c, &s, &err)) { /* checked by dtx_ckpt_init */
        snprintf(why, len, "%s: %.200s", path, err.msg);
        return CK_SKIP;
    }
    memset(h, 0, sizeof *h);
    struct reader r;
    if (!r_open(&r, path, why, len))
        return CK_SKIP;
    struct buf_entry e[MAX_SAVED];
    bool table = r_get(&r, h, sizeof *h) && h->n_entries == (uint32_t)s.n &&
                 r_get(&r, e, (uint64_t)s.n * sizeof e[0]) &&
                 memcmp(e, s.e, (size_t)s.n * sizeof e[0]) == 0;
    /* a file that fits is read straight into the buffers: if it proves bad, every rank
     * loads an older step over them, or the run stops */
    for (int i = 0; table && i < s.n; i++)
        table = r_get(&r, s.p[i], entry_bytes(&s.e[i]));
    table = table && r.left == 0;
    uint64_t size = r.size;
    uint32_t crc;
    if (!r_close(&r, &crc))
        snprintf(why, len, "%s: checksum mismatch (torn or corrupt)", path);
    else if (!rank_head_fits(c, h, m))
        snprintf(why, len, "%s: its header is not rank %d's at this step", path, c->rank);
    else if (!table)
        snprintf(why, len, "%s: its buffers are not those of this run's plan", path);
    else if (crc != want->crc || size != want->bytes)
        snprintf(why, len, "%s: not the file the manifest lists (checksum or size differs)",
                 path);
    else
        return CK_OK;
    return CK_SKIP;
}

/* Rank 0 prints why the first rank that skipped step did. */
static void warn_skip(const struct dtx_ckpt *c, long step, int st, const char *why)
{
    int me = st ? c->rank : INT_MAX, first;
    MPI_Allreduce(&me, &first, 1, MPI_INT, MPI_MIN, c->comm);
    char text[PATH_MAX + 256];
    snprintf(text, sizeof text, "%s", why);
    if (first != 0 && first != INT_MAX) {
        if (c->rank == first)
            MPI_Send(text, (int)sizeof text, MPI_CHAR, 0, 0, c->comm);
        if (c->rank == 0)
            MPI_Recv(text, (int)sizeof text, MPI_CHAR, first, 0, c->comm, MPI_STATUS_IGNORE);
    }
    if (c->rank == 0)
        fprintf(stderr, "%s: warning: --resume: skipping step %ld: %s\n", c->prog, step, text);
}

static void apply(struct dtx_ckpt *c, const struct head *h, struct dtx_ckpt_pos *pos)
{
    dtx_exec_set_steps(c->ex, (long)h->step);
    dtx_exec_set_skipped(c->ex, (long)h->skipped);
    pos->step = (long)h->step;
    pos->epoch = (int)h->epoch;
    pos->iter = (long)h->iter;
    memcpy(pos->sums, h->sums, sizeof pos->sums);
}

/* Tries one step: CK_OK (loaded), CK_SKIP (warned) or CK_REFUSE; the same on every rank. */
static int try_step(struct dtx_ckpt *c, const char *dir, long step, struct dtx_ckpt_pos *pos,
                    struct dt_error *err)
{
    struct head m, h;
    char why[PATH_MAX + 256] = "";
    int st = c->rank == 0 ? read_manifest(c, dir, step, &m, why, sizeof why, err) : CK_OK;
    MPI_Bcast(&st, 1, MPI_INT, 0, c->comm);
    if (st == CK_SKIP)
        warn_skip(c, step, c->rank == 0, why);
    if (st != CK_OK)
        return st;
    MPI_Bcast(&m, sizeof m, MPI_BYTE, 0, c->comm);
    struct rank_entry want;
    MPI_Scatter(c->entries, sizeof want, MPI_BYTE, &want, sizeof want, MPI_BYTE, 0, c->comm);
    st = load_rank_file(c, dir, &m, &want, &h, why, sizeof why);
    int worst;
    MPI_Allreduce(&st, &worst, 1, MPI_INT, MPI_MAX, c->comm);
    if (worst == CK_SKIP)
        warn_skip(c, step, st, why);
    if (worst == CK_OK)
        apply(c, &h, pos);
    return worst;
}

int dtx_ckpt_resume(struct dtx_ckpt *c, const char *dir, struct dtx_ckpt_pos *pos,
                    struct dt_error *err)
{
    long *steps = NULL;
    int n = 0;
    int rc = c->rank == 0 ? list_steps("--resume", dir, &steps, &n, err) : DT_OK;
    int got[2] = {rc, n};
    MPI_Bcast(got, 2, MPI_INT, 0, c->comm);
    rc = got[0];
    n = got[1];
    if (!rc && n == 0 && c->rank == 0)
        dt_fail(err, DT_EINPUT, NULL, 0, 0, "--resume %s: no checkpoint there", dir);
    if (rc || n == 0) {
        free(steps);
        return rc ? rc : DT_EINPUT;
    }
    if (c->rank != 0 && !(steps = malloc((size_t)n * sizeof *steps)))
        MPI_Abort(c->comm, DT_ENOMEM); /* a rank that cannot follow the broadcast */
    MPI_Bcast(steps, n, MPI_LONG, 0, c->comm);
    int st = CK_SKIP, k;
    for (k = 0; k < n && st == CK_SKIP; k++)
        st = try_step(c, dir, steps[k], pos, err);
    if (st == CK_OK)
        c->kept = pos->step;
    free(steps);
    if (st == CK_SKIP)
        return dt_fail(err, DT_EINPUT, NULL, 0, 0, "--resume %s: no valid checkpoint (%d "
                       "skipped)", dir, n);
    return st == CK_OK ? DT_OK : DT_EINPUT;
}
