#!/usr/bin/env bash
# The GPU check (docs/PERFORMANCE.md, "On a real GPU"): run on a machine with one NVIDIA GPU
# from the folder tools/gpu/bundle.sh made. Stages (STAGES, default all):
#  1. every `ctest -L gpu` test binary; none may fail or skip (exit 77);
#  2. one rank on NCCL through the public API: every collective, every op, every type NCCL has,
#     each result checked exactly; a ResNet-50 step's timeline with its GPU phases;
#  3. 2 and 4 ranks sharing the GPU over KOLO_GPU_OPERATIONS=ring, every collective, op and type,
#     exact; 2 ranks on NCCL (which refuses two ranks on one GPU) fail, saying so; rank 1 of 2
#     SIGKILLed mid-allreduce fails rank 0 within 2 x KOLO_TIMEOUT_SECONDS;
#  4. figures: kolo-bench --device cuda against nccl-peer-bench (the same NCCL call, made
#     directly), 4 KiB..1 GiB, twice interleaved; ResNet-50's 161 gradients through kolo (fused,
#     and KOLO_FUSION_THRESHOLD=0) against one NCCL call per tensor; the staged path's busbw at
#     2 ranks against the host<->device copy rate and the CPU path's.
# Usage: check.sh OUT_DIR   (writes OUT_DIR/log.txt and OUT_DIR/details.tar.gz; exit 1 if a
# check failed). NCCL_LIB_DIR: where libnccl.so.2 is (default: found under /usr and /opt).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:?usage: check.sh OUT_DIR}
stages=${STAGES:-1 2 3 4}
mkdir -p "$out"
work=$(mktemp -d)
exec > >(tee "$out/log.txt") 2>&1
trap 'tar -czf "$out/details.tar.gz" -C "$work" . 2>/dev/null; rm -rf "$work"' EXIT

nccl_dir=${NCCL_LIB_DIR:-$(dirname "$(find /usr /opt -name libnccl.so.2 2>/dev/null | head -1)")}
export LD_LIBRARY_PATH="$here/lib:$nccl_dir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
bin=$here/bin
failed=()

now_ns() { date +%s%N; }
seconds_since() { awk -v a="$1" -v b="$(now_ns)" 'BEGIN { printf "%.3f", (b - a) / 1e9 }'; }
stage() { echo; echo "=== $* ($(date +%T))"; }
# run NAME LIMIT CMD...: CMD's output to $work/NAME.log; prints the verdict and the time.
run() {
  local name=$1 limit=$2 start rc
  shift 2
  start=$(now_ns)
  timeout "$limit" "$@" >"$work/$name.log" 2>&1
  rc=$?
  printf '%-44s rc=%-3s %8ss\n' "$name" "$rc" "$(seconds_since "$start")"
  return $rc
}
fail() { failed+=("$1"); echo "FAILED: $1"; }
# expect_clean NAME: a kolo-bench log whose every element was right.
expect_clean() {
  grep -q "Wrong elements *: 0 OK" "$work/$1.log" || { fail "$1 (wrong elements)"; tail -5 "$work/$1.log"; }
}

stage "machine"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader
echo "cpus: $(nproc); NCCL: $(ls "$nccl_dir"/libnccl.so* 2>/dev/null | tr '\n' ' ')"
missing=$(ldd "$bin"/* "$here"/tests/* 2>/dev/null | grep "not found" | sort -u)
[[ -z "$missing" ]] || { echo "missing libraries:"; echo "$missing"; }

if [[ " $stages " == *" 1 "* ]]; then
  stage "1. ctest -L gpu binaries, in parallel"
  pids=()
  for t in $(cat "$here/tests.list"); do
    (run "$t" 600 "$here/tests/$t" || true) &
    pids+=($!)
  done
  wait "${pids[@]}"  # not a bare wait: that would also wait for the tee above
  for t in $(cat "$here/tests.list"); do
    if grep -q "^All tests passed" "$work/$t.log"; then
      echo "$t: $(grep '^All tests passed' "$work/$t.log")"
    else
      fail "$t"
      tail -40 "$work/$t.log"
    fi
  done
fi

collectives=(all allgather broadcast reducescatter alltoall)
if [[ " $stages " == *" 2 "* ]]; then
  stage "2. one rank on NCCL, every collective, op and type, exact"
  for c in "${collectives[@]}"; do
    run "nccl1-$c" 300 "$bin/kolo-bench" --device cuda -o "$c" -d all -b 8 -e 4M -f 8 -n 3 -w 1 ||
      fail "nccl1-$c (exit)"
    expect_clean "nccl1-$c"
  done
  grep -h "Types left out" "$work"/nccl1-all.log
  stage "2. timeline of a ResNet-50 step on the GPU"
  KOLO_TIMELINE=$work/resnet.json run nccl1-timeline 300 "$bin/kolo-bench" --device cuda \
    --model resnet50 -n 3 -w 1 || fail "nccl1-timeline (exit)"
  trace=$(ls "$work"/resnet*.json | head -1)
  for phase in MEMCPY_IN_FUSION_BUFFER NCCL_ALLREDUCE MEMCPY_OUT_FUSION_BUFFER; do
    echo "$phase: $(grep -o "\"$phase\"" "$trace" | wc -l) events"
    grep -q "\"$phase\"" "$trace" || fail "timeline has no $phase"
  done
  "$bin/kolo-timeline" summary "$trace" 2>&1 | head -40
fi

if [[ " $stages " == *" 3 "* ]]; then
  stage "3. 2 and 4 ranks on one GPU over KOLO_GPU_OPERATIONS=ring, exact"
  for np in 2 4; do
    for c in "${collectives[@]}"; do
      KOLO_GPU_OPERATIONS=ring run "ring$np-$c" 300 "$bin/kolorun" -np $np "$bin/kolo-bench" \
        --device cuda -o "$c" -d all -b 8 -e 1M -f 16 -n 2 -w 1 || fail "ring$np-$c (exit)"
      expect_clean "ring$np-$c"
    done
  done
  stage "3. 2 ranks on NCCL on one GPU: refused, saying so"
  KOLO_GPU_OPERATIONS=nccl KOLO_TIMEOUT_SECONDS=10 run nccl2-one-gpu 60 "$bin/kolorun" -np 2 \
    "$bin/kolo-bench" --device cuda -b 4K -e 4K -n 1 -w 0 && fail "nccl2-one-gpu ran"
  grep -v "^\[.\] *[0-9]" "$work/nccl2-one-gpu.log" | tail -8
  stage "3. rank 1 of 2 SIGKILLed mid-allreduce (ring, KOLO_TIMEOUT_SECONDS=2)"
  KOLO_GPU_OPERATIONS=ring KOLO_TIMEOUT_SECONDS=2 timeout 120 "$bin/kolorun" -np 2 \
    "$bin/kolo-bench" --device cuda -b 64M -e 64M -n 100000 -w 0 -c 0 >"$work/kill.log" 2>&1 &
  launcher=$!
  sleep 6
  victim=""
  for p in $(pgrep -f "bin/kolo-bench"); do
    tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "KOLO_RANK=1" && victim=$p
  done
  if [[ -z "$victim" ]]; then
    fail "kill: no rank 1 found"
  else
    kill -9 "$victim"
    start=$(now_ns)
    wait "$launcher"
    echo "kolorun exited $? after $(seconds_since "$start") s (bound 4 s)"
    grep -v "^\[.\] *[0-9]" "$work/kill.log" | tail -6
    grep -q "rank 1 lost" "$work/kill.log" || fail "kill: no 'rank 1 lost'"
  fi
fi

if [[ " $stages " == *" 4 "* ]]; then
  stage "4. one rank: kolo-bench --device cuda against NCCL called directly, twice interleaved"
  for rep in 1 2; do
    run "kolo1-sweep-$rep" 300 "$bin/kolo-bench" --device cuda -b 4K -e 1G -f 4 -n 20 -w 5 \
      --stat median || fail "kolo1-sweep-$rep (exit)"
    run "peer-sweep-$rep" 300 "$bin/nccl-peer-bench" -b 4K -e 1G -f 4 -n 20 -w 5 ||
      fail "peer-sweep-$rep (exit)"
  done
  cat "$work"/kolo1-sweep-1.log "$work"/peer-sweep-1.log "$work"/kolo1-sweep-2.log \
    "$work"/peer-sweep-2.log | grep -v "^#  *\(minBytes\|(B)\)"
  stage "4. ResNet-50's 161 gradients: kolo (fused, unfused) against one NCCL call per tensor"
  run kolo1-resnet 300 "$bin/kolo-bench" --device cuda --model resnet50 -n 20 -w 5 ||
    fail "kolo1-resnet (exit)"
  KOLO_FUSION_THRESHOLD=0 run kolo1-resnet-unfused 300 "$bin/kolo-bench" --device cuda \
    --model resnet50 -n 20 -w 5 || fail "kolo1-resnet-unfused (exit)"
  run peer-resnet 300 "$bin/nccl-peer-bench" --model resnet50 -n 20 -w 5 || fail "peer-resnet"
  tail -n 4 "$work"/kolo1-resnet.log "$work"/kolo1-resnet-unfused.log
  cat "$work"/peer-resnet.log
  stage "4. the staged path (ring) at 2 ranks against the CPU path and the copy rate"
  KOLO_GPU_OPERATIONS=ring run ring2-sweep 300 "$bin/kolorun" -np 2 "$bin/kolo-bench" \
    --device cuda -b 4K -e 256M -f 4 -n 10 -w 3 --stat median --barrier 1 ||
    fail "ring2-sweep (exit)"
  run cpu2-sweep 300 "$bin/kolorun" -np 2 "$bin/kolo-bench" -b 4K -e 256M -f 4 -n 10 -w 3 \
    --stat median --barrier 1 || fail "cpu2-sweep (exit)"
  grep -v "^\[0\] #  *\(minBytes\|(B)\)" "$work"/ring2-sweep.log "$work"/cpu2-sweep.log
fi

stage "done"
if ((${#failed[@]})); then
  echo "${#failed[@]} check(s) failed:"
  printf '  %s\n' "${failed[@]}"
  exit 1
fi
echo "every check passed"
