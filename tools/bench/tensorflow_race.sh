#!/usr/bin/env bash
# kolo.tensorflow side by side with MultiWorkerMirroredStrategy and with no communication, on the
# same TensorFlow, 2 ranks on this machine, every configuration once per round (rotated each
# round, so that a slow spell of a shared machine spreads over all of them); then the median of
# the rounds and the ratios (tools/bench/tensorflow/race_report.py):
#   - allreduce (sum, float32) from TensorFlow, 4 KiB to 64 MiB: kolo-bench (C++, in place; the
#     floor), kolo.tensorflow called eagerly and inside a tf.function, and MWMS's all_reduce;
#   - a Keras ResNet-50 step on synthetic images (batch 8 a rank, one compute thread a rank):
#     no communication, kolo.tensorflow.keras on Keras 3 and on tf-keras, MWMS on tf-keras (its
#     model.fit fails on Keras 3 here: docs/TENSORFLOW.md).
#
#   tools/bench/tensorflow_race.sh [BUILD_DIR]    (default build; ~10 min a round on 2 cores)
#
# Needs a kolo build with kolo.tensorflow (README "TensorFlow and Keras"). Not part of CI (ctest
# runs both benchmarks at tiny sizes so that they cannot rot).
# Environment: ROUNDS (default 3), TF_PYTHON (default .venv/tensorflow/bin/python), OUT_DIR (raw
# outputs; default a fresh /tmp folder), STEPS (timed steps a run, default 5), IMAGE (default
# 224), ITERS (timed allreduces a size, default 20), MAX_SIZE (default 64M), CONFIGS (any of
# "kolo-eager kolo-function mwms" for the sweep), TRAIN_CONFIGS (any of "none kolo-keras3
# kolo-keras2 mwms-keras2").
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
rounds="${ROUNDS:-3}"
tf_python="${TF_PYTHON:-$repo/.venv/tensorflow/bin/python}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-tensorflow-race-XXXXXX)}"
configs="${CONFIGS:-kolo-eager kolo-function mwms}"
train_configs="${TRAIN_CONFIGS:-none kolo-keras3 kolo-keras2 mwms-keras2}"
steps="${STEPS:-5}"
image="${IMAGE:-224}"
iters="${ITERS:-20}"
max_size="${MAX_SIZE:-64M}"
bench="$repo/tools/bench/tensorflow"
mkdir -p "$out"
log() { printf '[tensorflow_race %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
[ -f "$build/python/kolo/tensorflow/_kolo_ops.so" ] ||
  { log "no kolo.tensorflow in $build/python: build with TensorFlow (README)"; exit 1; }
[ -x "$tf_python" ] || { log "no python at $tf_python (set TF_PYTHON)"; exit 1; }

run() {  # run NAME COMMAND...: output to $out/NAME.txt, stderr beside it
  local name=$1
  shift
  if ! timeout -k 5 900 "$@" >"$out/$name.txt" 2>"$out/$name.err"; then
    log "$name exited non-zero (see $out/$name.err)"
  fi
}

# MultiWorkerMirroredStrategy: two workers on loopback ports, each with its TF_CONFIG.
mwms() {  # mwms NAME SCRIPT ARGS...
  local name=$1
  shift
  local port0=$((20000 + RANDOM % 20000)) port1
  port1=$((port0 + 1))
  local cluster="{\"worker\": [\"127.0.0.1:$port0\", \"127.0.0.1:$port1\"]}"
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 1}}" \
    OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=3 timeout -k 5 900 "$tf_python" "$@" \
    >"$out/$name.worker1.txt" 2>"$out/$name.worker1.err" &
  local other=$!
  TF_CONFIG="{\"cluster\": $cluster, \"task\": {\"type\": \"worker\", \"index\": 0}}" \
    run "$name" env OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=3 "$tf_python" "$@"
  wait "$other" || log "$name worker 1 exited non-zero (see $out/$name.worker1.err)"
}

kolo=(env PYTHONPATH="$build/python" OMP_NUM_THREADS=1 TF_CPP_MIN_LOG_LEVEL=3
  "$build/bin/kolorun" -np 2 "$tf_python")

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "tensorflow: $(TF_CPP_MIN_LOG_LEVEL=3 "$tf_python" -c 'import tensorflow as tf; print(tf.__version__)' 2>/dev/null)"
  echo "rounds: $rounds, sweep: $configs, training: $train_configs, steps: $steps, image: $image"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

rotate() {  # rotate N WORDS...: the words rotated left by N
  local n=$1
  shift
  local words=("$@") count=$# i
  for ((i = 0; i < count; i++)); do printf '%s ' "${words[$(((i + n) % count))]}"; done
}

sweep=(-b 4K -e "$max_size" -f 4 -n "$iters" -w 3 --stat median --barrier 1)
for round in $(seq 1 "$rounds"); do
  log "round $round: kolo-bench C++"
  run "allreduce__kolo-bench__r$round" "$build/bin/kolorun" -np 2 "$build/bin/kolo-bench" \
    -b 4K -e "$max_size" -f 4 -n "$iters" -w 3 --stat median --inplace 1 --barrier 1
  # shellcheck disable=SC2046
  for config in $(rotate "$((round - 1))" $configs); do
    log "round $round: allreduce on $config"
    case $config in
    kolo-eager) run "allreduce__${config}__r$round" "${kolo[@]}" "$bench/allreduce_bench.py" \
      --hvd kolo.tensorflow "${sweep[@]}" ;;
    kolo-function) run "allreduce__${config}__r$round" "${kolo[@]}" \
      "$bench/allreduce_bench.py" --hvd kolo.tensorflow --function "${sweep[@]}" ;;
    mwms) mwms "allreduce__${config}__r$round" "$bench/allreduce_bench.py" --mwms "${sweep[@]}" ;;
    esac
  done
  # shellcheck disable=SC2046
  for config in $(rotate "$((round - 1))" $train_configs); do
    log "round $round: ResNet-50 step on $config"
    args=(--model resnet50 --batch 8 --image "$image" --steps "$steps" --warmup 2)
    case $config in
    none) run "train__${config}__r$round" "${kolo[@]}" "$bench/train_bench.py" --mode none \
      "${args[@]}" ;;
    kolo-keras3) run "train__${config}__r$round" "${kolo[@]}" "$bench/train_bench.py" \
      --mode kolo --keras 3 "${args[@]}" ;;
    kolo-keras2) run "train__${config}__r$round" "${kolo[@]}" "$bench/train_bench.py" \
      --mode kolo --keras 2 "${args[@]}" ;;
    mwms-keras2) mwms "train__${config}__r$round" "$bench/train_bench.py" --mode mwms \
      --keras 2 "${args[@]}" ;;
    esac
  done
  echo "load after round $round: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
done

python3 "$bench/race_report.py" "$out" | tee "$out/report.md"
log "raw outputs and report in $out"
