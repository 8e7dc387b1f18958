# `make demo` and `make test` work on a fresh clone: they create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: compiled demo check lint typecheck test bench bench-latency clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

# The package is installed editable, and where PYTHONDONTWRITEBYTECODE is set (CI here) Python never
# writes its bytecode: every `assay` process would compile the whole package again (~0.4 s each).
# Compile it once per make; only changed files are compiled again.
compiled: $(STAMP)
	$(BIN)/python -m compileall -q -j 0 src > /dev/null

demo: compiled
	$(BIN)/python -m assay.demo

# The loop a developer runs every minute: the linter, the type checker over src/, and the pure
# tests (`pytest --pure`: the tests that open no store and start no process, see tests/conftest.py).
lint: $(STAMP)
	$(BIN)/ruff check src tests

typecheck: $(STAMP)
	$(BIN)/python -m mypy

# pytest rewrites each test module's asserts as it imports it, ~10 s of CPU a process for this suite,
# and keeps the result as bytecode only where Python may write it: so the tests run with
# PYTHONDONTWRITEBYTECODE unset (CI sets it), and after the first run every worker reads the
# rewritten modules (measured: a --pure collection 18-19 s of CPU without the cache, 8-9 s with it)
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

check: lint typecheck
	$(PYTEST) -q -n auto --pure -p no:cacheprovider

# one worker more than there are cores (CI has two, so three): part of the suite waits on servers,
# subprocesses and sandboxes, which another worker fills (measured on CI's kind of machine: 0.316 s a
# test at three workers, 0.326 s at two: a small gain); each worker starts its own PostgreSQL. With
# --dist loadgroup the tests' xdist_group marks hold (tests/conftest.py puts the group into the node id,
# which xdist 3.8 no longer manages under pytest 9): one worker runs the browser tests on one Chromium,
# one the Ray tests on one Ray, and a second worker starting either fails (tests/support/groups.py)
WORKERS ?= $(shell echo $$(( $$(nproc 2>/dev/null || echo 1) + 1 )))
test: compiled
	$(PYTEST) -q -n $(WORKERS) --dist loadgroup

bench: compiled
	$(BIN)/python benchmarks/throughput.py

bench-latency: compiled
	$(BIN)/python benchmarks/latency.py

clean:
	rm -rf $(VENV) build src/*.egg-info
