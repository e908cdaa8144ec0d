#!/usr/bin/env bash
# hutch's grep and glob tools against the same searches through hutch's
# shell tool, side by side in one run, on the local and isolated tiers:
#   - grep (a literal, and a regular expression) against `grep -rnF` and
#     `grep -rnE PATTERN .` run by the shell tool;
#   - glob `**/*.go` against `find . -name '*.go'` run by the shell tool
#     (target: glob within 3x of find), and against find run directly.
# bench/searchcmp drives `hutch mcp` over stdio with the Go MCP SDK's
# client, on a generated tree of 20,000 ~4 KiB files in 200 directories
# plus a node_modules of 2,000 that .gitignore names (hutch skips it;
# grep and find read it), and prints medians and ratios.
# Usage: bench/search.sh [N] [BASE]   (default 20 rounds; BASE, a git
#        revision, also times a hutch built from it, for before and after)
# Needs: Go; grep and find.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-20}
base_rev=${2:-}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CGO_ENABLED=0 go build -o "$tmp/hutch" ./cmd/hutch
go build -o "$tmp/searchcmp" ./bench/searchcmp
base=()
if [ -n "$base_rev" ]; then
  mkdir "$tmp/base"
  git archive "$base_rev" | tar -x -C "$tmp/base"
  (cd "$tmp/base" && CGO_ENABLED=0 go build -o "$tmp/hutch-base" ./cmd/hutch)
  base=(-base "$tmp/hutch-base")
  echo "== base: $(git rev-parse --short "$base_rev")" >&2
fi
echo "== hutch at $(git rev-parse --short HEAD)$(git diff --quiet HEAD -- . || echo ' (with uncommitted changes)'), $n rounds" >&2
"$tmp/searchcmp" -hutch "$tmp/hutch" "${base[@]}" -n "$n" -warmup 3
