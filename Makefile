# Two entry points for a newcomer: `make demo` (the main job) and `make test`; `make dev` runs
# the service locally. Each creates the virtualenv on first use, so a fresh machine needs nothing
# else than Python >= 3.11 and make.
#
# PYTHON: the newest Python >= 3.11 found (python3.N on PATH, or pyenv's installed versions);
# choose one with `make PYTHON=python3.12 test`. The venv is rebuilt when the choice changes.
PYTHON ?= $(shell infra/find-python.sh)
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-$(notdir $(PYTHON))
# pytest-xdist workers (auto: one per core). loadgroup hands each worker one test at a time
# (a few queued) in collection order, and tests/conftest.py puts the runs of minutes (marked
# `minutes`) first: they start on different workers at once instead of one of them being the last
# thing running while the other workers idle.
PYTEST_WORKERS ?= auto
# More pytest options for unit, slow and suite, e.g. PYTEST_ARGS="--durations=30".
PYTEST_ARGS ?=
PYTEST := $(BIN)/pytest -q -n $(PYTEST_WORKERS) --dist loadgroup $(PYTEST_ARGS)
# The template validators' own venv (.venv-infra/): Python 3.11, on which aws-sam-cli's pins
# are known to install.
INFRA_PYTHON ?= $(shell infra/find-python.sh 3.11 || infra/find-python.sh)

.PHONY: venv demo dev test lint typecheck unit slow suite infra build-check bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@test -n "$(PYTHON)" || { echo "error: no Python >= 3.11 found; install one, or set PYTHON=" >&2; exit 1; }
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11+ or set PYTHON=" >&2; exit 1; }
	@echo "== $(VENV) with $$($(PYTHON) --version) ($(PYTHON))"
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,anthropic,openai]'
	@touch $(STAMP)

demo: venv
	$(BIN)/awaken-s3 demo

# The HTTP API, workers, sweeper and web console on 127.0.0.1 (docs/LOCAL.md).
dev: venv
	$(BIN)/awaken-s3 dev

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

# The suite in two sets that together are every test: `unit`, everything not marked slow (what
# `make test` runs), and `slow`, the end-to-end runs of real processes and servers (the kill
# soak, the dev stack, a fresh project, the harness, the service handlers on a moto server).
# CI runs both. A set that selects no test fails (pytest's exit status 5), as every failure does.
unit: venv
	$(PYTEST) -m "not slow"

slow: venv
	$(PYTEST) -m slow

# Every test in one run (the two sets share the workers, so it is shorter than both in a row).
suite: venv
	$(PYTEST)

# cfn-lint and sam validate --lint of template.yaml and of the template `awaken-s3 init` writes
# (in .venv-infra/, apart from .venv: aws-sam-cli's boto pins clash with aioboto3's).
infra: venv
	PYTHON="$(INFRA_PYTHON)" AWAKEN_S3="$(BIN)/awaken-s3" bash infra/validate.sh

# ... and `sam build` of the three functions' artifact and of a freshly written project's, each
# with an import smoke test (minutes, and PyPI): not part of `make test`; CI runs it.
build-check: venv
	PYTHON="$(INFRA_PYTHON)" AWAKEN_S3="$(BIN)/awaken-s3" bash infra/validate.sh --build

test: lint typecheck infra unit

bench: venv
	$(BIN)/python benchmarks/store_ops.py
	$(BIN)/python benchmarks/stream_overhead.py
	$(BIN)/python benchmarks/crash_resume.py
	$(BIN)/python benchmarks/live_push.py

clean:
	rm -rf $(VENV) .venv-* .pytest_cache .mypy_cache .ruff_cache .hypothesis .aws-sam \
		clients/typescript/node_modules clients/typescript/dist clients/typescript/dist-test
