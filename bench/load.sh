# Sourced by bench scripts: an optional background load, so that a figure
# can be measured both on a quiet machine and under load, with the same
# command. LOAD=K starts K busy loops (pure CPU, one process each) before
# the timings and stops them when the script exits; LOAD unset or 0 runs
# quiet. load_start is called once the builds are done (they would
# compete with the load otherwise); load_stop is safe to call twice.
load_pids=()
load_start() {
  local k=${LOAD:-0} i
  case $k in '' | *[!0-9]*) echo "LOAD must be a number of busy loops, got '$k'" >&2; exit 2 ;; esac
  for ((i = 0; i < k; i++)); do
    sh -c 'while :; do :; done' &
    load_pids+=($!)
  done
  if [ "$k" -gt 0 ]; then sleep 1; fi # let the load average feel them
}
load_stop() {
  if [ ${#load_pids[@]} -gt 0 ]; then
    kill "${load_pids[@]}" 2>/dev/null || true
    wait "${load_pids[@]}" 2>/dev/null || true
    load_pids=()
  fi
}
load_label() {
  if [ "${LOAD:-0}" -gt 0 ]; then echo "under load: ${LOAD} busy loops on $(nproc) CPUs"; else echo "quiet: no load started"; fi
}
