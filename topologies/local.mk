# Topology zoo, installed under $(pkgdatadir)/topologies.
dist_topologies_DATA += $(wildcard $(srcdir)/topologies/*.yaml)
EXTRA_DIST += topologies/README.md

# Tests of the topology loader, the zoo and the units it reads.
check_PROGRAMS += tests/test_units tests/test_topology tests/test_topology_errors
TESTS += tests/test_units tests/test_topology tests/test_topology_errors
tests_test_units_SOURCES = tests/test_units.c
tests_test_units_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_units_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_topology_SOURCES = tests/test_topology.c
tests_test_topology_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_topology_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
tests_test_topology_errors_SOURCES = tests/test_topology_errors.c
tests_test_topology_errors_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_topology_errors_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
