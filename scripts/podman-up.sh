#!/usr/bin/env bash
# Makes podman and the container tier's test image available on this
# machine, idempotently, after scripts/docker-up.sh (scripts/test.sh calls
# both; run them by hand before `go test -run Podman ./sandbox/container/`):
#
#   1. installs podman and runc when missing (Debian, as root);
#   2. loads the test image from Docker's copy (`docker save | podman load`),
#      when podman does not have it yet (no registry is reachable);
#   3. where a container cannot start because podman's default process
#      rlimit is more than this machine lets runc set (seen on VMs with
#      hybrid cgroup v1), writes /etc/containers/containers.conf.d/
#      hutch-test.conf with defaults that work (runc, cgroupfs, nproc 8192,
#      nofile 1024), and says so. A machine where podman works is left as
#      it is.
#
# Usage: scripts/podman-up.sh        prints the image name on success
set -euo pipefail

IMAGE=${HUTCH_TEST_IMAGE:-hutch-test-busybox:latest}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

if ! command -v podman >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1; then
  echo "== installing podman runc" >&2
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq podman runc >&2
fi

if ! podman image exists "$IMAGE"; then
  echo "== loading $IMAGE into podman from docker" >&2
  docker save "$IMAGE" | podman load >&2
fi

probe() { podman run --rm --network none "$IMAGE" true 2>&1; }
if ! out=$(probe); then
  conf=/etc/containers/containers.conf.d/hutch-test.conf
  case "$out" in
  *"error setting rlimit"* | *cgroup*)
    echo "== podman cannot start a container here ($out); writing $conf" >&2
    as_root mkdir -p "$(dirname "$conf")"
    printf '%s\n' '# Written by hutch scripts/podman-up.sh: podman defaults that work on this machine.' \
      '[containers]' 'default_ulimits = ["nproc=8192:8192", "nofile=1024:1024"]' '' \
      '[engine]' 'cgroup_manager = "cgroupfs"' 'runtime = "runc"' | as_root tee "$conf" >/dev/null
    if ! out=$(probe); then
      echo "podman still cannot start a container: $out" >&2
      exit 1
    fi
    ;;
  *)
    echo "podman cannot start a container: $out" >&2
    exit 1
    ;;
  esac
fi
echo "$IMAGE"
