# Two entry points for a newcomer: `make demo` (the main job) and `make test`.
# Both create the virtualenv on first use, so a fresh machine needs nothing else.
PYTHON ?= python3.11
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-stamp

.PHONY: venv demo test lint typecheck unit infra bench clean

venv: $(STAMP)

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null || { echo "error: $(PYTHON) not found; install Python 3.11+ or set PYTHON=" >&2; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,anthropic,openai]'
	@touch $(STAMP)

demo: venv
	$(BIN)/awaken-s3 demo

lint: venv
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: venv
	$(BIN)/mypy

unit: venv
	$(BIN)/pytest -q

# cfn-lint, sam validate --lint and a sam build of the Lambda artifact (in .venv-infra/,
# apart from .venv: aws-sam-cli's boto pins clash with aioboto3's).
infra:
	bash infra/validate.sh --build

test: lint typecheck infra unit

bench: venv
	$(BIN)/python benchmarks/store_ops.py
	$(BIN)/python benchmarks/stream_overhead.py

clean:
	rm -rf $(VENV) .venv-infra .pytest_cache .mypy_cache .ruff_cache .hypothesis .aws-sam
