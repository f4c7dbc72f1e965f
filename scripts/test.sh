#!/usr/bin/env bash
# The whole test suite, after setting up on a fresh machine.  Extra arguments go to pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python -m pytest -p no:cacheprovider "$@"
