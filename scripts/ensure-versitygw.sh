#!/usr/bin/env bash
# Build the Versity S3 gateway (a real S3-compatible server used by the S3
# tests) once into a cache outside the repository, and print its path.
# The first build takes several minutes; later runs reuse the binary.
set -euo pipefail
VERSION="${VERSITYGW_VERSION:-v1.8.0}"
CACHE="${OML_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/oml}/versitygw-$VERSION"
BIN="$CACHE/versitygw"
if [ ! -x "$BIN" ]; then
  echo "ensure-versitygw: building versitygw $VERSION into $CACHE (first time only)" >&2
  mkdir -p "$CACHE"
  GOBIN="$CACHE" GOFLAGS=-mod=mod go install "github.com/versity/versitygw/cmd/versitygw@$VERSION" >&2
fi
echo "$BIN"
