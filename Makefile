# Set-up and checks. `make test` and `make demo` work on a fresh clone.
PYTHON ?= python3
VENV   ?= .venv
BIN     = $(VENV)/bin
STAMP   = $(VENV)/.installed

.PHONY: test lint typecheck pytest docs demo bench bench-quota bench-worlds bench-limiter bench-faults clean install \
        test-oldest test-newest

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

# The supported range, tested at both ends (README, "Supported versions"). Each end has its own
# venv and runs the tests and the notebooks; lint, types and docs run in `make test` only.
# oldest: Python 3.11 with every dependency at its declared minimum (ci/constraints-oldest.txt);
# newest: the newest Python here with the newest releases. A pyenv-installed Python is found
# when its shim cannot run it. `rm -rf .venv-newest` to pick up newer releases.
find_python = $(firstword $(shell $(1) -c '' 2>/dev/null && echo $(1)) \
                $(lastword $(sort $(wildcard $(HOME)/.pyenv/versions/$(2).*/bin/$(1)))))
PYTHON_OLDEST ?= $(call find_python,python3.11,3.11)
PYTHON_NEWEST ?= $(call find_python,python3.13,3.13)
PYTEST_ALL     = -m pytest -q -p no:cacheprovider --nbmake tests notebooks
SHOW_VERSIONS  = -c "import sys, pandas, numpy, pyarrow, httpx, lxml.etree as e, tqdm, ipywidgets; \
	print('Python', sys.version.split()[0], '| pandas', pandas.__version__, '| numpy', \
	numpy.__version__, '| pyarrow', pyarrow.__version__, '| httpx', httpx.__version__, \
	'| lxml', '.'.join(map(str, e.LXML_VERSION[:3])), '| tqdm', tqdm.__version__, \
	'| ipywidgets', ipywidgets.__version__)"

.venv-oldest/.installed: pyproject.toml ci/constraints-oldest.txt
	@test -n "$(PYTHON_OLDEST)" || { echo "test-oldest needs python3.11 (PYTHON_OLDEST=...)"; exit 1; }
	rm -rf .venv-oldest
	$(PYTHON_OLDEST) -m venv .venv-oldest
	.venv-oldest/bin/python -m pip install --quiet --upgrade pip
	.venv-oldest/bin/python -m pip install --quiet -c ci/constraints-oldest.txt -e '.[test]'
	touch $@

.venv-newest/.installed: pyproject.toml
	@test -n "$(PYTHON_NEWEST)" || { echo "test-newest needs python3.13 (PYTHON_NEWEST=...)"; exit 1; }
	rm -rf .venv-newest
	$(PYTHON_NEWEST) -m venv .venv-newest
	.venv-newest/bin/python -m pip install --quiet --upgrade pip
	.venv-newest/bin/python -m pip install --quiet --upgrade --upgrade-strategy eager \
		-e '.[test,parquet,plot,dask]'
	touch $@

test-oldest: .venv-oldest/.installed
	.venv-oldest/bin/python $(SHOW_VERSIONS)
	.venv-oldest/bin/python $(PYTEST_ALL)

test-newest: .venv-newest/.installed
	.venv-newest/bin/python $(SHOW_VERSIONS)
	.venv-newest/bin/python $(PYTEST_ALL)

demo: $(STAMP)
	$(BIN)/litfetch-df demo --output demo-result.csv

# the fake enforces the published 2026 limits and quotas (benchmarks/README.md); BENCH_ARGS
# may say --limits fixed for the old world
bench: $(STAMP)
	$(BIN)/python -m benchmarks --limits 2026 $(BENCH_ARGS)
	$(BIN)/python -m benchmarks.bomb
	$(BIN)/python -m benchmarks.text

# issue 24's quota world: Unpaywall's day ends after 50 calls, OpenAlex's keyless list
# budget after 5, at N=2,000 (the client has no OpenAlex key)
bench-quota: $(STAMP)
	$(BIN)/python -m benchmarks --limits 2026 --quota unpaywall=50,openalex-keyless-list=5 \
		--scenario pipeline --n 2000 $(BENCH_ARGS)

# five drawn worlds of limits, run() and the chained calls in each (benchmarks/README.md)
bench-worlds: $(STAMP)
	$(BIN)/python -m benchmarks --scenario worlds --worlds 5 $(BENCH_ARGS)

# the host limiter alone over the hosts of five drawn worlds, on a virtual clock: 200 and
# 1,665 requests at 50 ms and 300 ms (a few minutes)
bench-limiter: $(STAMP)
	$(BIN)/python -m benchmarks.limiter_sweep --jobs 2 $(BENCH_ARGS)

# run() and its re-runs at 20 % and 30 % faults on every host, against the fault-free frame
bench-faults: $(STAMP)
	$(BIN)/python -m benchmarks --scenario faults --faults 0.2 $(BENCH_ARGS)
	$(BIN)/python -m benchmarks --scenario faults --faults 0.3 $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .venv-oldest .venv-newest .mypy_cache .ruff_cache build *.egg-info
