/* The CUDA backend of dtexec: float32 layer kernels on the GPU, device memory, and an NCCL
 * allreduce. Plain C prototypes; behind them, when configure found nvcc: layers.cu (kernels,
 * nvcc) and runtime.c/nccl.c (host code, gcc); else stub.c and nccl_stub.c, whose functions
 * all fail with "no CUDA backend built" (DT_EINPUT: the user asked for a backend this build
 * does not have). Callers need no #ifdef:
 * dtcuda_device_count() is 0 in both the stub and a CUDA build on a machine without a GPU.
 *
 * Semantics are those of the CPU kernels (exec/cpu/layers.h), which are the oracle the GPU
 * kernels are tested against: same argument order (outputs, then const inputs, then sizes),
 * NCHW, row-major weights, backward ACCUMULATES (+=) into dinp/dweight/dbias, NULL dinp or
 * dbias skips that gradient, forward overwrites. The conv/pool geometry and the Adam settings
 * are the CPU's own structs, so one description drives either backend.
 *
 * Every pointer to a tensor is a DEVICE pointer (from dtcuda_malloc), except where a name says
 * host. Kernels are queued on the context's stream and return at once: a status of DT_OK
 * means the launch was accepted; a fault inside a kernel surfaces at the next dtcuda_sync() or
 * dtcuda_to_host(). Every function fills err (which may be NULL) when it fails.
 * Matrix products run in true FP32 (cuBLAS' default math mode; TF32 is not enabled). */
#ifndef DTCUDA_KERNELS_H
#define DTCUDA_KERNELS_H

#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

#include "dt/error.h"
#include "../cpu/layers.h"
#include "../cpu/optim.h"

/* ---- backend and devices ---- */

/* True when this build has the CUDA backend (false in the stub). */
bool dtcuda_built(void);
/* Number of usable GPUs; 0 when there is none, no driver, or no CUDA backend. Never fails. */
int dtcuda_device_count(void);

/* A context owns, on one device, a stream and a cuBLAS handle bound to it. */
struct dtcuda;
/* Makes device `device` (0-based) current for the calling thread and creates the context. */
int dtcuda_create(struct dtcuda **out, int device, struct dt_error *err);
void dtcuda_destroy(struct dtcuda *cx);
/* "NVIDIA H100 80GB HBM3 (sm_90, 79.1 GiB)" into buf; for logs and run records. */
int dtcuda_describe(const struct dtcuda *cx, char *buf, size_t len, struct dt_error *err);
/* Waits for everything queued on the stream; reports a fault of any earlier kernel. */
int dtcuda_sync(struct dtcuda *cx, struct dt_error *err);

/* ---- device memory ---- */

/* *dptr receives `bytes` of device memory, uninitialised; dtcuda_free(NULL) does nothing. */
int dtcuda_malloc(void **dptr, size_t bytes, struct dt_error *err);
void dtcuda_free(void *dptr);
/* Zeroes `bytes` at dptr (queued on the stream). */
int dtcuda_zero(struct dtcuda *cx, void *dptr, size_t bytes, struct dt_error *err);
/* Host to device: waits for the stream (then the copy), so the host buffer may be reused at
 * once, pinned or not. Simple and safe; an overlapped loader would need an async variant. */
int dtcuda_to_device(struct dtcuda *cx, void *dst, const void *host_src, size_t bytes,
                     struct dt_error *err);
/* Device to host: waits for the stream, so host_dst holds the result on return. */
int dtcuda_to_host(struct dtcuda *cx, void *host_dst, const void *src, size_t bytes,
                   struct dt_error *err);

/* ---- dense: inp (N, in), weight (outd, in), bias (outd) or NULL, out (N, outd) ---- */
int dtcuda_dense_forward(struct dtcuda *cx, float *out, const float *inp, const float *weight,
                         const float *bias, int N, int in, int outd, struct dt_error *err);
/* dinp += dout W, dweight += dout^T inp, dbias += column sums of dout (each may be NULL). */
int dtcuda_dense_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                          const float *dout, const float *inp, const float *weight, int N,
                          int in, int outd, struct dt_error *err);

/* ---- relu over n floats (derivative 0 at 0, as the CPU) ---- */
int dtcuda_relu_forward(struct dtcuda *cx, float *out, const float *inp, long n,
                        struct dt_error *err);
int dtcuda_relu_backward(struct dtcuda *cx, float *dinp, const float *dout, const float *inp,
                         long n, struct dt_error *err);

/* ---- softmax + cross-entropy: logits (B, V), probs (B, V), labels (B) in [0, V) ----
 * losses (B) receives logsumexp(logits_b) - logits_b[label_b] per row (NaN for a label outside
 * [0, V)); the CPU's mean loss is their mean, taken on the host after dtcuda_to_host. */
int dtcuda_softmax_xent_forward(struct dtcuda *cx, float *probs, float *losses,
                                const float *logits, const int *labels, int B, int V,
                                struct dt_error *err);
/* dlogits += (probs - onehot(labels)) scale; scale = 1 / B for the mean over these rows (a
 * micro-batch of a larger step: 1 / the step's rows). */
int dtcuda_softmax_xent_backward(struct dtcuda *cx, float *dlogits, const float *probs,
                                 const int *labels, int B, int V, float scale,
                                 struct dt_error *err);

/* ---- conv2d (im2col + cuBLAS): inp (B, C, H, W), weight (F, C/groups, kh, kw), bias (F) or
 * NULL, out (B, F, OH, OW); d filled by dtk_conv_dims_finish. work is device scratch of
 * dtcuda_conv2d_workspace_floats(d) floats (the same for forward and backward). */
long dtcuda_conv2d_workspace_floats(const struct dtk_conv_dims *d);
int dtcuda_conv2d_forward(struct dtcuda *cx, float *out, float *work, const float *inp,
                          const float *weight, const float *bias, const struct dtk_conv_dims *d,
                          struct dt_error *err);
int dtcuda_conv2d_backward(struct dtcuda *cx, float *dinp, float *dweight, float *dbias,
                           float *work, const float *dout, const float *inp, const float *weight,
                           const struct dtk_conv_dims *d, struct dt_error *err);

/* ---- maxpool: out and argmax (B, C, OH, OW), argmax as the CPU's (index ih*W + iw inside the
 * input plane, first maximum on ties, -1 for a window wholly in the padding). */
int dtcuda_maxpool_forward(struct dtcuda *cx, float *out, int *argmax, const float *inp,
                           const struct dtk_conv_dims *d, struct dt_error *err);
int dtcuda_maxpool_backward(struct dtcuda *cx, float *dinp, const float *dout, const int *argmax,
                            const struct dtk_conv_dims *d, struct dt_error *err);

/* ---- Adam over one flat buffer of n floats (or a slice of it: a ZeRO shard), step t >= 1,
 * both flavors of exec/cpu/optim.h with the same formulas. */
int dtcuda_adam_step(struct dtcuda *cx, float *params, const float *grads, float *m, float *v,
                     long n, long t, const struct dtk_adam *cfg, struct dt_error *err);

/* ---- SGD over n floats, step t >= 1 (dtk_sgd_step's semantics; buf NULL when momentum is
 * 0) ---- */
int dtcuda_sgd_step(struct dtcuda *cx, float *params, const float *grads, float *buf, long n,
                    long t, const struct dtk_sgd *cfg, struct dt_error *err);

/* ---- device-to-device: dst = src, or dst += src (n floats; the regions do not overlap) ---- */
int dtcuda_copy(struct dtcuda *cx, void *dst, const void *src, size_t bytes,
                struct dt_error *err);
int dtcuda_accumulate(struct dtcuda *cx, float *dst, const float *src, long n,
                      struct dt_error *err);

/* ---- NCCL: in-place sum allreduce of a float buffer across ranks, one GPU per rank ----
 * Built when configure found nccl.h; otherwise these fail like the stub. The unique id is
 * made by one rank and sent to the others by the caller (MPI_Bcast of DTCUDA_NCCL_ID_BYTES). */
#define DTCUDA_NCCL_ID_BYTES 128
bool dtcuda_nccl_built(void);
int dtcuda_nccl_unique_id(unsigned char id[DTCUDA_NCCL_ID_BYTES], struct dt_error *err);
struct dtcuda_comm;
/* Joins the communicator of nranks ranks named by id, as `rank`, on cx's device and stream.
 * Collective: every rank must call it. */
int dtcuda_comm_create(struct dtcuda_comm **out, struct dtcuda *cx,
                       const unsigned char id[DTCUDA_NCCL_ID_BYTES], int nranks, int rank,
                       struct dt_error *err);
void dtcuda_comm_destroy(struct dtcuda_comm *comm);
/* buf (n floats, device) = sum over ranks of buf; queued on the context's stream. */
int dtcuda_allreduce_sum(struct dtcuda_comm *comm, float *buf, long n, struct dt_error *err);

#ifdef __cplusplus
}
#endif

#endif
