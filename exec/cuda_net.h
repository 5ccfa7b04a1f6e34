/* dtexec --device cuda: a rank's network on a GPU. The CPU net (exec/cpu/net.h) is built as
 * usual and lays out the buffers (and initialises the parameters); the CUDA net mirrors each
 * of its allocations, and those the executor registers (input rows, labels, optimizer
 * moments), in device memory of the same size, so that the plan's buffer table is what the
 * GPU holds. Callers keep naming buffers by their HOST addresses (the executor's regions):
 * the CUDA net translates an address inside a mirrored allocation into the device's.
 *
 * The host copy serves as the staging area of communication (the executor downloads a region
 * before MPI sends or reduces it and uploads what arrived) and of the outputs dtexec reads
 * (parameters, accuracy). Kernels queue on one stream; a failure is kept (the first one) and
 * reported by dtx_cuda_status, which the executor checks after every op.
 *
 * Runs fp32 dense, relu, conv2d, maxpool, flatten, and softmax cross-entropy over the last
 * axis (a last softmax layer fused with the loss, or logits), with SGD or Adam:
 * dtx_cuda_supports refuses anything else by name before a GPU is touched. */
#ifndef DTX_CUDA_NET_H
#define DTX_CUDA_NET_H

#include <stdbool.h>
#include <stddef.h>

#include "cpu/net.h"
#include "dt/error.h"
#include "dt/plan.h"

struct dtx_cuda_net;

/* DT_OK when the CUDA net executes every layer and option of plan; else DT_EINPUT naming the
 * first layer (file:line:column of the model) or option it does not. Needs no GPU. */
int dtx_cuda_supports(const struct dt_plan *plan, struct dt_error *err);

/* Opens GPU `device`, mirrors host's allocations and uploads them. host must outlive it. */
int dtx_cuda_create(struct dtk_net *host, int device, struct dtx_cuda_net **out,
                    struct dt_error *err);
void dtx_cuda_destroy(struct dtx_cuda_net *g);
/* Mirrors `bytes` of another host allocation (uploaded now); bytes 0 does nothing. */
int dtx_cuda_mirror(struct dtx_cuda_net *g, void *host, size_t bytes, struct dt_error *err);
/* The host allocation that holds the model's input rows (mirrored by dtx_cuda_mirror). */
void dtx_cuda_set_input(struct dtx_cuda_net *g, const float *x);
/* Device bytes of the mirrors (the plan's buffers); of the kernels' scratch apart. */
double dtx_cuda_bytes(const struct dtx_cuda_net *g);
double dtx_cuda_work_bytes(const struct dtx_cuda_net *g);
/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" */
void dtx_cuda_describe(const struct dtx_cuda_net *g, char *buf, size_t len);

/* The first failure so far (DT_OK: none), copied into err; waits for the queued kernels when
 * `wait` (a fault inside a kernel surfaces there). */
int dtx_cuda_status(struct dtx_cuda_net *g, bool wait, struct dt_error *err);

/* Host range [host, host + bytes) of a mirrored allocation: device to host, host to device. */
void dtx_cuda_download(struct dtx_cuda_net *g, void *host, size_t bytes);
void dtx_cuda_upload(struct dtx_cuda_net *g, const void *host, size_t bytes);

/* The layer-by-layer calls of exec/cpu/net.h on rows [b0, b0 + nb). */
void dtx_cuda_forward_layer(struct dtx_cuda_net *g, int i, int b0, int nb);
void dtx_cuda_backward_layer(struct dtx_cuda_net *g, int i, int b0, int nb);
/* dtk_net_begin_backward: labels (host, rows from b0, already uploaded) are checked on the
 * host; the mean loss of the rows comes back in *loss, and the last layer's output rows are
 * downloaded into the host net (dtk_net_correct_rows reads them there). */
int dtx_cuda_begin_backward(struct dtx_cuda_net *g, const int *labels, int b0, int nb,
                            double denom, double *loss, struct dt_error *err);
/* dtk_net_eval_loss: the same without a gradient (eval rows may be more than a pooled
 * gradient holds). */
int dtx_cuda_eval_loss(struct dtx_cuda_net *g, const int *labels, int b0, int nb, double *loss,
                       struct dt_error *err);

/* ZERO, COPY (dst = src or dst += src, n floats) and UPDATE on mirrored host addresses. */
void dtx_cuda_zero(struct dtx_cuda_net *g, void *host, size_t bytes);
void dtx_cuda_copy(struct dtx_cuda_net *g, void *dst, const void *src, long n, bool sum);
void dtx_cuda_adam(struct dtx_cuda_net *g, float *p, const float *grad, float *m, float *v,
                   long n, long t, const struct dtk_adam *cfg);
void dtx_cuda_sgd(struct dtx_cuda_net *g, float *p, const float *grad, float *buf, long n,
                  long t, const struct dtk_sgd *cfg);

#endif
