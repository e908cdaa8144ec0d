#!/usr/bin/env bash
# Makes a Docker engine and the container tier's test image available on
# this machine, idempotently (scripts/test.sh and bench/container.sh call
# it; run it by hand before `go test ./sandbox/container/`):
#
#   1. installs docker.io and busybox-static when missing (Debian, as root);
#   2. starts dockerd (vfs storage, no iptables, no bridge: what works in a
#      VM without a registry or host networking) when `docker info` fails,
#      and waits until it answers;
#   3. builds the image hutch-test-busybox:latest with `docker import` from a
#      root filesystem holding only /bin/busybox and its applet links, when
#      it is not there yet (no registry is reachable).
#
# Usage: scripts/docker-up.sh        prints the image name on success
set -euo pipefail

IMAGE=${HUTCH_TEST_IMAGE:-hutch-test-busybox:latest}
as_root() { if [ "$(id -u)" = 0 ]; then "$@"; else sudo "$@"; fi; }

need=()
command -v dockerd >/dev/null 2>&1 || need+=(docker.io)
[ -x /bin/busybox ] && /bin/busybox --list-full >/dev/null 2>&1 || need+=(busybox-static)
if [ ${#need[@]} -gt 0 ]; then
  echo "== installing ${need[*]}" >&2
  # Another apt-get may hold the lock for a while: wait for it.
  as_root apt-get -o DPkg::Lock::Timeout=300 update -qq
  as_root env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=300 install -y -qq "${need[@]}" >&2
fi

if ! docker info >/dev/null 2>&1; then
  echo "== starting dockerd (log: /tmp/dockerd.log)" >&2
  as_root sh -c 'nohup dockerd --storage-driver=vfs --iptables=false --bridge=none >/tmp/dockerd.log 2>&1 &'
  for _ in $(seq 1 60); do
    docker info >/dev/null 2>&1 && break
    sleep 1
  done
  if ! docker info >/dev/null 2>&1; then
    echo "dockerd did not answer within 60 s; its log:" >&2
    tail -n 30 /tmp/dockerd.log >&2 || true
    exit 1
  fi
fi

if ! docker image inspect "$IMAGE" >/dev/null 2>&1; then
  echo "== building $IMAGE from busybox-static" >&2
  stage=$(mktemp -d)
  trap 'rm -rf "$stage"' EXIT
  mkdir -p "$stage/bin" "$stage/tmp" "$stage/etc" "$stage/root"
  cp /bin/busybox "$stage/bin/busybox"
  for applet in $(/bin/busybox --list-full); do
    [ "$applet" = bin/busybox ] && continue
    mkdir -p "$stage/$(dirname "$applet")"
    ln -sf /bin/busybox "$stage/$applet"
  done
  chmod 1777 "$stage/tmp"
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/nonexistent:/bin/false\n' >"$stage/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$stage/etc/group"
  tar -C "$stage" -cf - . | docker import - "$IMAGE" >/dev/null
fi
echo "$IMAGE"
