#!/usr/bin/env bash
# Make sure PostgreSQL's server programs (initdb, postgres, pg_ctl) are installed: the run store's
# tests start a throwaway cluster of their own on loopback (tests/postgres_cluster.py).
# Installs Debian's `postgresql` package when they are missing and this runs as root; otherwise
# says what to install. Prints the folder holding the programs.
set -euo pipefail
find_bin() {
  for dir in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V -r); do
    if [ -x "$dir/initdb" ] && [ -x "$dir/postgres" ] && [ -x "$dir/pg_ctl" ]; then
      echo "$dir"
      return 0
    fi
  done
  if command -v initdb >/dev/null && command -v postgres >/dev/null; then
    dirname "$(command -v initdb)"
    return 0
  fi
  return 1
}
if bin=$(find_bin); then
  echo "$bin"
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "PostgreSQL's server programs are missing: install them (Debian: apt-get install postgresql)" >&2
  exit 1
fi
echo "installing Debian's postgresql package ..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2
apt-get install -y -qq --no-install-recommends postgresql >&2
# The package starts a cluster of its own; the tests do not use it.
if command -v pg_lsclusters >/dev/null; then
  pg_lsclusters -h 2>/dev/null | while read -r version name _rest; do
    pg_ctlcluster "$version" "$name" stop >/dev/null 2>&1 || true
  done
fi
find_bin
