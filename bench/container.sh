#!/usr/bin/env bash
# The container tier's warm operations against one `docker exec` per
# operation, side by side in one run: a read_file (Read of a small file)
# and a small shell (`echo hi` through Exec) through hutch's helper, and
# `docker exec NAME cat FILE` and `docker exec NAME sh -c 'echo hi'` on the
# same container. Prints p50 and p99 of each and the ratios.
# Usage: [LOAD=K] bench/container.sh [N]   (N helper runs each, default
#   500; docker exec gets N/5, at least 20; LOAD=K runs it beside K busy
#   loops, bench/load.sh, for the figures under load)
# Needs: Go; Docker, installed and started by scripts/docker-up.sh (root or
# sudo for apt-get and dockerd when missing).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-500}
scripts/docker-up.sh >/dev/null
. bench/load.sh
bin=$(mktemp)
trap 'load_stop; rm -f "$bin"' EXIT
# Built before the load starts (go test then finds it in its cache), so
# that only the timings share the CPUs.
CGO_ENABLED=0 go test -c -o "$bin" ./sandbox/container/
load_start
load_label
# A static test binary is the helper itself (no rebuild inside the test).
CGO_ENABLED=0 HUTCH_BENCH_N=$n go test -count=1 -run '^TestLatencyReport$' -v ./sandbox/container/ |
  grep -v -e '^=== ' -e '^--- ' -e '^PASS' -e '^ok '
