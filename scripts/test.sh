#!/usr/bin/env bash
# The whole test suite, after setting up on a fresh machine, spread over every CPU (pytest-xdist: -n auto;
# give -n 0 to run in one process).  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider -n auto "$@"
