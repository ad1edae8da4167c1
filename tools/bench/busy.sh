#!/usr/bin/env bash
# Runs a command beside N busy processes (each `yes >/dev/null`, unbound, nice 0), the way
# docs/PERFORMANCE.md "On a busy machine" measures kolo and its peers: the busy processes start
# before the command and are killed when it ends, whatever its exit status.
#
#   tools/bench/busy.sh N command [args...]      (N = 0 runs the command alone)
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: $0 N command [args...]" >&2; exit 2; }
n=$1
shift
case "$n" in '' | *[!0-9]*) echo "busy.sh: N must be a count, got '$n'" >&2; exit 2 ;; esac
pids=()
cleanup() { [ ${#pids[@]} -eq 0 ] || kill "${pids[@]}" 2>/dev/null || true; }
trap cleanup EXIT
for _ in $(seq 1 "$n"); do
  yes >/dev/null &
  pids+=($!)
done
"$@"
