# validate: dtvalidate calibrates the simulator's cost model on measured runs (dtexec records,
# reference tables), predicts held-out runs and draws the scaling plots. See validate/README.md.
# The simulator's player is compiled in (sim/player.c, sim/network.c, sim/fabric.c, and
# sim/epoch.c's step): the fit's model function is the simulator itself.
DTV_GIT_REVISION = $(shell git -C $(top_srcdir) rev-parse --short HEAD 2>/dev/null || echo unknown)
DTVALIDATE_CPPFLAGS = $(AM_CPPFLAGS) -I$(top_srcdir)/sim -I$(top_srcdir)/validate \
	-DDT_GNUPLOT='"$(GNUPLOT)"' -DDT_GIT_REVISION='"$(DTV_GIT_REVISION)"' \
	-DDT_BINDIR='"$(bindir)"' -DDT_MPIEXEC='"$(MPIEXEC)"'
noinst_LIBRARIES += validate/libdtvalidate.a
validate_libdtvalidate_a_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
validate_libdtvalidate_a_CFLAGS = $(AM_CFLAGS) $(GSL_CFLAGS)
validate_libdtvalidate_a_SOURCES = \
	validate/json.c validate/json.h \
	validate/runs.c validate/runs.h \
	validate/predict.c validate/predict.h validate/fastsim.c validate/fastsim.h \
	validate/fit.c validate/fit.h \
	validate/ranktest.c validate/ranktest.h \
	validate/calibrate.c validate/calibrate.h \
	validate/check.c validate/check.h \
	validate/plot.c validate/plot.h \
	validate/loop.c validate/loop.h \
	validate/ops.c validate/ops.h \
	validate/published.c validate/published.h validate/gpureport.c validate/gpureport.h \
	sim/player.c sim/matchindex.c sim/matchindex.h sim/network.c sim/fabric.c sim/epoch.c
DTVALIDATE_LIBS = validate/libdtvalidate.a sim/libdtsimengine.a $(DTCORE_LIBS)

bin_PROGRAMS += dtvalidate
dtvalidate_SOURCES = validate/dtvalidate.c
dtvalidate_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
dtvalidate_LDADD = $(DTVALIDATE_LIBS)
dist_man_MANS += man/dtvalidate.1

validatedatadir = $(pkgdatadir)/validate/data
dist_validatedata_DATA = validate/data/seed002-cascadelake-mpi.csv \
	validate/data/seed-results-other.csv validate/data/gpu-published.csv
EXTRA_DIST += validate/README.md

check_PROGRAMS += tests/test_calibration tests/test_fit tests/test_ranktest
TESTS += tests/test_calibration tests/test_fit tests/test_ranktest
tests_test_ranktest_SOURCES = tests/test_ranktest.c validate/ranktest.c validate/ranktest.h
tests_test_ranktest_CPPFLAGS = -I$(top_srcdir)/validate
tests_test_ranktest_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_ranktest_LDADD = $(CMOCKA_LIBS) -lm
tests_test_calibration_SOURCES = tests/test_calibration.c
tests_test_calibration_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_calibration_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_fit_SOURCES = tests/test_fit.c
tests_test_fit_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
tests_test_fit_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS) $(GSL_CFLAGS)
tests_test_fit_LDADD = $(DTVALIDATE_LIBS) $(CMOCKA_LIBS)

# The fit's cheap prediction (validate/fastsim.c) equals the whole plan played.
check_PROGRAMS += tests/test_fastsim
TESTS += tests/test_fastsim
tests_test_fastsim_SOURCES = tests/test_fastsim.c tests/testdata.c tests/testdata.h
tests_test_fastsim_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
tests_test_fastsim_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_fastsim_LDADD = $(DTVALIDATE_LIBS) $(CMOCKA_LIBS)

TESTS += tests/test_dtvalidate.sh tests/test_dtvalidate_records.sh tests/test_dtvalidate_loop.sh
EXTRA_DIST += tests/test_dtvalidate.sh tests/test_dtvalidate_records.sh tests/test_dtvalidate_loop.sh

# GPU calibrations fitted by `dtvalidate gpu --dir calibrations`, found by name
# (dtsim --calibration a100); see calibrations/README.md.
calibrationsdir = $(pkgdatadir)/calibrations
dist_calibrations_DATA = $(wildcard $(srcdir)/calibrations/*.yaml)
EXTRA_DIST += calibrations/README.md

TESTS += tests/test_gpu_calibration.sh
EXTRA_DIST += tests/test_gpu_calibration.sh
