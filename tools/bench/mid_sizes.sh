#!/usr/bin/env bash
# Issue 34's table: the allreduce from 1 MiB to 64 MiB, kolo against Open MPI in the same run,
# over shared memory at 2 and 4 ranks and over TCP at 2 ranks, every configuration repeated
# REPS times and interleaved (all configurations once, then all again) so that a slow spell of
# the machine spreads over every column instead of spoiling one. Open MPI runs every
# repetition too: on a machine with more ranks than cores its times move by 2x between runs.
#
#   tools/bench/mid_sizes.sh [BUILD_DIR]          (default build; ~6 min on 2 cores)
#
# Method, the same for both: float32 sum in place, an untimed barrier before every timed call,
# the median over iterations of the slowest rank's time (Open MPI: the peers' benchmark
# ../shared/bench/mpi_allreduce_bench.cc, built into BUILD_DIR/testbed by
# tools/testbed/build-mpi-bench; kolo: kolo-bench --inplace 1 --barrier 1 --stat median, through
# the API). Each cell is the median over repetitions with their min-max; the ratio is Open
# MPI's time over kolo's (above 1: kolo faster). Prints the CPU's name first: a table holds for
# the machine kind it was measured on.
#
# Environment: REPS (3), ITERS (20), SIZES (1M,4M,16M,64M), CONFIGS (the rows to run, default
# "shm:2 shm:4 tcp:2"), KOLO_ENV (extra VAR=VALUE words for kolo's runs, e.g.
# "KOLO_SHM_SINGLE_COPY=on"), OUT_DIR (raw outputs; default a fresh /tmp folder).
set -euo pipefail
repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
build="$(cd "${1:-$repo/build}" && pwd)"
reps="${REPS:-3}"
iters="${ITERS:-20}"
sizes="${SIZES:-1M,4M,16M,64M}"
configs="${CONFIGS:-shm:2 shm:4 tcp:2}"
read -r -a kolo_env <<<"${KOLO_ENV:-}"
out="${OUT_DIR:-$(mktemp -d /tmp/kolo-mid-XXXXXX)}"
mpirun="${MPIRUN:-mpirun.openmpi}"
mpi_bench="$build/testbed/mpi_allreduce_bench"
log() { printf '[mid_sizes %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }

for tool in kolorun kolo-bench; do
  [ -x "$build/bin/$tool" ] || { log "missing $build/bin/$tool: build kolo first"; exit 1; }
done
if [ ! -x "$mpi_bench" ]; then
  log "building Open MPI's benchmark into $build/testbed"
  "$repo/tools/testbed/build-mpi-bench" "$build/testbed" >&2 ||
    { log "no Open MPI benchmark (apt-get install libopenmpi-dev)"; exit 1; }
fi
mkdir -p "$out"

# kolo-bench sweeps from the first size to the last by factors of 4: SIZES is such a list.
first="${sizes%%,*}"
last="${sizes##*,}"

for rep in $(seq 1 "$reps"); do
  for config in $configs; do
    transport="${config%%:*}"
    np="${config##*:}"
    btl="self,vader"
    [ "$transport" = tcp ] && btl="self,tcp"
    log "repetition $rep of $reps: $transport, $np ranks"
    timeout -k 5 600 "$mpirun" --allow-run-as-root --oversubscribe -np "$np" --bind-to none \
      --mca btl "$btl" "$mpi_bench" -s "$sizes" -n "$iters" -w 3 \
      >"$out/ompi__${transport}__np${np}__rep${rep}.txt" 2>&1 ||
      log "Open MPI exited $? (see $out/ompi__${transport}__np${np}__rep${rep}.txt)"
    env KOLO_TRANSPORT="$transport" "${kolo_env[@]}" timeout -k 5 600 "$build/bin/kolorun" \
      -np "$np" "$build/bin/kolo-bench" -b "$first" -e "$last" -f 4 -n "$iters" -w 3 \
      --stat median --barrier 1 --inplace 1 \
      >"$out/kolo__${transport}__np${np}__rep${rep}.txt" 2>&1 ||
      log "kolo exited $? (see $out/kolo__${transport}__np${np}__rep${rep}.txt)"
  done
done

python3 - "$out" "$sizes" "$configs" "${KOLO_ENV:-}" <<'EOF'
import glob, os, re, statistics, sys

out, sizes, configs, kolo_env = sys.argv[1], sys.argv[2].split(","), sys.argv[3].split(), sys.argv[4]

def size_bytes(s):
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return int(s[:-1]) * units[s[-1]] if s[-1] in units else int(s)

def times(path, kolo):
    """bytes -> time (us) of one run's output, and its wrong-element count."""
    found = {}
    for line in open(path, errors="replace"):
        fields = line.split()
        if kolo:  # "[0]  bytes count type redop root time algbw busbw #wrong"
            if len(fields) < 10 or fields[0] != "[0]" or not fields[1].isdigit():
                continue
            found[int(fields[1])] = (float(fields[6]), int(fields[9]))
        else:  # "bytes count warm iters time_us min p90 mean algbw busbw wrong flt"
            if len(fields) < 11 or not fields[0].isdigit():
                continue
            found[int(fields[0])] = (float(fields[4]), int(fields[10]))
    return found

cpu = "unknown CPU"
for line in open("/proc/cpuinfo"):
    if line.startswith("model name"):
        cpu = line.split(":", 1)[1].strip()
        break
print(f"# {cpu}, {os.cpu_count()} cores; {out}")
if kolo_env:
    print(f"# kolo with {kolo_env}")
print("| transport, ranks | size | Open MPI µs | kolo µs | Open MPI / kolo |")
print("|---|---:|---:|---:|---:|")

def cell(values):
    if not values:
        return "-"
    return f"{statistics.median(values):,.0f} ({min(values):,.0f}-{max(values):,.0f})"

wrong = 0
for config in configs:
    transport, np = config.split(":")
    for size in sizes:
        b = size_bytes(size)
        got = {"ompi": [], "kolo": []}
        for who in got:
            for path in sorted(glob.glob(f"{out}/{who}__{transport}__np{np}__rep*.txt")):
                row = times(path, who == "kolo").get(b)
                if row:
                    got[who].append(row[0])
                    wrong += row[1]
        ratio = "-"
        if got["ompi"] and got["kolo"]:
            ratio = f"{statistics.median(got['ompi']) / statistics.median(got['kolo']):.2f}x"
        print(f"| {transport}, {np} | {size} | {cell(got['ompi'])} | {cell(got['kolo'])} | {ratio} |")
print(f"# wrong elements over every run: {wrong}")
EOF
