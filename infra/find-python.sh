#!/usr/bin/env bash
# Prints the path of a Python interpreter, or exits 1 having printed nothing:
#   infra/find-python.sh          the newest Python >= 3.11 found
#   infra/find-python.sh 3.13     Python 3.13 exactly
# It tries python3.N on PATH, then pyenv's installed versions (a pyenv shim for a version
# that is installed but not selected fails to run, so each candidate must actually run).
set -uo pipefail

versions=(3.14 3.13 3.12 3.11)
[ $# -gt 0 ] && versions=("$1")
pyenv_root="$(pyenv root 2>/dev/null || true)"

for version in "${versions[@]}"; do
    candidates=("python$version")
    if [ -n "$pyenv_root" ]; then
        for installed in "$pyenv_root"/versions/"$version".*/bin/python"$version"; do
            [ -x "$installed" ] && candidates+=("$installed")
        done
    fi
    for candidate in "${candidates[@]}"; do
        command -v "$candidate" >/dev/null 2>&1 || continue
        real="$("$candidate" -c "import sys; assert sys.version_info[:2] == tuple(map(int, '$version'.split('.'))); print(sys.executable)" 2>/dev/null)" || continue
        [ -n "$real" ] && { echo "$real"; exit 0; }
    done
done
exit 1
