#!/usr/bin/env bash
# Set up everything Iron needs on a fresh machine: a virtual environment with
# Iron installed (editable) and its test dependencies.  Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --upgrade pip
.venv/bin/python -m pip install --quiet -e '.[test]'
