#!/usr/bin/env bash
# Create ./.venv (if needed) and install the project with the given extras.
#   scripts/bootstrap-venv.sh [EXTRAS]      e.g. "server,zimage" (default) or "dev,zimage"
# torch is installed first, pinned, so the extras resolve against it instead of letting pip pick
# a multi-GB build on its own. Override the pin with INLINE_TORCH_SPEC (e.g. a CUDA index URL
# build, or "skip" to keep what is installed). pip's own output is shown (not --quiet): torch and
# its libraries are gigabytes, and its progress bars say how far the download has got.
set -euo pipefail
cd "$(dirname "$0")/.."
extras="${1:-server,zimage}"
python="${PYTHON:-python3}"
if [ ! -x .venv/bin/python ]; then
  "$python" -m venv .venv
  .venv/bin/python -m pip install --quiet --upgrade pip
fi
pip() { .venv/bin/python -m pip "$@"; }
torch_spec="${INLINE_TORCH_SPEC:-torch==2.13.0}"
needs_torch=false
for extra in zimage parallel xdit; do
  [[ ",$extras," == *",$extra,"* ]] && needs_torch=true
done
if $needs_torch && [ "$torch_spec" != "skip" ]; then
  if ! .venv/bin/python -c "import torch" >/dev/null 2>&1; then
    echo "installing $torch_spec ..."
    pip install --progress-bar on "$torch_spec"
  fi
fi
echo "installing inline-core[$extras] ..."
# The SDK node packs are written against lives in sdk/ (its own distribution): installed first,
# so the server's dependency on it resolves here rather than on a registry.
pip install --progress-bar on -e ./sdk -e ".[$extras]"
