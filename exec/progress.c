/* Keras-like progress bar. */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define BAR_WIDTH 30

/* The parent of pid from /proc/pid/stat ("pid (comm) state ppid ..."), or -1. */
static long parent_of(long pid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    char *close = strrchr(buf, ')'); /* comm may hold spaces and parentheses */
    long ppid;
    if (!close || sscanf(close + 1, " %*c %ld", &ppid) != 1)
        return -1;
    return ppid;
}

bool dtx_progress_on_terminal(void)
{
    if (isatty(STDOUT_FILENO))
        return true;
    /* mpiexec -> hydra_pmi_proxy -> this rank: look a few generations up */
    long pid = (long)getppid();
    for (int depth = 0; depth < 4 && pid > 1; depth++) {
        char path[64], comm[64] = "", link[256];
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return false;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "mpiexec", 7) == 0 || strncmp(comm, "mpirun", 6) == 0) {
            snprintf(path, sizeof path, "/proc/%ld/fd/1", pid);
            ssize_t n = readlink(path, link, sizeof link - 1);
            if (n <= 0)
                return false;
            link[n] = 0;
            return strncmp(link, "/dev/pts/", 9) == 0 || strncmp(link, "/dev/tty", 8) == 0;
        }
        pid = parent_of(pid);
    }
    return false;
}

void dtx_progress_init(struct dtx_progress *p, FILE *out, bool tty, bool quiet)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = tty;
    p->quiet = quiet;
}

void dtx_progress_epoch(struct dtx_progress *p, int epoch, int epochs, long total, double now_s)
{
    p->epoch = epoch;
    p->epochs = epochs;
    p->total = total;
    p->start_s = now_s;
    p->last_draw_s = -1e300;
    if (!p->quiet && p->tty) {
        fprintf(p->out, "Epoch %d/%d\n", epoch, epochs);
        fflush(p->out);
    }
}

/* "4s", "1:02", "1:02:03" as Keras writes durations. */
static void duration(char *buf, size_t len, double s)
{
    long t = (long)(s + 0.5);
    if (t < 60)
        snprintf(buf, len, "%lds", t);
    else if (t < 3600)
        snprintf(buf, len, "%ld:%02ld", t / 60, t % 60);
    else
        snprintf(buf, len, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
}

void dtx_progress_format(char *buf, size_t len, long done, long total, double elapsed_s,
                         double loss, double accuracy)
{
    int digits = snprintf(NULL, 0, "%ld", total);
    char bar[BAR_WIDTH + 1];
    long filled = total > 0 ? BAR_WIDTH * done / total : BAR_WIDTH;
    for (int i = 0; i < BAR_WIDTH; i++)
        bar[i] = i < filled ? '=' : '.';
    if (done < total && filled < BAR_WIDTH)
        bar[filled] = '>';
    bar[BAR_WIDTH] = 0;
    char t[32];
    int n;
    if (done >= total) {
        duration(t, sizeof t, elapsed_s);
        double per = done > 0 ? elapsed_s / done : 0;
        n = snprintf(buf, len, "%*ld/%ld [%s] - %s %.0fms/step", digits, done, total, bar, t,
                     per * 1e3);
    } else {
        duration(t, sizeof t, done > 0 ? elapsed_s / done * (total - done) : 0);
        n = snprintf(buf, len, "%*ld/%ld [%s] - ETA: %s", digits, done, total, bar, t);
    }
    /* a pipeline's first stage sees no loss (NaN): its bar shows progress only */
    if (n >= 0 && (size_t)n < len && !isnan(loss))
        snprintf(buf + n, len - (size_t)n, " - loss: %.4f - accuracy: %.4f", loss, accuracy);
}

void dtx_progress_step(struct dtx_progress *p, long done, double loss, double accuracy,
                       double now_s)
{
    if (p->quiet || !p->tty)
        return;
    if (done < p->total && now_s - p->last_draw_s < 0.1)
        return;
    p->last_draw_s = now_s;
    char line[256];
    dtx_progress_format(line, sizeof line, done, p->total, now_s - p->start_s, loss, accuracy);
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
}

void dtx_progress_end(struct dtx_progress *p, long steps, double train_s, double loss,
                      double accuracy, double test_loss, double test_accuracy)
{
    if (p->quiet)
        return;
    if (p->tty) {
        char line[256];
        dtx_progress_format(line, sizeof line, steps, steps, train_s, loss, accuracy);
        fprintf(p->out, "\r%s", line);
        if (!isnan(test_loss))
            fprintf(p->out, " - test_loss: %.4f - test_accuracy: %.4f", test_loss, test_accuracy);
        fprintf(p->out, "\033[K\n");
    } else {
        fprintf(p->out, "epoch %d/%d: %ld steps in %.3f s (%.2f ms/step) - loss: %.4f - accuracy: "
                        "%.4f",
                p->epoch, p->epochs, steps, train_s, steps > 0 ? train_s / steps * 1e3 : 0.0, loss,
                accuracy);
        if (!isnan(test_loss))
            fprintf(p->out, " - test_loss: %.4f - test_accuracy: %.4f", test_loss, test_accuracy);
        fputc('\n', p->out);
    }
    fflush(p->out);
}
