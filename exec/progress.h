/* Training progress on rank 0: a Keras-like bar redrawn in place on a terminal
 *   469/469 [==============================] - 4s 9ms/step - loss: 0.2910 - accuracy: 0.8921
 * and one plain line per epoch when the output is not a terminal (logs, CI). */
#ifndef DTX_PROGRESS_H
#define DTX_PROGRESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct dtx_progress {
    FILE *out;
    bool tty;          /* redraw a bar in place */
    bool quiet;        /* print nothing */
    int epoch, epochs; /* 1-based epoch */
    long total;        /* steps in the epoch */
    double start_s;    /* when the epoch started (any clock, seconds) */
    double last_draw_s;
    int columns;       /* the terminal's width: lines are fitted to it */
};

void dtx_progress_init(struct dtx_progress *p, FILE *out, bool tty, bool quiet);
/* Starts epoch (1-based) of epochs with total steps at time now_s. */
void dtx_progress_epoch(struct dtx_progress *p, int epoch, int epochs, long total, double now_s);
/* After step done (1..total): redraws the bar (at most every 0.1 s, and at the last step). */
void dtx_progress_step(struct dtx_progress *p, long done, double loss, double accuracy,
                       double now_s);
/* The epoch's final line: train figures, test figures (NaN: not evaluated), elapsed time. */
void dtx_progress_end(struct dtx_progress *p, long steps, double train_s, double loss,
                      double accuracy, double test_loss, double test_accuracy);

/* Whether progress should be drawn as a bar: stdout is a terminal, or, under mpiexec (which
 * forwards each rank's output through a pipe), mpiexec's own stdout is one (Linux /proc). */
bool dtx_progress_on_terminal(void);

/* The bar text without the leading carriage return, e.g.
 * " 12/469 [>.............................] - ETA: 3s - loss: 0.5000 - accuracy: 0.8000"
 * (elapsed_s: since the epoch started; used for the ETA, or the total when done == total). */
void dtx_progress_format(char *buf, size_t len, long done, long total, double elapsed_s,
                         double loss, double accuracy);

/* The same, fitted to a terminal of `columns` columns (at most columns - 1 characters): the bar
 * shrinks first, then the line is cut. */
void dtx_progress_fit(char *buf, size_t len, long done, long total, double elapsed_s,
                      double loss, double accuracy, int columns);

/* The width of the terminal progress goes to: $COLUMNS when set, else the terminal's own
 * (TIOCGWINSZ, mpiexec's terminal under mpiexec), else 80. */
int dtx_terminal_columns(void);

#endif
