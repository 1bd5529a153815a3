# Set-up and checks. `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test lint typecheck pytest docs demo bench bench-worlds bench-faults clean install

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,docs]'
	touch $(STAMP)

install: $(STAMP)

lint: $(STAMP)
	$(BIN)/ruff check litfetch_df tests benchmarks tools notebooks
	$(BIN)/ruff format --check litfetch_df tests benchmarks tools notebooks

typecheck: $(STAMP)
	$(BIN)/mypy

pytest: $(STAMP)
	$(BIN)/python -m pytest -q -p no:cacheprovider --nbmake tests notebooks

# the documentation site in build/site (mkdocs.yml), strict: a broken link or
# anchor, a page left out of the nav or a notebook cell that raises fails it.
# PYTHONPATH: the notebooks import this checkout's package, whatever the venv holds.
docs: $(STAMP)
	PYTHONPATH=$(CURDIR) NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --site-dir build/site

test: lint typecheck pytest docs

demo: $(STAMP)
	$(BIN)/litfetch-df demo --output demo-result.csv

bench: $(STAMP)
	$(BIN)/python -m benchmarks $(BENCH_ARGS)

# five drawn worlds of limits, run() and the chained calls in each (benchmarks/README.md)
bench-worlds: $(STAMP)
	$(BIN)/python -m benchmarks --scenario worlds --worlds 5 $(BENCH_ARGS)

# run() and its re-runs at 20 % and 30 % faults on every host, against the fault-free frame
bench-faults: $(STAMP)
	$(BIN)/python -m benchmarks --scenario faults --faults 0.2 $(BENCH_ARGS)
	$(BIN)/python -m benchmarks --scenario faults --faults 0.3 $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache build *.egg-info
