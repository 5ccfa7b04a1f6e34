# Fuzzing the input readers (README, "Fuzzing"). One harness per reader, tests/fuzz/fuzz_*.c:
#   topology, model, calibration  the YAML loaders of libdt/ (on libdt/yamldoc.c)
#   units                         the quantity parser (libdt/units.c)
#   records, table                dtvalidate's run records and reference tables (validate/)
#   idx, cifar                    dtexec's dataset readers (exec/data.c)
FUZZ_TARGETS = topology model calibration units records table idx cifar

# ---- make check: each harness built with tests/fuzz/replay.c by the normal compiler replays
# its seed corpus and the inputs that once broke it (tests/fuzz/corpus/, tests/fuzz/regress/).
FUZZ_REPLAY_SRC = tests/fuzz/replay.c tests/fuzz/fuzz_util.c tests/fuzz/fuzz.h
FUZZ_RUNS_SRC = tests/fuzz/fuzz_runs.c tests/fuzz/fuzz_runs.h
FUZZ_DATA_SRC = tests/fuzz/fuzz_data.c tests/fuzz/fuzz_data.h exec/data.c exec/data.h

check_PROGRAMS += tests/fuzz/fuzz_topology tests/fuzz/fuzz_model tests/fuzz/fuzz_calibration \
	tests/fuzz/fuzz_units tests/fuzz/fuzz_records tests/fuzz/fuzz_table tests/fuzz/fuzz_idx \
	tests/fuzz/fuzz_cifar
tests_fuzz_fuzz_topology_SOURCES = tests/fuzz/fuzz_topology.c $(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_topology_LDADD = $(DTCORE_LIBS)
tests_fuzz_fuzz_model_SOURCES = tests/fuzz/fuzz_model.c $(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_model_LDADD = $(DTCORE_LIBS)
tests_fuzz_fuzz_calibration_SOURCES = tests/fuzz/fuzz_calibration.c $(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_calibration_LDADD = $(DTCORE_LIBS)
tests_fuzz_fuzz_units_SOURCES = tests/fuzz/fuzz_units.c $(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_units_LDADD = $(DTCORE_LIBS)
tests_fuzz_fuzz_records_SOURCES = tests/fuzz/fuzz_records.c $(FUZZ_RUNS_SRC) \
	$(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_records_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
tests_fuzz_fuzz_records_LDADD = $(DTVALIDATE_LIBS)
tests_fuzz_fuzz_table_SOURCES = tests/fuzz/fuzz_table.c $(FUZZ_RUNS_SRC) \
	$(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_table_CPPFLAGS = $(DTVALIDATE_CPPFLAGS)
tests_fuzz_fuzz_table_LDADD = $(DTVALIDATE_LIBS)
tests_fuzz_fuzz_idx_SOURCES = tests/fuzz/fuzz_idx.c $(FUZZ_DATA_SRC) $(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_idx_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_fuzz_fuzz_idx_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_idx_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(ZLIB_LIBS)
tests_fuzz_fuzz_cifar_SOURCES = tests/fuzz/fuzz_cifar.c $(FUZZ_DATA_SRC) \
	$(FUZZ_REPLAY_SRC)
tests_fuzz_fuzz_cifar_CPPFLAGS = $(DTCPU_CPPFLAGS) -I$(top_srcdir)/exec
tests_fuzz_fuzz_cifar_CFLAGS = $(AM_CFLAGS) $(ZLIB_CFLAGS)
tests_fuzz_fuzz_cifar_LDADD = $(DTCPU_LIBS) $(DTCORE_LIBS) $(ZLIB_LIBS)

TESTS += tests/fuzz/test_fuzz_replay.sh
EXTRA_DIST += tests/fuzz/test_fuzz_replay.sh tests/fuzz/corpus tests/fuzz/regress \
	tests/fuzz/yaml.dict tests/fuzz/records.dict tests/fuzz/table.dict tests/fuzz/units.dict \
	tests/fuzz/seed-corpus.sh tests/fuzz/seed_extra.sh tests/fuzz/seed_wrap.c

# ---- make fuzz: the same harnesses built with clang's libFuzzer under AddressSanitizer and
# UndefinedBehaviorSanitizer (Debian: clang, libclang-rt-dev), in fuzz/ of the build
# directory; each runs FUZZ_SECONDS over its corpus. New inputs go to fuzz/corpus/TARGET,
# crashes, leaks and hangs (an input running over FUZZ_TIMEOUT seconds) to fuzz/artifacts/,
# libFuzzer's output to fuzz/TARGET.log. `make fuzz FUZZ_TARGETS=model FUZZ_SECONDS=3600`
# runs one for an hour.
FUZZ_CC = clang
FUZZ_SECONDS = 60
FUZZ_TIMEOUT = 10
FUZZ_RSS_MB = 2048
FUZZ_SANITIZE = -fsanitize=address,undefined -fno-sanitize-recover=undefined
FUZZ_CFLAGS = -g -O1 -fno-omit-frame-pointer $(WARN_CFLAGS)
FUZZ_CPPFLAGS = $(DEFS) $(DTVALIDATE_CPPFLAGS) -I$(top_srcdir)/exec -I$(top_srcdir)/exec/cpu \
	$(YAML_CFLAGS) $(GSL_CFLAGS) $(HWLOC_CFLAGS) $(ZLIB_CFLAGS) $(BLAS_CFLAGS)
FUZZ_LIBS = $(YAML_LIBS) $(GSL_LIBS) $(BLAS_LIBS) $(HWLOC_LIBS) $(ZLIB_LIBS) -lm
FUZZ_OBJ = fuzz/obj

fuzz_objs = $(patsubst %.c,$(FUZZ_OBJ)/%.o,$(filter %.c,$(1)))
FUZZ_CORE_OBJS = $(call fuzz_objs,$(libdt_libdtcore_a_SOURCES) tests/fuzz/fuzz_util.c)
FUZZ_RUNS_OBJS = $(call fuzz_objs,$(FUZZ_RUNS_SRC) validate/runs.c validate/json.c)
FUZZ_DATA_OBJS = $(call fuzz_objs,$(FUZZ_DATA_SRC) exec/cpu/rng.c)
FUZZ_BINARIES = $(FUZZ_TARGETS:%=fuzz/fuzz_%)

$(FUZZ_OBJ)/%.o: $(top_srcdir)/%.c
	@mkdir -p $(@D)
	$(AM_V_CC)$(FUZZ_CC) $(FUZZ_CPPFLAGS) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) \
	  -fsanitize=fuzzer-no-link -MMD -MP -c -o $@ $<
-include $(patsubst %.o,%.d,$(call fuzz_objs,$(libdt_libdtcore_a_SOURCES) \
	$(FUZZ_RUNS_SRC) $(FUZZ_DATA_SRC) $(FUZZ_TARGETS:%=tests/fuzz/fuzz_%.c)))

fuzz/fuzz_records fuzz/fuzz_table: $(FUZZ_RUNS_OBJS)
fuzz/fuzz_idx fuzz/fuzz_cifar: $(FUZZ_DATA_OBJS)
$(FUZZ_BINARIES): fuzz/fuzz_%: $(FUZZ_OBJ)/tests/fuzz/fuzz_%.o $(FUZZ_CORE_OBJS)
	$(AM_V_CCLD)$(FUZZ_CC) $(FUZZ_CFLAGS) $(FUZZ_SANITIZE) -fsanitize=fuzzer -o $@ $^ \
	  $(FUZZ_LIBS)

fuzz-build: $(FUZZ_BINARIES)

# One run per harness, so `make -j2 fuzz` runs two at a time: each still has FUZZ_SECONDS of
# wall time on a CPU of its own (CI: 2 CPUs). Runs start once every harness is built, so no
# run shares its CPU with the compiler. Models and topologies named by records and tables come
# from the source tree. LeakSanitizer checks every input: a leak is a failure like a crash.
FUZZ_RUNS = $(FUZZ_TARGETS:%=fuzz-run-%)
fuzz: $(FUZZ_RUNS)
$(FUZZ_RUNS): fuzz-run-%: fuzz-build
	@t=$*; dirs=; for d in corpus regress; do \
	  d=$(abs_top_srcdir)/tests/fuzz/$$d/$$t; if test -d $$d; then dirs="$$dirs $$d"; fi; \
	done; \
	case $$t in topology|model|calibration) dict=yaml;; *) dict=$$t;; esac; \
	dict=$(abs_top_srcdir)/tests/fuzz/$$dict.dict; \
	if test -f $$dict; then dict=-dict=$$dict; else dict=; fi; \
	mkdir -p fuzz/corpus/$$t fuzz/artifacts; here=`pwd`; \
	if DTSIM_DATADIR=$(abs_top_srcdir) UBSAN_OPTIONS=print_stacktrace=1 \
	   ./fuzz/fuzz_$$t -max_total_time=$(FUZZ_SECONDS) -timeout=$(FUZZ_TIMEOUT) \
	     -rss_limit_mb=$(FUZZ_RSS_MB) -print_final_stats=1 $$dict \
	     -artifact_prefix=$$here/fuzz/artifacts/$$t- $$here/fuzz/corpus/$$t $$dirs \
	     >fuzz/$$t.log 2>&1; then \
	  stats=`grep -E '^(Done|stat::number_of_executed_units|stat::new_units_added)' \
	    fuzz/$$t.log | sed 's/^/  /'`; \
	  printf 'fuzz: %s, %s s (log: fuzz/%s.log)\n%s\n' $$t $(FUZZ_SECONDS) $$t "$$stats"; \
	else \
	  tail -n 60 fuzz/$$t.log; echo "fuzz: $$t FAILED: see fuzz/$$t.log and fuzz/artifacts/"; \
	  exit 1; \
	fi

clean-local: clean-fuzz
clean-fuzz:
	rm -rf fuzz

.PHONY: fuzz fuzz-build clean-fuzz $(FUZZ_RUNS)
