#!/usr/bin/env bash
# The whole check, from nothing: set up ./.venv with everything the tests need, then ruff,
# pyright (strict) and pytest. This is the README's test command and what CI runs.
# The run store's tests need PostgreSQL's server programs, the web UI's tests Debian's chromium:
# both installed here if missing (as root, Debian's packages), and then those tests must run
# rather than skip.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/bootstrap-venv.sh "dev,diffusers,parallel,xdit"
INLINE_TEST_POSTGRES_BIN="$(scripts/ensure-postgres.sh)"
export INLINE_TEST_POSTGRES_BIN INLINE_TEST_REQUIRE_POSTGRES=1
INLINE_TEST_CHROMIUM="$(scripts/ensure-chromium.sh)"
export INLINE_TEST_CHROMIUM INLINE_TEST_REQUIRE_CHROMIUM=1
echo "== ruff"
.venv/bin/ruff check .
echo "== pyright"
.venv/bin/pyright
echo "== pytest"
.venv/bin/pytest -q "$@"
