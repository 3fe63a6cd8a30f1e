#!/usr/bin/env bash
# Make sure a Chromium the browser tests can drive is installed: Debian's `chromium` package,
# installed when missing and this runs as root (Playwright's own browser download needs a host
# this machine cannot reach). Prints the browser's path.
set -euo pipefail
find_browser() {
  for name in chromium chromium-browser; do
    if command -v "$name" >/dev/null; then
      command -v "$name"
      return 0
    fi
  done
  return 1
}
if path=$(find_browser); then
  echo "$path"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "Chromium is missing: install it (Debian: apt-get install chromium)" >&2
  exit 1
fi
echo "installing Debian's chromium package ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends chromium >&2
find_browser
