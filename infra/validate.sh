#!/usr/bin/env bash
# Offline validation of template.yaml and of the template `awaken-s3 init` writes from it, for
# CI and by hand:
#   infra/validate.sh            cfn-lint + sam validate --lint, of both templates
#   infra/validate.sh --build    ... and `sam build` of this repository's artifact and of a
#                                freshly written project's, each with an import smoke test
#                                (minutes, PyPI)
# The tools live in their own venv (.venv-infra/, created on first use from
# infra/requirements-validate.txt) because aws-sam-cli's boto pins clash with aioboto3's; the
# project is written by this checkout's awaken-s3 (AWAKEN_S3, default .venv/bin/awaken-s3).
# Exits non-zero on any error or warning.
set -euo pipefail
cd "$(dirname "$0")/.."
AWAKEN_S3="${AWAKEN_S3:-.venv/bin/awaken-s3}"

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

# A project as `awaken-s3 init` writes it: its template is derived from template.yaml.
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
project="$work/support-desk"
[ -x "$AWAKEN_S3" ] || { echo "infra/validate.sh: $AWAKEN_S3 not found (make venv); set AWAKEN_S3=" >&2; exit 2; }
"$AWAKEN_S3" init "$project" --provider anthropic >/dev/null
echo "== cfn-lint, sam validate --lint: the template of a project awaken-s3 init wrote"
"$VENV/bin/cfn-lint" "$project/template.yaml"
"$VENV/bin/sam" validate --lint --template-file "$project/template.yaml"

if [ "${1:-}" = "--build" ]; then
    out="$work/build"
    echo "== sam build (into $out)"
    "$VENV/bin/sam" build --template-file template.yaml --build-dir "$out"
    for pair in WorkerFunction:worker ApiFunction:api SweeperFunction:sweeper \
        SocketFunction:socket SocketAuthorizerFunction:socket_authorizer; do
        fn="${pair%%:*}" handler="${pair##*:}"
        [ -f "$out/$fn/handlers/$handler.py" ] \
            || { echo "sam build: $fn artifact lacks its handler" >&2; exit 1; }
        [ ! -e "$out/$fn/tests" ] || { echo "sam build: tests/ leaked into $fn" >&2; exit 1; }
        for pruned in demo dev local testing project; do
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

    # The project as its user builds it: SAM's standard Python builder (src/ as the
    # functions, layer/requirements.txt as their layer), with nothing set: init, run from
    # an install of this checkout, required `awaken-s3[anthropic] @ file://<this checkout>`,
    # which SAM's pip builds from here. SAM's builder runs pip with a local interpreter of
    # the runtime's version, found on PATH.
    grep -qx "awaken-s3\[anthropic\] @ file://$(pwd -P)" "$project/layer/requirements.txt" \
        || { echo "the project does not require awaken-s3 from this checkout" >&2; exit 1; }
    version="$(sed -n 's/^    Runtime: python//p' template.yaml)"
    runtime_python="$(infra/find-python.sh "$version")" \
        || { echo "sam build of a project needs a local python$version (the template's runtime)" >&2; exit 1; }
    sam="$(pwd)/$VENV/bin/sam"
    build_project() {  # template (relative to the project), build directory
        local started=$SECONDS
        (cd "$project" && PATH="$(dirname "$runtime_python"):$PATH" \
            "$sam" build --template-file "$1" --build-dir "$2" >"$2.log" 2>&1) \
            || { cat "$2.log" >&2; echo "sam build of the project failed" >&2; exit 1; }
        echo "   built in $((SECONDS - started)) s"
    }
    echo "== sam build of the project awaken-s3 init wrote (into $work/project)"
    built="$work/project"
    build_project template.yaml "$built"
    layer="$built/DependenciesLayer/python"
    [ -d "$layer/awaken_s3" ] || { echo "the project's layer lacks awaken_s3" >&2; exit 1; }
    ls "$layer"/pydantic_core/*-aarch64-linux-gnu.so >/dev/null \
        || { echo "the project's layer is not built for arm64" >&2; exit 1; }
    for pair in WorkerFunction:worker ApiFunction:api SweeperFunction:sweeper; do
        fn="${pair%%:*}" handler="${pair##*:}"
        [ -f "$built/$fn/support_desk/handlers/$handler.py" ] \
            || { echo "the project's $fn lacks its handler" >&2; exit 1; }
        # The functions hold the project's code only; every dependency is the layer's.
        for stray in tests awaken_s3 pydantic layer requirements.txt; do
            [ ! -e "$built/$fn/$stray" ] || { echo "$stray leaked into the project's $fn" >&2; exit 1; }
        done
    done
    du -sh "$layer" "$built"/WorkerFunction
    # Import the handlers from the artifact alone, for this host's architecture (an arm64
    # artifact cannot be imported on x86_64): the function's package and the layer's python/,
    # as Lambda puts them on sys.path, with nothing else.
    arch="$(uname -m)"
    [ "$arch" = aarch64 ] && arch=arm64
    if [ "$arch" != arm64 ]; then
        sed "s/\barm64\b/$arch/g" "$project/template.yaml" >"$project/template-$arch.yaml"
        echo "== sam build of the project for this host ($arch), for the import smoke test"
        built="$work/project-$arch"
        build_project "template-$arch.yaml" "$built"
    fi
    env -i PATH=/usr/bin:/bin AWS_DEFAULT_REGION=us-east-1 "$runtime_python" -I -c \
        'import sys; sys.path[:0] = sys.argv[1:]; import support_desk.handlers.worker, support_desk.handlers.api, support_desk.handlers.sweeper, awaken_s3.runtime.loop, awaken_s3.providers.anthropic; print("project handlers import: OK")' \
        "$built/WorkerFunction" "$built/DependenciesLayer/python"
fi
echo "templates: OK"
