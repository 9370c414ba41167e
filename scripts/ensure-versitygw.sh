#!/usr/bin/env bash
# Build the Versity S3 gateway (a real S3-compatible server used by the S3
# tests) once into a cache outside the repository, and print its path on
# stdout (everything else goes to stderr).
# The first build takes several minutes; later runs reuse the binary.
# The main package of versitygw v1.8.0 is github.com/versity/versitygw/cmd/versitygw.
set -euo pipefail
VERSION="${VERSITYGW_VERSION:-v1.8.0}"
CACHE="${OML_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oml}/versitygw-$VERSION"
BIN="$CACHE/versitygw"
mkdir -p "$CACHE"

usable() { [ -x "$BIN" ] && "$BIN" --help >/dev/null 2>&1; }

if ! usable; then
  # Serialize concurrent callers (parallel test binaries, make -j): one
  # builds, the others wait for it and reuse the result.
  exec 9>"$CACHE/.build.lock"
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if ! usable; then
    echo "ensure-versitygw: building versitygw $VERSION into $CACHE (first time only, several minutes)" >&2
    rm -f "$BIN"
    GOBIN="$CACHE" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
    usable || { echo "ensure-versitygw: the built $BIN does not run" >&2; exit 1; }
  fi
fi
echo "$BIN"
