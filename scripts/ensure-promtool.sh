#!/usr/bin/env bash
# Make sure promtool exists (it checks and unit-tests docs/monitoring/'s
# Prometheus rules). Installs Debian's prometheus package, which ships it,
# when it is missing; the package's server is not started.
set -euo pipefail
if command -v promtool >/dev/null 2>&1; then exit 0; fi
echo "ensure-promtool: promtool not found; installing Debian's prometheus package" >&2
export DEBIAN_FRONTEND=noninteractive
SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO="sudo"
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends prometheus >/dev/null
command -v promtool >/dev/null 2>&1 || { echo "ensure-promtool: install finished but promtool is still missing" >&2; exit 1; }
