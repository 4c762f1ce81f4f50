# Two commands: `make demo` runs the word count example, `make test` runs the tests.
# Each creates (or reuses) the virtual environment .venv from setup.cfg.
# `make test` runs pytest in two processes (pytest-xdist): the Spark tests one after
# another in one of them, the other tests beside them (tests/conftest.py).
# `make soak` runs the sustained-load test (minutes; CI runs it after `make test`).
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

.PHONY: demo test soak bench mutants docs check-env clean

check-env:
	@$(PYTHON) persistent/tools/environment.py

$(STAMP): setup.cfg pyproject.toml | check-env
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python -m persistent.examples.demo

test: $(STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python tests/jvm_servers.py
	$(VENV)/bin/python -m pytest -n 2 --dist loadgroup

soak: $(STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python -m pytest tests/spark/soak

$(BENCH_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
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
