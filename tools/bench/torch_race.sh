#!/usr/bin/env bash
# kolo.torch against Horovod 0.28.1 and PyTorch DDP (gloo) on the same torch, side by side, and
# torch.distributed on kolo's own c10d backend (DDP and dist.all_reduce with backend "kolo"):
# the Python allreduce benchmark and the synthetic training step (tools/bench/torch/), 2 ranks
# on this machine, every configuration once per round, rounds interleaved so that a slow spell
# of a shared machine spreads over all of them; then min/median/max over the rounds and the
# ratios (report from tools/bench/torch/race_report.py). kolo-bench (C++, in place) runs in the
# same rounds, the floor for kolo.torch's per-op overhead, and so does Open MPI's
# MPI_Allreduce (C++, in place, shared memory and TCP) from ../shared/bench/mpi_allreduce_bench.cc
# where that file and mpicxx.openmpi are there (apt-get install libopenmpi-dev).
#
#   tools/bench/torch_race.sh [BUILD_DIR]      (default build; ~10 min for 3 rounds on 2 cores,
#                                              plus ~4 min the first time to build Horovod)
#
# Needs a kolo build with kolo.torch (README "PyTorch"). Horovod is built once, by
# tools/bench/torch/build_horovod.sh, from its PyPI sdist against the torch of TORCH_PYTHON
# into ${XDG_CACHE_HOME:-~/.cache}/kolo-race (downloads happen there only, never in kolo's
# build). Not part of CI.
#
# Environment: ROUNDS (default 3), TORCH_PYTHON (default .venv/torch/bin/python), CACHE_DIR,
# OUT_DIR (raw outputs; default a fresh /tmp folder), CONFIGS (any of "kolo-shm kolo-tcp
# horovod horovod-fast ddp ddp-kolo"; horovod-fast is Horovod with HOROVOD_CYCLE_TIME=0.1 ms
# instead of its default 1 ms, ddp-kolo torch.distributed with backend "kolo" under kolorun),
# MODELS ("resnet50 mlp"), STEPS (timed ResNet-50 steps per run, default 5;
# the MLP runs 20 times as many),
# ITERS (timed allreduces per size, default 20), WARMUP (untimed ones first, default 5: the
# kolo backend names c10d's unnamed ops by their place in the sequence, in 4 names per place,
# which go through kolo's controller once each before they are cached), MAX_SIZE (default 64M),
# MPI_BENCH (the Open
# MPI benchmark's source, default ../shared/bench/mpi_allreduce_bench.cc next to the repo;
# "none" leaves Open MPI out).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
torch_python="${TORCH_PYTHON:-$repo/.venv/torch/bin/python}"
cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-race}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-torch-race-XXXXXX)}"
configs="${CONFIGS:-kolo-shm kolo-tcp horovod horovod-fast ddp ddp-kolo}"
models="${MODELS:-resnet50 mlp}"
steps="${STEPS:-5}"
iters="${ITERS:-20}"
warmup_iters="${WARMUP:-5}"
max_size="${MAX_SIZE:-64M}"
bench="$repo/tools/bench/torch"
mkdir -p "$out"
log() { printf '[torch_race %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
ls "$build"/python/kolo/torch/_C*.so >/dev/null 2>&1 ||
  { log "no kolo.torch in $build/python: build with torch (README \"PyTorch\")"; exit 1; }
[ -x "$torch_python" ] || { log "no python at $torch_python (set TORCH_PYTHON)"; exit 1; }

# Open MPI's benchmark, built here from its source (it times an MPI_Barrier, then one in-place
# MPI_Allreduce, per iteration: the median of the slowest rank, as kolo-bench --barrier 1).
mpi_bench_src="${MPI_BENCH:-$repo/../shared/bench/mpi_allreduce_bench.cc}"
ompi_bench=""
if [ "$mpi_bench_src" != none ] && [ -f "$mpi_bench_src" ] && command -v mpicxx.openmpi >/dev/null &&
  mpicxx.openmpi -std=c++17 -O3 -march=native -o "$out/mpi_allreduce_bench_ompi" \
    "$mpi_bench_src" 2>"$out/mpi_allreduce_bench_ompi.err"; then
  ompi_bench="$out/mpi_allreduce_bench_ompi"
else
  log "no Open MPI columns (MPI_BENCH=$mpi_bench_src; needs mpicxx.openmpi: libopenmpi-dev)"
fi
ompi=(mpirun.openmpi --allow-run-as-root --oversubscribe --mca oob_tcp_if_include lo
  --mca btl_tcp_if_include lo)

hvd_python=""
if [[ " $configs " == *" horovod"* ]]; then
  hvd_python="$("$repo/tools/bench/torch/build_horovod.sh" "$torch_python" "$cache")"
fi

# One run: launcher and its script, output to $out/NAME.txt (stderr next to it). A failed run
# is logged and leaves its file without figures; the report shows the gap.
run() {  # run NAME COMMAND...
  local name=$1
  shift
  if ! timeout -k 5 900 "$@" >"$out/$name.txt" 2>"$out/$name.err"; then
    log "$name exited non-zero (see $out/$name.err)"
  fi
}
launch() {  # launch CONFIG SCRIPT ARGS...: sets cmd to the script under CONFIG's launcher
  local config=$1 script=$2
  shift 2
  case $config in
  kolo-shm) cmd=(env PYTHONPATH="$build/python" OMP_NUM_THREADS=1
    "$build/bin/kolorun" -np 2 "$torch_python" "$bench/$script" --hvd kolo.torch) ;;
  kolo-tcp) cmd=(env PYTHONPATH="$build/python" OMP_NUM_THREADS=1 KOLO_TRANSPORT=tcp
    "$build/bin/kolorun" -np 2 "$torch_python" "$bench/$script" --hvd kolo.torch) ;;
  horovod) cmd=(env OMP_NUM_THREADS=1 "$(dirname "$hvd_python")/horovodrun" -np 2
    -H localhost:2 --gloo "$hvd_python" "$bench/$script" --hvd horovod.torch) ;;
  horovod-fast) cmd=(env OMP_NUM_THREADS=1 HOROVOD_CYCLE_TIME=0.1
    "$(dirname "$hvd_python")/horovodrun" -np 2 -H localhost:2 --gloo "$hvd_python"
    "$bench/$script" --hvd horovod.torch) ;;
  ddp) cmd=(env OMP_NUM_THREADS=1 "$torch_python" -m torch.distributed.run --standalone
    --nproc_per_node 2 "$bench/$script" --ddp) ;;
  ddp-kolo) cmd=(env PYTHONPATH="$build/python" OMP_NUM_THREADS=1
    "$build/bin/kolorun" -np 2 "$torch_python" "$bench/$script" --ddp --backend kolo) ;;
  raw) cmd=(env OMP_NUM_THREADS=1 "$build/bin/kolorun" -np 2 "$torch_python"
    "$bench/$script" --raw) ;;
  esac
  cmd+=("$@")
}

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "kernel: $(uname -r)"
  echo "torch: $("$torch_python" -c 'import torch; print(torch.__version__)')"
  echo "rounds: $rounds, configs: $configs, models: $models"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

# The configurations in a different order each round (rotated by one), so that none always
# runs first or last in a round while the machine's load drifts.
rotate() {  # rotate N WORDS...: the words rotated left by N
  local n=$1
  shift
  local words=("$@")
  local count=${#words[@]} i
  for ((i = 0; i < count; i++)); do printf '%s ' "${words[$(((i + n) % count))]}"; done
}

for round in $(seq 1 "$rounds"); do
  # shellcheck disable=SC2086
  round_configs=$(rotate "$((round - 1))" $configs)
  # shellcheck disable=SC2086
  train_configs=$(rotate "$((round - 1))" raw $configs)
  for transport in shm tcp; do
    [[ " $configs " == *" kolo-$transport "* ]] || continue
    log "round $round: kolo-bench C++ over $transport"
    run "allreduce__kolo-bench-${transport}__r$round" env KOLO_TRANSPORT="$transport" \
      "$build/bin/kolorun" -np 2 "$build/bin/kolo-bench" -b 4K -e "$max_size" -f 4 \
      -n "$iters" -w "$warmup_iters" --stat median --inplace 1 --barrier 1
  done
  if [ -n "$ompi_bench" ]; then
    log "round $round: Open MPI C++ over shared memory and TCP"
    ompi_args=(-np 2 "$ompi_bench" -b 4K -e "$max_size" -f 4 -n "$iters" -w "$warmup_iters")
    run "allreduce__ompi-shm__r$round" "${ompi[@]}" "${ompi_args[@]}"
    run "allreduce__ompi-tcp__r$round" "${ompi[@]}" --mca pml ob1 --mca btl tcp,self \
      "${ompi_args[@]}"
  fi
  for config in $round_configs; do
    log "round $round: allreduce on $config"
    launch "$config" allreduce_bench.py -b 4K -e "$max_size" -f 4 -n "$iters" \
      -w "$warmup_iters" --stat median --barrier 1
    run "allreduce__${config}__r$round" "${cmd[@]}"
  done
  for model in $models; do
    # The MLP's step is milliseconds: more steps for a stable median.
    # At least 5 warmup steps: kolo's backend caches DDP's bucket allreduces from the 5th step.
    model_steps=$steps warmup=5
    [ "$model" = mlp ] && model_steps=$((steps * 20)) warmup=5
    for config in $train_configs; do
      log "round $round: $model step on $config"
      launch "$config" train_bench.py --model "$model" --steps "$model_steps" --warmup "$warmup"
      run "train-${model}__${config}__r$round" "${cmd[@]}"
    done
  done
  echo "load after round $round: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
done

python3 "$bench/race_report.py" "$out" | tee "$out/report.md"
log "raw outputs and report in $out"
