# Tests of the shared core that no single folder owns (collectives, plans).
check_PROGRAMS += tests/test_collective
TESTS += tests/test_collective
tests_test_collective_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_collective_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

check_PROGRAMS += tests/test_costmodel
TESTS += tests/test_costmodel
tests_test_costmodel_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_costmodel_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)
