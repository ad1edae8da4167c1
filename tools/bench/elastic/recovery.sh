#!/usr/bin/env bash
# Elastic recovery of kolo beside Horovod's elastic mode and torchrun's restart, one scenario on
# each (issue 37's targets; the table goes to docs/ELASTIC-PEERS.md): a 4-worker job on hosts
# "2 slots + 1 + 1", one worker SIGKILLed mid-run, the time from the kill to the survivors'
# first step; then a host added to the discovery script's output, the time to its worker's
# first step. recovery.py runs the jobs and takes the times; report.py prints the table.
#
#   tools/bench/elastic/recovery.sh [BUILD_DIR]    (default build; ~20 min for 3 runs each on
#                                                  2 cores, plus ~4 min the first time to build
#                                                  Horovod)
#
# Needs kolo's kolorun and kolo-elastic-train in BUILD_DIR/bin, and a torch venv. Horovod 0.28.1
# comes from tools/bench/torch/build_horovod.sh (built once, into the cache, against that torch).
# Not part of CI or ctest: a benchmark, and its figures are only as quiet as the machine.
#
# Environment: RUNS (default 3), CONFIGS (any of "kolo kolo-torch horovod horovod-gloo5
# torchrun torchrun-shared"; default all), TORCH_PYTHON (default .venv/torch/bin/python),
# CACHE_DIR, OUT_DIR (logs of every run; default a fresh /tmp folder), STEP_MS (simulated compute
# per step, default 20), COMMIT_EVERY (steps between commits, default 1: kolo-elastic-train
# prints a line only at a commit, and the same interval on every system keeps the scenario one).
#   horovod-gloo5:   Horovod with HOROVOD_GLOO_TIMEOUT_SECONDS=5 (default 30 s; see the docs)
#   torchrun:        with TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1, without which torch's restart
#                    reuses the previous attempt's store keys (pytorch/pytorch#135712, #167288)
#   torchrun-shared: torchrun as it comes (1 run: it shows the failure)
#   kolo-torch:      examples/pytorch/elastic_train.py under kolorun, where that file exists
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
here="$repo/tools/bench/elastic"
runs="${RUNS:-3}"
configs="${CONFIGS:-kolo kolo-torch horovod horovod-gloo5 torchrun torchrun-shared}"
torch_python="${TORCH_PYTHON:-$repo/.venv/torch/bin/python}"
cache="${CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/kolo-race}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-elastic-peers-XXXXXX)}"
common=(--step-ms "${STEP_MS:-20}" --commit-every "${COMMIT_EVERY:-1}" --out "$out")
mkdir -p "$out"
log() { printf '[elastic-peers %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-elastic-train; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
[ -x "$torch_python" ] || { log "no python at $torch_python (set TORCH_PYTHON)"; exit 1; }
torch_venv="$(dirname "$(dirname "$torch_python")")"

# Horovod runs a worker without ssh only on a host whose name resolves to an address of a local
# interface: this machine's name and its non-loopback address serve as the victim's host and
# the added one (127.0.0.2 is no interface's address, so Horovod would ssh there).
own_host="$(hostname)"
added_host="$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -m1 -v -e '^127\.' -e ':' || true)"

{
  echo "date: $(date -u '+%Y-%m-%d %H:%M UTC')"
  echo "cpu: $(lscpu | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores"
  echo "kernel: $(uname -r)"
  echo "torch: $("$torch_python" -c 'import torch; print(torch.__version__)')"
  echo "kolo: $(git -C "$repo" rev-parse --short HEAD)"
  echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
} >"$out/machine.txt"

bench() {  # bench CONFIG RUNS SYSTEM ARGS...: one configuration's runs, JSON lines to results
  local config=$1 count=$2 system=$3
  shift 3
  log "$config: $count run(s)"
  # recovery.py bounds every wait itself; this is the backstop for the whole configuration.
  timeout -k 10 $((count * 400)) python3 "$here/recovery.py" "$system" --runs "$count" \
    "${common[@]}" "$@" | sed "s/^{/{\"config\": \"$config\", /" >>"$out/results.jsonl" ||
    log "$config: recovery.py failed (logs in $out)"
}

hvd_venv=""
if [[ " $configs " == *" horovod"* ]]; then
  hvd_venv="$(dirname "$(dirname "$("$here/../torch/build_horovod.sh" "$torch_python" "$cache")")")"
  [ -n "$added_host" ] || { log "no non-loopback IPv4 address for Horovod's added host"; exit 1; }
fi
for config in $configs; do
  case $config in
  kolo) bench kolo "$runs" kolo --bin "$build/bin" ;;
  kolo-torch)
    if [ -f "$repo/examples/pytorch/elastic_train.py" ]; then
      bench kolo-torch "$runs" kolo-torch --bin "$build/bin" --torch-venv "$torch_venv" \
        --pythonpath "$build/python" --example "$repo/examples/pytorch/elastic_train.py"
    else
      log "kolo-torch: no examples/pytorch/elastic_train.py in this tree; skipped"
      printf '{"config": "kolo-torch", "error": "%s"}\n' \
        "examples/pytorch/elastic_train.py is not in this tree" >>"$out/results.jsonl"
    fi
    ;;
  horovod | horovod-gloo5)
    extra=()
    [ "$config" = horovod-gloo5 ] && extra=(--env HOROVOD_GLOO_TIMEOUT_SECONDS=5)
    bench "$config" "$runs" horovod --hvd-venv "$hvd_venv" \
      --horovod-hosts "$own_host,$added_host" "${extra[@]}"
    ;;
  torchrun) bench torchrun "$runs" torchrun --torch-venv "$torch_venv" --port 29611 \
    --env TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1 ;;
  torchrun-shared) bench torchrun-shared 1 torchrun --torch-venv "$torch_venv" --port 29671 ;;
  *) log "unknown configuration $config"; exit 1 ;;
  esac
done
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)" >>"$out/machine.txt"
python3 "$here/report.py" "$out"
log "logs of every run: $out"
