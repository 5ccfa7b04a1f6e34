# Tests of the shared core that no single folder owns (collectives, plans).
check_PROGRAMS += tests/test_collective
TESTS += tests/test_collective
tests_test_collective_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_collective_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_costmodel
TESTS += tests/test_costmodel
tests_test_costmodel_SOURCES = tests/test_costmodel.c tests/testdata.c tests/testdata.h
tests_test_costmodel_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_costmodel_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Tests that play plans with dtsim's player (sim/player.c) besides the shared core.
PLAYER_TEST_SOURCES = sim/player.c sim/matchindex.c sim/network.c sim/fabric.c tests/testdata.c \
	tests/testdata.h
PLAYER_TEST_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
PLAYER_TEST_LIBS = sim/libdtsimengine.a $(DTCORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_pipeline
TESTS += tests/test_pipeline
tests_test_pipeline_SOURCES = tests/test_pipeline.c $(PLAYER_TEST_SOURCES)
tests_test_pipeline_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_pipeline_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_pipeline_LDADD = $(PLAYER_TEST_LIBS)

check_PROGRAMS += tests/test_plan_check
TESTS += tests/test_plan_check
tests_test_plan_check_SOURCES = tests/test_plan_check.c $(PLAYER_TEST_SOURCES)
tests_test_plan_check_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_plan_check_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_plan_check_LDADD = $(PLAYER_TEST_LIBS)

# Activation gradients by liveness: pool sizes by hand, no two live gradients overlapping.
check_PROGRAMS += tests/test_dact
TESTS += tests/test_dact
tests_test_dact_SOURCES = tests/test_dact.c tests/testdata.c tests/testdata.h
tests_test_dact_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_dact_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
check_PROGRAMS += tests/test_commpool
TESTS += tests/test_commpool
tests_test_commpool_SOURCES = tests/test_commpool.c tests/testdata.c tests/testdata.h
tests_test_commpool_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_commpool_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Pipeline stages of transformers cut at block ends, and what they keep (test_block_cuts).
check_PROGRAMS += tests/test_block_cuts
TESTS += tests/test_block_cuts
tests_test_block_cuts_SOURCES = tests/test_block_cuts.c tests/testdata.c tests/testdata.h
tests_test_block_cuts_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_block_cuts_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Activation recomputation: the plan's buffer table and recompute ops (test_recompute), and
# dtexec's weights equal --recompute none's with the allocations the plan gives.
check_PROGRAMS += tests/test_recompute
TESTS += tests/test_recompute tests/test_exec_recompute.sh
EXTRA_DIST += tests/test_exec_recompute.sh
tests_test_recompute_SOURCES = tests/test_recompute.c tests/testdata.c tests/testdata.h
tests_test_recompute_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_recompute_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_tensor
TESTS += tests/test_tensor
tests_test_tensor_SOURCES = tests/test_tensor.c $(PLAYER_TEST_SOURCES)
tests_test_tensor_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_tensor_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_tensor_LDADD = $(PLAYER_TEST_LIBS)

check_PROGRAMS += tests/test_seqpar
TESTS += tests/test_seqpar
tests_test_seqpar_SOURCES = tests/test_seqpar.c $(PLAYER_TEST_SOURCES)
tests_test_seqpar_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_seqpar_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_seqpar_LDADD = $(PLAYER_TEST_LIBS)

check_PROGRAMS += tests/test_plan_share
TESTS += tests/test_plan_share
tests_test_plan_share_SOURCES = tests/test_plan_share.c tests/testdata.c tests/testdata.h
tests_test_plan_share_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_plan_share_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_precision
TESTS += tests/test_precision
tests_test_precision_SOURCES = tests/test_precision.c $(PLAYER_TEST_SOURCES)
tests_test_precision_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_precision_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_precision_LDADD = $(PLAYER_TEST_LIBS)

check_PROGRAMS += tests/test_parallel
TESTS += tests/test_parallel
tests_test_parallel_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_parallel_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Every command example of README.md and the man pages, run against the build tree.
TESTS += tests/test_examples.sh
EXTRA_DIST += tests/test_examples.sh
# Every option of dtsim/dtexec/dtvalidate --help is in the man page's OPTIONS.
TESTS += tests/test_man_flags.sh
EXTRA_DIST += tests/test_man_flags.sh

# The shape of validate/data/gpu-published.csv (validate/published.c reads it: test_gpu_calibration.sh).
TESTS += tests/test_gpu_published.sh
EXTRA_DIST += tests/test_gpu_published.sh
TESTS += tests/test_dtsim_gpu.sh
EXTRA_DIST += tests/test_dtsim_gpu.sh

# Sourced by the shell tests; the leak suppressions they point LeakSanitizer at.
EXTRA_DIST += tests/testlib.sh tests/execlib.sh tests/data/tiny-cnn.yaml tests/data/tp-mlp.yaml \
	tests/data/tiny-mlp.yaml tests/data/gpt-dropout.yaml tests/lsan.supp \
	tests/data/h100-4n-fattree.yaml

# ZeRO stages 1-3: memory against the paper's formulas and traffic against data parallelism
# (plans played by dtsim's player), and dtexec's weights and allocations under mpiexec.
check_PROGRAMS += tests/test_zero
TESTS += tests/test_zero tests/test_exec_zero.sh
EXTRA_DIST += tests/test_exec_zero.sh
tests_test_zero_SOURCES = tests/test_zero.c $(PLAYER_TEST_SOURCES)
tests_test_zero_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_zero_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_zero_LDADD = $(PLAYER_TEST_LIBS)

# Tensor parallelism: dtexec's shards reach the one-rank weights (tp 2, tp 4, dp 2 x tp 2),
# controls, allocated bytes, the closed form of the f/g allreduces, bad configurations.
TESTS += tests/test_exec_tensor.sh tests/test_exec_3d.sh tests/test_exec_seqpar.sh
EXTRA_DIST += tests/test_exec_tensor.sh tests/test_exec_3d.sh tests/test_exec_seqpar.sh
TESTS += tests/test_exec_vocabpp.sh
EXTRA_DIST += tests/test_exec_vocabpp.sh
TESTS += tests/test_exec_precision.sh
EXTRA_DIST += tests/test_exec_precision.sh
TESTS += tests/test_exec_repeatable.sh
EXTRA_DIST += tests/test_exec_repeatable.sh
# --test-samples N: the first N test samples evaluated, as a test set of only them is.
TESTS += tests/test_exec_test_samples.sh
EXTRA_DIST += tests/test_exec_test_samples.sh
TESTS += tests/test_exec_precision_accuracy.sh tests/test_exec_precision_parallel.sh
EXTRA_DIST += tests/test_exec_precision_accuracy.sh tests/test_exec_precision_parallel.sh
# --grad-precision fp32 under bf16/fp16: float32 gradients and their allreduce (4 B/element).
TESTS += tests/test_exec_grad_precision.sh
EXTRA_DIST += tests/test_exec_grad_precision.sh
# Checkpoints of bf16/fp16 runs (resume bit-identical, bad files) and a version-1 checkpoint.
TESTS += tests/test_exec_checkpoint_precision.sh
EXTRA_DIST += tests/test_exec_checkpoint_precision.sh tests/data/ckpt-v1.yaml \
	tests/data/ckpt-v1/step-000000000007.manifest \
	tests/data/ckpt-v1/step-000000000007.rank-00000.ckpt \
	tests/data/ckpt-v1/step-000000000007.rank-00001.ckpt

check_PROGRAMS += tests/test_probe
TESTS += tests/test_probe
tests_test_probe_SOURCES = tests/test_probe.c tests/testdata.c tests/testdata.h
tests_test_probe_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_probe_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
check_PROGRAMS += tests/test_memfloor
TESTS += tests/test_memfloor
tests_test_memfloor_SOURCES = tests/test_memfloor.c tests/testdata.c tests/testdata.h
tests_test_memfloor_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_memfloor_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# --device: flag errors and --device cuda's refusals (any machine); the CUDA net against the
# CPU (a GPU: skipped without one)
TESTS += tests/test_dtexec_device.sh tests/test_exec_cuda.sh
EXTRA_DIST += tests/test_dtexec_device.sh tests/test_exec_cuda.sh

# Under AddressSanitizer: the programs that start MPI unwind allocations the slow way, dtsim not.
TESTS += tests/test_san_unwind.sh
EXTRA_DIST += tests/test_san_unwind.sh tests/time_each.sh

# Waiting ranks that share a CPU sleep between polls (exec/idle.h): same weights as polling.
TESTS += tests/test_exec_idle.sh
EXTRA_DIST += tests/test_exec_idle.sh

# The longest tests (CPU seconds each, plain build: 10-90): make check and the sanitizer
# build of setup.sh run them; the tarball's make check in setup.sh's distcheck-short does not.
LONG_TESTS = tests/test_exec_zero.sh tests/test_exec_seqpar.sh tests/test_examples.sh \
	tests/test_exec_checkpoint_precision.sh tests/test_exec_tensor.sh \
	tests/test_exec_precision_parallel.sh tests/test_exec_precision_accuracy.sh \
	tests/test_dtsim_scale.sh tests/test_exec_3d.sh tests/test_dtvalidate_loop.sh \
	tests/test_exec_recompute.sh tests/test_dtsim_recommend.sh tests/test_exec_pipeline.sh \
	tests/test_exec_checkpoint.sh tests/test_exec_collectives.sh tests/test_exec_idle.sh
