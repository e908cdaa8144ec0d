#!/usr/bin/env bash
# run_code's cost per call against its peers, side by side in one run:
#   - run_code python `print(1)` (a fresh isolated sandbox and run directory,
#     the files scan, in one Go process: go test -bench in tool) against the
#     same interpreter under bubblewrap with an mxc-like read-only root
#     (target: at most 1.2x);
#   - run_code shell `true` against `hutch run -- /bin/true` (target: at
#     most 3 ms more), and against isolated.Run alone in the same process
#     (what run_code adds to the one-shot).
# bwrap and hutch run are timed by bench/timecmd (sequential runs, wall time
# from fork to wait), from the same empty directory.
# Usage: bench/run_code.sh [N]   (default 100 runs each)
# Needs: Go, python3; root (or sudo) for apt-get when bwrap is missing.
set -euo pipefail
cd "$(dirname "$0")/.."

n=${1:-100}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }
if ! command -v bwrap >/dev/null 2>&1; then
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/cwd"
CGO_ENABLED=0 go build -o "$tmp/hutch" ./cmd/hutch
go build -o "$tmp/timecmd" ./bench/timecmd

# bubblewrap, mxc-like (bench/bwrap-mxc.sh), as in bench/isolated.sh.
. bench/bwrap-mxc.sh

med() { (cd "$tmp/cwd" && "$tmp/timecmd" -n "$n" -warmup 3 -- "$@") | awk '{ print $2 }'; }
echo "== timing ($n runs each)" >&2
bwrap_py=$(med "${bwrap_cmd[@]}" /usr/bin/python3 -c 'print(1)')
hutch_true=$(med "$tmp/hutch" run -- /bin/true)
bench=$(CGO_ENABLED=0 go test -run '^$' -bench '^Benchmark(RunCodePython|RunCodeShell|IsolatedRunTrue)$' -benchtime "${n}x" ./tool/ | grep '^Benchmark')
ms() { echo "$bench" | awk -v name="$1" '$1 ~ "^"name"(-[0-9]+)?$" { printf "%.3f", $3 / 1e6 }'; }
rc_py=$(ms BenchmarkRunCodePython)
rc_sh=$(ms BenchmarkRunCodeShell)
iso=$(ms BenchmarkIsolatedRunTrue)

. /etc/os-release
echo "host      $PRETTY_NAME, kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "hutch     $("$tmp/hutch" version) at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
echo "bwrap     $(bwrap --version); $(/usr/bin/python3 --version)"
echo
echo "per call, median or mean wall time (ms)"
awk -v rp="$rc_py" -v bp="$bwrap_py" -v rs="$rc_sh" -v ht="$hutch_true" -v iso="$iso" 'BEGIN {
  printf "run_code python print(1)   %8.3f   bwrap python3 -c print(1) %8.3f   ratio %.2fx   target <= 1.2x: %s\n", rp, bp, rp / bp, (rp <= 1.2 * bp) ? "met" : "missed"
  printf "run_code shell true        %8.3f   hutch run -- /bin/true    %8.3f   diff %+.3f ms   target <= +3 ms: %s\n", rs, ht, rs - ht, (rs - ht <= 3) ? "met" : "missed"
  printf "run_code shell true        %8.3f   isolated.Run /bin/true    %8.3f   diff %+.3f ms (what run_code adds in one process)\n", rs, iso, rs - iso
}'
