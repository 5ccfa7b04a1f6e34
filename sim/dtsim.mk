# The dtsim program: plan player, network routes, CLI and reports.
bin_PROGRAMS += dtsim
dtsim_SOURCES = sim/dtsim.c sim/epoch.c sim/epoch.h sim/recommend.c sim/recommend.h sim/split.c \
	sim/split.h sim/ranklist.c sim/ranklist.h sim/player.c sim/player.h sim/matchindex.c \
	sim/matchindex.h sim/network.c sim/network.h sim/fabric.c sim/fabric.h \
	sim/links.c sim/links.h sim/estimate.c sim/estimate.h sim/bound.c sim/bound.h \
	sim/symmetry.c sim/symmetry.h sim/symround.c sim/symround.h sim/memo.c sim/memo.h \
	sim/heap.c sim/heap.h
dtsim_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
dtsim_CFLAGS = $(AM_CFLAGS) $(MPI_CFLAGS)
dtsim_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS) $(MPI_LIBS)
dist_man_MANS += man/dtsim.1

check_PROGRAMS += tests/test_player
TESTS += tests/test_player
tests_test_player_SOURCES = tests/test_player.c sim/player.c sim/matchindex.c sim/network.c \
	sim/fabric.c tests/testdata.c tests/testdata.h
tests_test_player_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
tests_test_player_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_player_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Routes of fat-trees, rails and tori (sim/network.c, sim/fabric.c).
check_PROGRAMS += tests/test_fabric
TESTS += tests/test_fabric
tests_test_fabric_SOURCES = tests/test_fabric.c sim/network.c sim/fabric.c
tests_test_fabric_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
tests_test_fabric_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_fabric_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS) $(CMOCKA_LIBS)

# A round's time by classes where the fabric shares evenly, against the engine (sim/evenshare.c).
check_PROGRAMS += tests/test_evenshare
TESTS += tests/test_evenshare
tests_test_evenshare_SOURCES = tests/test_evenshare.c sim/network.c sim/fabric.c
tests_test_evenshare_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
tests_test_evenshare_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_evenshare_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS) $(CMOCKA_LIBS)

# The memo table of sim/symround.c (sim/memo.c).
check_PROGRAMS += tests/test_memo
TESTS += tests/test_memo
tests_test_memo_SOURCES = tests/test_memo.c sim/memo.c
tests_test_memo_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
tests_test_memo_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_memo_LDADD = $(CMOCKA_LIBS)

TESTS += tests/test_dtsim_links.sh
EXTRA_DIST += tests/test_dtsim_links.sh
TESTS += tests/test_dtsim_cli.sh tests/test_dtsim_recommend.sh tests/test_dtsim_scale.sh
EXTRA_DIST += tests/test_dtsim_cli.sh tests/test_dtsim_recommend.sh tests/test_dtsim_scale.sh

# Benchmark: the seed 002 grid x all strategies (target: under 1 s).
EXTRA_DIST += sim/bench_grid.sh sim/bench_1k.sh
BENCH_TARGETS += bench-dtsim-grid
DP_STRATEGIES = sequential,reduce-bcast-linear,reduce-bcast,ring,recursive-doubling,rabenseifner,hierarchical,mpi-allreduce,ps-central,ps-sharded
bench-dtsim-grid: dtsim$(EXEEXT)
	top_srcdir=$(top_srcdir) $(SHELL) $(top_srcdir)/sim/bench_grid.sh ./dtsim$(EXEEXT)
	top_srcdir=$(top_srcdir) $(SHELL) $(top_srcdir)/sim/bench_grid.sh ./dtsim$(EXEEXT) \
	  $(DP_STRATEGIES)
.PHONY: bench-dtsim-grid
# Benchmark: one ring iteration on 1,024 ranks, end to end (DTSIM_BEFORE=old/dtsim: alternately).
BENCH_TARGETS += bench-dtsim-1k
bench-dtsim-1k: dtsim$(EXEEXT)
	top_srcdir=$(top_srcdir) $(SHELL) $(top_srcdir)/sim/bench_1k.sh ./dtsim$(EXEEXT) $(DTSIM_BEFORE)
.PHONY: bench-dtsim-1k bench-peer-simgrid bench-scale

# Benchmark peer: the same plan and flows on SimGrid 3.32 (built when libsimgrid-dev is there).
EXTRA_DIST += sim/peer_simgrid.c sim/bench_allreduce.yaml sim/bench_peer_simgrid.sh
if HAVE_SIMGRID
noinst_PROGRAMS += sim/peer_simgrid
sim_peer_simgrid_SOURCES = sim/peer_simgrid.c sim/network.c sim/network.h sim/fabric.c sim/fabric.h
sim_peer_simgrid_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim
sim_peer_simgrid_LDADD = sim/libdtsimengine.a $(DTCORE_LIBS) -lsimgrid
endif
if HAVE_SIMGRID
BENCH_TARGETS += bench-peer-simgrid
bench-peer-simgrid: dtsim$(EXEEXT) sim/peer_simgrid$(EXEEXT)
	top_srcdir=$(top_srcdir) $(SHELL) $(top_srcdir)/sim/bench_peer_simgrid.sh ./dtsim$(EXEEXT) \
	  ./sim/peer_simgrid$(EXEEXT)
endif
# Benchmark: time and memory against devices, 1k to 16k GPUs (bench-scale.dat, bench-scale.svg).
EXTRA_DIST += sim/bench_scale.sh
BENCH_TARGETS += bench-scale
bench-scale: dtsim$(EXEEXT)
	top_srcdir=$(top_srcdir) $(SHELL) $(top_srcdir)/sim/bench_scale.sh ./dtsim$(EXEEXT) .

# The symmetric estimate against the full simulation (sim/symmetry.c), and --recommend's
# lower bound against both (sim/bound.c): the player's test sources (tests/local.mk) and these.
BOUND_TEST_SOURCES = sim/symmetry.c sim/symround.c sim/memo.c sim/bound.c sim/epoch.c $(PLAYER_TEST_SOURCES)
check_PROGRAMS += tests/test_symmetry tests/test_bound
TESTS += tests/test_symmetry tests/test_bound
tests_test_symmetry_SOURCES = tests/test_symmetry.c $(BOUND_TEST_SOURCES)
tests_test_symmetry_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_symmetry_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_symmetry_LDADD = $(PLAYER_TEST_LIBS)
tests_test_bound_SOURCES = tests/test_bound.c $(BOUND_TEST_SOURCES)
tests_test_bound_CPPFLAGS = $(PLAYER_TEST_CPPFLAGS)
tests_test_bound_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_bound_LDADD = $(PLAYER_TEST_LIBS)

# Benchmark: the GPT-3 175B / 1,024-GPU --recommend search (REC_MEMORY_LIMIT=... to set it).
EXTRA_DIST += sim/bench_recommend.sh
BENCH_TARGETS += bench-recommend
bench-recommend: dtsim$(EXEEXT)
	$(SHELL) $(top_srcdir)/sim/bench_recommend.sh ./dtsim$(EXEEXT)
.PHONY: bench-recommend
