/* Keras-like progress bar. */
#include "progress.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <unistd.h>

#define BAR_WIDTH 30
#define MIN_BAR 8

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

/* The terminal rank 0's output reaches: its own stdout, or, under mpiexec (which forwards
 * each rank's output through a pipe), mpiexec's stdout; "" for the own stdout. */
static bool terminal_path(char *tty, size_t len)
{
    tty[0] = 0;
    if (isatty(STDOUT_FILENO))
        return true;
    /* mpiexec -> hydra_pmi_proxy -> this rank: look a few generations up */
    long pid = (long)getppid();
    for (int depth = 0; depth < 4 && pid > 1; depth++) {
        char path[64], comm[64] = "";
        snprintf(path, sizeof path, "/proc/%ld/comm", pid);
        FILE *f = fopen(path, "r");
        if (!f)
            return false;
        if (!fgets(comm, sizeof comm, f))
            comm[0] = 0;
        fclose(f);
        if (strncmp(comm, "mpiexec", 7) == 0 || strncmp(comm, "mpirun", 6) == 0) {
            snprintf(path, sizeof path, "/proc/%ld/fd/1", pid);
            ssize_t n = readlink(path, tty, len - 1);
            if (n <= 0)
                return false;
            tty[n] = 0;
            return strncmp(tty, "/dev/pts/", 9) == 0 || strncmp(tty, "/dev/tty", 8) == 0;
        }
        pid = parent_of(pid);
    }
    return false;
}

bool dtx_progress_on_terminal(void)
{
    char tty[256];
    return terminal_path(tty, sizeof tty);
}

int dtx_terminal_columns(void)
{
    const char *env = getenv("COLUMNS");
    char *end;
    long c = env ? strtol(env, &end, 10) : 0;
    if (env && *env && !*end && c > 0 && c < 10000)
        return (int)c;
    char tty[256];
    struct winsize ws;
    if (!terminal_path(tty, sizeof tty))
        return 80;
    int fd = tty[0] ? open(tty, O_RDONLY | O_NOCTTY) : STDOUT_FILENO;
    bool got = fd >= 0 && ioctl(fd, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0;
    if (fd >= 0 && fd != STDOUT_FILENO)
        close(fd);
    return got ? ws.ws_col : 80;
}

void dtx_progress_init(struct dtx_progress *p, FILE *out, bool tty, bool quiet)
{
    memset(p, 0, sizeof *p);
    p->out = out;
    p->tty = tty;
    p->quiet = quiet;
    p->columns = tty ? dtx_terminal_columns() : 80;
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

static void format_bar(char *buf, size_t len, long done, long total, double elapsed_s,
                       double loss, double accuracy, int bar_width)
{
    int digits = snprintf(NULL, 0, "%ld", total);
    char bar[BAR_WIDTH + 1];
    long filled = total > 0 ? bar_width * done / total : bar_width;
    for (int i = 0; i < bar_width; i++)
        bar[i] = i < filled ? '=' : '.';
    if (done < total && filled < bar_width)
        bar[filled] = '>';
    bar[bar_width] = 0;
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

void dtx_progress_format(char *buf, size_t len, long done, long total, double elapsed_s,
                         double loss, double accuracy)
{
    format_bar(buf, len, done, total, elapsed_s, loss, accuracy, BAR_WIDTH);
}

void dtx_progress_fit(char *buf, size_t len, long done, long total, double elapsed_s,
                      double loss, double accuracy, int columns)
{
    /* as Keras does: the bar gives way first (down to MIN_BAR cells), then the line is cut
     * one column short of the edge, where a terminal would wrap it */
    format_bar(buf, len, done, total, elapsed_s, loss, accuracy, BAR_WIDTH);
    int over = (int)strlen(buf) - (columns - 1);
    if (over <= 0)
        return;
    int bar = BAR_WIDTH - over < MIN_BAR ? MIN_BAR : BAR_WIDTH - over;
    format_bar(buf, len, done, total, elapsed_s, loss, accuracy, bar);
    if (columns > 1 && strlen(buf) > (size_t)(columns - 1) && (size_t)(columns - 1) < len)
        buf[columns - 1] = 0;
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
    dtx_progress_fit(line, sizeof line, done, p->total, now_s - p->start_s, loss, accuracy,
                     p->columns);
    fprintf(p->out, "\r%s\033[K", line);
    fflush(p->out);
}

void dtx_progress_end(struct dtx_progress *p, long steps, double train_s, double loss,
                      double accuracy, double test_loss, double test_accuracy)
{
    if (p->quiet)
        return;
    if (p->tty) {
        char line[256], test[96] = "";
        dtx_progress_fit(line, sizeof line, steps, steps, train_s, loss, accuracy, p->columns);
        if (!isnan(test_loss))
            snprintf(test, sizeof test, "test_loss: %.4f - test_accuracy: %.4f", test_loss,
                     test_accuracy);
        /* the test figures go on a line of their own when they would not fit beside */
        bool beside = strlen(line) + 3 + strlen(test) <= (size_t)(p->columns - 1);
        fprintf(p->out, "\r%s\033[K%s%s\n", line, !test[0] ? "" : beside ? " - " : "\n", test);
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
