#!/usr/bin/env bash
# Offline validation of template.yaml, for CI and by hand:
#   infra/validate.sh            cfn-lint + sam validate --lint
#   infra/validate.sh --build    ... and a `sam build` into a temporary directory (~1 min, PyPI)
# The tools live in their own venv (.venv-infra/, created on first use from
# infra/requirements-validate.txt) because aws-sam-cli's boto pins clash with aioboto3's.
# Exits non-zero on any error or warning.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3.11}"
VENV="${INFRA_VENV:-.venv-infra}"
REQS=infra/requirements-validate.txt
STAMP="$VENV/.installed-stamp"

if [ ! -f "$STAMP" ] || [ "$REQS" -nt "$STAMP" ]; then
    command -v "$PYTHON" >/dev/null || { echo "infra/validate.sh: $PYTHON not found; set PYTHON=" >&2; exit 2; }
    "$PYTHON" -m venv "$VENV"
    # Keep the venv out of git without touching the project's .gitignore.
    echo '*' >"$VENV/.gitignore"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check --upgrade pip
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -r "$REQS"
    touch "$STAMP"
fi

# sam and cfn-lint only parse the template; keep them off the network and any real account.
export AWS_DEFAULT_REGION="${AWS_DEFAULT_REGION:-us-east-1}"
export SAM_CLI_TELEMETRY=0

echo "== cfn-lint template.yaml"
"$VENV/bin/cfn-lint" template.yaml

echo "== sam validate --lint"
"$VENV/bin/sam" validate --lint --template-file template.yaml

if [ "${1:-}" = "--build" ]; then
    out="$(mktemp -d)"
    trap 'rm -rf "$out"' EXIT
    echo "== sam build (into $out)"
    "$VENV/bin/sam" build --template-file template.yaml --build-dir "$out"
    for fn in WorkerFunction ApiFunction; do
        [ -f "$out/$fn/handlers/$( [ $fn = WorkerFunction ] && echo worker || echo api ).py" ] \
            || { echo "sam build: $fn artifact lacks its handler" >&2; exit 1; }
        [ ! -e "$out/$fn/tests" ] || { echo "sam build: tests/ leaked into $fn" >&2; exit 1; }
    done
    du -sh "$out"/WorkerFunction "$out"/ApiFunction
fi
echo "template.yaml: OK"
