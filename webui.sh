#!/usr/bin/env bash
# Start Inline Core. Sets up ./.venv on first use, then serves /v1, ComfyUI's API and the web UI
# (ComfyUI's frontend, the `ui` extra) on http://127.0.0.1:8848.
#
#   ./webui.sh                          loopback, port 8848
#   ./webui.sh --listen --token SECRET  all interfaces (a token is required there)
#   ./webui.sh --port 9000 --lowvram    other port, tight-VRAM profile
#   ./webui.sh --multi-gpu ulysses=2    split one image across 2 ranks
#   ./webui.sh --install --extra zimage set up ./.venv with the given extras, then exit
#   ./webui.sh --help                   every server flag
#
# Launcher-only flags: --install (set up and exit), --extra LIST (extras to install besides
# "server", default "zimage,video,ui"; --extra server alone gives a torch-free core),
# --skip-install (never touch .venv). Installing shows pip's progress (torch is a few GB).
set -euo pipefail
cd "$(dirname "$0")"
launcher_help() {
  cat <<'USAGE'
usage: ./webui.sh [--install] [--extra LIST] [--skip-install] [server flags]

Launcher flags:
  --install        set up ./.venv (PyTorch pinned first, then the extras) and exit
  --extra LIST     extras to install, comma-separated, besides "server" (default:
                   zimage,video,ui); e.g. zimage,video,ui,postgres  parallel  xdit
  --skip-install   never touch ./.venv (start with what is installed)
USAGE
}
for arg in "$@"; do
  if [ "$arg" = "--help" ] || [ "$arg" = "-h" ]; then
    launcher_help
    # Never sets anything up: the server's flags come from an existing ./.venv.
    if .venv/bin/python -c "import inline_core" >/dev/null 2>&1; then
      echo
      exec .venv/bin/python -m inline_core.cli --help
    fi
    echo
    echo "Server flags: run ./webui.sh --install first, then ./webui.sh --help lists them."
    exit 0
  fi
done
extras="server,zimage,video,ui"
install_only=0
skip_install=0
args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --install) install_only=1 ;;
    --skip-install) skip_install=1 ;;
    --extra) shift; extras="server,${1:?--extra needs a value}" ;;
    --extra=*) extras="server,${1#--extra=}" ;;
    *) args+=("$1") ;;
  esac
  shift
done
if [ "$skip_install" = 0 ]; then
  if [ "$install_only" = 1 ] || ! .venv/bin/python -c "import inline_core, fastapi" >/dev/null 2>&1; then
    scripts/bootstrap-venv.sh "$extras"
  fi
fi
[ "$install_only" = 1 ] && { echo "ready: ./webui.sh to start"; exit 0; }
exec .venv/bin/python -m inline_core.cli "${args[@]+"${args[@]}"}"
