# Two commands: `make demo` runs the word count example, `make test` runs the tests.
# Each creates (or reuses) the virtual environment .venv from setup.cfg.
# `make bench` runs the benchmark (bench/run.py; BENCH_ARGS passes options to it).

PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp
BENCH_STAMP := $(VENV)/.bench-stamp
export PYSPARK_PYTHON := $(CURDIR)/$(VENV)/bin/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(VENV)/bin/python

.PHONY: demo test bench docs check-env clean

check-env:
	@$(PYTHON) persistent/tools/environment.py

$(STAMP): setup.cfg pyproject.toml | check-env
	@test -x $(VENV)/bin/python || $(PYTHON) -m venv $(VENV)
	$(VENV)/bin/python -m pip install --quiet --upgrade pip
	$(VENV)/bin/python -m pip install --quiet -e '.[test]'
	@touch $(STAMP)

demo: $(STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python examples/demo.py

test: $(STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python -m pytest

$(BENCH_STAMP): $(STAMP)
	$(VENV)/bin/python -m pip install --quiet -e '.[test,bench]'
	@touch $(BENCH_STAMP)

bench: $(BENCH_STAMP)
	$(VENV)/bin/python persistent/tools/environment.py --dependencies
	$(VENV)/bin/python bench/run.py $(BENCH_ARGS)

# Redraws the documentation's picture (docs/timeline.svg) from docs/diagrams.py.
docs: $(STAMP)
	$(VENV)/bin/python docs/diagrams.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache
