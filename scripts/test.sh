#!/usr/bin/env bash
# Runs every hutch test, installing what the tests need first.
# Usage: scripts/test.sh        (CI: .ci/run calls this same script)
# Needs: root (or sudo) for apt-get when a tool is missing; Go >= 1.26.
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$(go env GOPATH)/bin:$PATH"
STATICCHECK_VERSION=v0.8.2
FUZZTIME=${FUZZTIME:-10s}

as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

# Debian packages the tests use: sh, coreutils (head, sleep, env, cat),
# util-linux (setsid), procps; curl, wget and Debian's own python3 as the
# clients inside network-allow-list sandboxes; node and ruby, which
# run_code's tests run (and npm, whose registry they install from); git, which
# the protected-paths tests commit with.
# Installed only when missing.
missing=()
for pair in sh:dash head:coreutils setsid:util-linux ps:procps curl:curl wget:wget node:nodejs npm:npm ruby:ruby git:git; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
[ -x /usr/bin/python3 ] || missing+=(python3)
# pip, setuptools and wheel: run_code's package tests build and install a
# wheel from a local directory.
{ /usr/bin/python3 -c 'import setuptools, wheel' && /usr/bin/python3 -m pip --version; } >/dev/null 2>&1 ||
  missing+=(python3-pip python3-setuptools python3-wheel)
if [ ${#missing[@]} -gt 0 ]; then
  echo "== installing ${missing[*]}"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}"
fi

echo "== go modules"
go mod download

if ! command -v staticcheck >/dev/null 2>&1 || ! staticcheck -version | grep -q "${STATICCHECK_VERSION#v}"; then
  echo "== installing staticcheck $STATICCHECK_VERSION"
  go install "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION"
fi

echo "== gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then echo "gofmt needed on: $unformatted"; exit 1; fi

echo "== go vet (amd64, and arm64, the other architecture with seccomp tables)"
go vet ./...
GOARCH=arm64 go vet ./...

echo "== staticcheck"
staticcheck ./...
GOARCH=arm64 staticcheck ./...

# The README's build is static (the container helper runs in any image
# only then): hutch check says nothing of the helper for it, and says
# why for a plain build with the C compiler installed above.
echo "== CGO_ENABLED=0 build"
bin_dir=$(mktemp -d)
CGO_ENABLED=0 go build -o "$bin_dir/hutch" ./cmd/hutch
report=$("$bin_dir/hutch" check --json)
if [[ $report == *container_helper_note* ]]; then
  echo "the README's CGO_ENABLED=0 build is not static: the container helper would take the slow path"; exit 1
fi
go build -o "$bin_dir/hutch-cgo" ./cmd/hutch
report=$("$bin_dir/hutch-cgo" check --json)
if command -v cc >/dev/null && [[ $report != *'"container_helper_note":"container: hutch'*'dynamically linked'* ]]; then
  echo "hutch check does not say that a cgo build's container helper is dynamically linked"; exit 1
fi
rm -rf "$bin_dir"

# The container tier's live tests need a Docker engine and a local busybox
# image (no registry is reachable): scripts/docker-up.sh installs docker.io
# and busybox-static, starts dockerd and builds the image, idempotently.
# Under CI a missing engine fails the run (the tests fail too); elsewhere
# the live tests skip and say how to start one.
echo "== docker engine and test image"
if ! scripts/docker-up.sh; then
  if [ "${CI:-}" = true ]; then echo "docker is needed under CI"; exit 1; fi
  echo "-- no docker engine: the container tier's live tests will skip"
fi
# Podman too (scripts/podman-up.sh: podman and runc, the image loaded from
# docker), for the podman runtime's live tests; the same rule applies.
echo "== podman and test image"
if ! scripts/podman-up.sh; then
  if [ "${CI:-}" = true ]; then echo "podman is needed under CI"; exit 1; fi
  echo "-- no podman: the podman live tests will skip"
fi

echo "== go test"
# -timeout: the container tier's conformance suite makes some 800 docker
# execs (about 3 minutes alone here), and on 2 cores it shares the machine
# with the isolated tier's bombs (the default policy's 8 GiB memory bomb
# among them): Go's 10-minute default per package is too tight for that.
go test -count=1 -timeout 25m ./...

echo "== go test -race"
# Every package, whole, under the race detector, with -short (10 MB
# transfers instead of 100 MB, no store filled to MaxOpen: the full run
# above has those) -- except four, whose whole suites under the race
# detector's 5-10x slowdown would not fit CI's time: the isolated and
# container tiers' suites (fork and memory bombs in both modes; some 800
# docker execs) and helper and cmd/hutch, which start them. The pieces
# where hutch's own goroutines meet live in packages that do run whole
# (internal/wire's stream protocol, internal/session's server and reapers,
# internal/sysprog's one-shot PID 1); of the four, the parts that drive
# them end to end run here by name.
go test -race -count=1 -short $(go list ./... | grep -v -x -e '.*/sandbox/isolated' -e '.*/sandbox/container' -e '.*/helper' -e '.*/cmd/hutch')

# race_named PATTERN PKG...: runs the tests PATTERN names in PKG under the
# race detector, and fails if any alternative of PATTERN names no test
# there, so a renamed or moved test cannot drop out of this run unseen.
race_named() {
  local pattern=$1 alt listed
  shift
  listed=$(go test -list '.*' "$@" | grep -E '^(Test|Example)' || true)
  for alt in ${pattern//|/ }; do
    if ! echo "$listed" | grep -q -E "^$alt"; then
      echo "race run: no test matches $alt in $*: update scripts/test.sh"
      exit 1
    fi
  done
  go test -race -count=1 -run "$pattern" "$@"
}
race_named 'TestConformanceLocalHelper' ./sandbox/container/
race_named 'TestOneShot' ./sandbox/isolated/

# One fuzz run of $2 in package $1, for $3 (a -fuzztime: a duration, or
# a count of executions, "Nx"). A real failure writes its input under
# testdata and fails at once. Go 1.26's fuzzer can also end a run of a
# duration with "context deadline exceeded" although no input failed (its
# coordinator's own deadline races its workers, go.dev/issue/75804, fixed
# in Go 1.27); that, and only that, runs again as a count of the
# executions the first run reached, which has no deadline to race: the
# same amount of fuzzing, and a failure there is a failure.
fuzz_once() {
  local out n
  if out=$(go test -run '^$' -fuzz "^$2\$" -fuzztime "$3" -fuzzminimizetime 2s "$1" 2>&1); then
    echo "$out" | tail -n 2
    return 0
  fi
  echo "$out"
  if echo "$out" | grep -q "Failing input written" || ! echo "$out" | grep -q "context deadline exceeded" || [[ "$3" == *x ]]; then
    exit 1
  fi
  n=$(echo "$out" | sed -n 's/.*, execs: \([0-9]*\) .*/\1/p' | sort -n | tail -n 1)
  n=${n:-100000}
  [ "$n" -ge 1000 ] || n=1000
  echo "-- $2: Go's fuzzer hit its own deadline (go.dev/issue/75804), no failing input: running ${n} executions instead"
  fuzz_once "$1" "$2" "${n}x"
}

# Every Fuzz* function of every package runs here, found by go test -list
# (among them helper's FuzzReadFrame, the stream protocol's frame decoder,
# and sandbox/container's FuzzParseListing and FuzzStreamHeader, which
# decode what a container sends back).
echo "== fuzz ($FUZZTIME each)"
for pkg in $(go list ./...); do
  for f in $(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true); do
    echo "-- $pkg $f"
    fuzz_once "$pkg" "$f" "$FUZZTIME"
  done
done

# e2e/: the official TypeScript client over stdio and HTTP (long calls kept
# alive by progress among them), the MCP conformance suite against
# hutch mcp --http (conformance.test.mjs) and the MCP Inspector's CLI
# driving every tool (inspector.test.mjs, arguments in e2e/tool-args.mjs);
# npm ci installs all three from e2e/package-lock.json. Nothing there
# skips: a missing component fails the run.
echo "== MCP end to end (official TypeScript client, conformance suite, Inspector CLI: e2e/)"
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  echo "== installing nodejs npm"
  as_root apt-get update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm
fi
npm ci --prefix e2e --no-audit --no-fund --loglevel=error >/dev/null
e2e_bin=$(mktemp -d)
trap 'rm -rf "$e2e_bin"' EXIT
CGO_ENABLED=0 go build -o "$e2e_bin/hutch" ./cmd/hutch
HUTCH_BIN="$e2e_bin/hutch" node --test e2e/

echo "== all tests passed"
