#!/usr/bin/env bash
# Offline validation of template.yaml, for CI and by hand:
#   infra/validate.sh            cfn-lint + sam validate --lint
#   infra/validate.sh --build    ... and a `sam build` into a temporary directory (minutes, PyPI)
# The tools live in their own venv (.venv-infra/, created on first use from
# infra/requirements-validate.txt) because aws-sam-cli's boto pins clash with aioboto3's.
# Exits non-zero on any error or warning.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-$(infra/find-python.sh 3.11 || infra/find-python.sh || echo python3.11)}"
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
    for pair in WorkerFunction:worker ApiFunction:api SweeperFunction:sweeper \
        SocketFunction:socket SocketAuthorizerFunction:socket_authorizer; do
        fn="${pair%%:*}" handler="${pair##*:}"
        [ -f "$out/$fn/handlers/$handler.py" ] \
            || { echo "sam build: $fn artifact lacks its handler" >&2; exit 1; }
        [ ! -e "$out/$fn/tests" ] || { echo "sam build: tests/ leaked into $fn" >&2; exit 1; }
        for pruned in demo dev local; do
            [ ! -e "$out/$fn/awaken_s3/$pruned" ] \
                || { echo "sam build: awaken_s3/$pruned leaked into $fn" >&2; exit 1; }
        done
    done
    du -sh "$out"/WorkerFunction "$out"/ApiFunction "$out"/SweeperFunction "$out"/SocketFunction
    # The arm64 artifact cannot be imported here; the same recipe for this host's platform
    # can. Importing the handlers from it alone (-I: no site-packages, no .venv) proves the
    # artifact's dependency set is complete, e.g. that no handler needs a dev-only package.
    echo "== import smoke test of the same build for $PYTHON on this host"
    host="$out/host"
    make -s -f infra/lambda/Makefile artifact ARTIFACTS_DIR="$host" PYTHON="$PYTHON" \
        LAMBDA_PYTHON_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
        LAMBDA_PLATFORMS="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_platform().replace("linux-", "manylinux2014_"))')"
    (cd "$host" && env -i PATH=/usr/bin:/bin AWS_DEFAULT_REGION=us-east-1 "$(command -v "$PYTHON")" -I -c \
        'import sys; sys.path.insert(0, "."); import handlers.worker, handlers.api, handlers.sweeper, handlers.socket, handlers.socket_authorizer, jwt.algorithms; jwt.algorithms.RSAAlgorithm; print("handlers import: OK")')
    # A Bedrock-only build carries no provider SDK, and its handlers still load everything
    # a Bedrock worker needs on its first invocation (the provider and the AWS clients).
    echo "== Bedrock-only build (PROVIDERS=bedrock) for $PYTHON on this host"
    bedrock="$out/bedrock"
    make -s -f infra/lambda/Makefile artifact ARTIFACTS_DIR="$bedrock" PYTHON="$PYTHON" PROVIDERS=bedrock \
        LAMBDA_PYTHON_VERSION="$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" \
        LAMBDA_PLATFORMS="$("$PYTHON" -c 'import sysconfig; print(sysconfig.get_platform().replace("linux-", "manylinux2014_"))')"
    for sdk in anthropic openai; do
        [ ! -e "$bedrock/$sdk" ] || { echo "PROVIDERS=bedrock shipped the $sdk SDK" >&2; exit 1; }
    done
    (cd "$bedrock" && env -i PATH=/usr/bin:/bin AWS_DEFAULT_REGION=us-east-1 "$(command -v "$PYTHON")" -I -c \
        'import sys; sys.path.insert(0, "."); import handlers.worker, boto3; from awaken_s3.providers.config import ProviderSettings, build_provider; build_provider(ProviderSettings(model="m", region="us-east-1")); import awaken_s3.runtime.loop, awaken_s3.stores.s3, awaken_s3.threads.dynamo; [boto3.client(s, region_name="us-east-1") for s in ("dynamodb", "s3", "sqs", "bedrock-runtime", "ssm", "secretsmanager", "sts")]; boto3.client("apigatewaymanagementapi", region_name="us-east-1", endpoint_url="https://example.execute-api.us-east-1.amazonaws.com/live"); print("bedrock-only worker: OK")')
    du -sh "$bedrock"
fi
echo "template.yaml: OK"
