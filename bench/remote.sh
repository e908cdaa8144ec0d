#!/usr/bin/env bash
# The remote tier on loopback against the isolated tier, side by side in one
# run: exec of `true` in a warm session (target: remote at most 2x), read of
# a 4 KiB file (target: p50 at most 1 ms), a tree of 1000 files / 10 MiB
# copied in and out in one call each (target: under 0.5 s each way; the
# isolated tier's own unpack of it alongside), and
# the same tree one file per call. The server is the static hutch binary
# (hutch serve --listen 127.0.0.1:0, isolated tier); the client and the
# isolated contender run in bench/remotecmp.
# Each bulk copy and the floor run five times; the median is shown.
# Usage: bench/remote.sh [N] [FILES] [BYTES_PER_FILE]   (default 300 1000 10240)
set -euo pipefail
cd "$(dirname "$0")/.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/hutch" ./cmd/hutch
go build -o "$tmp/remotecmp" ./bench/remotecmp
"$tmp/remotecmp" -hutch "$tmp/hutch" -n "${1:-300}" -files "${2:-1000}" -size "${3:-10240}"
