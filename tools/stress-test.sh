#!/usr/bin/env bash
# Runs the whole suite (ctest -j2 on build/) RUNS times in a row while a busy loop spins on
# every core, the way a CI machine shared with other builds looks; stops at the first failing
# run. A test that fails only here races a timeout against the scheduler: give it an event to
# wait for, or a margin that load cannot eat. Usage: tools/stress-test.sh [RUNS] [ctest args...]
set -euo pipefail
cd "$(dirname "$0")/.."
runs=${1:-10}
shift || true
hogs=()
stop_hogs() { if [ ${#hogs[@]} -ne 0 ]; then kill "${hogs[@]}" 2>/dev/null || true; fi; }
trap stop_hogs EXIT
for _ in $(seq "$(nproc)"); do
  (while :; do :; done) &
  hogs+=($!)
done
for run in $(seq "$runs"); do
  echo "=== stress-test: run $run of $runs, ${#hogs[@]} busy loops beside it"
  if ! ctest --test-dir build -j2 --output-on-failure "$@"; then
    echo "stress-test: run $run failed; $((run - 1)) passed before it" >&2
    exit 1
  fi
done
echo "stress-test: $runs of $runs runs passed"
