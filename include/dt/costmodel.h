/* The cost model of DESIGN.md: what an op costs, from datasheet values and calibrated factors.
 *   compute op:  t = max(flops / (peak[class, precision] * eff[class] * q), bytes / bw)
 *                    + overhead[class]
 *                  (peak: the op's precision's peak for convolutions and dense layers, fp32
 *                   for the rest (dt_cost_peak); bytes at the storage dtype's size
 *                   (dt_op_elem_bytes); q: on GPUs, the GEMM's tile and wave quantisation
 *                   over the device's SMs (dt_op_gemm_quantisation), 1 elsewhere; on GPUs an
 *                   activation after a conv, dense, norm or add costs nothing: it is fused
 *                   into its producer's kernel (dt_op_fused))
 *                  (bw: cache_bw when the op's bytes fit in the device's cache, else mem_bw;
 *                   the optimizer step: opt_bw when calibrated)
 *                  (+ lowered bytes / lower_bw for a convolution: the im2col matrix and the
 *                   GEMM's output, which im2col-based convolutions stream besides the GEMM;
 *                   what makes a convolution with few channels far slower per FLOP)
 *                  (+ packed bytes / pack_bw for a dense layer, when calibrated: its weights
 *                   packed once per GEMM call, what makes small micro-batches slow)
 *                  (+ exp and tanh evaluations x their calibrated times, for the ops that
 *                   make them (dt_op_special_evals): softmax, attention scores, sigmoid,
 *                   tanh, GELU's tanh forward and again backward, LSTM gates, and the LOSS
 *                   op's log-sum-exp; a libm call costs tens of FLOPs' time on a CPU core)
 *                  (+ on GPUs, an attention op's score bytes / mem_bw (dt_op_score_bytes):
 *                   the heads' T x T scores, probabilities and dropout mask that unfused
 *                   attention writes to and reads from device memory between its kernels)
 *   message:     per hop latency + bytes / bandwidth on each link, links shared max-min
 *   iteration:   + framework overhead per iteration + resetting the gradients (4 bytes per
 *                  parameter written at mem_bw, or opt_bw when calibrated: dtexec, like
 *                  PyTorch's zero_grad, clears the gradient buffer every step); epoch: + data
 *                  read / read bandwidth
 * The defaults below are assumptions until dtvalidate fits them (a calibration file). */
#ifndef DT_COSTMODEL_H
#define DT_COSTMODEL_H

#include "dt/model.h"
#include "dt/plan.h"
#include "dt/topology.h"

enum dt_op_class {
    DT_CLASS_CONV,        /* conv2d, conv2d_transpose */
    DT_CLASS_DENSE,       /* dense, lstm, attention */
    DT_CLASS_POOL,        /* maxpool, avgpool, globalpool, upsample */
    DT_CLASS_ELEMENTWISE, /* activations, dropout, add, concat, flatten, softmax, embedding */
    DT_CLASS_NORM,        /* batchnorm, layernorm */
    DT_CLASS_UPDATE,      /* optimizer step */
    DT_CLASS_COUNT
};

struct dt_cost_params {
    double eff[DT_CLASS_COUNT];        /* fraction of the device's fp32 peak reached */
    double overhead_s[DT_CLASS_COUNT]; /* fixed time per op (kernel launch, framework) */
    double iter_overhead_s;            /* per iteration, per rank */
    double reduce_Bps;                 /* summing received floats: bytes/s of the sum; 0 = mem_bw/3 */
    double mem_Bps;                    /* memory bandwidth of compute ops; 0 = the device's */
    double lower_Bps;                  /* convolution lowering (im2col/col2im); 0 = mem_bw */
    double cache_Bps;                  /* traffic of an op that fits in the device's cache;
                                          0 = mem_bw (see dt_cost_stream_bw) */
    double node_mem_Bps;               /* memory bandwidth the ranks of a node share; 0 = no
                                          contention (see dt_cost_colocated) */
    double pack_Bps;                   /* packing a dense layer's weights into the GEMM's
                                          panels, once per call (dt_op_packed_bytes); 0 = not
                                          modelled (the datasheet default) */
    double exp_s, tanh_s;              /* one exp / tanh evaluation (dt_op_special_evals); 0 =
                                          not modelled (the datasheet default) */
    double opt_Bps;                    /* the optimizer's passes over parameter-sized state,
                                          its update and the gradient reset (pure prefetched
                                          streams, faster than mem_bw's mix of ops); 0 = the
                                          other ops' bandwidth (dt_cost_stream_bw) */
    /* Link overrides; 0 keeps the topology's value. */
    double intra_bw_Bps, intra_lat_s, nic_bw_Bps, nic_lat_s, net_lat_s;
    double read_Bps;                   /* data read; 0 keeps the topology's value */
    double eager_bytes;                /* point-to-point messages up to this size move at once
                                          (MPI's eager protocol); larger ones wait for their
                                          receive (rendezvous). Default 64 KiB */
    /* GPU terms (dt_cost_defaults sets them for gpus; off for cpus, whose calibrated
     * lowering and packing model what im2col + OpenBLAS do). */
    bool implicit_gemm;                /* convolutions as implicit GEMM (cuDNN): no lowering */
    bool fuse_activations;             /* activations fused into their producer (dt_op_fused) */
    bool score_traffic;                /* attention's T x T scores pass through device memory
                                          (dt_op_score_bytes) */
    int gemm_tile;                     /* edge of a GEMM output tile for tile and wave
                                          quantisation over the device's SMs; 0 = none */
    bool winograd;                     /* fp32 3x3 stride-1 convolutions as Winograd
                                          F(2x2, 3x3) (dt_op_winograd_share) */
    bool conv_nchw;                    /* activations in NCHW: a tensor-core convolution
                                          transposes them to NHWC and back
                                          (dt_op_layout_bytes); off = NHWC, as dtsim assumed */
    /* Fractions a calibration fits so that it carries over to another device's datasheet. */
    double eff_conv_half, eff_dense_half; /* conv and dense at 16- and 8-bit precisions,
                                          fraction of that precision's peak; 0 = eff[] (tensor
                                          cores reach a lower fraction of their peak than fp32,
                                          convolutions less than a transformer's large GEMMs) */
    double eff_conv_tf32, eff_dense_tf32; /* conv and dense at tf32, fraction of the tf32
                                          peak; 0 = eff_conv_half / eff_dense_half when set,
                                          else eff[] (tf32 runs on tensor cores, whose
                                          kernels reach another fraction of their peak than
                                          fp32's: fitted apart where rows are tf32) */
    double eff_mem;                    /* fraction of the device's memory bandwidth reached
                                          when mem_Bps is 0; 0 = 1 */
};

const char *dt_op_class_name(enum dt_op_class c);
enum dt_op_class dt_layer_class(enum dt_layer_kind kind);

/* Defaults for a device kind (documented assumptions, replaced by calibration; README "The
 * GPU compute model" gives the GPU values and why). */
void dt_cost_defaults(struct dt_cost_params *cp, enum dt_device_kind kind);

/* The FLOP/s an op of class c at precision p runs at on dev, before efficiency: convolutions
 * and dense layers at p's peak (fp32's when the device gives none for p), everything else at
 * fp32 (frameworks keep softmax, norms' statistics and the optimizer in fp32). */
double dt_cost_peak(const struct dt_device_spec *dev, enum dt_op_class c, enum dt_precision p);

/* Bytes per element of a compute op's tensors: its precision's storage dtype
 * (dt_precision_storage: 4 for fp32 and tf32, 2 for bf16, fp16 and fp8). */
double dt_op_elem_bytes(const struct dt_op *op);

/* Fraction of the work of an M x N GEMM output that is useful when it is cut into tiles of
 * `tile` x `tile` (a dimension of at most tile/2 gets a tile/2-wide tile, as cuBLAS and
 * cuDNN pick narrower tiles for narrow GEMMs) and, with waves, the tiles run in waves of
 * `sms` (one tile per SM at a time): useful M N / (waves x sms x tile area). Without waves
 * (split-K GEMMs, which cut K to fill the SMs) only the tile padding counts. 1 when tile or
 * sms is 0. */
double dt_gemm_quantisation(double m, double n, int tile, int sms, bool waves);

/* Quantisation of a conv or dense op's GEMMs on dev (cp->gemm_tile, dev->sms): *q_main for
 * the forward GEMM (rows = samples x output pixels or tokens, columns = filters or units) or
 * the backward-data GEMM (rows = samples x input pixels, columns = input channels), with
 * waves; *q_weight for the backward-weight GEMM (filters x C_in kh kw), split-K: tile padding
 * only. 1 for other ops, grouped convolutions, lstm and attention, and without tile or SMs. */
void dt_op_gemm_quantisation(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                             const struct dt_model *m, const struct dt_op *op, double *q_main,
                             double *q_weight);

/* The fraction of a conv op's direct multiplies it does when cp->winograd: 16 / 36 for an
 * fp32 ungrouped 3x3 stride-1 conv2d (forward, backward data and backward weights), 1
 * otherwise. cuDNN runs such convolutions with its Winograd algorithms (cuDNN API reference:
 * CUDNN_CONVOLUTION_FWD_ALGO_WINOGRAD, _BWD_DATA_ALGO_WINOGRAD, _BWD_FILTER_ALGO_WINOGRAD_
 * NONFUSED, 3x3 filters, unit stride), which Lavin and Gray ("Fast Algorithms for
 * Convolutional Neural Networks", CVPR 2016, arXiv 1509.09308) show do F(2x2, 3x3) in 16
 * multiplies where direct convolution does 36 (2.25 x fewer). At tf32, bf16, fp16 and fp8
 * cuDNN picks implicit-GEMM tensor-core kernels instead, so those keep their direct FLOPs. */
double dt_op_winograd_share(const struct dt_cost_params *cp, const struct dt_model *m,
                            const struct dt_op *op);

/* Bytes a convolution op moves transposing its activations between NCHW and NHWC when
 * cp->conv_nchw and it runs on tensor cores (its precision tf32 or 16-/8-bit, with a peak for
 * that precision on dev); 0 otherwise. Tensor-core convolution kernels take NHWC, and given
 * NCHW tensors cuDNN transposes them to NHWC and the result back, as separate passes (NVIDIA
 * Deep Learning Performance Guide, "Convolutional Layers User's Guide": "Tensor Layouts In
 * Memory: NCHW vs NHWC"; PyTorch's "Channels Last Memory Format" tutorial). The cuDNN
 * Developer Guide says it *may* (Legacy API, "Data and Filter Formats"): charging every call
 * is an upper bound. Each transpose
 * reads and writes a tensor at the op's dtype size: forward the input and the output, 2 (in +
 * out) e per sample; backward the data-gradient call's dy and dx and the weight-gradient
 * call's x and dy, twice that (once without a data gradient). *kernels: the transposes run. */
double dt_op_layout_bytes(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          const struct dt_model *m, const struct dt_op *op, int *kernels);

/* Whether a COMPUTE op is an activation (relu, tanh, sigmoid, gelu) that cp fuses into the
 * kernel of the conv, dense, norm or add that produced its input (cuDNN's conv + bias +
 * activation and batch norm + activation; its backward runs in the producer's backward), and
 * so costs nothing of its own. */
bool dt_op_fused(const struct dt_cost_params *cp, const struct dt_model *m,
                 const struct dt_op *op);

/* FLOPs and memory bytes of a compute op (per op, all its samples). Bytes count elements at
 * dt_op_elem_bytes; an UPDATE is one fused Adam pass (as apex's and PyTorch's fused Adam):
 * 28 B per parameter, fp32 parameters, m and v read and written and the gradient read (in
 * mixed precision a 2-byte gradient read and a 2-byte weight copy written: 28 B too). */
void dt_op_work(const struct dt_model *m, const struct dt_op *op, double *flops, double *bytes);

/* Bytes an attention op moves through device memory for its heads' T x T scores when
 * cp->score_traffic (0 otherwise and for other ops), as unfused attention runs it (Hugging
 * Face's and NVIDIA DeepLearningExamples' BertSelfAttention: matmul, scale + mask, softmax,
 * dropout, matmul), per score element at the op's dtype size e: forward 4e + 1 (the QK^T
 * GEMM writes S, softmax + dropout read S and write the dropped probabilities P' and a 1-byte
 * mask, the PV GEMM reads P'); backward 7e + 1 (the dO V^T GEMM writes dP', the dropout +
 * softmax backward reads dP', the mask and P' and writes dS, the dQ and dK GEMMs each read
 * dS, the dV GEMM reads P'). These passes are memory-bound (a head's GEMMs have K = 64, far
 * below a GPU's FLOP/byte balance), so they grow with T^2 while the projections grow with
 * T: 16 x per sequence from 128 to 512 tokens. Scores per head as dt_op_special_evals. */
double dt_op_score_bytes(const struct dt_cost_params *cp, const struct dt_model *m,
                         const struct dt_op *op);

/* Bytes an im2col-based convolution op streams besides its GEMM's operands (0 for the
 * other ops): the lowered input matrix and the output, (C_in kh kw + filters) x output
 * pixels floats per sample forward; backward twice that when it also computes the input
 * gradient (col2im), once otherwise. */
double dt_op_lowered_bytes(const struct dt_model *m, const struct dt_op *op);

/* The exp and tanh evaluations of a COMPUTE or LOSS op (all its samples, its tensor-parallel
 * share): forward softmax 1 exp per value, attention 1 per score a head keeps (T (T + 1) / 2
 * causal, T^2 otherwise), sigmoid 1 exp, tanh 1 tanh, GELU (tanh form) 1 tanh forward and 1
 * backward (its derivative needs the tanh again), LSTM 3 exp + 2 tanh per unit and step
 * forward, 1 tanh backward; LOSS: 1 exp per logit (the cross-entropy's log-sum-exp, or the
 * binary one's log(1 + exp)). Backward of softmax, sigmoid, tanh and attention reuse the
 * forward's outputs: none. */
void dt_op_special_evals(const struct dt_model *m, const struct dt_op *op, double *n_exp,
                         double *n_tanh);

/* Bytes a GEMM-based dense layer's op streams to pack its weight matrix (OpenBLAS packs the
 * operand panels on every call, so the weights are read and written once per call whatever
 * the rows): 4 x parameters forward, twice that backward when it also computes the input
 * gradient (the dX GEMM packs W again, and dW is read and written whole), once otherwise.
 * What makes many small micro-batches slower per sample than one large batch; 0 for the
 * other ops. */
double dt_op_packed_bytes(const struct dt_model *m, const struct dt_op *op);

/* The memory bandwidth compute ops get on dev: cp's calibrated value, else the datasheet's. */
double dt_cost_mem_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev);

/* The bandwidth an op that moves `bytes` streams them at on dev: cache_bw (cp's, else
 * mem_bw) when the device has a cache (topology `cache`) and they fit in it, else mem_bw.
 * The bytes an op moves stand for its working set; measured here, Adam's step over 0.1 M
 * parameters ran at 48 GB/s, over 5.8 M (163 MB) at 39 GB/s, memcpy of 256 MiB at 25. */
double dt_cost_stream_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                         double bytes);

/* The bandwidth of convolution lowering on dev: cp's calibrated value, else dt_cost_mem_bw. */
double dt_cost_lower_bw(const struct dt_cost_params *cp, const struct dt_device_spec *dev);

/* Seconds clearing n elements of elem_bytes each takes on dev (the gradients at the start of
 * an iteration: 4 bytes each in fp32, 2 in bf16/fp16), at opt_bw when calibrated. */
double dt_cost_grad_reset(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                          long n, double elem_bytes);

/* The parameters one rank of k that compute side by side on a node sees: they share the
 * node's memory bandwidth (node_mem_Bps), so its memory-bound rates (mem_bw, lower_bw, the
 * reduction's) are scaled by min(1, node_mem_Bps / (k mem_bw)). Data-parallel ranks run the
 * same ops in lockstep, so a static share stands for the dynamic one; an op only one rank
 * runs (a central server's update) is charged the shared rate too. Unset (0) or k = 1 with
 * enough bandwidth: out = *cp. */
void dt_cost_colocated(const struct dt_cost_params *cp, const struct dt_device_spec *dev, int k,
                       struct dt_cost_params *out);
/* Every rank's parameters, for the first n_ranks ranks of topo: its node group's
 * (group_cp[g], one per group of topo; NULL: cp for every rank) as dt_cost_colocated shares
 * them among the ranks of its node. The one rule of dtsim's player and its SimGrid peer.
 * Returns a malloc'd array of n_ranks, or NULL when out of memory. */
struct dt_cost_params *dt_cost_rank_params(const struct dt_cost_params *cp,
                                           const struct dt_cost_params *group_cp,
                                           const struct dt_topology *topo, int n_ranks);

/* Seconds a COMPUTE or UPDATE op takes on dev. */
double dt_cost_compute(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                       const struct dt_model *m, const struct dt_op *op);

/* Seconds a local op takes on dev: COMPUTE and UPDATE as dt_cost_compute, ZERO as clearing
 * its region (dt_cost_grad_reset), COPY as a pass over it (a sum: dt_cost_reduce), LOAD as
 * its bytes at mem_bw; LOSS costs nothing of its own (the last layer's forward includes it).
 * Communication ops (SEND, RECV, COLL, WAIT) cost 0 here: their time is the network's. */
double dt_cost_op(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                  const struct dt_model *m, const struct dt_op *op);

/* Seconds to sum n received elements of elem_bytes each into a buffer on dev (the dtype the
 * wire carries: the same size the network is charged). */
double dt_cost_reduce(const struct dt_cost_params *cp, const struct dt_device_spec *dev,
                      long n, double elem_bytes);

#endif
