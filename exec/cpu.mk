# exec/cpu: float32 CPU training kernels (NCHW, OpenBLAS) and the network that trains a
# dt_model. Users add $(DTCPU_CPPFLAGS) and link $(DTCPU_LIBS) before $(DTCORE_LIBS).
noinst_LIBRARIES += exec/libdtcpu.a
exec_libdtcpu_a_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/exec/cpu
# OPENMP_CFLAGS (AC_OPENMP) threads the kernels' own loops when configure defines it; empty,
# they run on one thread. Programs that link the library then need it in their LDFLAGS.
exec_libdtcpu_a_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS) $(OPENMP_CFLAGS)
exec_libdtcpu_a_SOURCES = \
	exec/cpu/rng.c exec/cpu/rng.h \
	exec/cpu/half.c exec/cpu/half.h \
	exec/cpu/layers.h exec/cpu/parallel.h exec/cpu/threads.c \
	exec/cpu/gemm.c \
	exec/cpu/im2col.c exec/cpu/im2col.h \
	exec/cpu/dense.c \
	exec/cpu/conv.c \
	exec/cpu/pool.c \
	exec/cpu/activation.c \
	exec/cpu/softmax.c \
	exec/cpu/dropout.c \
	exec/cpu/norm.c \
	exec/cpu/movement.c \
	exec/cpu/lstm.c \
	exec/cpu/attention.c \
	exec/cpu/attention_core.c \
	exec/cpu/optim.c exec/cpu/optim.h \
	exec/cpu/init.c exec/cpu/init.h \
	exec/cpu/net.c exec/cpu/net.h
DTCPU_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/exec/cpu
DTCPU_LIBS = exec/libdtcpu.a $(BLAS_LIBS) -lm

check_PROGRAMS += tests/test_layers tests/test_optim tests/test_net tests/test_half
TESTS += tests/test_layers tests/test_optim tests/test_net tests/test_half
tests_test_half_SOURCES = tests/test_half.c
tests_test_half_CPPFLAGS = $(DTCPU_CPPFLAGS)
tests_test_half_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_half_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_layers_SOURCES = tests/test_layers.c
tests_test_layers_CPPFLAGS = $(DTCPU_CPPFLAGS)
tests_test_layers_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_layers_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_optim_SOURCES = tests/test_optim.c
tests_test_optim_CPPFLAGS = $(DTCPU_CPPFLAGS)
tests_test_optim_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_optim_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_net_SOURCES = tests/test_net.c
tests_test_net_CPPFLAGS = $(DTCPU_CPPFLAGS)
tests_test_net_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_net_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)

# GFLOP/s of the conv and dense kernels and of a plain single-thread sgemm (README figures).
noinst_PROGRAMS += exec/bench_kernels
exec_bench_kernels_SOURCES = exec/cpu/bench_kernels.c
exec_bench_kernels_CPPFLAGS = $(DTCPU_CPPFLAGS)
exec_bench_kernels_CFLAGS = $(AM_CFLAGS) $(BLAS_CFLAGS)
exec_bench_kernels_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS)
BENCH_TARGETS += bench-kernels
bench-kernels: exec/bench_kernels$(EXEEXT)
	OPENBLAS_NUM_THREADS=1 ./exec/bench_kernels$(EXEEXT) 128 0.5 \
	  $(srcdir)/models/cnn690k.yaml $(srcdir)/models/mlp-fmnist.yaml
.PHONY: bench-kernels
