#!/usr/bin/env bash
# Local-tier exec overhead against a bare os/exec run of /bin/true, in one run.
# Usage: bench/local-exec.sh [benchtime]   (default 2s per benchmark)
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(go test -run '^$' -bench '^BenchmarkExec(Bare|Local|LocalShell)$' -benchtime "${1:-2s}" -count 1 ./sandbox/local/)
echo "$out" | grep -E '^Benchmark'
echo "$out" | awk '
  /^BenchmarkExecBare/       { bare = $3 }
  /^BenchmarkExecLocal-/     { loc = $3 }
  /^BenchmarkExecLocal /     { loc = $3 }
  /^BenchmarkExecLocalShell/ { sh = $3 }
  END {
    if (bare == 0) { print "no baseline"; exit 1 }
    printf "bare os/exec   %8.3f ms/run\n", bare / 1e6
    printf "local (argv)   %8.3f ms/run   ratio %.2fx\n", loc / 1e6, loc / bare
    printf "local (sh -c)  %8.3f ms/run   ratio %.2fx\n", sh / 1e6, sh / bare
  }'
