#!/usr/bin/env bash
# The long fuzz campaign (README "Fuzzing and soak"): configures build-fuzz with
# clang and -DKOLO_FUZZ=ON (libFuzzer + ASan + UBSan), builds the fuzz targets, and runs each
# for SECONDS (default 60) from its seed corpus, one after the other. New inputs collect in
# build-fuzz/fuzz/work/<target>/; a crash, leak or timeout stops the run and leaves the input
# in build-fuzz/fuzz/artifacts/. Prints each target's executions and final coverage.
# Usage: tools/fuzz.sh [SECONDS] [TARGET...]   (targets: control_message data_plane_stream
#        mesh_hello config_text round_message; default all). Env: BUILD_DIR, JOBS, CC, CXX.
# Needs clang-14 and libFuzzer (Debian: clang-14, libclang-rt-14-dev).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
seconds=${1:-60}
shift || true
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(control_message data_plane_stream mesh_hello config_text round_message)
fi
build=${BUILD_DIR:-$root/build-fuzz}
jobs=${JOBS:-2}

export CC=${CC:-clang-14} CXX=${CXX:-clang++-14}
cmake -S "$root" -B "$build" -DKOLO_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j"$jobs" --target kolo_fuzzers

mkdir -p "$build/fuzz/artifacts"
# UBSan only prints by default; a report must stop the run like an ASan one.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
failed=0
for t in "${targets[@]}"; do
  work=$build/fuzz/work/$t
  mkdir -p "$work"
  log=$build/fuzz/$t.log
  echo "fuzz.sh: fuzzing $t for ${seconds}s (log: $log)"
  if "$build/bin/fuzz_$t" -max_total_time="$seconds" -rss_limit_mb=2048 -timeout=20 \
      -print_final_stats=1 -artifact_prefix="$build/fuzz/artifacts/$t-" \
      "$work" "$root/fuzz/corpus/$t" >"$log" 2>&1; then
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1)
    echo "fuzz.sh: $t: ok, $execs executions in ${seconds}s, $cov, corpus $(ls "$work" | wc -l)"
  else
    echo "fuzz.sh: $t: FAILED; the input is in $build/fuzz/artifacts/ (tail of the log:)"
    tail -n 30 "$log"
    failed=1
  fi
done
exit $failed
