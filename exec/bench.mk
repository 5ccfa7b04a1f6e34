# `make bench-peer` (part of `make bench`): dtexec against PyTorch (Debian's python3-torch,
# configured as its tuning guide says: tcmalloc from libtcmalloc-minimal4 preloaded,
# channels_last, threads pinned) on mlp-fmnist, cnn21k and cnn690k at 1 and 2 threads and 2 MPI
# ranks, samples/s, ratio, peak memory and GFLOP/s against the single-thread sgemm rate
# (exec/bench_peer.sh says how). BENCH_REPEAT=5 or BENCH_SCALE=2 on the make command line take
# more runs or longer runs; BENCH_PEER_CONFIG=plain runs PyTorch unconfigured.

# The machine's single-thread sgemm rate (the GFLOP/s column's yardstick).
noinst_PROGRAMS += exec/bench_sgemm
exec_bench_sgemm_SOURCES = exec/bench_sgemm.c
exec_bench_sgemm_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS)
exec_bench_sgemm_LDADD = $(BLAS_LIBS)

EXTRA_DIST += exec/bench_peer.sh exec/bench_torch.py
PYTHON_TORCH = /usr/bin/python3
BENCH_TARGETS += bench-peer
bench-peer: dtexec$(EXEEXT) dtsim$(EXEEXT) exec/bench_sgemm$(EXEEXT)
	DTEXEC=./dtexec$(EXEEXT) DTSIM=./dtsim$(EXEEXT) BENCH_SGEMM=./exec/bench_sgemm$(EXEEXT) \
	  MODELS=$(srcdir)/models TORCH_BENCH=$(srcdir)/exec/bench_torch.py MPIEXEC='$(MPIEXEC)' \
	  PYTHON=$(PYTHON_TORCH) $(SHELL) $(srcdir)/exec/bench_peer.sh
.PHONY: bench-peer

# The kernels' thread pool (exec/cpu/threads.c, gemm.c) and the convolution run on it, checked
# against the definitions (kept here with the benchmark whose 2-thread rows they serve).
check_PROGRAMS += tests/test_threads
TESTS += tests/test_threads
tests_test_threads_SOURCES = tests/test_threads.c
tests_test_threads_CPPFLAGS = $(DTCPU_CPPFLAGS)
tests_test_threads_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(BLAS_CFLAGS)
tests_test_threads_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
