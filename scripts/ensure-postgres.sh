#!/usr/bin/env bash
# Make sure PostgreSQL server binaries (initdb, pg_ctl, postgres) exist.
# Installs Debian's postgresql package when they are missing.
set -euo pipefail
find_bin() {
  if command -v pg_ctl >/dev/null 2>&1 && command -v initdb >/dev/null 2>&1; then return 0; fi
  ls -d /usr/lib/postgresql/*/bin/pg_ctl >/dev/null 2>&1
}
if find_bin; then exit 0; fi
echo "ensure-postgres: PostgreSQL server binaries not found; installing Debian's postgresql package" >&2
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq postgresql >/dev/null
find_bin || { echo "ensure-postgres: install finished but pg_ctl is still missing" >&2; exit 1; }
