# Model zoo, installed under $(pkgdatadir)/models.
dist_models_DATA += $(wildcard $(srcdir)/models/*.yaml)
EXTRA_DIST += models/README.md models/gen/zoo.py models/gen/check-generated.sh

# The loader against the zoo's published parameter counts, hand-computed FLOPs and shapes.
check_PROGRAMS += tests/test_model
TESTS += tests/test_model
tests_test_model_SOURCES = tests/test_model.c
tests_test_model_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_model_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# Every kind of bad model file: file:line:column and DT_EINPUT, never a crash.
check_PROGRAMS += tests/test_model_errors
TESTS += tests/test_model_errors
tests_test_model_errors_SOURCES = tests/test_model_errors.c
tests_test_model_errors_CFLAGS = $(AM_CFLAGS) $(CMOCKA_CFLAGS)
tests_test_model_errors_LDADD = $(DTCORE_LIBS) $(CMOCKA_LIBS)

# The committed generated models are what models/gen/zoo.py writes (skips without python3).
TESTS += models/gen/check-generated.sh
