/* CPU float32 layer kernels for dtexec, in the style of karpathy/llm.c.
 *
 * One signature per layer:
 *   dtk_X_forward(out, [saved state,] inp, weight, bias, sizes...)
 *   dtk_X_backward(dinp, dweight, dbias, [work,] dout, inp, weight, [saved state,] sizes...)
 * Outputs first, then const inputs, then sizes. Tensors are batch first, images NCHW.
 * Backward ACCUMULATES (+=) into dinp, dweight and dbias: the caller zeroes them once, so that
 * residual branches, layers with several consumers and gradient accumulation over micro-batches
 * need nothing special. dinp may be NULL (the first layer needs no input gradient); so may dbias
 * when the layer has no bias. Forward overwrites its output.
 * Scratch memory ("work") is supplied by the caller, sized by the matching _workspace_floats()
 * function, so that a network makes all its allocations once.
 * Parameter layouts are those of include/dt/model.h.
 * Arrays passed to one call must not overlap (the definitions declare them restrict), except
 * where a comment says otherwise.
 */
#ifndef DTK_LAYERS_H
#define DTK_LAYERS_H

#include <stdbool.h>
#include <stddef.h>

#include "rng.h"

/* Threads of the kernels: OpenBLAS's thread count (openblas_set_num_threads, as dtexec
 * --threads does, or OPENBLAS_NUM_THREADS; dtk_set_num_threads sets it). The kernels run
 * their parallel work (a convolution's blocks of samples, the slices of a large GEMM) on one
 * pool of that many threads, with OpenBLAS on one thread inside each task (parallel.h). An
 * MPI rank per core wants 1. */
void dtk_set_num_threads(int n);
int dtk_num_threads(void);

/* ---- dense ----
 * inp (N, in), weight (out, in) row-major, bias (out) or NULL, out (N, out).
 * N is the batch, or batch x T for a dense layer applied to each step of a sequence. */
void dtk_dense_forward(float *out, const float *inp, const float *weight, const float *bias,
                       int N, int in, int outd);
void dtk_dense_backward(float *dinp, float *dweight, float *dbias, const float *dout,
                        const float *inp, const float *weight, int N, int in, int outd);

/* ---- windows: conv2d, conv2d_transpose, pools ----
 * Input (B, C, H, W); output (B, F, OH, OW). Pools use F = C and ignore groups. */
struct dtk_conv_dims {
    int B, C, H, W;
    int F;
    int kh, kw, sh, sw;
    int pad_t, pad_l, pad_b, pad_r;
    int groups;
    int OH, OW; /* set by dtk_conv_dims_finish / dtk_convt_dims_finish */
    /* conv2d: threads its workspace serves (0 counts as 1). Each thread takes whole blocks
     * of samples with its own scratch; the kernels use at most this many threads. */
    int threads;
};
/* OH = (H + pad_t + pad_b - kh) / sh + 1 (floor), likewise OW: conv2d and pools.
 * Returns false when the window does not fit or a size is not positive. */
bool dtk_conv_dims_finish(struct dtk_conv_dims *d);
/* OH = (H - 1) sh + kh - pad_t - pad_b, likewise OW: conv2d_transpose. */
bool dtk_convt_dims_finish(struct dtk_conv_dims *d);

/* conv2d: weight (F, C/groups, kh, kw), bias (F) or NULL.
 * im2col of a chunk of samples then one GEMM per group over the whole chunk (the batch is
 * folded into the GEMM's N dimension, which keeps N large for small feature maps). With
 * d->threads > 1 threads take chunks side by side; backward then sums each thread's weight
 * and bias gradients after the chunks (in thread order), so that those sums are rounded
 * differently from the one-thread order (the input gradient is not: its chunks are disjoint). */
long dtk_conv2d_workspace_floats(const struct dtk_conv_dims *d);
void dtk_conv2d_forward(float *out, float *work, const float *inp, const float *weight,
                        const float *bias, const struct dtk_conv_dims *d);
void dtk_conv2d_backward(float *dinp, float *dweight, float *dbias, float *work,
                         const float *dout, const float *inp, const float *weight,
                         const struct dtk_conv_dims *d);

/* conv2d_transpose (groups = 1): weight (C, F, kh, kw) as PyTorch's ConvTranspose2d, bias (F).
 * It is the adjoint of conv2d: out = col2im(W^T inp). U-Net uses stride = kernel. */
long dtk_convt_workspace_floats(const struct dtk_conv_dims *d);
void dtk_convt_forward(float *out, float *work, const float *inp, const float *weight,
                       const float *bias, const struct dtk_conv_dims *d);
void dtk_convt_backward(float *dinp, float *dweight, float *dbias, float *work,
                        const float *dout, const float *inp, const float *weight,
                        const struct dtk_conv_dims *d);

/* maxpool: argmax (B, C, OH, OW) keeps the index inside the input plane (ih * W + iw) of each
 * maximum (first one on ties); padding never wins. */
void dtk_maxpool_forward(float *out, int *argmax, const float *inp, const struct dtk_conv_dims *d);
void dtk_maxpool_backward(float *dinp, const float *dout, const int *argmax,
                          const struct dtk_conv_dims *d);
/* The same writing dinp (zero but at the maxima) instead of adding to it: for a gradient that
 * nothing has written yet, which then needs no zeroing first (likewise the _set forms of relu
 * and dropout below). */
void dtk_maxpool_backward_set(float *dinp, const float *dout, const int *argmax,
                              const struct dtk_conv_dims *d);
/* avgpool: the mean over the cells of the window that lie inside the input (padding excluded,
 * as Keras' "same" average pooling does). */
void dtk_avgpool_forward(float *out, const float *inp, const struct dtk_conv_dims *d);
void dtk_avgpool_backward(float *dinp, const float *dout, const struct dtk_conv_dims *d);

/* global average pool: inp (B, C, S) with S = H*W, out (B, C). */
void dtk_globalpool_forward(float *out, const float *inp, int B, int C, int S);
void dtk_globalpool_backward(float *dinp, const float *dout, int B, int C, int S);

/* ---- elementwise activations over n floats ---- */
void dtk_relu_forward(float *out, const float *inp, long n);
void dtk_relu_backward(float *dinp, const float *dout, const float *inp, long n);
void dtk_relu_backward_set(float *dinp, const float *dout, const float *inp, long n);
void dtk_tanh_forward(float *out, const float *inp, long n);
void dtk_tanh_backward(float *dinp, const float *dout, const float *out, long n);
void dtk_sigmoid_forward(float *out, const float *inp, long n);
void dtk_sigmoid_backward(float *dinp, const float *dout, const float *out, long n);
/* GELU, tanh approximation: 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))). */
void dtk_gelu_forward(float *out, const float *inp, long n);
void dtk_gelu_backward(float *dinp, const float *dout, const float *inp, long n);

/* ---- softmax and cross-entropy ----
 * logits (B, V), probs (B, V), labels (B) in [0, V). */
void dtk_softmax_forward(float *probs, const float *logits, int B, int V);
/* Plain softmax backward: dinp += p * (dout - sum(dout * p)) row by row. */
void dtk_softmax_backward(float *dinp, const float *dout, const float *probs, int B, int V);
/* Softmax then cross-entropy, mean over the batch: returns
 * (1/B) sum_b (logsumexp(logits_b) - logits_b[labels_b]), computed in double. */
double dtk_softmax_xent_forward(float *probs, const float *logits, const int *labels, int B, int V);
/* Fused gradient with respect to the logits: dlogits += (probs - onehot(labels)) / B. */
void dtk_softmax_xent_backward(float *dlogits, const float *probs, const int *labels, int B, int V);
/* Number of rows whose arg max equals the label (first maximum on ties). */
int dtk_count_correct(const float *scores, const int *labels, int B, int V);
/* The same over the channel axis of (B, C, S) (an NCHW per-pixel classifier: S = H*W;
 * labels (B, S)); the loss is the mean over the B*S positions and the gradient is scaled by
 * `scale` (1/(B*S) for that mean). The (B, V) forms above are these with S = 1. */
void dtk_softmax_ch_forward(float *probs, const float *logits, int B, int C, long S);
void dtk_softmax_ch_backward(float *dinp, const float *dout, const float *probs, int B, int C,
                             long S);
double dtk_softmax_xent_ch_forward(float *probs, const float *logits, const int *labels, int B,
                                   int C, long S);
void dtk_softmax_xent_ch_backward(float *dlogits, const float *probs, const int *labels, int B,
                                  int C, long S, float scale);
/* Vocabulary-parallel cross-entropy (Megatron-LM's vocab_parallel_cross_entropy) on G
 * groups (tokens) of C logits, a rank's columns [first, first + C) of the vocabulary, of which
 * the first `valid` are real (the rest padding, left out). The tensor group allreduces each
 * statistic between the calls: mx (max), then target and sumexp (sum).
 * max: each group's largest real logit (-FLT_MAX when it holds none);
 * sums: its target's logit (0 unless this rank holds the label) and sum of exp(z - mx);
 * finish: probs = exp(z - mx) / sumexp (padding 0), dlogits += (probs - onehot) x scale, and
 * the mean over groups of mx + log(sumexp) - target (in double, as the whole softmax's). */
void dtk_vocab_xent_max(float *mx, const float *logits, int G, int C, int valid);
void dtk_vocab_xent_sums(float *target, float *sumexp, const float *logits, const float *mx,
                         const int *labels, int G, int C, int valid, long first);
double dtk_vocab_xent_finish(float *probs, float *dlogits, const float *logits,
                             const float *mx, const float *target, const float *sumexp,
                             const int *labels, int G, int C, int valid, long first,
                             float scale);
long dtk_count_correct_ch(const float *scores, const int *labels, int B, int C, long S);
/* Sigmoid with binary cross-entropy on n independent outputs, labels 0 or 1 (a single sigmoid
 * output is a 2-class classifier, as in Keras): probs = sigmoid(logits); returns the mean
 * loss; backward adds (p - y) * scale to dlogits. */
double dtk_sigmoid_bce_forward(float *probs, const float *logits, const int *labels, long n);
void dtk_sigmoid_bce_backward(float *dlogits, const float *probs, const int *labels, long n,
                              float scale);

/* ---- dropout (inverted): keeps each element with probability 1 - rate and scales it by
 * 1 / (1 - rate); mask (n) receives that factor (0 or 1/(1-rate)). Element k is kept or not by
 * the uniform at position first + k of the counter-based stream key (dtk_rng_counter_uniforms):
 * a mask is a function of (key, the elements' positions), whoever draws it. rate = 0 copies. */
void dtk_dropout_forward(float *out, float *mask, const float *inp, long n, float rate,
                         uint64_t key, uint64_t first);
/* The same with mask already holding the n uniforms; rate > 0. */
void dtk_dropout_forward_drawn(float *out, float *mask, const float *inp, long n, float rate);
void dtk_dropout_backward(float *dinp, const float *dout, const float *mask, long n);
void dtk_dropout_backward_set(float *dinp, const float *dout, const float *mask, long n);

/* ---- batchnorm over (B, C, S): statistics per channel c over the B x S values.
 * NCHW images: C channels, S = H*W; vectors (N): C = N, S = 1; sequences (T, D) channel last:
 * pass B*T as B, D as C, S = 1.
 * Training normalises with the biased batch variance and updates the running statistics with
 * PyTorch's convention: running = (1 - momentum) running + momentum batch, the running
 * variance taking the unbiased batch variance (Keras' momentum 0.99 is PyTorch's 0.01).
 * mean (C) and rstd (C) = 1/sqrt(var + eps) are kept for backward. */
void dtk_batchnorm_forward_train(float *out, float *mean, float *rstd, float *running_mean,
                                 float *running_var, const float *inp, const float *gamma,
                                 const float *beta, int B, int C, int S, float eps,
                                 float momentum);
void dtk_batchnorm_forward_eval(float *out, const float *inp, const float *gamma,
                                const float *beta, const float *running_mean,
                                const float *running_var, int B, int C, int S, float eps);
void dtk_batchnorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *gamma, const float *mean,
                            const float *rstd, int B, int C, int S);

/* ---- layernorm over the last axis: inp (N, D); mean (N), rstd (N) kept for backward. */
void dtk_layernorm_forward(float *out, float *mean, float *rstd, const float *inp,
                           const float *gamma, const float *beta, int N, int D, float eps);
void dtk_layernorm_backward(float *dinp, float *dgamma, float *dbeta, const float *dout,
                            const float *inp, const float *gamma, const float *mean,
                            const float *rstd, int N, int D);

/* ---- data movement ---- */
/* residual add: out = a + b. Its backward is dtk_accumulate(da, dout) for each input. */
void dtk_add_forward(float *out, const float *a, const float *b, long n);
/* dst += src. */
void dtk_accumulate(float *dst, const float *src, long n);
/* channel concat: inp (B, Cin, S) goes to channels [c_off, c_off + Cin) of out (B, Cout, S). */
void dtk_concat_forward(float *out, const float *inp, int B, int Cin, int S, int Cout, int c_off);
void dtk_concat_backward(float *dinp, const float *dout, int B, int Cin, int S, int Cout,
                         int c_off);
/* nearest upsampling: inp (B, C, H, W) -> out (B, C, H*s, W*s). */
void dtk_upsample_forward(float *out, const float *inp, int B, int C, int H, int W, int s);
void dtk_upsample_backward(float *dinp, const float *dout, int B, int C, int H, int W, int s);
/* embedding: ids (N) -> out (N, D) rows of table (vocab, D). An id outside [0, vocab) gives a
 * zero row and no gradient (the network validates ids before calling). */
void dtk_embedding_forward(float *out, const int *ids, const float *table, int N, int vocab,
                           int D);
void dtk_embedding_backward(float *dtable, const float *dout, const int *ids, int N, int vocab,
                            int D);
/* The same on a vocabulary shard (Megatron-LM's VocabParallelEmbedding): table holds rows
 * [first, first + rows) of the whole; other ids give zero rows and no gradient. */
void dtk_embedding_forward_rows(float *out, const int *ids, const float *table, int N,
                                long first, long rows, int D);
void dtk_embedding_backward_rows(float *dtable, const float *dout, const int *ids, int N,
                                 long first, long rows, int D);
/* learned rows added to every sample: out (B, T, D) += rows (T, D) (BERT's position table;
 * with T = 1 and B = samples x tokens, one token-type row added to every token). */
void dtk_rows_add_forward(float *out, const float *rows, int B, int T, int D);
void dtk_rows_add_backward(float *drows, const float *dout, int B, int T, int D);
/* first token of each sequence: inp (B, T, D) -> out (B, D) (BERT's [CLS] pooling). */
void dtk_seqpool_forward(float *out, const float *inp, int B, int T, int D);
void dtk_seqpool_backward(float *dinp, const float *dout, int B, int T, int D);

/* ---- LSTM (Keras layout and semantics): inp (B, T, D); wx (4H, D), wh (4H, H), b (4H) with
 * gates in the order i, f, c, o; sigmoid gates, tanh cell and output; zero initial state.
 * out is (B, T, H) when seq, else (B, H) (the last step). cache holds what backward needs:
 * dtk_lstm_cache_floats(B, T, H) floats. */
long dtk_lstm_cache_floats(int B, int T, int H);
long dtk_lstm_workspace_floats(int B, int T, int H);
void dtk_lstm_forward(float *out, float *cache, const float *inp, const float *wx,
                      const float *wh, const float *b, int B, int T, int D, int H, bool seq);
void dtk_lstm_backward(float *dinp, float *dwx, float *dwh, float *db, float *work,
                       const float *dout, const float *inp, const float *wx, const float *wh,
                       const float *cache, int B, int T, int D, int H, bool seq);

/* ---- multi-head self-attention (no mask): inp (B, T, D), w = Wq, Wk, Wv, Wo each (D, D)
 * applied as x W^T, then bq, bk, bv, bo each (D); heads divide D. Scores are scaled by
 * 1/sqrt(D/heads). cache: dtk_attention_cache_floats(B, T, D, heads) floats. */
long dtk_attention_cache_floats(int B, int T, int D, int heads);
long dtk_attention_workspace_floats(int B, int T, int D, int heads);
void dtk_attention_forward(float *out, float *cache, const float *inp, const float *w,
                           int B, int T, int D, int heads);
void dtk_attention_backward(float *dinp, float *dw, float *work, const float *dout,
                            const float *inp, const float *w, const float *cache, int B, int T,
                            int D, int heads);

/* ---- attention core (GPT, llm.c's cut): qkv (B, T, 3D) holds q | k | v of each token side
 * by side, out (B, T, D); head h owns columns [h dh, (h+1) dh) of q, k, v and out (dh =
 * D/heads). Per head P = softmax(q k^T / sqrt(dh)), with causal row t keeping columns <= t
 * (the others 0); out = P v. att (B, heads, T, T) keeps P for backward. No parameters.
 * Backward adds to dqkv; its scratch is dtk_attn_core_workspace_floats(T, threads) floats,
 * for at most `threads` threads (one (sample, head) pair per task). */
long dtk_attn_core_workspace_floats(int T, int threads);
void dtk_attn_core_forward(float *out, float *att, const float *qkv, int B, int T, int D,
                           int heads, bool causal);
void dtk_attn_core_backward(float *dqkv, float *work, int threads, const float *dout,
                            const float *qkv, const float *att, int B, int T, int D, int heads);

#endif
