# Two commands: `make demo` runs the word count example, `make test` runs the tests.
# Each creates (or reuses) the virtual environment .venv from setup.cfg.
# `make test` runs pytest in two processes (pytest-xdist): the Spark tests one after
# another in one of them, the other tests beside them (tests/conftest.py).
# `make soak` runs the sustained-load test (minutes; CI runs it after `make test`).
# `make compat SPARK=X.Y.Z` runs the compatibility subset on another pyspark of the range.
# `make bench` runs the benchmark (bench/run.py; BENCH_ARGS passes options to it), then
# writes bench/results/results.json's figures into docs/performance.md (python -m bench.report).
# `make mutants` runs the mutation tests (docs/testing.md).

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp
MUTANTS_STAMP := $(VENV)/.mutants-stamp
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VENV)/bin/python

.PHONY: jvm compat demo test soak bench mutants docs check-env clean

check-env:
	@$(PYTHON) persistent/tools/environment.py

$(STAMP): setup.cfg pyproject.toml | check-env
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

# Spark's half of the fold, a jar per supported Spark minor version, built with Maven when
# persistent/jvm/ changed since (build_jars.py; the wheel's build runs it too).
jvm: $(STAMP)
	$(VENV)/bin/python build_jars.py

demo: jvm
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python -m persistent.examples.demo

test: jvm
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python tests/jvm_servers.py
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

soak: jvm
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python -m pytest tests/spark/soak

# The compatibility subset on another Spark of the range, in its own virtual environment:
# `make compat SPARK=4.0.0` (CI runs the lowest; docs/testing.md). COMPAT_TESTS picks the tests.
# Spark 4.0 and 4.1 need pyarrow<26 (persistent/runtime/spark.py).
COMPAT_TESTS ?= tests/spark/test_crash.py::test_packed_counts_across_kills_on_path_a_path_b_and_a_rescale_are_exact \
	tests/spark/test_kafka.py::test_path_b_rewinds_every_partition_by_timestamp_even_one_without_records_after_the_clock \
	tests/spark/test_kafka.py::test_killed_at_every_crash_point_then_path_a_writes_each_count_once_to_kafka \
	tests/spark/test_hdfs.py::test_wordcount_on_hdfs_killed_then_path_a_and_path_b \
	tests/spark/test_folded_job.py tests/spark/test_fold_order.py
COMPAT_VENV := .venv-spark-$(SPARK)
COMPAT_PINS := $(if $(filter 4.0.% 4.1.%,$(SPARK)),'pyarrow<26')

compat: export PYSPARK_PYTHON := $(CURDIR)/$(COMPAT_VENV)/bin/python
compat: export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(COMPAT_VENV)/bin/python
compat: jvm
	@test -n "$(SPARK)" || { echo "make compat SPARK=X.Y.Z: the pyspark version to test on"; exit 2; }
	@test -x $(COMPAT_VENV)/bin/python || $(PYTHON) -m venv $(COMPAT_VENV)
	$(COMPAT_VENV)/bin/python -m pip install --quiet --upgrade pip
	$(COMPAT_VENV)/bin/python -m pip install --quiet -e '.[test]' 'pyspark[connect]==$(SPARK)' $(COMPAT_PINS)
	$(COMPAT_VENV)/bin/python tests/jvm_servers.py
	$(COMPAT_VENV)/bin/python -m pytest -n 2 --dist loadgroup -p no:cacheprovider $(COMPAT_TESTS)

$(BENCH_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP) jvm
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)
	$(VENV)/bin/python -m bench.report

$(MUTANTS_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,mutants]'
	@touch $(MUTANTS_STAMP)

# A fresh mutmut run (setup.cfg's [mutmut]), then its report, also in mutants/report.md;
# MUTANTS='state.table.*' tests those mutants again instead. Not as CI: a run under CI
# fails on a skip, which would count as killing the mutant.
mutants: $(MUTANTS_STAMP)
	@test -n "$(MUTANTS)" || rm -rf mutants
	@start=$$(date +%s); env -u CI $(VENV)/bin/mutmut run $(MUTANTS) && \
		$(VENV)/bin/python tests/mutants/report.py --seconds $$(($$(date +%s) - start))

# Redraws the documentation's picture (docs/timeline.svg) from docs/diagrams.py.
docs: $(STAMP)
	$(VENV)/bin/python docs/diagrams.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache mutants
