#!/usr/bin/env bash
# MCP read latency of hutch against the reference filesystem server, side by
# side in one run (see bench/mcp-read.mjs).
# Usage: bench/mcp-read.sh [N] [WARMUP]   (default 2000 calls each, 200 warm-up)
# Needs: Go, node >= 20 and npm (the npm registry, the first time).
set -euo pipefail
cd "$(dirname "$0")/.."

# npm ci when e2e/node_modules is missing or older than the lock file.
if [ ! -f e2e/node_modules/.package-lock.json ] || [ e2e/package-lock.json -nt e2e/node_modules/.package-lock.json ]; then
  npm ci --prefix e2e --no-audit --no-fund --loglevel=error >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/hutch" ./cmd/hutch
HUTCH_BIN="$tmp/hutch" node bench/mcp-read.mjs "$@"
