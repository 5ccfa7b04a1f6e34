/* mpi_bw: what bandwidth does the network give MPI? A small probe for dtcluster and for
 * real clusters: it times one of three traffic patterns between the ranks of
 * MPI_COMM_WORLD and prints one line of key=value pairs (rank 0 only).
 *
 *   allreduce  MPI_Allreduce of --bytes of floats, --iters times. busbw_Bps is NCCL-tests'
 *              bus bandwidth, 2 (p-1)/p x bytes / time: what each rank's link carried per
 *              second for a ring (or, at p = 2, any) algorithm, so it reads as the link rate.
 *   stream     rank 0 sends --iters messages of --bytes to rank 1 back to back, then waits
 *              for a one-byte acknowledgement: one-way streaming rate. The link never goes
 *              idle, so a token bucket's burst counts once, not once per message.
 *   pingpong   rank 0 and 1 bounce --bytes --iters times; bw_Bps = 2 x bytes / round trip,
 *              lat_s = half the median round trip (with small --bytes: the one-way latency).
 *              On a token-bucket-shaped link the bandwidth misleads: each leg starts after
 *              an idle gap, when the bucket is full.
 *
 * Every pattern first runs --warmup untimed repetitions (connection set-up, page faults).
 * Times are the maximum over ranks of each rank's MPI_Wtime span.
 */
#include <errno.h>
#include <getopt.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "exit_status.h"

enum mode { MODE_ALLREDUCE, MODE_STREAM, MODE_PINGPONG };

struct options {
    enum mode mode;
    long bytes;
    int iters;
    int warmup;
};

static const char *const mode_names[] = {"allreduce", "stream", "pingpong"};

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpiexec -n P mpi_bw [--mode allreduce|stream|pingpong] [--bytes N]\n"
            "                           [--iters K] [--warmup W]\n"
            "  --mode     traffic pattern (default allreduce; stream and pingpong use ranks 0, 1)\n"
            "  --bytes    message size in bytes, a multiple of 4 (default 4194304)\n"
            "  --iters    timed repetitions (default 10)\n"
            "  --warmup   untimed repetitions first (default 2)\n"
            "Prints: mode=... ranks=... bytes=... iters=... time_s=... <rate>_Bps=... Mbit_s=...\n"
            "        (pingpong also lat_s=..., half the median round trip)\n");
}

/* Parses a whole non-negative integer in [lo, hi]; 0 on success. */
static int parse_long(const char *s, long lo, long hi, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi)
        return -1;
    *out = v;
    return 0;
}

/* Fills opt from argv; returns 0, or 2 after printing the problem (bad input). */
static int parse_args(int argc, char **argv, struct options *opt, int rank)
{
    static const struct option longopts[] = {
        {"mode", required_argument, NULL, 'm'},  {"bytes", required_argument, NULL, 'b'},
        {"iters", required_argument, NULL, 'i'}, {"warmup", required_argument, NULL, 'w'},
        {"help", no_argument, NULL, 'h'},        {NULL, 0, NULL, 0},
    };
    opt->mode = MODE_ALLREDUCE;
    opt->bytes = 4L << 20;
    opt->iters = 10;
    opt->warmup = 2;
    opterr = rank == 0;
    int c;
    long v;
    while ((c = getopt_long(argc, argv, "m:b:i:w:h", longopts, NULL)) != -1) {
        switch (c) {
        case 'm': {
            int found = 0;
            for (int k = 0; k < 3; k++)
                if (strcmp(optarg, mode_names[k]) == 0) {
                    opt->mode = (enum mode)k;
                    found = 1;
                }
            if (!found) {
                if (rank == 0)
                    fprintf(stderr, "mpi_bw: --mode: '%s' is not allreduce, stream or pingpong\n",
                            optarg);
                return 2;
            }
            break;
        }
        case 'b':
            if (parse_long(optarg, 4, 1L << 30, &v) != 0 || v % 4 != 0) {
                if (rank == 0)
                    fprintf(stderr, "mpi_bw: --bytes: '%s' is not a multiple of 4 in [4, 2^30]\n",
                            optarg);
                return 2;
            }
            opt->bytes = v;
            break;
        case 'i':
        case 'w':
            if (parse_long(optarg, c == 'i' ? 1 : 0, 1000000, &v) != 0) {
                if (rank == 0)
                    fprintf(stderr, "mpi_bw: --%s: '%s' is not an integer in [%d, 1000000]\n",
                            c == 'i' ? "iters" : "warmup", optarg, c == 'i' ? 1 : 0);
                return 2;
            }
            if (c == 'i')
                opt->iters = (int)v;
            else
                opt->warmup = (int)v;
            break;
        case 'h':
            if (rank == 0)
                usage(stdout);
            return 1;
        default:
            if (rank == 0)
                usage(stderr);
            return 2;
        }
    }
    if (optind != argc) {
        if (rank == 0)
            fprintf(stderr, "mpi_bw: unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    return 0;
}

static void run_allreduce(float *buf, float *out, int count, int reps)
{
    for (int r = 0; r < reps; r++)
        MPI_Allreduce(buf, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}

/* Ranks 0 and 1 only; other ranks idle. */
static void run_stream(float *buf, int count, int reps, int rank)
{
    char ack = 0;
    if (rank == 0) {
        for (int r = 0; r < reps; r++)
            MPI_Send(buf, count, MPI_FLOAT, 1, 1, MPI_COMM_WORLD);
        MPI_Recv(&ack, 1, MPI_CHAR, 1, 2, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 1) {
        for (int r = 0; r < reps; r++)
            MPI_Recv(buf, count, MPI_FLOAT, 0, 1, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        MPI_Send(&ack, 1, MPI_CHAR, 0, 2, MPI_COMM_WORLD);
    }
}

/* rtt_s: NULL, or reps round-trip times measured on rank 0. */
static void run_pingpong(float *buf, int count, int reps, int rank, double *rtt_s)
{
    for (int r = 0; r < reps; r++) {
        double t0 = MPI_Wtime();
        if (rank == 0) {
            MPI_Send(buf, count, MPI_FLOAT, 1, 3, MPI_COMM_WORLD);
            MPI_Recv(buf, count, MPI_FLOAT, 1, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        } else if (rank == 1) {
            MPI_Recv(buf, count, MPI_FLOAT, 0, 3, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            MPI_Send(buf, count, MPI_FLOAT, 0, 3, MPI_COMM_WORLD);
        }
        if (rtt_s != NULL)
            rtt_s[r] = MPI_Wtime() - t0;
    }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void run(const struct options *opt, float *buf, float *out, int reps, int rank,
                double *rtt_s)
{
    int count = (int)(opt->bytes / 4);
    switch (opt->mode) {
    case MODE_ALLREDUCE: run_allreduce(buf, out, count, reps); break;
    case MODE_STREAM: run_stream(buf, count, reps, rank); break;
    case MODE_PINGPONG: run_pingpong(buf, count, reps, rank, rtt_s); break;
    }
}

int main(int argc, char **argv)
{
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    struct options opt;
    int rc = parse_args(argc, argv, &opt, rank);
    if (rc == 0 && opt.mode != MODE_ALLREDUCE && size < 2) {
        if (rank == 0)
            fprintf(stderr, "mpi_bw: --mode %s needs at least 2 ranks\n", mode_names[opt.mode]);
        rc = 2;
    }
    if (rc != 0) {
        dtx_declare_exit_status(rc == 1 ? 0 : rc); /* for the finalize guard */
        MPI_Finalize();
        return rc == 1 ? 0 : rc;
    }

    size_t count = (size_t)opt.bytes / 4;
    float *buf = malloc(count * sizeof *buf);
    float *out = malloc(count * sizeof *out);
    double *rtt_s = malloc((size_t)opt.iters * sizeof *rtt_s);
    if (buf == NULL || out == NULL || rtt_s == NULL) {
        fprintf(stderr, "mpi_bw: rank %d: cannot allocate 2 x %ld bytes\n", rank, opt.bytes);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t k = 0; k < count; k++)
        buf[k] = (float)(k % 7);

    run(&opt, buf, out, opt.warmup, rank, NULL);
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    run(&opt, buf, out, opt.iters, rank, rtt_s);
    double span = MPI_Wtime() - t0, time_s = 0.0;
    MPI_Reduce(&span, &time_s, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);

    if (rank == 0) {
        double bytes = (double)opt.bytes * opt.iters, rate = 0.0;
        const char *name = "bw";
        switch (opt.mode) {
        case MODE_ALLREDUCE:
            /* A ring allreduce moves 2 (p-1)/p of the buffer over each rank's link. */
            rate = size > 1 ? 2.0 * (size - 1) / size * bytes / time_s : bytes / time_s;
            name = "busbw";
            break;
        case MODE_STREAM: rate = bytes / time_s; break;
        case MODE_PINGPONG: rate = 2.0 * bytes / time_s; break;
        }
        printf("mode=%s ranks=%d bytes=%ld iters=%d time_s=%.6f %s_Bps=%.6g Mbit_s=%.2f",
               mode_names[opt.mode], size, opt.bytes, opt.iters, time_s, name, rate,
               rate * 8.0 / 1e6);
        if (opt.mode == MODE_PINGPONG) {
            /* Half the median round trip: robust to the odd descheduled iteration. */
            qsort(rtt_s, (size_t)opt.iters, sizeof *rtt_s, cmp_double);
            int m = opt.iters / 2;
            double med = opt.iters % 2 ? rtt_s[m] : 0.5 * (rtt_s[m - 1] + rtt_s[m]);
            printf(" lat_s=%.3g", med / 2.0);
        }
        printf("\n");
        fflush(stdout);
    }
    free(rtt_s);
    free(out);
    free(buf);
    MPI_Finalize();
    return 0;
}
