#!/usr/bin/env bash
# kolo and its peers on a busy machine (docs/PERFORMANCE.md, "On a busy machine"): every
# configuration with 0, 1 and 2 busy processes beside 2 ranks, in one run, rounds interleaved
# (every configuration once, then again) so that a slow spell of a shared machine spreads over
# all of them. In place, a barrier before each timed op, median over the iterations of the
# slowest rank's time, every result checked, all timed the same way:
#   kolo       kolo-bench --busy N (C++ API, shared memory)
#   ompi       Open MPI's MPI_Allreduce (vader), ../shared/bench/mpi_allreduce_bench.cc, beside
#              N `yes` (tools/bench/busy.sh)
#   c10d-kolo  dist.all_reduce on kolo's torch.distributed backend (allreduce_bench.py --busy N)
#   c10d-gloo  dist.all_reduce on gloo, under torchrun
#   kolo.torch kolo.torch's allreduce_
#   horovod    horovod.torch's allreduce_ (Gloo), where HOROVOD_PYTHON names a Python with it
# and the ResNet-50 training step with a 2-worker DataLoader and torch's default threads:
# kolo.torch's DistributedOptimizer against DDP on gloo (train_bench.py --loader-workers 2
# --threads 0 --busy N).
#
#   tools/bench/busy_compare.sh [BUILD_DIR]      (~25 min for 3 rounds on 2 cores)
#
# Environment: ROUNDS (default 3), BUSY ("0 1 2"), SIZES_MAX (default 16M), ITERS (timed
# iterations per size, default 100), STEPS (timed ResNet-50 steps, default 5; 0 leaves the
# step out), TORCH_PYTHON (default .venv/torch/bin/python), HOROVOD_PYTHON, OUT_DIR (default a
# fresh /tmp folder). Name the CPU beside every figure taken from it.
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
busy_counts="${BUSY:-0 1 2}"
max_size="${SIZES_MAX:-16M}"
iters="${ITERS:-100}"
steps="${STEPS:-5}"
py="${TORCH_PYTHON:-$repo/.venv/torch/bin/python}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-busy-XXXXXX)}"
mkdir -p "$out"
log() { printf '[busy %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
ompi_bench="$out/mpi_allreduce_bench"
mpicxx.openmpi -O3 -o "$ompi_bench" "$repo/../shared/bench/mpi_allreduce_bench.cc" ||
  { log "cannot build Open MPI's benchmark (apt-get install libopenmpi-dev)"; exit 1; }
torch_rows=1
[ -x "$py" ] && ls "$build"/python/kolo/torch/_C*.so >/dev/null 2>&1 || torch_rows=0
[ "$torch_rows" = 1 ] || log "no torch rows (no kolo.torch in $build or no $py)"
{
  echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-) ($(nproc) cores)"
  echo "date: $(date -u +%F)"
  echo "kolo: $(git -C "$repo" rev-parse --short HEAD)$(git -C "$repo" diff --quiet || echo +dirty)"
} >"$out/machine.txt"

run() {  # run FILE command... (a failure is logged, the run goes on)
  local file=$1
  shift
  timeout -k 5 900 "$@" >"$file" 2>"$file.err" || log "$(basename "$file"): exit $? (see $file.err)"
}

sweep=(-b 4K -e "$max_size" -f 4 -n "$iters" -w 10 --stat median --barrier 1)
torch_bench="$repo/tools/bench/torch/allreduce_bench.py"
train_bench="$repo/tools/bench/torch/train_bench.py"
for round in $(seq 1 "$rounds"); do
  for n in $busy_counts; do
    log "round $round of $rounds, $n busy"
    f="$out/busy${n}__r${round}"
    run "$f.kolo.txt" "$build/bin/kolorun" -np 2 "$build/bin/kolo-bench" "${sweep[@]}" \
      --inplace 1 --busy "$n"
    run "$f.ompi.txt" "$repo/tools/bench/busy.sh" "$n" mpirun.openmpi --allow-run-as-root \
      -np 2 "$ompi_bench" -b 4K -e "$max_size" -f 4 -n "$iters" -w 10
    [ "$torch_rows" = 1 ] || continue
    PYTHONPATH="$build/python" run "$f.c10d-kolo.txt" "$build/bin/kolorun" -np 2 "$py" \
      "$torch_bench" --ddp --backend kolo "${sweep[@]}" --busy "$n"
    run "$f.c10d-gloo.txt" "$py" -m torch.distributed.run --nproc_per_node 2 "$torch_bench" \
      --ddp "${sweep[@]}" --busy "$n"
    PYTHONPATH="$build/python" run "$f.kolo.torch.txt" "$build/bin/kolorun" -np 2 "$py" \
      "$torch_bench" --hvd kolo.torch "${sweep[@]}" --busy "$n"
    if [ -n "${HOROVOD_PYTHON:-}" ]; then
      run "$f.horovod.txt" "$(dirname "$HOROVOD_PYTHON")/horovodrun" -np 2 -H localhost:2 \
        --gloo "$HOROVOD_PYTHON" "$torch_bench" --hvd horovod.torch "${sweep[@]}" --busy "$n"
    fi
    if [ "$steps" -gt 0 ]; then
      step=(--model resnet50 --loader-workers 2 --threads 0 --steps "$steps" --busy "$n")
      PYTHONPATH="$build/python" run "$f.step-kolo.torch.txt" "$build/bin/kolorun" -np 2 "$py" \
        "$train_bench" --hvd kolo.torch "${step[@]}"
      run "$f.step-ddp-gloo.txt" "$py" -m torch.distributed.run --nproc_per_node 2 \
        "$train_bench" --ddp "${step[@]}"
    fi
  done
done
python3 "$repo/tools/bench/busy_report.py" "$out" | tee "$out/report.md"
log "raw outputs and report in $out"
