/* Tests of the compute cost model (libdt/costmodel.c): the bytes a convolution's lowering
 * streams, counted by hand from the layer shapes of seed 002's network, and the cost of an
 * op under explicit parameters, worked out in each test's comment. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dt/costmodel.h"
#include "dt/model.h"
#include "testdata.h"

/* Group set-up: seed 002's network, loaded once for all tests (*state). */
static int load_cnn690k(void **state)
{
    *state = test_zoo_model("cnn690k"); /* a failure to load fails the group */
    return 0;
}

static int free_model(void **state)
{
    dt_model_destroy(*state);
    return 0;
}

static struct dt_op compute(int layer, enum dt_phase phase, int samples)
{
    return (struct dt_op){.kind = DT_OP_COMPUTE, .phase = phase, .layer = layer,
                          .samples = samples};
}

/* A CPU device of 100 GFLOP/s fp32 and 20 GB/s of memory bandwidth, and cost parameters
 * with class c at efficiency eff and a per-op overhead. */
static struct dt_device_spec device_and_params(struct dt_cost_params *cp, enum dt_op_class c,
                                               double eff, double overhead_s)
{
    struct dt_device_spec d = {.kind = DT_DEV_CPU, .mem_bw_Bps = 20e9};
    d.peak_flops[DT_FP32] = 100e9;
    dt_cost_defaults(cp, DT_DEV_CPU);
    cp->eff[c] = eff;
    cp->overhead_s[c] = overhead_s;
    return d;
}

static void assert_rel(double got, double want)
{
    if (!(fabs(got - want) <= 1e-12 * fabs(want)))
        fail_msg("got %.15g, want %.15g", got, want);
}

/* Ensure the lowered bytes follow the shapes (seed 002, Figure 1): layer 0 is conv2d, 32
 * filters 3x3 on (1, 28, 28) -> (32, 26, 26): (1*3*3 + 32) x 676 = 27,716 floats per sample;
 * its backward computes no input gradient, so one pass. Layer 3 is conv2d_1, 128 filters
 * 3x3 on (32, 13, 13) -> (128, 11, 11): (32*9 + 128) x 121 = 50,336 floats, backward twice
 * (im2col for the weight gradient, col2im for the input gradient). A dense layer lowers
 * nothing. */
static void test_lowered_bytes(void **state)
{
    const struct dt_model *m = *state;
    assert_int_equal(m->layers[0].kind, DT_L_CONV2D);
    assert_int_equal(m->layers[3].kind, DT_L_CONV2D);
    struct dt_op f0 = compute(0, DT_PH_FORWARD, 64), b0 = compute(0, DT_PH_BACKWARD, 64);
    struct dt_op f3 = compute(3, DT_PH_FORWARD, 64), b3 = compute(3, DT_PH_BACKWARD, 64);
    assert_rel(dt_op_lowered_bytes(m, &f0), 4.0 * 27716 * 64);
    assert_rel(dt_op_lowered_bytes(m, &b0), 4.0 * 27716 * 64);
    assert_rel(dt_op_lowered_bytes(m, &f3), 4.0 * 50336 * 64);
    assert_rel(dt_op_lowered_bytes(m, &b3), 2 * 4.0 * 50336 * 64);
    for (int i = 0; i < m->n_layers; i++)
        if (m->layers[i].kind == DT_L_DENSE) {
            struct dt_op d = compute(i, DT_PH_FORWARD, 64);
            assert_true(dt_op_lowered_bytes(m, &d) == 0);
        }
}

/* Ensure a convolution costs max(flops / (peak eff), bytes / mem_bw) + lowered / lower_bw +
 * overhead. conv2d_1 forward, 64 samples: 2 x 128 x 121 x 288 multiply-adds + 128 x 121
 * bias adds = 8,936,576 FLOP per sample, 571,940,864 in all; at 100 GFLOP/s x 0.5 that is
 * 11.43881728 ms. Its activations (32 x 169 in + 128 x 121 out) x 4 B x 64 + 36,992 weights
 * x 4 B = 5,497,344 B take 0.27 ms at 20 GB/s: compute-bound. Lowering 12,886,016 B at
 * 8 GB/s: 1.610752 ms. Overhead 10 us. Total 13.05956928 ms. With lower_bw left at 0 the
 * lowering streams at mem_bw (20 GB/s: 0.6443008 ms), or at the calibrated mem_bw when one
 * is set (40 GB/s: 0.3221504 ms). */
static void test_conv_cost(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_CONV, 0.5, 10e-6);
    cp.lower_Bps = 8e9;
    struct dt_op f3 = compute(3, DT_PH_FORWARD, 64);
    double flops, bytes;
    dt_op_work(m, &f3, &flops, &bytes);
    assert_rel(flops, 571940864.0);
    assert_rel(bytes, 5497344.0);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f3), 13.05956928e-3);
    cp.lower_Bps = 0;
    assert_rel(dt_cost_compute(&cp, &dev, m, &f3), (11.43881728 + 0.6443008 + 0.010) * 1e-3);
    cp.mem_Bps = 40e9;
    assert_rel(dt_cost_compute(&cp, &dev, m, &f3), (11.43881728 + 0.3221504 + 0.010) * 1e-3);
}

/* Ensure a calibrated mem_bw sets the time of a memory-bound op: Adam over the 690,590
 * parameters moves 7 x 4 B each = 19,336,520 B; 12 FLOP each = 8,287,080 FLOP take 0.83 ms
 * at 100 GFLOP/s x 0.1, less than the bytes at 20 GB/s (0.966826 ms) but more than at
 * 40 GB/s (0.483413 ms). Overhead 1 us. */
static void test_update_cost_follows_mem_bw(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 0.1, 1e-6);
    struct dt_op u = {.kind = DT_OP_UPDATE, .layer = -1,
                      .region = {DT_BUF_PARAMS, 0, 690590}};
    assert_rel(dt_cost_compute(&cp, &dev, m, &u), 0.966826e-3 + 1e-6);
    cp.mem_Bps = 40e9;
    assert_rel(dt_cost_compute(&cp, &dev, m, &u), 0.8287080e-3 + 1e-6);
}

/* Ensure opt_bw, when calibrated, times the optimizer's passes and nothing else: Adam over
 * 690,590 parameters moves 19,336,520 B, at opt_bw 50 GB/s 0.3867304 ms (eff 1: its FLOPs
 * never bind; no overhead), whatever cache_bw says (1 MiB cache at 80 GB/s: it does not fit,
 * and a 10,000-parameter update that fits, 280,000 B, still takes 5.6 us at opt_bw); the
 * gradient reset writes 2,762,360 B: 55.2472 us; a pipeline's activation-gradient clear and
 * a copy keep the streaming bandwidth (mem_bw 20 GB/s: 10,000 floats cleared, 2 us; copied,
 * 4 us). Unset (0) every figure is mem_bw's, as before: 0.966826 ms for the update. Two
 * ranks sharing node_mem_bw 30 GB/s (share 0.75) get 37.5 GB/s each. */
static void test_optimizer_bandwidth(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    struct dt_op u = {.kind = DT_OP_UPDATE, .layer = -1, .region = {DT_BUF_PARAMS, 0, 690590}};
    struct dt_op small = {.kind = DT_OP_UPDATE, .layer = -1,
                          .region = {DT_BUF_PARAMS, 0, 10000}};
    struct dt_op reset = {.kind = DT_OP_ZERO, .layer = -1, .region = {DT_BUF_GRADS, 0, 690590}};
    struct dt_op dact = {.kind = DT_OP_ZERO, .layer = -1, .region = {DT_BUF_DACT, 0, 10000}};
    struct dt_op copy = {.kind = DT_OP_COPY, .layer = -1, .region = {DT_BUF_GRADS, 0, 10000},
                         .dst = {DT_BUF_COMM, 0, 10000}};
    assert_rel(dt_cost_op(&cp, &dev, m, &u), 0.966826e-3);
    assert_rel(dt_cost_op(&cp, &dev, m, &reset), 138.118e-6);
    cp.opt_Bps = 50e9;
    dev.cache_bytes = 1048576;
    cp.cache_Bps = 80e9;
    assert_rel(dt_cost_op(&cp, &dev, m, &u), 0.3867304e-3);
    assert_rel(dt_cost_op(&cp, &dev, m, &small), 5.6e-6);
    assert_rel(dt_cost_op(&cp, &dev, m, &reset), 55.2472e-6);
    dev.cache_bytes = 0;
    assert_rel(dt_cost_op(&cp, &dev, m, &dact), 2e-6);
    assert_rel(dt_cost_op(&cp, &dev, m, &copy), 4e-6);
    struct dt_cost_params two;
    cp.node_mem_Bps = 30e9;
    dt_cost_colocated(&cp, &dev, 2, &two);
    assert_rel(two.opt_Bps, 37.5e9);
}

/* Ensure an op whose bytes fit in the device's cache streams at cache_bw, and one that does
 * not at mem_bw: Adam over 690,590 parameters moves 19,336,520 B (above), over 10,000 moves
 * 280,000 B. With a 1 MiB cache, cache_bw 80 GB/s, mem_bw 20 GB/s (eff 1: the FLOPs never
 * bind) and no overhead: 280,000 / 80e9 = 3.5 us and 19,336,520 / 20e9 = 0.966826 ms. No
 * cache in the topology, or cache_bw unset: mem_bw for both (14 us for the small one). */
static void test_cache_bandwidth(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    struct dt_op big = {.kind = DT_OP_UPDATE, .layer = -1,
                        .region = {DT_BUF_PARAMS, 0, 690590}};
    struct dt_op small = big;
    small.region.count = 10000;
    dev.cache_bytes = 1048576;
    cp.cache_Bps = 80e9;
    assert_rel(dt_cost_compute(&cp, &dev, m, &small), 3.5e-6);
    assert_rel(dt_cost_compute(&cp, &dev, m, &big), 0.966826e-3);
    assert_rel(dt_cost_stream_bw(&cp, &dev, 1048576), 80e9);   /* exactly the cache: fits */
    assert_rel(dt_cost_stream_bw(&cp, &dev, 1048577), 20e9);
    cp.cache_Bps = 0;
    assert_rel(dt_cost_compute(&cp, &dev, m, &small), 14e-6);
    cp.cache_Bps = 80e9;
    dev.cache_bytes = 0;
    assert_rel(dt_cost_compute(&cp, &dev, m, &small), 14e-6);
}

/* Ensure the gradient reset writes 4 bytes per fp32 parameter at the stream bandwidth: 690,590
 * parameters = 2,762,360 B at 20 GB/s = 138.118 us; inside a 4 MiB cache at 80 GB/s,
 * 34.5295 us. */
static void test_grad_reset(void **state)
{
    (void)state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    assert_rel(dt_cost_grad_reset(&cp, &dev, 690590, 4.0), 138.118e-6);
    dev.cache_bytes = 4194304;
    cp.cache_Bps = 80e9;
    assert_rel(dt_cost_grad_reset(&cp, &dev, 690590, 4.0), 34.5295e-6);
}

/* Ensure dt_cost_op charges each local op kind as documented, on the device above (20 GB/s,
 * no cache) with no per-op overhead: ZERO of 690,590 floats writes 2,762,360 B: 138.118 us
 * (the gradient reset); LOAD of 64 Fashion-MNIST rows, 64 x 784 x 4 = 200,704 B: 10.0352 us;
 * COPY of 10,000 floats reads and writes 80,000 B: 4 us; a summing COPY reads two and writes
 * one, 120,000 B: 6 us; LOSS is part of the last forward: 0 uncalibrated (its exp_time
 * term: test_special_evals); communication and WAIT cost
 * nothing here (the network plays them); UPDATE and COMPUTE are dt_cost_compute's. */
/* Ensure a dense layer's packed weight bytes follow its parameters and are charged at
 * pack_bw only when calibrated. Layer 11 of cnn690k is dense 256 -> 1000: 257,000
 * parameters, 4 x 257,000 = 1,028,000 bytes forward; its backward also computes the input
 * gradient (layers before it train): twice that, 2,056,000. A convolution packs nothing
 * here (its lowering is lower_bw's). At pack_bw = 10 GB/s the forward of 64 samples costs
 * 1,028,000 / 1e10 = 102.8 us more than uncalibrated (pack_bw 0: not modelled). */
static void test_packed_bytes(void **state)
{
    const struct dt_model *m = *state;
    assert_rel(dt_op_packed_bytes(m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 11,
                                                     .phase = DT_PH_FORWARD, .samples = 64}),
               1028000);
    struct dt_op b = compute(11, DT_PH_BACKWARD, 64), f = compute(11, DT_PH_FORWARD, 64);
    assert_rel(dt_op_packed_bytes(m, &b), 2056000);
    assert_true(dt_op_packed_bytes(m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 0,
                                                      .phase = DT_PH_FORWARD,
                                                      .samples = 64}) == 0);
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_DENSE, 0.5, 0);
    double plain = dt_cost_compute(&cp, &dev, m, &f);
    cp.pack_Bps = 10e9;
    assert_rel(dt_cost_compute(&cp, &dev, m, &f) - plain, 102.8e-6);
}

static void test_cost_op_kinds(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    struct dt_op zero = {.kind = DT_OP_ZERO, .layer = -1, .region = {DT_BUF_GRADS, 0, 690590}};
    struct dt_op load = {.kind = DT_OP_LOAD, .layer = -1, .samples = 64, .bytes = 200704};
    struct dt_op copy = {.kind = DT_OP_COPY, .layer = -1, .region = {DT_BUF_GRADS, 0, 10000},
                         .dst = {DT_BUF_COMM, 0, 10000}};
    struct dt_op loss = {.kind = DT_OP_LOSS, .layer = m->n_layers - 1, .samples = 64};
    struct dt_op send = {.kind = DT_OP_SEND, .peer = 1, .region = {DT_BUF_GRADS, 0, 10000}};
    struct dt_op wait = {.kind = DT_OP_WAIT};
    struct dt_op update = {.kind = DT_OP_UPDATE, .layer = -1,
                           .region = {DT_BUF_PARAMS, 0, 690590}};
    struct dt_op f3 = compute(3, DT_PH_FORWARD, 64);
    assert_rel(dt_cost_op(&cp, &dev, m, &zero), 138.118e-6);
    /* the load gathers its 200,704 B: reads and writes them, 401,408 B at 20 GB/s */
    assert_rel(dt_cost_op(&cp, &dev, m, &load), 20.0704e-6);
    assert_rel(dt_cost_op(&cp, &dev, m, &copy), 4e-6);
    copy.sum = true;
    assert_rel(dt_cost_op(&cp, &dev, m, &copy), 6e-6);
    assert_true(dt_cost_op(&cp, &dev, m, &loss) == 0);
    assert_true(dt_cost_op(&cp, &dev, m, &send) == 0);
    assert_true(dt_cost_op(&cp, &dev, m, &wait) == 0);
    assert_rel(dt_cost_op(&cp, &dev, m, &update), 0.966826e-3);
    assert_rel(dt_cost_op(&cp, &dev, m, &f3), dt_cost_compute(&cp, &dev, m, &f3));
    /* bf16: the gradients are 2-byte, so clearing 690,590 of them writes 1,381,180 B
     * (69.059 us) and summing 10,000 moves 60,000 B (3 us), as the wire carries them */
    zero.precision = copy.precision = DT_BF16;
    assert_rel(dt_cost_op(&cp, &dev, m, &zero), 69.059e-6);
    assert_rel(dt_cost_op(&cp, &dev, m, &copy), 3e-6);
}

/* Ensure co-located ranks share node_mem_bw: mem_bw 20 GB/s, lower_bw 10 GB/s, node 30 GB/s.
 * Two ranks: share = 30 / (2 x 20) = 0.75, so 15 and 7.5 GB/s; one rank: 30 / 20 > 1, no
 * change; unset: no change. The Adam step above then takes 19,336,520 / 15e9 = 1.28910 ms. */
static void test_colocated_share(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp, out;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    cp.lower_Bps = 10e9;
    dt_cost_colocated(&cp, &dev, 2, &out);
    assert_rel(dt_cost_mem_bw(&out, &dev), 20e9);   /* unset: no contention */
    cp.node_mem_Bps = 30e9;
    dt_cost_colocated(&cp, &dev, 2, &out);
    assert_rel(out.mem_Bps, 15e9);
    assert_rel(out.lower_Bps, 7.5e9);
    struct dt_op u = {.kind = DT_OP_UPDATE, .layer = -1,
                      .region = {DT_BUF_PARAMS, 0, 690590}};
    assert_rel(dt_cost_compute(&out, &dev, m, &u), 19336520 / 15e9);
    dt_cost_colocated(&cp, &dev, 1, &out);
    assert_rel(dt_cost_mem_bw(&out, &dev), 20e9);
    assert_rel(dt_cost_lower_bw(&out, &dev), 10e9);
}

/* A GPU of 10 TFLOP/s fp32 and 100 TFLOP/s bf16 (no tf32, no fp16), 1 TB/s, 10 SMs, with the
 * GPU defaults but Winograd (test_winograd turns it on: cnn690k's convolutions are all 3x3
 * stride 1, and the closed forms below are of direct convolution), class c at efficiency 0.5
 * and 5 us per op. */
static struct dt_device_spec gpu_and_params(struct dt_cost_params *cp, enum dt_op_class c)
{
    struct dt_device_spec d = {.kind = DT_DEV_GPU, .mem_bw_Bps = 1e12, .sms = 10};
    d.peak_flops[DT_FP32] = 10e12;
    d.peak_flops[DT_BF16] = 100e12;
    dt_cost_defaults(cp, DT_DEV_GPU);
    cp->winograd = false;
    cp->eff[c] = 0.5;
    cp->overhead_s[c] = 5e-6;
    return d;
}

static struct dt_op at(struct dt_op op, enum dt_precision p)
{
    op.precision = p;
    return op;
}

/* Ensure each op class runs at its precision's peak: convolutions and dense layers at bf16's
 * 100 TFLOP/s, at fp32's when the device has no peak for the precision (tf32, fp16 here);
 * norms, pools, elementwise ops and the optimizer at fp32 whatever the precision. Elements
 * are 4 bytes in fp32 and tf32, 2 in bf16, fp16 and fp8. */
static void test_precision_peak(void **state)
{
    (void)state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_CONV, DT_BF16), 100e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_DENSE, DT_BF16), 100e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_CONV, DT_TF32), 10e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_DENSE, DT_FP16), 10e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_NORM, DT_BF16), 10e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_ELEMENTWISE, DT_BF16), 10e12);
    assert_rel(dt_cost_peak(&dev, DT_CLASS_UPDATE, DT_BF16), 10e12);
    double want[DT_PREC_COUNT] = {[DT_FP32] = 4, [DT_TF32] = 4, [DT_BF16] = 2, [DT_FP16] = 2,
                                  [DT_FP8] = 2};
    for (int p = 0; p < DT_PREC_COUNT; p++)
        if (p != DT_FP64) /* no plan computes in fp64 */
            assert_rel(dt_op_elem_bytes(&(struct dt_op){.precision = (enum dt_precision)p}),
                       want[p]);
}

/* Ensure a GPU convolution is a roofline at its precision with no lowering term, here without
 * quantisation (gemm_tile 0). conv2d_1 forward, 64 samples: 571,940,864 FLOP (above). bf16:
 * at 100 TFLOP/s x 0.5, 11.43881728 us; bytes (32 x 169 + 128 x 121) x 2 B x 64 + 36,992
 * weights x 2 B = 2,748,672 B, 2.748672 us at 1 TB/s: compute-bound; + 5 us launch =
 * 16.43881728 us, whatever lower_bw says. fp32 (and tf32, which this device lacks): at
 * 10 TFLOP/s x 0.5, 114.3881728 us + 5 us. max_pooling2d forward in bf16: in 21,632 + out
 * 5,408 elements x 2 B x 64 = 3,461,120 B, 3.46112 us at 1 TB/s, above its 1,384,448 FLOP at
 * fp32's 10 TFLOP/s x 0.5 (0.2768896 us): memory-bound, 8.46112 us. */
static void test_gpu_roofline(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    cp.gemm_tile = 0;
    cp.lower_Bps = 1e9;
    struct dt_op f3 = compute(3, DT_PH_FORWARD, 64);
    double flops, bytes;
    struct dt_op b = at(f3, DT_BF16);
    dt_op_work(m, &b, &flops, &bytes);
    assert_rel(bytes, 2748672);
    assert_rel(dt_cost_compute(&cp, &dev, m, &b), 16.43881728e-6);
    assert_rel(dt_cost_compute(&cp, &dev, m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 3,
                                                             .samples = 64,
                                                             .precision = DT_FP32}),
               119.3881728e-6);
    struct dt_op t = at(f3, DT_TF32);
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 119.3881728e-6);
    cp.eff[DT_CLASS_POOL] = 0.5;
    cp.overhead_s[DT_CLASS_POOL] = 5e-6;
    struct dt_op pool = at(compute(2, DT_PH_FORWARD, 64), DT_BF16);
    assert_rel(dt_cost_compute(&cp, &dev, m, &pool), 8.46112e-6);
}

/* Ensure conv and dense layers take their own tensor-core efficiency at 16 bits, and fp32 and
 * tf32 keep eff[], here without quantisation. conv2d_1 forward, 64 samples, bf16 (above):
 * 571,940,864 FLOP at 100 TFLOP/s x eff_conv_half 0.25 = 22.87763456 us, compute-bound, + 5 us
 * launch. dense (256 -> 1000) forward, 64 samples, bf16: 513,000 x 64 = 32,832,000 FLOP at
 * 100 TFLOP/s x eff_dense_half 0.125 = 2.62656 us, above its (256 + 1000) x 2 B x 64 + 257,000
 * x 2 B = 674,768 B (0.674768 us at 1 TB/s), + 5 us. conv2d_1 in tf32 without tf32 values
 * (tensor cores, as the 16-bit kernels): at eff_conv_half 0.25 of the tf32 peak (here fp32's
 * 10 TFLOP/s), 228.7763456 us + 5 us; without 16-bit values either, eff[conv] 0.5:
 * 114.3881728 us + 5 us. */
static void test_half_efficiency_by_class(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    cp.gemm_tile = 0;
    cp.eff_conv_half = 0.25;
    cp.eff_dense_half = 0.125;
    struct dt_op conv = at(compute(3, DT_PH_FORWARD, 64), DT_BF16);
    assert_rel(dt_cost_compute(&cp, &dev, m, &conv), 27.87763456e-6);
    struct dt_op dense = at(compute(11, DT_PH_FORWARD, 64), DT_BF16);
    double flops, bytes;
    dt_op_work(m, &dense, &flops, &bytes);
    assert_rel(flops, 32832000);
    assert_rel(bytes, 674768);
    assert_rel(dt_cost_compute(&cp, &dev, m, &dense), 7.62656e-6);
    struct dt_op t = at(compute(3, DT_PH_FORWARD, 64), DT_TF32);
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 233.7763456e-6);
    cp.eff_conv_half = 0; /* unset: the conv class's eff[] at the 16-bit peak, and at tf32 */
    assert_rel(dt_cost_compute(&cp, &dev, m, &conv), 16.43881728e-6);
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 119.3881728e-6);
}

/* Ensure fp32 gradients under bf16 (--grad-precision fp32, grads_f32) cost 4 bytes per
 * gradient where an op touches them, in closed form: the dense backward (256 -> 1000, 64
 * samples) moves 2 x 674,768 B in bf16; with its 257,000 weight gradients written at 4 bytes
 * instead of 2, + 514,000 B = 1,863,536 B; Adam's update reads a 4-byte
 * gradient (30 B per parameter instead of 28); the gradient reset and the unscale pass stream
 * twice the bytes; activations and the forward are as in bf16. */
static void test_grads_fp32_costs(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_UPDATE, 1.0, 0);
    double flops, bytes;
    struct dt_op b16 = at(compute(11, DT_PH_BACKWARD, 64), DT_BF16), b32 = b16;
    b32.grads_f32 = true;
    dt_op_work(m, &b16, &flops, &bytes);
    assert_rel(bytes, 1349536);
    dt_op_work(m, &b32, &flops, &bytes);
    assert_rel(bytes, 1863536);
    struct dt_op f32 = at(compute(11, DT_PH_FORWARD, 64), DT_BF16);
    f32.grads_f32 = true;
    dt_op_work(m, &f32, &flops, &bytes);
    assert_rel(bytes, 674768);
    struct dt_op u = {.kind = DT_OP_UPDATE, .layer = -1, .region = {DT_BUF_PARAMS, 0, 1000},
                      .precision = DT_BF16};
    dt_op_work(m, &u, &flops, &bytes);
    assert_rel(bytes, 28000);
    u.grads_f32 = true;
    dt_op_work(m, &u, &flops, &bytes);
    assert_rel(bytes, 30000);
    static const enum dt_op_kind passes[] = {DT_OP_ZERO, DT_OP_UNSCALE};
    for (int k = 0; k < 2; k++) {
        struct dt_op g = {.kind = passes[k], .layer = -1, .precision = DT_BF16,
                          .region = {DT_BUF_GRADS, 0, 690590}};
        double half = dt_cost_op(&cp, &dev, m, &g);
        g.grads_f32 = true;
        assert_true(half > 0);
        assert_rel(dt_cost_op(&cp, &dev, m, &g), 2 * half);
    }
}

/* Ensure tf32 conv and dense layers take their own efficiency when set, and fp32 keeps eff[]
 * (tf32 runs on tensor cores: another fraction of another peak). conv2d_1 forward, 64
 * samples, tf32 (no tf32 peak here: fp32's 10 TFLOP/s): 571,940,864 FLOP x eff_conv_tf32 0.25
 * = 228.7763456 us + 5 us launch; in fp32 eff[conv] 0.5: 114.3881728 us + 5 us; in bf16 the
 * 16-bit values (unset: eff[conv] at 100 TFLOP/s, 11.43881728 us + 5 us). eff_conv_tf32
 * unset: the 16-bit value where set (eff_conv_half 0.125 of the tf32 peak: 457.5526912 us
 * + 5 us), and fp32 keeps eff[conv]; neither set: eff[conv]. */
static void test_tf32_efficiency(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    cp.gemm_tile = 0;
    cp.eff_conv_tf32 = 0.25;
    cp.eff_dense_tf32 = 0.125;
    struct dt_op t = at(compute(3, DT_PH_FORWARD, 64), DT_TF32);
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 233.7763456e-6);
    struct dt_op f = at(compute(3, DT_PH_FORWARD, 64), DT_FP32);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f), 119.3881728e-6);
    struct dt_op h = at(compute(3, DT_PH_FORWARD, 64), DT_BF16);
    assert_rel(dt_cost_compute(&cp, &dev, m, &h), 16.43881728e-6);
    cp.eff_conv_tf32 = 0; /* unset: eff_conv_half, else eff[conv] */
    cp.eff_conv_half = 0.125;
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 462.5526912e-6);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f), 119.3881728e-6);
    cp.eff_conv_half = 0;
    assert_rel(dt_cost_compute(&cp, &dev, m, &t), 119.3881728e-6);
}

/* Ensure fp32 3x3 stride-1 convolutions do Winograd F(2x2, 3x3)'s 16 multiplies of direct
 * convolution's 36 on a GPU, in each pass, and nothing else does. conv2d_1 forward, 64
 * samples, fp32, no quantisation: 571,940,864 FLOP x 16 / 36 at 10 TFLOP/s x 0.5 =
 * 50.839187911 us (direct: 114.3881728 us), above its 5,497,344 B at 1 TB/s, + 5 us launch;
 * backward the same share of both GEMMs; tf32, bf16 and fp16 (tensor-core kernels in cuDNN)
 * and the CPU (winograd off) keep their direct cost. On resnet50-imagenet: a 3x3 stride-1
 * conv gets 16 / 36, a 1x1 and a 3x3 stride-2 conv 1. */
static void test_winograd(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    cp.gemm_tile = 0;
    struct dt_op f = at(compute(3, DT_PH_FORWARD, 64), DT_FP32);
    struct dt_op b = at(compute(3, DT_PH_BACKWARD, 64), DT_FP32);
    double direct_b = dt_cost_compute(&cp, &dev, m, &b);
    cp.winograd = true;
    assert_rel(dt_op_winograd_share(&cp, m, &f), 16.0 / 36.0);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f), 114.3881728e-6 * 16 / 36 + 5e-6);
    assert_rel(dt_cost_compute(&cp, &dev, m, &b) - 5e-6, (direct_b - 5e-6) * 16 / 36);
    enum dt_precision tensor_core[] = {DT_TF32, DT_BF16, DT_FP16};
    for (int i = 0; i < 3; i++) {
        struct dt_op t = at(f, tensor_core[i]);
        assert_rel(dt_op_winograd_share(&cp, m, &t), 1);
        double with = dt_cost_compute(&cp, &dev, m, &t);
        cp.winograd = false;
        assert_rel(dt_cost_compute(&cp, &dev, m, &t), with);
        cp.winograd = true;
    }
    struct dt_cost_params cpu;
    dt_cost_defaults(&cpu, DT_DEV_CPU);
    assert_rel(dt_op_winograd_share(&cpu, m, &f), 1);
    struct dt_model *r = test_zoo_model("resnet50-imagenet");
    int seen[3] = {0}; /* 3x3 stride 1, 3x3 stride 2, 1x1 */
    for (int i = 0; i < r->n_layers; i++) {
        const struct dt_layer *l = &r->layers[i];
        if (l->kind != DT_L_CONV2D)
            continue;
        double share = dt_op_winograd_share(&cp, r, &(struct dt_op){.kind = DT_OP_COMPUTE,
                                                                     .layer = i, .samples = 1});
        int k = l->kh == 1 ? 2 : l->kh == 3 && l->sh == 1 ? 0 : l->kh == 3 ? 1 : -1;
        if (k < 0)
            continue;
        assert_rel(share, k == 0 ? 16.0 / 36.0 : 1);
        seen[k]++;
    }
    assert_true(seen[0] > 0 && seen[1] > 0 && seen[2] > 0);
    dt_model_destroy(r);
}

/* Ensure tile and wave quantisation as documented, tile 128 on 10 SMs. 1000 x 256: 8 x 2 =
 * 16 tiles, 2 waves of 10: 256,000 / (20 x 128 x 128) = 0.78125; without waves (split-K)
 * 256,000 / (16 x 16,384) = 0.9765625. 1000 x 32: the narrow side gets a 64-wide tile, 8
 * tiles in one wave of 10: 32,000 / (10 x 128 x 64) = 0.390625. No tile or no SMs: 1. */
static void test_gemm_quantisation(void **state)
{
    (void)state;
    assert_rel(dt_gemm_quantisation(1000, 256, 128, 10, true), 0.78125);
    assert_rel(dt_gemm_quantisation(1000, 256, 128, 10, false), 0.9765625);
    assert_rel(dt_gemm_quantisation(1000, 32, 128, 10, true), 0.390625);
    assert_rel(dt_gemm_quantisation(1000, 256, 0, 10, true), 1);
    assert_rel(dt_gemm_quantisation(1000, 256, 128, 0, true), 1);
}

/* Ensure a convolution's GEMMs are quantised by their shapes (tile 128, 10 SMs). conv2d_1 of
 * 64 samples: forward 7,744 output pixels x 128 filters: 61 tiles, 7 waves:
 * 991,232 / (70 x 16,384) = 0.8642857; 571,940,864 FLOP at 100 TFLOP/s x 0.5 / q =
 * 13.2349952 us. Backward data: 10,816 input pixels x 32 channels (64-wide tiles): 85 tiles,
 * 9 waves: 346,112 / (90 x 8,192) = 0.4694444; backward weight 128 x (32 x 9 = 288), split-K:
 * 36,864 / (3 x 16,384) = 0.75. 64 x (8,921,088 / (5e13 x 0.4694444) + 8,936,576 /
 * (5e13 x 0.75)) = 39.5762377 us, above its 5,497,344 B at 1 TB/s. No overhead. */
static void test_conv_quantised(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    cp.overhead_s[DT_CLASS_CONV] = 0;
    struct dt_op f = at(compute(3, DT_PH_FORWARD, 64), DT_BF16);
    struct dt_op b = at(compute(3, DT_PH_BACKWARD, 64), DT_BF16);
    double q_main, q_weight;
    dt_op_gemm_quantisation(&cp, &dev, m, &f, &q_main, &q_weight);
    assert_rel(q_main, 991232.0 / (70 * 16384));
    assert_rel(q_weight, 1);
    dt_op_gemm_quantisation(&cp, &dev, m, &b, &q_main, &q_weight);
    assert_rel(q_main, 346112.0 / (90 * 8192));
    assert_rel(q_weight, 0.75);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f), 13.2349952e-6);
    if (fabs(dt_cost_compute(&cp, &dev, m, &b) - 39.5762377e-6) > 1e-12)
        fail_msg("backward: got %.10g", dt_cost_compute(&cp, &dev, m, &b));
    /* a dense layer: 64 rows x 1,000 units, 8 tiles in one wave: 64,000 / (10 x 64 x 128) */
    struct dt_op d = at(compute(11, DT_PH_FORWARD, 64), DT_BF16);
    dt_op_gemm_quantisation(&cp, &dev, m, &d, &q_main, &q_weight);
    assert_rel(q_main, 64000.0 / (10 * 64 * 128));
}

/* Ensure that on a GPU an activation after a conv or dense layer is fused (costs nothing,
 * forward and backward) while other elementwise layers (dropout, softmax) and pools are not,
 * and that a CPU fuses nothing. */
static void test_fused_activations(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_ELEMENTWISE);
    int fused[] = {1, 4, 7, 12, 14}, kept[] = {2, 10, 16};
    for (int i = 0; i < 5; i++)
        for (int ph = 0; ph < 2; ph++) {
            struct dt_op op = at(compute(fused[i], (enum dt_phase)ph, 64), DT_BF16);
            assert_true(dt_op_fused(&cp, m, &op));
            assert_true(dt_cost_compute(&cp, &dev, m, &op) == 0);
        }
    for (int i = 0; i < 3; i++) {
        struct dt_op op = at(compute(kept[i], DT_PH_FORWARD, 64), DT_BF16);
        assert_false(dt_op_fused(&cp, m, &op));
        assert_true(dt_cost_compute(&cp, &dev, m, &op) >= 5e-6);
    }
    struct dt_cost_params cpu;
    dt_cost_defaults(&cpu, DT_DEV_CPU);
    struct dt_op relu = compute(1, DT_PH_FORWARD, 64);
    assert_false(dt_op_fused(&cpu, m, &relu));
}

/* Ensure a tensor-core convolution in NCHW pays the transposes to NHWC and back, and nothing
 * else does. conv2d_1 (in 32 x 13 x 13 = 5,408, out 128 x 11 x 11 = 15,488 elements) of 64
 * samples in bf16: forward the input and output each read and written, 2 x 20,896 x 2 B x 64
 * = 5,349,376 B, 5.349376 us at 1 TB/s, + 2 transpose kernels x 5 us; backward (data and
 * weight gradients) twice the bytes and 4 kernels; conv2d (layer 0, no data gradient: in 784,
 * out 21,632) backward one call: 2 x 22,416 x 2 B x 64 = 5,738,496 B, 2 kernels. Controls:
 * NHWC (conv_nchw off), fp32 (the fp32 units run NCHW natively), tf32 on this device without
 * a tf32 peak (fp32 units), a dense layer: no transposes, the cost unchanged. */
static void test_conv_layout(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_CONV);
    struct dt_op f = at(compute(3, DT_PH_FORWARD, 64), DT_BF16);
    struct dt_op b = at(compute(3, DT_PH_BACKWARD, 64), DT_BF16);
    struct dt_op b0 = at(compute(0, DT_PH_BACKWARD, 64), DT_BF16);
    double nhwc_f = dt_cost_compute(&cp, &dev, m, &f), nhwc_b = dt_cost_compute(&cp, &dev, m, &b);
    int k;
    assert_true(dt_op_layout_bytes(&cp, &dev, m, &f, &k) == 0 && k == 0);
    cp.conv_nchw = true;
    assert_rel(dt_op_layout_bytes(&cp, &dev, m, &f, &k), 5349376);
    assert_int_equal(k, 2);
    assert_rel(dt_cost_compute(&cp, &dev, m, &f) - nhwc_f, 15.349376e-6);
    assert_rel(dt_op_layout_bytes(&cp, &dev, m, &b, &k), 2 * 5349376.0);
    assert_int_equal(k, 4);
    assert_rel(dt_cost_compute(&cp, &dev, m, &b) - nhwc_b, 30.698752e-6);
    assert_rel(dt_op_layout_bytes(&cp, &dev, m, &b0, &k), 5738496);
    assert_int_equal(k, 2);
    struct dt_op others[] = {at(f, DT_FP32), at(f, DT_TF32), at(compute(11, DT_PH_FORWARD, 64),
                                                                    DT_BF16)};
    for (int i = 0; i < 3; i++) {
        assert_true(dt_op_layout_bytes(&cp, &dev, m, &others[i], &k) == 0 && k == 0);
        double with = dt_cost_compute(&cp, &dev, m, &others[i]);
        cp.conv_nchw = false;
        assert_rel(dt_cost_compute(&cp, &dev, m, &others[i]), with);
        cp.conv_nchw = true;
    }
    /* with a tf32 peak, tf32 runs on tensor cores: transposed, at 4 bytes */
    dev.peak_flops[DT_TF32] = 50e12;
    assert_rel(dt_op_layout_bytes(&cp, &dev, m, &others[1], &k), 2 * 5349376.0);
}

/* Ensure a flatten is a view of its input, as dtexec runs it: no FLOPs, no bytes, so only
 * the op's overhead (5 us here) forward and backward. */
static void test_flatten_is_a_view(void **state)
{
    const struct dt_model *m = *state;
    int f = 0;
    while (f < m->n_layers && m->layers[f].kind != DT_L_FLATTEN)
        f++;
    assert_true(f < m->n_layers);
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_ELEMENTWISE, 0.1, 5e-6);
    for (int ph = DT_PH_FORWARD; ph <= DT_PH_BACKWARD; ph++) {
        struct dt_op op = compute(f, (enum dt_phase)ph, 64);
        double flops = -1, bytes = -1;
        dt_op_work(m, &op, &flops, &bytes);
        assert_true(flops == 0 && bytes == 0);
        assert_rel(dt_cost_compute(&cp, &dev, m, &op), 5e-6);
    }
}

/* Ensure the per-kind defaults: a GPU has implicit-GEMM convolutions, fused activations,
 * 128-wide tiles, 5 us per kernel and 1 ms per iteration; a CPU none of the GPU terms. And
 * that mixed-precision Adam is the same 28 B per parameter memory pass (24 + 2 + 2): over
 * 690,590 parameters 19,336,520 B, 19.33652 us at 1 TB/s on the GPU, + 5 us. */
static void test_gpu_defaults(void **state)
{
    const struct dt_model *m = *state;
    struct dt_cost_params g, c;
    dt_cost_defaults(&g, DT_DEV_GPU);
    dt_cost_defaults(&c, DT_DEV_CPU);
    assert_true(g.implicit_gemm && g.fuse_activations && g.gemm_tile == 128);
    assert_false(c.implicit_gemm || c.fuse_activations || c.gemm_tile);
    assert_true(g.winograd);
    assert_false(c.winograd);
    assert_rel(g.iter_overhead_s, 1e-3);
    assert_rel(g.overhead_s[DT_CLASS_CONV], 5e-6);
    /* a CPU: 1 us per op and per step outside its ops (dtexec --ops-csv: 0.7 us) */
    assert_rel(c.iter_overhead_s, 1e-6);
    assert_rel(c.overhead_s[DT_CLASS_DENSE], 1e-6);
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_UPDATE);
    struct dt_op u = {.kind = DT_OP_UPDATE, .layer = -1, .precision = DT_BF16,
                      .region = {DT_BUF_PARAMS, 0, 690590}};
    assert_rel(dt_cost_compute(&cp, &dev, m, &u), 19.33652e-6 + 5e-6);
}


/* Ensure the exp and tanh evaluations follow the shapes of tiny-gpt (16 tokens, 32 wide, 4
 * heads, vocabulary 64; layer 3 the causal attention core, 8 the GELU after mlp.c_fc's 128
 * units, the last the softmax) at 64 samples: GELU 16 x 128 x 64 = 131,072 tanh forward and
 * as many backward (its derivative needs the tanh again); the core keeps 16 x 17 / 2 = 136
 * scores per head, 4 x 136 x 64 = 34,816 exp forward, none backward, half on each of 2
 * tensor-parallel ranks (17,408); the softmax 16 x 64 x 64 = 65,536 exp forward, none
 * backward; the LOSS op's log-sum-exp 65,536; a dense layer none. Charged only when
 * calibrated: at tanh_time 10 ns the GELU forward costs 1.31072 ms more (the op is FLOP-bound
 * here: 1.05 MFLOP at 10 GFLOP/s against 1 MB at 20 GB/s), and at exp_time 2 ns the LOSS op
 * 131.072 us (0 uncalibrated). */
/* Ensure attention's score traffic in closed form on bert-large-phase2's first attention
 * (layer 3: 16 heads, 288 tokens: 16 x 288^2 = 1,327,104 scores per sequence), 32 sequences:
 * fp16 forward 4 x 2 + 1 = 9 B per score (382,205,952 B), backward 7 x 2 + 1 = 15 B
 * (637,009,920 B), fp32 forward 17 B (721,944,576 B), half of it per shard of 2; nothing
 * for other layers or on a CPU (dtexec keeps a row of scores in cache); the op's time grows
 * by exactly bytes / mem_bw (1 TB/s here: 382.205952 us). */
static void test_score_bytes(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("bert-large-phase2");
    assert_int_equal(m->layers[3].kind, DT_L_ATTENTION);
    struct dt_cost_params cp;
    struct dt_device_spec dev = gpu_and_params(&cp, DT_CLASS_DENSE);
    struct dt_op f = at(compute(3, DT_PH_FORWARD, 32), DT_FP16);
    assert_rel(dt_op_score_bytes(&cp, m, &f), 382205952);
    assert_rel(dt_op_score_bytes(&cp, m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 3,
                                                         .phase = DT_PH_BACKWARD,
                                                         .samples = 32,
                                                         .precision = DT_FP16}),
               637009920);
    assert_rel(dt_op_score_bytes(&cp, m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 3,
                                                         .samples = 32}),
               721944576);
    struct dt_op half = f;
    half.shards = 2;
    assert_rel(dt_op_score_bytes(&cp, m, &half), 191102976);
    assert_true(dt_op_score_bytes(&cp, m, &(struct dt_op){.kind = DT_OP_COMPUTE, .layer = 4,
                                                          .samples = 32}) == 0);
    double with = dt_cost_compute(&cp, &dev, m, &f);
    cp.score_traffic = false;
    assert_true(dt_op_score_bytes(&cp, m, &f) == 0);
    assert_rel(with - dt_cost_compute(&cp, &dev, m, &f), 382.205952e-6);
    dt_cost_defaults(&cp, DT_DEV_CPU);
    assert_false(cp.score_traffic);
    dt_model_destroy(m);
}

static void test_special_evals(void **state)
{
    (void)state;
    struct dt_model *m = test_zoo_model("tiny-gpt");
    int last = m->n_layers - 1;
    assert_int_equal(m->layers[8].kind, DT_L_GELU);
    assert_int_equal(m->layers[3].kind, DT_L_ATTENTION_CORE);
    assert_int_equal(m->layers[last].kind, DT_L_SOFTMAX);
    struct {
        struct dt_op op;
        double exp, tanh;
    } want[] = {
        {compute(8, DT_PH_FORWARD, 64), 0, 131072},
        {compute(8, DT_PH_BACKWARD, 64), 0, 131072},
        {compute(3, DT_PH_FORWARD, 64), 34816, 0},
        {compute(3, DT_PH_BACKWARD, 64), 0, 0},
        {compute(last, DT_PH_FORWARD, 64), 65536, 0},
        {compute(last, DT_PH_BACKWARD, 64), 0, 0},
        {{.kind = DT_OP_LOSS, .layer = last, .samples = 64}, 65536, 0},
        {compute(7, DT_PH_FORWARD, 64), 0, 0},
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        double e, t;
        dt_op_special_evals(m, &want[i].op, &e, &t);
        if (e != want[i].exp || t != want[i].tanh)
            fail_msg("case %zu: %g exp, %g tanh; want %g, %g", i, e, t, want[i].exp,
                     want[i].tanh);
    }
    struct dt_op core = compute(3, DT_PH_FORWARD, 64);
    core.shards = 2;
    double e, t;
    dt_op_special_evals(m, &core, &e, &t);
    assert_rel(e, 17408);
    struct dt_cost_params cp;
    struct dt_device_spec dev = device_and_params(&cp, DT_CLASS_ELEMENTWISE, 0.1, 0);
    struct dt_op gelu = want[0].op, loss = want[6].op;
    double plain = dt_cost_compute(&cp, &dev, m, &gelu);
    assert_true(dt_cost_op(&cp, &dev, m, &loss) == 0);
    cp.tanh_s = 10e-9;
    cp.exp_s = 2e-9;
    assert_rel(dt_cost_compute(&cp, &dev, m, &gelu) - plain, 1.31072e-3);
    assert_rel(dt_cost_op(&cp, &dev, m, &loss), 131.072e-6);
    dt_model_destroy(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_lowered_bytes),
        cmocka_unit_test(test_conv_cost),
        cmocka_unit_test(test_update_cost_follows_mem_bw),
        cmocka_unit_test(test_optimizer_bandwidth),
        cmocka_unit_test(test_cache_bandwidth),
        cmocka_unit_test(test_grad_reset),
        cmocka_unit_test(test_cost_op_kinds),
        cmocka_unit_test(test_flatten_is_a_view),
        cmocka_unit_test(test_packed_bytes),
        cmocka_unit_test(test_colocated_share),
        cmocka_unit_test(test_precision_peak),
        cmocka_unit_test(test_gpu_roofline),
        cmocka_unit_test(test_half_efficiency_by_class),
        cmocka_unit_test(test_tf32_efficiency),
        cmocka_unit_test(test_winograd),
        cmocka_unit_test(test_gemm_quantisation),
        cmocka_unit_test(test_conv_quantised),
        cmocka_unit_test(test_fused_activations),
        cmocka_unit_test(test_conv_layout),
        cmocka_unit_test(test_gpu_defaults),
        cmocka_unit_test(test_special_evals),
        cmocka_unit_test(test_score_bytes),
        cmocka_unit_test(test_grads_fp32_costs),
    };
    return cmocka_run_group_tests(tests, load_cnn690k, free_model);
}
