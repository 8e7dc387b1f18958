# `make demo` and `make test` work on a fresh clone: they create .venv when missing.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: demo test bench bench-latency clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python pyproject.toml
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m assay.demo

# one worker per core (CI has two): each worker starts its own PostgreSQL; the Ray tests share
# one worker (xdist_group "ray"), so one local Ray serves them all
test: $(STAMP)
	$(BIN)/python -m pytest -q -n auto --dist loadgroup

bench: $(STAMP)
	$(BIN)/python benchmarks/throughput.py

bench-latency: $(STAMP)
	$(BIN)/python benchmarks/latency.py

clean:
	rm -rf $(VENV) build src/*.egg-info
