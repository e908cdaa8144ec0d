#!/usr/bin/env bash
# One-shot start-up cost of the isolated tier (hutch run -- /bin/true) against
# bubblewrap with an mxc-like read-only root, Anthropic's sandbox-runtime (srt)
# and a bare fork+exec of /bin/true, side by side in one run. Every contender
# is timed by the same program (bench/timecmd: os/exec, sequential runs, wall
# time from fork to wait) from the same empty working directory. Then, in
# one go test process, a warm exec in a session against a bare fork+exec
# and a Go program's isolated.Run against the same program starting
# bubblewrap; page faults per start when perf is installed; and last the
# start-up targets (issue 23), each a ratio of two figures of this run.
# The one-shots are timed twice: back to back, and one run at a time
# after a pause of 0.1 s (N_SPACED runs), as an agent calls a tool. As
# root the two differ: a cgroup change may wait for a grace period of the
# kernel's RCU, which runs back to back can find still running.
# Usage: [LOAD=K] bench/isolated.sh [N] [N_SRT] [N_SPACED]
#   (default 200 runs each, 20 for srt, 30 spaced; LOAD=K times everything
#   beside K busy loops, bench/load.sh, for the figures under load)
# Needs: Go; root (or sudo) for apt-get when bwrap, socat or rg is missing;
# node and npm (the npm registry, the first time) for srt, which is reported
# as not run rather than failing the script when it cannot run here.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD

n=${1:-200}
n_srt=${2:-20}
n_spaced=${3:-30}
SRT_VERSION=0.0.83 # keep in step with bench/.srt/package.json

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages: bubblewrap for the baseline, socat and ripgrep for srt.
missing=()
for pair in bwrap:bubblewrap socat:socat rg:ripgrep; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}" >&2
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
fi

. bench/load.sh
tmp=$(mktemp -d)
trap 'load_stop; rm -rf "$tmp"' EXIT
mkdir "$tmp/cwd" # every contender starts here: empty, so srt scans nothing
CGO_ENABLED=0 go build -o "$tmp/hutch" ./cmd/hutch
go build -o "$tmp/timecmd" ./bench/timecmd
# What a process start costs here, apart from any sandbox: an empty Go
# program, and hutch itself (hutch version).
mkdir "$tmp/empty"
printf 'package main\n\nfunc main() {}\n' >"$tmp/empty/main.go"
printf 'module empty\n\ngo 1.21\n' >"$tmp/empty/go.mod"
(cd "$tmp/empty" && CGO_ENABLED=0 go build -o "$tmp/emptygo" .)

# bubblewrap, mxc-like (bench/bwrap-mxc.sh), running /bin/true.
. bench/bwrap-mxc.sh
bwrap_cmd+=(/bin/true)

# srt, pinned in bench/.srt (npm ci when node_modules is missing or older than
# the lock file). Settings: no network, no writes beyond srt's defaults.
srt_bin=$repo/bench/.srt/node_modules/.bin/srt
srt_skip=""
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  srt_skip="not run: node or npm missing"
elif [ ! -f bench/.srt/node_modules/.package-lock.json ] ||
  [ bench/.srt/package-lock.json -nt bench/.srt/node_modules/.package-lock.json ]; then
  if ! npm ci --prefix bench/.srt --no-audit --no-fund --loglevel=error >"$tmp/npm.log" 2>&1; then
    srt_skip="not run: npm ci failed: $(tail -n 1 "$tmp/npm.log")"
  fi
fi
cat >"$tmp/srt-settings.json" <<'EOF'
{
  "network": {"allowedDomains": [], "deniedDomains": []},
  "filesystem": {"denyRead": [], "allowWrite": [], "denyWrite": []}
}
EOF
srt_cmd=("$srt_bin" --settings "$tmp/srt-settings.json" -c /bin/true)

# [gap=D] [user=UID] measure NAME RUNS WARMUP CMD...: stores timecmd's
# line, or why it failed; with gap set, each run comes after that pause;
# with user set, timecmd and the runs are that user's (setpriv).
declare -A result failed
measure() {
  local name=$1 runs=$2 warmup=$3 out
  shift 3
  if out=$(cd "$tmp/cwd" && ${user:+setpriv --reuid="$user" --regid="$user" --clear-groups} "$tmp/timecmd" -n "$runs" -warmup "$warmup" -gap "${gap:-0}" -- "$@" 2>&1); then
    result[$name]=$out
  else
    failed[$name]=$(printf '%s' "$out" | tail -n 1 | cut -c1-200)
  fi
}

load_start
echo "== timing (fork+exec, hutch, bwrap: $n runs each; srt: $n_srt)" >&2
measure fork "$n" 3 /bin/true
measure emptygo "$n" 3 "$tmp/emptygo"
measure version "$n" 3 "$tmp/hutch" version
measure hutch "$n" 3 "$tmp/hutch" run -- /bin/true
measure bwrap "$n" 3 "${bwrap_cmd[@]}"
gap=100ms measure hutch_sp "$n_spaced" 1 "$tmp/hutch" run -- /bin/true
# The README's form: the working directory writable. An empty directory
# lacks hutch's protected paths (.git/hooks, .bashrc, .vscode...), as
# nearly every project lacks some, so the command runs supervised,
# through a session. bubblewrap binds the directory writable.
measure hutch_write "$n" 3 "$tmp/hutch" run --write . -- /bin/true
measure bwrap_write "$n" 3 "${bwrap_cmd[@]:0:${#bwrap_cmd[@]}-1}" --bind "$tmp/cwd" "$tmp/cwd" --chdir "$tmp/cwd" /bin/true
gap=100ms measure bwrap_sp "$n_spaced" 1 "${bwrap_cmd[@]}"
# As root, also as an unprivileged user (uid 65534, as a developer runs
# it): no cgroups then (rlimits), and no walk of /proc for root-only
# entries, which such a sandbox cannot read anyway.
if [ "$(id -u)" = 0 ] && command -v setpriv >/dev/null 2>&1; then
  chmod 755 "$tmp" && chmod 777 "$tmp/cwd"
  user=65534 measure hutch_user "$n" 3 "$tmp/hutch" run -- /bin/true
  user=65534 measure bwrap_user "$n" 3 "${bwrap_cmd[@]}"
fi
if [ -n "$srt_skip" ]; then
  failed[srt]=$srt_skip
else
  measure srt "$n_srt" 1 "${srt_cmd[@]}"
fi

# Versions and host.
. /etc/os-release
srt_ver=$( [ -x "$srt_bin" ] && "$srt_bin" --version 2>/dev/null || echo "not installed")
node_ver=$(node -v 2>/dev/null || echo none)
echo "host      $PRETTY_NAME, kernel $(uname -r), $(nproc) CPUs, load $(cut -d' ' -f1-3 /proc/loadavg), $(load_label)"
echo "hutch     $("$tmp/hutch" version) at $(git rev-parse --short HEAD 2>/dev/null || echo '?')$(git diff --quiet HEAD 2>/dev/null || echo ' (dirty tree)')"
echo "bwrap     $(bwrap --version)"
echo "srt       @anthropic-ai/sandbox-runtime $srt_ver on node $node_ver (package asks node >=22.12)"
echo

med() { local a; read -r _ a _ <<<"${result[$1]}"; echo "$a"; }
printf 'one-shot /bin/true, wall time per run from fork to wait (ms)\n'
printf '%-18s %5s %8s %8s %8s %8s   %-12s %s\n' "" runs median mean min max "vs fork+exec" "vs bwrap"
row() { # row KEY LABEL
  local key=$1 label=$2
  if [ -n "${result[$key]:-}" ]; then
    local m avg lo hi cnt
    read -r _ m _ avg _ lo _ hi _ _ cnt _ <<<"${result[$key]}"
    local vf="-" vb="-"
    [ -n "${result[fork]:-}" ] && vf=$(awk -v a="$m" -v b="$(med fork)" 'BEGIN { printf "%.1fx", a / b }')
    [ -n "${result[bwrap]:-}" ] && vb=$(awk -v a="$m" -v b="$(med bwrap)" 'BEGIN { printf "%.2fx", a / b }')
    printf '%-18s %5s %8s %8s %8s %8s   %-12s %s\n' "$label" "$cnt" "$m" "$avg" "$lo" "$hi" "$vf" "$vb"
  else
    printf '%-18s %s\n' "$label" "${failed[$key]}"
  fi
}
row fork "fork+exec"
row emptygo "empty Go program"
row version "hutch version"
row hutch "hutch run"
row bwrap "bwrap (mxc-like)"
row hutch_sp "hutch run, spaced"
row bwrap_sp "bwrap, spaced"
row hutch_write "hutch run --write"
row bwrap_write "bwrap --bind ."
if [ -n "${result[hutch_user]:-}${failed[hutch_user]:-}" ]; then
  row hutch_user "hutch run, user"
  row bwrap_user "bwrap, user"
fi
row srt "srt -c /bin/true"
# In one go test process: warm exec (/bin/true in an existing sandbox,
# the session's setup paid once) against a bare fork+exec, and a Go
# program's isolated.Run against the same program starting bubblewrap.
gobench=$(HUTCH_BENCH_BWRAP=$(printf '%s\n' "${bwrap_cmd[@]}") CGO_ENABLED=0 go test -run '^$' \
  -bench '^Benchmark(ForkExec|WarmExec|OneShot|BwrapOneShot)$' -benchtime "${n}x" ./sandbox/isolated/ | grep '^Benchmark')
gobench+=$'\n'$(HUTCH_BENCH_BWRAP=$(printf '%s\n' "${bwrap_cmd[@]}") CGO_ENABLED=0 go test -run '^$' \
  -bench '^Benchmark(OneShot|BwrapOneShot)Spaced$' -benchtime "${n_spaced}x" ./sandbox/isolated/ | grep '^Benchmark')
ns() { echo "$gobench" | awk -v b="Benchmark$1" '$1 ~ "^" b "(-[0-9]+)?$" { print $3 }'; }
echo
echo "from a Go program (go test -bench, $n runs each), ms per run"
awk -v fe="$(ns ForkExec)" -v we="$(ns WarmExec)" -v os="$(ns OneShot)" -v bw="$(ns BwrapOneShot)" \
  -v oss="$(ns OneShotSpaced)" -v bws="$(ns BwrapOneShotSpaced)" 'BEGIN {
  printf "fork+exec                    %8.3f\n", fe / 1e6
  printf "warm exec (hutch session)    %8.3f   %.2fx fork+exec\n", we / 1e6, we / fe
  printf "bwrap (exec.Command)         %8.3f\n", bw / 1e6
  printf "isolated.Run                 %8.3f   %.2fx bwrap\n", os / 1e6, os / bw
  printf "bwrap, spaced                %8.3f\n", bws / 1e6
  printf "isolated.Run, spaced         %8.3f   %.2fx bwrap, spaced\n", oss / 1e6, oss / bws
}'

# The one-shot's own cost: hutch run minus hutch's process start.
if [ -n "${result[hutch]:-}" ] && [ -n "${result[version]:-}" ] && [ -n "${result[bwrap]:-}" ]; then
  awk -v h="$(med hutch)" -v v="$(med version)" -v b="$(med bwrap)" 'BEGIN {
    printf "hutch run minus its process start (hutch version): %.3f ms, %.2fx bwrap\n", h - v, (h - v) / b
  }'
fi
# Page faults of one start (perf stat, when perf is here): a fault costs
# tens of microseconds on a virtual machine.
if command -v perf >/dev/null 2>&1; then
  echo
  echo "page faults per run (perf stat -r 50)"
  for pair in "empty Go program:$tmp/emptygo" "hutch version:$tmp/hutch version" "hutch run:$tmp/hutch run -- /bin/true" "bwrap (mxc-like):${bwrap_cmd[*]}"; do
    # shellcheck disable=SC2086 # the command line is split on purpose
    faults=$(cd "$tmp/cwd" && perf stat -x, -e page-faults -r 50 ${pair#*:} 2>&1 >/dev/null | awk -F, '/page-faults/ { print $1 }')
    printf '  %-20s %s\n' "${pair%%:*}" "${faults:-unknown}"
  done
fi

# Issue 23's targets: each a ratio of two figures measured above.
echo
echo "targets"
target() { # target LABEL A B LIMIT
  awk -v l="$1" -v a="$2" -v b="$3" -v lim="$4" 'BEGIN {
    if (a == "" || b == "" || b == 0) { printf "  %-46s unknown (a contender failed)\n", l; exit }
    printf "  %-46s %.2fx (limit %sx): %s\n", l, a / b, lim, (a / b <= lim) ? "met" : "missed"
  }'
}
target "hutch version / empty Go program" "$(med version)" "$(med emptygo)" 1.5
target "hutch run / bwrap (mxc-like)" "$(med hutch)" "$(med bwrap)" 1.5
target "hutch run / bwrap, stretch" "$(med hutch)" "$(med bwrap)" 1.0
target "hutch run / bwrap, spaced" "$(med hutch_sp)" "$(med bwrap_sp)" 1.5
if [ -n "${result[hutch_user]:-}" ]; then
  target "hutch run / bwrap, as uid 65534 (no cgroups)" "$(med hutch_user)" "$(med bwrap_user)" 1.5
fi
target "isolated.Run / exec bwrap, from Go" "$(ns OneShot)" "$(ns BwrapOneShot)" 1.0
target "isolated.Run / exec bwrap, from Go, spaced" "$(ns OneShotSpaced)" "$(ns BwrapOneShotSpaced)" 1.0
target "warm exec / fork+exec, from Go" "$(ns WarmExec)" "$(ns ForkExec)" 1.5

# Not one of the issue's targets: the README's form of hutch run.
awk -v a="$(med hutch_write)" -v b="$(med bwrap_write)" 'BEGIN {
  if (a != "" && b != "" && b > 0) printf "\nhutch run --write . / bwrap --bind .: %.2fx (supervised, through a session)\n", a / b
}'

# A failed hutch, bwrap or fork+exec run fails the script; srt only reports.
for key in fork hutch bwrap hutch_sp bwrap_sp hutch_write bwrap_write; do
  if [ -n "${failed[$key]:-}" ]; then exit 1; fi
done
