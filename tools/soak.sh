#!/usr/bin/env bash
# The sanitizer soak (README "Fuzzing and soak"):
#  1. builds kolorun and kolo-soak with -DKOLO_SANITIZE=address,undefined in build-asan and runs
#     `kolorun -np RANKS kolo-soak --steps STEPS` (a 100-tensor model), printing RSS as it goes;
#  2. builds the multi-rank tests with -DKOLO_SANITIZE=thread in build-tsan and runs
#     `ctest -L multirank` there.
# Sanitizer reports go to files (build-*/sanitizer-reports/); any report fails the script.
# Usage: tools/soak.sh [STEPS] [RANKS]   (default 3000 steps, 4 ranks)
# Env: SOAK_PHASES="asan tsan" (either or both), JOBS (default 2), CC/CXX (default: the
# system compiler), MAX_RSS_GROWTH_MB (default 64: allowed RSS growth after warmup, per rank).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
steps=${1:-3000}
ranks=${2:-4}
jobs=${JOBS:-2}
phases=${SOAK_PHASES:-asan tsan}
failed=0

# report_count <dir>: the number of sanitizer report files written there.
report_count() { find "$1" -type f 2>/dev/null | wc -l; }

if [[ " $phases " == *" asan "* ]]; then
  build=$root/build-asan
  reports=$build/sanitizer-reports
  cmake -S "$root" -B "$build" -DKOLO_SANITIZE=address,undefined -DKOLO_BUILD_TESTS=OFF \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$build" -j"$jobs" --target kolorun kolo-soak
  rm -rf "$reports" && mkdir -p "$reports"
  echo "soak.sh: ASan+UBSan: kolorun -np $ranks kolo-soak --steps $steps"
  start=$(date +%s)
  # ASan's quarantine (64 MiB here, 256 MiB by default) fills during the warmup; RSS growth
  # is measured after it, from step STEPS/5 on.
  if ASAN_OPTIONS="detect_leaks=1:quarantine_size_mb=64:log_path=$reports/asan" \
     UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:log_path=$reports/ubsan" \
     "$build/bin/kolorun" -np "$ranks" "$build/bin/kolo-soak" --steps "$steps" \
       --warmup $((steps / 5 + 1)) --max-rss-growth-mb "${MAX_RSS_GROWTH_MB:-64}"; then
    echo "soak.sh: ASan+UBSan soak passed in $(( $(date +%s) - start ))s"
  else
    echo "soak.sh: ASan+UBSan soak FAILED"
    failed=1
  fi
  if [ "$(report_count "$reports")" -ne 0 ]; then
    echo "soak.sh: sanitizer reports in $reports:"
    head -n 40 "$reports"/*
    failed=1
  fi
fi

if [[ " $phases " == *" tsan "* ]]; then
  build=$root/build-tsan
  reports=$build/sanitizer-reports
  cmake -S "$root" -B "$build" -DKOLO_SANITIZE=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  # Everything: the multirank tests run test binaries, kolorun, examples and kolo-bench.
  cmake --build "$build" -j"$jobs"
  rm -rf "$reports" && mkdir -p "$reports"
  echo "soak.sh: ThreadSanitizer: ctest -L multirank"
  # Uninstrumented gRPC/protobuf/abseil/OpenSSL only yield false reports: see the suppressions
  # file. history_size=7: with the default history a racing write's stack inside gRPC is often
  # "failed to restore", and then no suppression can match it.
  if TSAN_OPTIONS="second_deadlock_stack=1:history_size=7:suppressions=$root/tools/tsan-suppressions.txt:log_path=$reports/tsan" \
     ctest --test-dir "$build" -L multirank --output-on-failure --timeout 600; then
    echo "soak.sh: multirank tests passed under TSan"
  else
    echo "soak.sh: multirank tests FAILED under TSan"
    failed=1
  fi
  if [ "$(report_count "$reports")" -ne 0 ]; then
    echo "soak.sh: $(report_count "$reports") ThreadSanitizer report files in $reports; first:"
    head -n 60 "$(find "$reports" -type f | head -n 1)"
    failed=1
  fi
fi
exit $failed
