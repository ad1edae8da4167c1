#!/usr/bin/env bash
# Runs kolo-bench and the peers (Open MPI, MPICH and Gloo allreduce from ../shared/bench/run.sh)
# back to back on this machine and prints, from that one run, the ratios that the targets in
# docs/PERFORMANCE.md are stated in: busbw of kolo over TCP against the best TCP peer and over
# shared memory against the best shared-memory peer, per size, through the API in place (the
# peers' way: equal work), through the API out of place, and through the data plane alone
# (--raw); the 4 KiB latency against Open MPI's and the runtime's overhead over the data plane
# there; and the ResNet-50 step against one raw allreduce of the same bytes. Each kolo cell is
# the median of REPS interleaved repetitions, shown with their min and max, so an unlucky
# repetition shows as a wide spread. Absolute numbers on shared machines move by +-30% between
# runs, so only ratios from one run mean anything.
#
#   tools/bench/compare.sh [BUILD_DIR]          (default build; ~15 min on 2 cores)
#
# Environment: BASELINES (the peers' run.sh; default ../shared/bench/run.sh next to the repo),
# NPS ("2 4"), OUT_DIR (raw outputs; default a fresh /tmp folder), PEERS (run.sh's CONFIGS),
# ITERS (timed iterations per size for kolo-bench, default 10), REPS (repetitions of every
# kolo run, default 3), MAX_SIZE (largest sweep size, default 256M).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
baselines="${BASELINES:-$repo/../shared/bench/run.sh}"
nps="${NPS:-2 4}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-compare-XXXXXX)}"
iters="${ITERS:-10}"
reps="${REPS:-3}"
max_size="${MAX_SIZE:-256M}"
peers="${PEERS:-ompi-shm ompi-tcp ompi-ring-shm ompi-ring-tcp mpich-shm mpich-tcp gloo-ring gloo-ring_chunked}"
mkdir -p "$out"
log() { printf '[compare %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
[ -f "$baselines" ] || { log "no peer baselines at $baselines (set BASELINES)"; exit 1; }

# Transports this build has: shm only where the config table knows KOLO_TRANSPORT.
transports="tcp"
if "$build/bin/kolorun" --help-env 2>/dev/null | grep -q KOLO_TRANSPORT; then
  transports="tcp shm"
fi

log "peers ($peers) with $nps ranks -> $out/baselines"
KOLO_BASELINES_DIR="$out/baselines" OUT="$out/baselines.md" CONFIGS="$peers" NPS="$nps" \
  bash "$baselines" >"$out/baselines.log" 2>&1 || log "run.sh exited $? (see $out/baselines.log)"

kolo() {  # kolo TRANSPORT NP OUTFILE kolo-bench-args...
  local transport=$1 np=$2 file=$3
  shift 3
  local env=()
  [ "$transports" = tcp ] || env=(KOLO_TRANSPORT="$transport")
  env "${env[@]}" timeout -k 5 600 "$build/bin/kolorun" -np "$np" "$build/bin/kolo-bench" "$@" \
    >"$file" 2>"$file.err" || log "kolo-bench $* exited $? (see $file.err)"
}

# Repetitions interleaved (every configuration once, then again) so that a slow spell of the
# machine spreads over all configurations instead of spoiling one.
for rep in $(seq 1 "$reps"); do
  for np in $nps; do
    for transport in $transports; do
      log "kolo $transport with $np ranks, repetition $rep of $reps"
      # --barrier 1: the ranks start every timed op together, as run.sh's peers do (an
      # MPI_Barrier before each call), so that neither side's time holds the other's skew.
      sweep=(-b 4K -e "$max_size" -f 4 -n "$iters" -w 2 --stat median --barrier 1)
      lat=(-b 8 -e 4K -f 512 -n 300 -w 30 --stat median --barrier 1)
      kolo "$transport" "$np" "$out/kolo__${transport}__np${np}__rep${rep}.txt" "${sweep[@]}"
      kolo "$transport" "$np" "$out/kolo-inplace__${transport}__np${np}__rep${rep}.txt" \
        "${sweep[@]}" --inplace 1
      kolo "$transport" "$np" "$out/kolo-raw__${transport}__np${np}__rep${rep}.txt" \
        "${sweep[@]}" --raw 1
      kolo "$transport" "$np" "$out/kolo-lat__${transport}__np${np}__rep${rep}.txt" \
        "${lat[@]}" --inplace 1
      kolo "$transport" "$np" "$out/kolo-latraw__${transport}__np${np}__rep${rep}.txt" \
        "${lat[@]}" --raw 1
    done
  done
done
for transport in $transports; do
  log "kolo resnet50 step over $transport, 2 ranks"
  kolo "$transport" 2 "$out/kolo-model__${transport}__np2.txt" --model resnet50 -n 5 -w 1
done

python3 "$repo/tools/bench/compare_report.py" "$out" | tee "$out/report.md"
log "raw outputs and report in $out"
