#!/usr/bin/env bash
# The whole check, from nothing: set up ./.venv with everything the tests need, then ruff,
# pyright (strict) and pytest. This is the README's test command and what CI runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap-venv.sh "dev,zimage,parallel,xdit"
echo "== ruff"
.venv/bin/ruff check .
echo "== pyright"
.venv/bin/pyright
echo "== pytest"
.venv/bin/pytest -q "$@"
