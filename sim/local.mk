# sim: the simulation engine (events, devices, flow-level network with max-min sharing).
noinst_LIBRARIES += sim/libdtsimengine.a
sim_libdtsimengine_a_SOURCES = \
	sim/eventq.c sim/eventq.h \
	sim/grow.c sim/grow.h \
	sim/maxmin.c sim/maxmin.h \
	sim/engine.c sim/engine.h sim/batch.c sim/batch.h \
	sim/evenshare.c sim/evenshare.h sim/evenform.c sim/evenform.h
# What a program or test that uses the engine adds to its flags.
DTSIM_ENGINE_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
DTSIM_ENGINE_LIBS = sim/libdtsimengine.a

check_PROGRAMS += tests/test_eventq tests/test_maxmin tests/test_flownet tests/test_lonepath
TESTS += tests/test_eventq tests/test_maxmin tests/test_flownet tests/test_lonepath
tests_test_eventq_SOURCES = tests/test_eventq.c
tests_test_eventq_CPPFLAGS = $(DTSIM_ENGINE_CPPFLAGS)
tests_test_eventq_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_eventq_LDADD = $(DTSIM_ENGINE_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_maxmin_SOURCES = tests/test_maxmin.c
tests_test_maxmin_CPPFLAGS = $(DTSIM_ENGINE_CPPFLAGS)
tests_test_maxmin_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_maxmin_LDADD = $(DTSIM_ENGINE_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_flownet_SOURCES = tests/test_flownet.c
tests_test_flownet_CPPFLAGS = $(DTSIM_ENGINE_CPPFLAGS)
tests_test_flownet_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_flownet_LDADD = $(DTSIM_ENGINE_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_lonepath_SOURCES = tests/test_lonepath.c
tests_test_lonepath_CPPFLAGS = $(DTSIM_ENGINE_CPPFLAGS)
tests_test_lonepath_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_lonepath_LDADD = $(DTSIM_ENGINE_LIBS) $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Benchmark (not a test): 21 million flows of a 1024-rank ring allreduce, and the seed 002 grid.
noinst_PROGRAMS += sim/bench_flows
sim_bench_flows_SOURCES = sim/bench_flows.c
sim_bench_flows_CPPFLAGS = $(DTSIM_ENGINE_CPPFLAGS)
sim_bench_flows_CFLAGS = $(AM_CFLAGS)
sim_bench_flows_LDADD = $(DTSIM_ENGINE_LIBS) $(DTCORE_LIBS)
BENCH_TARGETS += bench-sim
bench-sim: sim/bench_flows$(EXEEXT)
	./sim/bench_flows$(EXEEXT)
.PHONY: bench-sim
