#!/usr/bin/env bash
# Two builds of kolo side by side in one run: "did this change make kolo slower?". kolo-bench
# (through the API, in place, a barrier before every timed call, median of the slowest rank)
# over TCP and shared memory, the bandwidth sweep and the small-op latency, then kolo.torch's
# allreduce_ and training step from Python where both builds have kolo.torch. Every
# configuration runs once per round for build A and then for build B, rounds interleaved, so a
# slow spell of a shared machine spreads over both; the report gives per size the median over
# the rounds of each build and the ratio B/A of the medians (tools/bench/ab_report.py).
#
#   tools/bench/ab.sh BUILD_A BUILD_B          (~12 min for 3 rounds on 2 cores)
#
# BUILD_A and BUILD_B are build folders (each with bin/kolorun and bin/kolo-bench; python/ for
# the torch rows). Environment: ROUNDS (default 3), NP (default 2), MAX_SIZE (default 64M),
# ITERS (timed ops per size, default 10), STEPS (timed ResNet-50 steps, default 5), TORCH_PYTHON (default .venv/torch/bin/python;
# "none" leaves the torch rows out), OUT_DIR (raw outputs; default a fresh /tmp folder), BUSY
# (default 0: N busy processes beside every run, tools/bench/busy.sh, the same for both builds,
# so that a build without `kolo-bench --busy` is measured on a busy machine too).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
[ $# -eq 2 ] || { echo "usage: $0 BUILD_A BUILD_B" >&2; exit 2; }
builds=("$(cd "$1" && pwd)" "$(cd "$2" && pwd)")
rounds="${ROUNDS:-3}"
np="${NP:-2}"
max_size="${MAX_SIZE:-64M}"
iters="${ITERS:-10}"
steps="${STEPS:-5}"
busy="${BUSY:-0}"
torch_python="${TORCH_PYTHON:-$repo/.venv/torch/bin/python}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-ab-XXXXXX)}"
mkdir -p "$out"
log() { printf '[ab %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

torch_rows=1
for build in "${builds[@]}"; do
  for tool in kolorun kolo-bench; do
    [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build it first"; exit 1; }
  done
  ls "$build"/python/kolo/torch/_C*.so >/dev/null 2>&1 || torch_rows=0
done
[ "$torch_python" != none ] && [ -x "$torch_python" ] || torch_rows=0
[ "$torch_rows" = 1 ] || log "no torch rows (a build without kolo.torch, or no TORCH_PYTHON)"
printf 'A %s\nB %s\nbusy %s\n' "${builds[0]}" "${builds[1]}" "$busy" >"$out/builds.txt"

run() {  # run BUILD FILE TRANSPORT command...
  local build=$1 file=$2 transport=$3
  shift 3
  KOLO_TRANSPORT="$transport" PYTHONPATH="$build/python" timeout -k 5 600 \
    "$repo/tools/bench/busy.sh" "$busy" "$build/bin/kolorun" -np "$np" "$@" >"$file" 2>"$file.err" ||
    log "$* exited $? (see $file.err)"
}

sweep=(-b 4K -e "$max_size" -f 4 -n "$iters" -w 2 --stat median --barrier 1 --inplace 1)
lat=(-b 8 -e 4K -f 512 -n 300 -w 30 --stat median --barrier 1 --inplace 1)
for round in $(seq 1 "$rounds"); do
  for side in A B; do
    build="${builds[0]}"
    [ "$side" = A ] || build="${builds[1]}"
    log "round $round of $rounds, build $side"
    for transport in tcp shm; do
      run "$build" "$out/${side}__sweep__${transport}__r$round.txt" "$transport" \
        "$build/bin/kolo-bench" "${sweep[@]}"
      run "$build" "$out/${side}__lat__${transport}__r$round.txt" "$transport" \
        "$build/bin/kolo-bench" "${lat[@]}"
    done
    if [ "$torch_rows" = 1 ]; then
      run "$build" "$out/${side}__torch__shm__r$round.txt" shm "$torch_python" \
        "$repo/tools/bench/torch/allreduce_bench.py" --hvd kolo.torch -b 4K -e "$max_size" -f 4 \
        -n "$iters" -w 2 --stat median --barrier 1
      run "$build" "$out/${side}__step__shm__r$round.txt" shm "$torch_python" \
        "$repo/tools/bench/torch/train_bench.py" --hvd kolo.torch --model resnet50 --steps "$steps"
    fi
  done
done
python3 "$repo/tools/bench/ab_report.py" "$out" | tee "$out/report.md"
log "raw outputs and report in $out"
