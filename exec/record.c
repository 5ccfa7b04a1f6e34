/* Run records (JSON lines), per-op CSV and Chrome traces. */
#include "record.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void dtx_json_string(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                fputc(*p, f);
        }
    }
    fputc('"', f);
}

/* A JSON object writer that places the commas. */
struct jw {
    FILE *f;
    bool first;
};

static void key(struct jw *w, const char *k)
{
    if (!w->first)
        fputs(", ", w->f);
    w->first = false;
    dtx_json_string(w->f, k);
    fputs(": ", w->f);
}

static void num(FILE *f, double v)
{
    if (isfinite(v))
        fprintf(f, "%.9g", v);
    else
        fputs("null", f);
}

static void j_str(struct jw *w, const char *k, const char *v)
{
    key(w, k);
    if (v)
        dtx_json_string(w->f, v);
    else
        fputs("null", w->f);
}

static void j_num(struct jw *w, const char *k, double v)
{
    key(w, k);
    num(w->f, v);
}

static void j_int(struct jw *w, const char *k, long long v)
{
    key(w, k);
    fprintf(w->f, "%lld", v);
}

static void j_bool(struct jw *w, const char *k, bool v)
{
    key(w, k);
    fputs(v ? "true" : "false", w->f);
}

static void j_arr(struct jw *w, const char *k, const double *v, int n)
{
    key(w, k);
    fputc('[', w->f);
    for (int i = 0; i < n; i++) {
        if (i)
            fputs(", ", w->f);
        num(w->f, v ? v[i] : NAN);
    }
    fputc(']', w->f);
}

static void j_open(struct jw *w, const char *k)
{
    key(w, k);
    fputc('{', w->f);
    w->first = true;
}

static void j_close(struct jw *w)
{
    fputc('}', w->f);
    w->first = false;
}

void dtx_record_write(FILE *f, const struct dtx_record *r)
{
    struct jw w = {f, true};
    fputc('{', f);
    j_str(&w, "tool", "dtexec");
    j_str(&w, "version", r->version);
    j_str(&w, "start_utc", r->start_utc);
    j_str(&w, "command", r->command_line);
    j_open(&w, "config");
    j_str(&w, "model", r->model_name);
    j_str(&w, "model_path", r->model_path);
    j_int(&w, "params", r->params);
    j_str(&w, "topology", r->topology_name);
    j_str(&w, "topology_path", r->topology_path);
    j_str(&w, "strategy", r->strategy);
    j_int(&w, "ranks", r->ranks);
    j_str(&w, "scaling", r->scaling);
    j_int(&w, "batch", r->batch);
    j_int(&w, "global_batch", r->global_batch);
    j_num(&w, "lr", r->lr);
    j_num(&w, "lr_scale", r->lr_scale);
    j_num(&w, "lr_effective", r->lr_effective);
    j_str(&w, "optimizer", r->optimizer);
    j_num(&w, "momentum", r->momentum);
    j_str(&w, "init", r->init);
    j_int(&w, "epochs", r->epochs);
    j_num(&w, "bucket_bytes", r->bucket_bytes);
    j_str(&w, "parallel", r->parallel ? r->parallel : "");
    j_str(&w, "data", r->data);
    j_int(&w, "train_samples", r->train_samples);
    j_int(&w, "test_samples", r->test_samples);
    j_int(&w, "test_evaluated", r->test_evaluated);
    j_bool(&w, "read_whole", r->read_whole);
    j_int(&w, "seed", (long long)r->seed);
    j_int(&w, "max_iters", r->max_iters);
    j_int(&w, "iters_per_epoch", r->iters_per_epoch);
    j_close(&w);
    j_open(&w, "environment");
    j_str(&w, "host", r->host);
    j_str(&w, "cpu", r->cpu ? r->cpu : "");
    j_str(&w, "mpi_library", r->mpi_library);
    j_str(&w, "git_revision", r->git_revision);
    j_int(&w, "blas_threads", r->blas_threads);
    j_str(&w, "bound_cpus", r->bound_cpus ? r->bound_cpus : "");
    j_close(&w);
    j_open(&w, "measurements");
    j_num(&w, "read_s", r->read_s);
    j_num(&w, "read_bytes", r->read_bytes);
    j_arr(&w, "epoch_s", r->epoch_s, r->epochs);
    j_num(&w, "epoch_median_s", r->epoch_median_s);
    j_num(&w, "update_per_batch_s", r->update_per_batch_s);
    j_num(&w, "eval_s", r->eval_s);
    j_num(&w, "total_s", r->total_s);
    j_arr(&w, "train_loss", r->train_loss, r->epochs);
    j_arr(&w, "train_accuracy", r->train_accuracy, r->epochs);
    j_arr(&w, "test_loss", r->test_loss, r->epochs);
    j_arr(&w, "test_accuracy", r->test_accuracy, r->epochs);
    j_num(&w, "final_test_loss", r->epochs > 0 ? r->test_loss[r->epochs - 1] : NAN);
    j_num(&w, "final_test_accuracy", r->epochs > 0 ? r->test_accuracy[r->epochs - 1] : NAN);
    j_num(&w, "samples_per_s", r->samples_per_s);
    j_num(&w, "peak_rss_bytes", r->peak_rss_bytes);
    j_num(&w, "layers_alloc_bytes", r->net_bytes);
    j_bool(&w, "params_agree", r->params_agree);
    if (r->alloc_bytes)
        j_arr(&w, "alloc_bytes", r->alloc_bytes, r->ranks);
    j_num(&w, "params_l2", r->params_l2);
    j_num(&w, "params_sum", r->params_sum);
    j_close(&w);
    fputs("}\n", f);
}

int dtx_record_append(const char *path, const struct dtx_record *r, struct dt_error *err)
{
    FILE *f = fopen(path, "a");
    if (!f)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot append the record: %s", strerror(errno));
    dtx_record_write(f, r);
    if (fclose(f) != 0)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write the record: %s", strerror(errno));
    return DT_OK;
}

static double op_bytes(const struct dt_op *op)
{
    switch (op->kind) {
    case DT_OP_LOAD: return op->bytes;
    case DT_OP_COLL:
    case DT_OP_SEND:
    case DT_OP_RECV:
    case DT_OP_ZERO:
    case DT_OP_COPY:
    case DT_OP_UPDATE: return (double)op->region.count * 4.0;
    default: return 0;
    }
}

int dtx_write_ops_csv(const char *path, const struct dt_plan *plan,
                      const struct dtx_timings *tm, struct dt_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    fputs("rank,epoch,iteration,op,kind,name,layer,phase,coll,alg,nonblocking,start_s,duration_s,"
          "end_s,bytes,bytes_sent,bytes_recv\n",
          f);
    char buf[160];
    for (int r = 0; r < tm->n_ranks; r++)
        for (int k = 0; k < tm->n_iters; k++)
            for (int i = 0; i < tm->n_ops[r]; i++) {
                const struct dt_op *op = &plan->ranks[r].ops[i];
                const struct dtx_op_time *t = &tm->t[r][(long)k * tm->n_ops[r] + i];
                bool compute = op->kind == DT_OP_COMPUTE;
                fprintf(f, "%d,%d,%ld,%d,%s,\"%s\",%d,%s,%s,%s,%d,%.9f,%.9f,%.9f,%.0f,%.0f,%.0f\n",
                        r, tm->epoch_of[k], tm->iter_index[k], i, dt_op_kind_name(op->kind),
                        dt_op_name(plan, op, buf, sizeof buf), compute ? op->layer : -1,
                        compute ? dt_phase_name(op->phase) : "",
                        op->kind == DT_OP_COLL ? dt_coll_kind_name(op->coll) : "",
                        op->kind == DT_OP_COLL ? dt_coll_alg_name(op->alg) : "",
                        op->nonblocking ? 1 : 0, t->start_s, t->dur_s, t->end_s, op_bytes(op),
                        t->bytes_sent, t->bytes_recv);
            }
    if (fclose(f) != 0)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    return DT_OK;
}

int dtx_write_trace(const char *path, const struct dt_plan *plan, const struct dtx_timings *tm,
                    struct dt_error *err)
{
    FILE *f = fopen(path, "w");
    if (!f)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    fprintf(f, "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [\n");
    fprintf(f, "{\"name\": \"process_name\", \"ph\": \"M\", \"pid\": 1, \"args\": {\"name\": "
               "\"dtexec %s\"}}",
            dt_strategy_name(plan->strategy));
    for (int r = 0; r < tm->n_ranks; r++) {
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                   "\"args\": {\"name\": \"rank %d\"}}",
                r, r);
        fprintf(f, ",\n{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": %d, "
                   "\"args\": {\"name\": \"rank %d in flight\"}}",
                1000 + r, r);
    }
    char buf[160];
    for (int r = 0; r < tm->n_ranks; r++)
        for (int k = 0; k < tm->n_iters; k++)
            for (int i = 0; i < tm->n_ops[r]; i++) {
                const struct dt_op *op = &plan->ranks[r].ops[i];
                const struct dtx_op_time *t = &tm->t[r][(long)k * tm->n_ops[r] + i];
                bool comm = op->kind == DT_OP_SEND || op->kind == DT_OP_RECV ||
                            op->kind == DT_OP_COLL || op->kind == DT_OP_WAIT;
                const char *cat = comm ? "comm" : "compute";
                fprintf(f, ",\n{\"name\": ");
                dtx_json_string(f, dt_op_trace_name(plan, op, buf, sizeof buf));
                fprintf(f, ", \"cat\": \"%s\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, ", cat, r);
                dt_trace_span(f, t->start_s, t->start_s + t->dur_s);
                fprintf(f, ", \"args\": {\"epoch\": %d, \"iteration\": %ld, \"op\": %d, "
                           "\"bytes\": %.0f}}",
                        tm->epoch_of[k], tm->iter_index[k], i, op_bytes(op));
                if (op->nonblocking && op->kind != DT_OP_WAIT) {
                    fprintf(f, ",\n{\"name\": ");
                    dtx_json_string(f, dt_op_trace_name(plan, op, buf, sizeof buf));
                    fprintf(f, ", \"cat\": \"comm\", \"ph\": \"X\", \"pid\": 1, \"tid\": %d, ",
                            1000 + r);
                    dt_trace_span(f, t->start_s, t->end_s);
                    fprintf(f, ", \"args\": {\"handle\": %d, \"bytes\": %.0f}}", op->handle,
                            op_bytes(op));
                }
            }
    fprintf(f, "\n]}\n");
    if (fclose(f) != 0)
        return dt_fail(err, DT_ESYS, path, 0, 0, "cannot write: %s", strerror(errno));
    return DT_OK;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double dtx_median(double *v, int n)
{
    if (n <= 0)
        return NAN;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}
